//! Operators whose output follows element positions: Gather (`gather`,
//! `embedding`; known negative indices normalised), Compress (the same, at
//! the true positions of a condition known at import), OneHot (`one_hot`,
//! `one_hot_values`), Trilu (`trilu`), ReverseSequence (`reverse_sequence`).

use graph::{int, TensorId};

use crate::lower::{unsupported, Kind, Known, LResult, Lower, NodeError, Out, Src};
use crate::map_elementwise::{input, shape};
use crate::map_nn::axis_of;
use crate::mapping::Mapping;
use crate::node::Node;
use crate::tensor::Data;

use super::ints_input;

/// Gather along `axis` → `gather` (1-D indices, data axis moved to the front);
/// 2-D data on axis 0 → `embedding`. Negative known indices are normalised.
pub fn gather(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let data = input(l, n, 0)?;
    let sd = l.shape(data);
    let axis = axis_of(n.attrs.int("axis", 0), sd.len())?;
    let ids_name = n
        .input(1)
        .ok_or_else(|| NodeError::Unsupported("indices are missing".into()))?;
    let ids = normalised_ids(l, n, ids_name, sd[axis])?;
    Ok(vec![Out::T(gather_of(l, data, axis, ids)?)])
}

/// `data` gathered at `ids` (non-negative, any shape) along `axis`: the ids'
/// dims replace that axis.
fn gather_of(l: &mut Lower, data: TensorId, axis: usize, ids: TensorId) -> LResult<TensorId> {
    let sd = l.shape(data);
    let si = l.shape(ids);
    if axis == 0 && sd.len() == 2 && !si.is_empty() {
        return l.emit1("embedding", &[data, ids], &[]);
    }
    let m: usize = si.iter().product();
    let ids1 = l.reshape(ids, &[m])?;
    let r = sd.len();
    let front: Vec<usize> = std::iter::once(axis)
        .chain((0..r).filter(|&d| d != axis))
        .collect();
    let moved = l.permute(data, &front)?;
    let g = l.emit1("gather", &[moved, ids1], &[])?;
    // g: [M, rest...] → [ids..., rest...] then move the ids block back to `axis`.
    let rest: Vec<usize> = (0..r).filter(|&d| d != axis).map(|d| sd[d]).collect();
    let mut full = si.clone();
    full.extend(&rest);
    let g = l.reshape(g, &full)?;
    let k = si.len();
    // Current order: ids dims (k), then data dims without axis; target: data[..axis], ids, data[axis+1..].
    let perm: Vec<usize> = (0..axis)
        .map(|d| k + d)
        .chain(0..k)
        .chain((axis..r - 1).map(|d| k + d))
        .collect();
    l.permute(g, &perm)
}

/// Compress: the slices along `axis` (the flattened input when absent) where
/// `condition` is true, gathered at the condition's true positions; the
/// condition must be known at import (a constant, or `--input-value`), as it
/// decides the output's shape. Positions past the condition's end are dropped.
pub fn compress(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let data = input(l, n, 0)?;
    let Some(cond_name) = n.input(1) else {
        return unsupported("the condition is missing");
    };
    let Some(cond) = l.arg_data(cond_name) else {
        return unsupported(format!(
            "the condition (`{cond_name}`) must be known at import time (a constant, an \
             initializer or --input-value {cond_name}=...): it decides the output's shape"
        ));
    };
    let (data, axis) = match n.attrs.get("axis") {
        Some(a) => {
            let r = l.shape(data).len();
            (data, axis_of(a.i, r)?)
        }
        None => {
            let numel: usize = l.shape(data).iter().product();
            (l.reshape(data, &[numel])?, 0)
        }
    };
    let dim = l.shape(data)[axis];
    let ids: Vec<f64> = cond
        .values
        .iter()
        .take(dim)
        .enumerate()
        .filter(|(_, &c)| c != 0.0)
        .map(|(i, _)| i as f64)
        .collect();
    if ids.is_empty() || l.shape(data).contains(&0) {
        let mut s = l.shape(data);
        s[axis] = 0;
        return Ok(vec![Out::C(super::empty(
            l.elem_of(n.input(0).unwrap_or_default()),
            s,
        ))]);
    }
    let ids_name = format!("{}.indices", n.name);
    l.define_known(
        &ids_name,
        Known {
            elem: crate::tensor::Elem::Int(64),
            shape: vec![ids.len()],
            src: Src::Dense(Data {
                elem: crate::tensor::Elem::Int(64),
                shape: vec![ids.len()],
                values: ids,
            }),
            kind: Kind::Constant,
        },
    );
    let ids = l.tensor(&ids_name)?;
    Ok(vec![Out::T(gather_of(l, data, axis, ids)?)])
}

fn normalised_ids(l: &mut Lower, n: &Node, name: &str, dim: usize) -> LResult<TensorId> {
    if let Some(d) = l.arg_data(name) {
        if d.values.iter().any(|&v| v < 0.0) {
            let fixed: Vec<f64> = d
                .values
                .iter()
                .map(|&v| if v < 0.0 { v + dim as f64 } else { v })
                .collect();
            let new_name = format!("{}.indices", n.name);
            let kind = l
                .values
                .get(name)
                .and_then(|e| e.known.as_ref())
                .map_or(Kind::Constant, |k| k.kind.clone());
            l.define_known(
                &new_name,
                Known {
                    elem: d.elem,
                    shape: d.shape.clone(),
                    src: Src::Dense(Data { values: fixed, ..d }),
                    kind,
                },
            );
            return l.tensor(&new_name);
        }
    }
    l.tensor(name)
}

/// OneHot along `axis`: values [0, 1] and non-negative known indices →
/// `one_hot`; otherwise (other off/on values, negative indices counting from
/// the end) → `one_hot_values`; the new axis is then moved to `axis`.
pub fn one_hot(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let ids_name = n
        .input(0)
        .ok_or_else(|| NodeError::Unsupported("indices are missing".into()))?;
    let ids = l.tensor(ids_name)?;
    let depth = ints_input(l, n, 1)?
        .and_then(|v| v.first().copied())
        .unwrap_or(0);
    if depth < 1 {
        return unsupported("depth < 1");
    }
    let r = l.shape(ids).len();
    let axis = axis_of(n.attrs.int("axis", -1), r + 1)?;
    let values_name = n
        .input(2)
        .ok_or_else(|| NodeError::Unsupported("values are missing".into()))?;
    if shape(l, values_name)?.iter().product::<usize>() != 2 {
        return unsupported("values must hold two elements [off, on]");
    }
    let plain = l
        .arg_data(values_name)
        .is_some_and(|d| d.values == [0.0, 1.0])
        && l.arg_data(ids_name)
            .is_some_and(|d| d.values.iter().all(|&v| v >= 0.0));
    let y = if plain {
        l.emit1("one_hot", &[ids], &[("depth", int(depth))])?
    } else {
        let v = l.tensor(values_name)?;
        let v = l.reshape(v, &[2])?;
        l.emit1("one_hot_values", &[ids, v], &[("depth", int(depth))])?
    };
    Ok(vec![Out::T(l.last_to_axis(y, axis)?)])
}

/// Trilu → `trilu<upper, k>` (k from the optional input).
pub fn trilu(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let k = ints_input(l, n, 1)?
        .and_then(|v| v.first().copied())
        .unwrap_or(0);
    let upper = n.attrs.int("upper", 1);
    Ok(vec![Out::T(l.emit1(
        "trilu",
        &[x],
        &[("upper", int(upper)), ("k", int(k))],
    )?)])
}

/// ReverseSequence → `reverse_sequence` on [batch, time, …]: with the
/// default time_axis = 0, batch_axis = 1 the two leading axes are swapped
/// in and out.
pub fn reverse_sequence(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let lens = input(l, n, 1)?;
    let r = l.shape(x).len();
    let (t, b) = (n.attrs.int("time_axis", 0), n.attrs.int("batch_axis", 1));
    if r < 2 {
        return unsupported(format!("a rank-{r} input (at least 2)"));
    }
    let swap = match (t, b) {
        (1, 0) => false,
        (0, 1) => true,
        _ => return unsupported(format!("time_axis = {t}, batch_axis = {b} (0 and 1)")),
    };
    let perm: Vec<usize> = [1, 0].into_iter().chain(2..r).collect();
    let xb = if swap { l.permute(x, &perm)? } else { x };
    let y = l.emit1("reverse_sequence", &[xb, lens], &[])?;
    let y = if swap { l.permute(y, &perm)? } else { y };
    Ok(vec![Out::T(y)])
}
