//! GatherElements (ONNX opsets 11–13) → `gather_elements_last`
//! (`specs/onnx_gather_elements.tdl`).
//!
//! Takes `data[d..]` and `indices[i..]` of the same rank; gives `y` of the
//! shape of `indices`, `y[i..] = data[i.. with i_axis replaced by
//! indices[i..]]`. The axis is moved last on both (a permutation, none when
//! it is last already), the data-dependent read
//! `gather_elements_last` gathers, and the axis is moved back. Indices known
//! at import become a constant input; negative ones are resolved by the spec.
//!
//! ScatterElements (and the older Scatter) the same way, onto
//! `scatter_elements_last` (reduction = none) or `scatter_elements_add_last`
//! (reduction = add); the mul / max / min reductions are not mapped.

use crate::lower::{unsupported, LResult, Lower, Out};
use crate::map_elementwise::input;
use crate::map_nn::axis_of;
use crate::mapping::Mapping;
use crate::node::Node;

/// Lower a GatherElements node (see the module doc).
///
/// Errors (unsupported uses): ranks that differ, an index dim larger than
/// the data's outside the axis.
pub fn gather_elements(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let data = input(l, n, 0)?;
    let idx = input(l, n, 1)?;
    let (sd, si) = (l.shape(data), l.shape(idx));
    if sd.len() != si.len() || sd.is_empty() {
        return unsupported(format!(
            "data of shape {sd:?} and indices of shape {si:?} (same rank ≥ 1 needed)"
        ));
    }
    let axis = axis_of(n.attrs.int("axis", 0), sd.len())?;
    for (a, (&d, &i)) in sd.iter().zip(&si).enumerate() {
        if a != axis && i != d {
            return unsupported(format!(
                "indices dim {a} is {i}, data's is {d} (only equal extents outside the axis are mapped)"
            ));
        }
    }
    let x = l.axis_to_last(data, axis)?;
    let i = l.axis_to_last(idx, axis)?;
    let y = l.emit1("gather_elements_last", &[x, i], &[])?;
    Ok(vec![Out::T(l.last_to_axis(y, axis)?)])
}

/// Lower a ScatterElements or Scatter node (see the module doc).
///
/// Errors (unsupported uses): as [`gather_elements`], updates whose shape
/// is not the indices', a reduction other than none and add.
pub fn scatter_elements(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let data = input(l, n, 0)?;
    let idx = input(l, n, 1)?;
    let upd = input(l, n, 2)?;
    let (sd, si, su) = (l.shape(data), l.shape(idx), l.shape(upd));
    if sd.len() != si.len() || sd.is_empty() || su != si {
        return unsupported(format!(
            "data of shape {sd:?}, indices {si:?} and updates {su:?} (same rank ≥ 1, updates shaped as the indices)"
        ));
    }
    let axis = axis_of(n.attrs.int("axis", 0), sd.len())?;
    if let Some(a) = (0..sd.len()).find(|&a| a != axis && si[a] != sd[a]) {
        return unsupported(format!(
            "indices dim {a} is {}, data's is {} (only equal extents outside the axis are mapped)",
            si[a], sd[a]
        ));
    }
    let spec = match n.attrs.string("reduction", "none").as_str() {
        "none" => "scatter_elements_last",
        "add" => "scatter_elements_add_last",
        other => return unsupported(format!("reduction = \"{other}\"")),
    };
    let x = l.axis_to_last(data, axis)?;
    let i = l.axis_to_last(idx, axis)?;
    let u = l.axis_to_last(upd, axis)?;
    let y = l.emit1(spec, &[x, i, u], &[])?;
    Ok(vec![Out::T(l.last_to_axis(y, axis)?)])
}
