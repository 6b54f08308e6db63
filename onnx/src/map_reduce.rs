//! Lowering of ONNX reductions (ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/
//! LogSum/LogSumExp, ArgMax/ArgMin, TopK) to the last-axis reduce specs.
//!
//! The reduced axes are permuted to the end and merged into one (a reshape),
//! the spec reduces the last axis, and a reshape restores `keepdims`. Axes
//! come from the attribute or (ReduceSum from opset 13, the others from 18)
//! the optional input; no axes reduces everything unless
//! `noop_with_empty_axes`.

use graph::int;

use crate::lower::{unsupported, LResult, Lower, NodeError, Out};
use crate::map_elementwise::{input, shape};
use crate::map_nn::axis_of;
use crate::map_shape::ints_input;
use crate::mapping::Mapping;
use crate::node::Node;
use crate::tensor::Data;

/// Reduce* → `reduce_*` on a view whose last dim holds the reduced axes.
pub fn reduce(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    let xn = n
        .input(0)
        .ok_or_else(|| NodeError::Unsupported("input 0 is missing".into()))?;
    let s = shape(l, xn)?;
    let r = s.len();
    let axes_from_input = if m.op == "ReduceSum" {
        n.opset >= 13
    } else {
        n.opset >= 18
    };
    let axes = if axes_from_input {
        ints_input(l, n, 1)?
    } else {
        n.attrs.ints("axes")
    };
    let keep = n.attrs.int("keepdims", 1) != 0;
    let mut axes: Vec<usize> = match axes {
        Some(a) if !a.is_empty() => a.iter().map(|&a| axis_of(a, r)).collect::<LResult<_>>()?,
        _ => {
            if n.attrs.int("noop_with_empty_axes", 0) != 0 {
                let x = l.tensor(xn)?;
                return Ok(vec![Out::T(l.emit1("identity", &[x], &[])?)]);
            }
            (0..r).collect()
        }
    };
    axes.sort_unstable();
    axes.dedup();
    let out: Vec<usize> = if keep {
        (0..r)
            .map(|a| if axes.contains(&a) { 1 } else { s[a] })
            .collect()
    } else {
        (0..r).filter(|a| !axes.contains(a)).map(|a| s[a]).collect()
    };
    if s.contains(&0) {
        // Nothing to read: every output element is the reduction's value on
        // the empty set (none at all if a kept dim is empty).
        let numel: usize = out.iter().product();
        let v = empty_set_value(m.specs[0])?;
        return Ok(vec![Out::C(Data {
            elem: l.elem_of(xn),
            shape: out,
            values: vec![v; numel],
        })]);
    }
    let x = l.tensor(xn)?;
    if r == 0 {
        // A scalar is a one-element reduction.
        let t = l.reshape(x, &[1])?;
        return Ok(vec![Out::T(l.emit1(m.specs[0], &[t], &[])?)]);
    }
    let kept: Vec<usize> = (0..r).filter(|a| !axes.contains(a)).collect();
    let perm: Vec<usize> = kept.iter().chain(&axes).copied().collect();
    let t = l.permute(x, &perm)?;
    let mut view: Vec<usize> = kept.iter().map(|&a| s[a]).collect();
    view.push(axes.iter().map(|&a| s[a]).product());
    let t = l.reshape(t, &view)?;
    let y = l.emit1(m.specs[0], &[t], &[])?;
    Ok(vec![Out::T(l.reshape(y, &out)?)])
}

/// The value of a reduction over no elements (ONNX: 0 for sums, 1 for the
/// product, -inf for max and the log-sums, +inf for min, NaN for the mean).
fn empty_set_value(spec: &str) -> LResult<f64> {
    Ok(match spec {
        "reduce_sum" | "reduce_l1" | "reduce_l2" | "reduce_sum_square" => 0.0,
        "reduce_prod" => 1.0,
        "reduce_max" | "reduce_log_sum" | "reduce_log_sum_exp" => f64::NEG_INFINITY,
        "reduce_min" => f64::INFINITY,
        "reduce_mean" => f64::NAN,
        other => return unsupported(format!("`{other}` of an empty tensor")),
    })
}

/// ArgMax / ArgMin along `axis` → `argmax` / `argmin` (first index on ties),
/// `argmax_last` / `argmin_last` (`select_last_index = 1`: last index).
pub fn arg(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    let spec = if n.attrs.int("select_last_index", 0) != 0 {
        m.specs[1]
    } else {
        m.specs[0]
    };
    let x = input(l, n, 0)?;
    let s = l.shape(x);
    let axis = axis_of(n.attrs.int("axis", 0), s.len())?;
    let t = l.axis_to_last(x, axis)?;
    let y = l.emit1(spec, &[t], &[])?;
    let out: Vec<usize> = if n.attrs.int("keepdims", 1) != 0 {
        s.iter()
            .enumerate()
            .map(|(a, &d)| if a == axis { 1 } else { d })
            .collect()
    } else {
        s.iter()
            .enumerate()
            .filter(|(a, _)| *a != axis)
            .map(|(_, &d)| d)
            .collect()
    };
    Ok(vec![Out::T(l.reshape(y, &out)?)])
}

/// TopK → `topk` along the axis moved last (`axis`, default -1; `largest`;
/// `sorted` = 0 lets any order do, so the sorted one does). K is the `k`
/// attribute before opset 10, then input 1, known at import time.
pub fn topk(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let s = l.shape(x);
    if s.is_empty() {
        return unsupported("scalar input");
    }
    let axis = axis_of(n.attrs.int("axis", -1), s.len())?;
    let k = if n.opset < 10 {
        n.attrs.int("k", -1)
    } else {
        match ints_input(l, n, 1)?.as_deref() {
            Some(&[k]) => k,
            other => return unsupported(format!("K = {other:?} (one integer)")),
        }
    };
    if k < 1 || k as usize > s[axis] {
        return unsupported(format!("k = {k} for an axis of {}", s[axis]));
    }
    let attrs = [("k", int(k)), ("largest", int(n.attrs.int("largest", 1)))];
    let t = l.axis_to_last(x, axis)?;
    let outs = l.emit("topk", &[t], &attrs)?;
    let mut res = Vec::new();
    for o in outs {
        res.push(Out::T(l.last_to_axis(o, axis)?));
    }
    Ok(res)
}
