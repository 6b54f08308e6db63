//! Axis-generic operators lowered to the last-axis specs of the core library
//! between [`Lower::axis_to_last`] and [`Lower::last_to_axis`]: Concat
//! (`concat`, or `concat_channels` on axis 1), Split (`split_last`), Slice
//! (`slice`, `reverse_last`), Pad (`pad`, `pad_edge`, `pad_reflect`,
//! `pad_wrap`), Tile (`tile_last`), CumSum (`cumsum`), CumProd (`cumprod`),
//! CenterCropPad (`slice` / `pad` per axis). Empty results are empty
//! constants.

use graph::{float, int, TensorId};

use crate::lower::{unsupported, LResult, Lower, NodeError, Out};
use crate::map_elementwise::{input, shape};
use crate::map_nn::axis_of;
use crate::mapping::Mapping;
use crate::node::Node;
use crate::tensor::Elem;

use super::{empty, ints_input};

/// Concat: `concat_channels` chains on axis 1 of rank ≥ 3, otherwise `concat` on the last axis.
pub fn concat(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let names: Vec<&str> = (0..n.n_inputs()).filter_map(|i| n.input(i)).collect();
    let mut ts = Vec::new();
    for &name in &names {
        if shape(l, name)?.iter().product::<usize>() > 0 {
            ts.push(l.tensor(name)?);
        }
    }
    let Some(&first) = ts.first() else {
        return unsupported("every input is empty");
    };
    let r = l.shape(first).len();
    let axis = axis_of(
        n.attrs.int("axis", if n.opset < 4 { 1 } else { i64::MIN }),
        r,
    )
    .map_err(|_| NodeError::Unsupported("axis is missing or out of range".into()))?;
    Ok(vec![Out::T(concat_tensors(l, &ts, axis)?)])
}

/// The non-empty tensors `ts` (at least one, equal shapes but on `axis`)
/// joined along `axis`: `identity` for one, `concat_channels` chains on axis
/// 1 of rank ≥ 3, otherwise `concat` on the last axis. Shared with
/// ConcatFromSequence.
pub fn concat_tensors(l: &mut Lower, ts: &[TensorId], axis: usize) -> LResult<TensorId> {
    let first = ts[0];
    let r = l.shape(first).len();
    if ts.len() == 1 {
        return l.emit1("identity", &[first], &[]);
    }
    if axis == 1 && r >= 3 {
        let mut acc = first;
        for &t in &ts[1..] {
            acc = l.emit1("concat_channels", &[acc, t], &[])?;
        }
        return Ok(acc);
    }
    let mut moved = Vec::new();
    for &t in ts {
        moved.push(l.axis_to_last(t, axis)?);
    }
    let mut acc = moved[0];
    for &t in &moved[1..] {
        acc = l.emit1("concat", &[acc, t], &[])?;
    }
    l.last_to_axis(acc, axis)
}

/// Split along `axis` into the given sizes (attribute or input by opset,
/// `num_outputs`, or equal parts) → `split_last` peeling.
pub fn split(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let s = l.shape(x);
    let axis = axis_of(n.attrs.int("axis", 0), s.len())?;
    let outs = n.proto.output.len();
    let sizes: Vec<usize> = match if n.opset < 13 {
        n.attrs.ints("split")
    } else {
        ints_input(l, n, 1)?
    } {
        Some(v) => v.iter().map(|&d| d.max(0) as usize).collect(),
        None => {
            let parts = n.attrs.int("num_outputs", outs as i64).max(1) as usize;
            let chunk = s[axis].div_ceil(parts);
            (0..parts)
                .map(|i| chunk.min(s[axis].saturating_sub(i * chunk)))
                .collect()
        }
    };
    if sizes.iter().sum::<usize>() != s[axis] || sizes.len() != outs {
        return unsupported(format!("split sizes {sizes:?} for a dim of {}", s[axis]));
    }
    split_sizes(l, x, axis, &sizes)
}

/// `x` split along `axis` into parts of `sizes` (summing to the dim):
/// empty parts are empty constants, the others peel off the front with
/// `split_last`. Shared with SplitToSequence.
pub fn split_sizes(l: &mut Lower, x: TensorId, axis: usize, sizes: &[usize]) -> LResult<Vec<Out>> {
    let s = l.shape(x);
    let last = sizes.iter().rposition(|&sz| sz > 0);
    let mut rest = l.axis_to_last(x, axis)?;
    let mut result = Vec::new();
    for (i, &sz) in sizes.iter().enumerate() {
        if sz == 0 {
            let mut es = s.clone();
            es[axis] = 0;
            result.push(Out::C(empty(Elem::F32, es)));
            continue;
        }
        let part = if Some(i) == last {
            rest
        } else {
            let o = l.emit("split_last", &[rest], &[("n", int(sz as i64))])?;
            rest = o[1];
            o[0]
        };
        result.push(Out::T(l.last_to_axis(part, axis)?));
    }
    Ok(result)
}

/// The (axis, start, end, step) of each sliced axis of a Slice node on an
/// input of rank `r` (attributes before opset 10, inputs after; raw values,
/// not yet clamped).
pub fn slice_args(l: &Lower, n: &Node, r: usize) -> LResult<Vec<(usize, i64, i64, i64)>> {
    let (starts, ends, axes, steps) = if n.opset < 10 {
        (
            n.attrs.ints("starts").unwrap_or_default(),
            n.attrs.ints("ends").unwrap_or_default(),
            n.attrs.ints("axes"),
            None,
        )
    } else {
        (
            ints_input(l, n, 1)?.unwrap_or_default(),
            ints_input(l, n, 2)?.unwrap_or_default(),
            ints_input(l, n, 3)?,
            ints_input(l, n, 4)?,
        )
    };
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&a| axis_of(a, r)).collect::<LResult<_>>()?,
        None => (0..starts.len()).collect(),
    };
    let steps = steps.unwrap_or_else(|| vec![1; axes.len()]);
    if starts.len() != axes.len() || ends.len() != axes.len() || steps.len() != axes.len() {
        return unsupported("starts, ends, axes and steps differ in length");
    }
    if steps.contains(&0) {
        return unsupported("step 0");
    }
    let mut seen = vec![false; r];
    for &a in &axes {
        if std::mem::replace(&mut seen[a], true) {
            return unsupported(format!("axis {a} is sliced twice"));
        }
    }
    Ok((0..axes.len())
        .map(|k| (axes[k], starts[k], ends[k], steps[k]))
        .collect())
}

/// The indices ONNX's Slice selects along a dim of size `dim` (negative
/// start/end count from the end; clamped to [0, dim] for a positive step,
/// [-1, dim - 1] for a negative one), in output order. Empty when the range is.
pub fn slice_indices(dim: usize, start: i64, end: i64, step: i64) -> Vec<usize> {
    let d = dim as i64;
    let norm = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    let mut out = Vec::new();
    if step > 0 {
        let (mut i, e) = (norm(start).clamp(0, d), norm(end).clamp(0, d));
        while i < e {
            out.push(i as usize);
            i += step;
        }
    } else if step < 0 {
        let (mut i, e) = (norm(start).clamp(-1, d - 1), norm(end).clamp(-1, d - 1));
        while i > e {
            out.push(i as usize);
            i += step;
        }
    }
    out
}

/// Slice → per axis `slice` (negative steps via `reverse_last`); an empty
/// result is an empty constant (it has no elements to compute).
pub fn slice(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let xn = n
        .input(0)
        .ok_or_else(|| NodeError::Unsupported("input 0 is missing".into()))?;
    let s = shape(l, xn)?;
    let args = slice_args(l, n, s.len())?;
    let mut out_shape = s.clone();
    for &(axis, start, end, step) in &args {
        out_shape[axis] = slice_indices(s[axis], start, end, step).len();
    }
    if out_shape.contains(&0) {
        return Ok(vec![Out::C(empty(l.elem_of(xn), out_shape))]);
    }
    let x = l.tensor(xn)?;
    let mut cur = x;
    for (axis, start, end, step) in args {
        let dim = s[axis] as i64;
        let idx = slice_indices(s[axis], start, end, step);
        let reverse = step < 0;
        // Positions along the (possibly reversed) axis: first, one past the last, step.
        let first = if reverse {
            dim - 1 - idx[0] as i64
        } else {
            idx[0] as i64
        };
        let (start, step) = (first, step.abs());
        let end = start + step * (idx.len() as i64 - 1) + 1;
        if start == 0 && end >= dim && step == 1 && !reverse {
            continue;
        }
        let mut t = l.axis_to_last(cur, axis)?;
        if reverse {
            t = l.emit1("reverse_last", &[t], &[])?;
        }
        t = l.emit1(
            "slice",
            &[t],
            &[
                ("start", int(start)),
                ("end", int(end)),
                ("step", int(step)),
            ],
        )?;
        cur = l.last_to_axis(t, axis)?;
    }
    if cur == x {
        cur = l.emit1("identity", &[x], &[])?;
    }
    Ok(vec![Out::T(cur)])
}

/// Pad (pads attribute before opset 11, input after) → per axis `pad`
/// (constant), `pad_edge`, `pad_reflect` or `pad_wrap`.
pub fn pad(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let s = l.shape(x);
    let r = s.len();
    let mode = n.attrs.string("mode", "constant");
    let spec = match mode.as_str() {
        "constant" => "pad",
        "edge" => "pad_edge",
        "reflect" => "pad_reflect",
        "wrap" => "pad_wrap",
        other => return unsupported(format!("mode = {other}")),
    };
    let (pads, value, axes) = if n.opset < 11 {
        (
            n.attrs.ints("pads").unwrap_or_default(),
            n.attrs.float("value", 0.0),
            None,
        )
    } else {
        let v = match n.input(2) {
            None => 0.0,
            Some(name) => match l.arg_data(name) {
                Some(d) if d.numel() == 1 => d.values[0],
                _ => return unsupported("constant_value must be a known scalar"),
            },
        };
        (
            ints_input(l, n, 1)?.unwrap_or_default(),
            v,
            ints_input(l, n, 3)?,
        )
    };
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&a| axis_of(a, r)).collect::<LResult<_>>()?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return unsupported(format!("pads {pads:?} for {} axes", axes.len()));
    }
    if pads.iter().any(|&p| p < 0) {
        return unsupported("negative pads (cropping)");
    }
    let mut cur = x;
    for (k, &axis) in axes.iter().enumerate() {
        let (before, after) = (pads[k], pads[k + axes.len()]);
        if before == 0 && after == 0 {
            continue;
        }
        if spec == "pad_reflect" && (before.max(after) as usize) >= s[axis] {
            return unsupported(format!(
                "reflect padding of {before}/{after} on a dim of {} (pads must be smaller than the dim)",
                s[axis]
            ));
        }
        if spec != "pad" && s[axis] == 0 {
            return unsupported(format!("mode = {mode} on an empty dim"));
        }
        let t = l.axis_to_last(cur, axis)?;
        let mut attrs = vec![("before", int(before)), ("after", int(after))];
        if spec == "pad" {
            attrs.push(("value", float(value)));
        }
        let t = l.emit1(spec, &[t], &attrs)?;
        cur = l.last_to_axis(t, axis)?;
    }
    if cur == x {
        cur = l.emit1("identity", &[x], &[])?;
    }
    Ok(vec![Out::T(cur)])
}

/// Tile → per axis `tile_last`.
pub fn tile(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let reps = ints_input(l, n, 1)?.unwrap_or_default();
    if reps.len() != l.shape(x).len() || reps.iter().any(|&r| r < 1) {
        return unsupported(format!("repeats {reps:?}"));
    }
    let mut cur = x;
    for (axis, &rep) in reps.iter().enumerate() {
        if rep == 1 {
            continue;
        }
        let t = l.axis_to_last(cur, axis)?;
        let t = l.emit1("tile_last", &[t], &[("reps", int(rep))])?;
        cur = l.last_to_axis(t, axis)?;
    }
    if cur == x {
        cur = l.emit1("identity", &[x], &[])?;
    }
    Ok(vec![Out::T(cur)])
}

/// CumSum / CumProd along a known axis → `cumsum` / `cumprod` (the row's
/// spec) with `reverse` and `exclusive`.
pub fn cumsum(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let r = l.shape(x).len();
    let axis = ints_input(l, n, 1)?
        .and_then(|v| v.first().copied())
        .unwrap_or(0);
    let axis = axis_of(axis, r)?;
    let t = l.axis_to_last(x, axis)?;
    let t = l.emit1(
        m.specs[0],
        &[t],
        &[
            ("reverse", int(n.attrs.int("reverse", 0))),
            ("exclusive", int(n.attrs.int("exclusive", 0))),
        ],
    )?;
    Ok(vec![Out::T(l.last_to_axis(t, axis)?)])
}

/// CenterCropPad: each of `axes` (default all) cropped (`slice`) or
/// zero-padded (`pad`) to the known target length, centred with the odd
/// element at the end (ONNX's reference: begin = ⌊(difference) / 2⌋).
pub fn center_crop_pad(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let mut x = input(l, n, 0)?;
    let r = l.shape(x).len();
    let Some(target) = ints_input(l, n, 1)? else {
        return unsupported("input 1 (shape) is missing");
    };
    let axes: Vec<i64> = n
        .attrs
        .ints("axes")
        .unwrap_or_else(|| (0..r as i64).collect());
    if axes.len() != target.len() || target.iter().any(|&t| t < 1) {
        return unsupported(format!("shape {target:?} for axes {axes:?}"));
    }
    for (&a, &want) in axes.iter().zip(&target) {
        let axis = axis_of(a, r)?;
        let have = l.shape(x)[axis] as i64;
        if have == want {
            continue;
        }
        let t = l.axis_to_last(x, axis)?;
        let t = if want < have {
            let start = (have - want) / 2;
            let attrs = [
                ("start", int(start)),
                ("end", int(start + want)),
                ("step", int(1)),
            ];
            l.emit1("slice", &[t], &attrs)?
        } else {
            let before = (want - have) / 2;
            let attrs = [
                ("before", int(before)),
                ("after", int(want - have - before)),
                ("value", float(0.0)),
            ];
            l.emit1("pad", &[t], &attrs)?
        };
        x = l.last_to_axis(t, axis)?;
    }
    Ok(vec![Out::T(x)])
}
