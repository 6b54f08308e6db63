//! GatherND (ONNX opsets 11–13) → `gather_nd_K` (`specs/onnx_gather_nd.tdl`).
//!
//! Takes `data[b.., d_1..d_K, r..]` and `indices[b.., n.., K]` (`batch_dims`
//! leading dims shared); views them as `[B, D_1.., D_K, R]` and `[B, N, K]`
//! (row-major reshapes, emitted only where the shape differs), emits the
//! data-dependent read `gather_nd_K` and views its `[B, N, R]` result as
//! `[b.., n.., r..]`. Indices known at import become a constant input;
//! negative indices are resolved by the spec. K = 1..=2.
//!
//! ScatterND (reduction none or add, tuples of length 1) the same way, onto
//! `scatter_nd_1` / `scatter_nd_add_1` with the updates viewed as [1, N, R].

use graph::TensorId;

use crate::lower::{unsupported, LResult, Lower, Out};
use crate::map_elementwise::input;
use crate::mapping::Mapping;
use crate::node::Node;

/// Largest index tuple length with a spec (`gather_nd_1`, `gather_nd_2`).
pub const MAX_TUPLE: usize = 2;

/// Lower a GatherND node (see the module doc).
///
/// Errors (unsupported uses): tuple length 0 or above [`MAX_TUPLE`],
/// `batch_dims` larger than either rank, batch dims that differ.
pub fn gather_nd(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let data = input(l, n, 0)?;
    let idx = input(l, n, 1)?;
    let (sd, si) = (l.shape(data), l.shape(idx));
    let bd = usize::try_from(n.attrs.int("batch_dims", 0)).unwrap_or(usize::MAX);
    let q = si.len();
    if q == 0 || bd >= q || bd >= sd.len() {
        return unsupported(format!(
            "batch_dims {bd} with data of rank {} and indices of rank {q}",
            sd.len()
        ));
    }
    let k = si[q - 1];
    if k == 0 || k > MAX_TUPLE || bd + k > sd.len() {
        return unsupported(format!(
            "index tuples of length {k} (specs `gather_nd_1` … `gather_nd_{MAX_TUPLE}` cover 1..={MAX_TUPLE}, at most the data rank {} minus batch_dims {bd})",
            sd.len()
        ));
    }
    if sd[..bd] != si[..bd] {
        return unsupported(format!(
            "batch dims of data {:?} and indices {:?} differ",
            &sd[..bd],
            &si[..bd]
        ));
    }
    let b: usize = sd[..bd].iter().product();
    let nn: usize = si[bd..q - 1].iter().product();
    let r: usize = sd[bd + k..].iter().product();
    let mut data_view = vec![b];
    data_view.extend(&sd[bd..bd + k]);
    data_view.push(r);
    let d3 = l.reshape(data, &data_view)?;
    let i3 = l.reshape(idx, &[b, nn, k])?;
    let y: TensorId = l.emit1(&format!("gather_nd_{k}"), &[d3, i3], &[])?;
    let mut out: Vec<usize> = si[..q - 1].to_vec();
    out.extend(&sd[bd + k..]);
    Ok(vec![Out::T(l.reshape(y, &out)?)])
}

/// Lower a ScatterND node (see the module doc).
///
/// Errors (unsupported uses): tuple length other than 1, updates not shaped
/// [indices' leading dims…, data's trailing dims…], a reduction other than
/// none and add.
pub fn scatter_nd(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let data = input(l, n, 0)?;
    let idx = input(l, n, 1)?;
    let upd = input(l, n, 2)?;
    let (sd, si, su) = (l.shape(data), l.shape(idx), l.shape(upd));
    let q = si.len();
    if q == 0 || sd.is_empty() || si[q - 1] != 1 {
        return unsupported(format!(
            "data of shape {sd:?} with indices {si:?} (index tuples of length 1 are mapped)"
        ));
    }
    let want: Vec<usize> = si[..q - 1].iter().chain(&sd[1..]).copied().collect();
    if su != want {
        return unsupported(format!("updates of shape {su:?}, expected {want:?}"));
    }
    let spec = match n.attrs.string("reduction", "none").as_str() {
        "none" => "scatter_nd_1",
        "add" => "scatter_nd_add_1",
        other => return unsupported(format!("reduction = \"{other}\"")),
    };
    let nn: usize = si[..q - 1].iter().product();
    let r: usize = sd[1..].iter().product();
    let d3 = l.reshape(data, &[1, sd[0], r])?;
    let i3 = l.reshape(idx, &[1, nn, 1])?;
    let u3 = l.reshape(upd, &[1, nn, r])?;
    let y = l.emit1(spec, &[d3, i3, u3], &[])?;
    Ok(vec![Out::T(l.reshape(y, &sd)?)])
}
