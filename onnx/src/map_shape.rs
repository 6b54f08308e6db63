//! Lowering of data-movement ONNX operators: Reshape, Flatten, Squeeze,
//! Unsqueeze, Transpose, Concat, Split, Slice, Pad, Tile, Expand, Gather,
//! OneHot, Trilu, DepthToSpace, SpaceToDepth, CumSum.
//!
//! Axis-generic operators are lowered to the last-axis specs of the core
//! library (`concat`, `split_last`, `slice`, `pad`, `tile_last`, `cumsum`,
//! `reverse_last`) between [`Lower::axis_to_last`] and
//! [`Lower::last_to_axis`]; shape-like arguments (shape, axes, starts, pads,
//! repeats) must be known at import time (initializers, constants, folded
//! Shape arithmetic, or values supplied by the caller).

use planner::graph::{float, int, TensorId};

use crate::lower::{unsupported, Kind, Known, LResult, Lower, NodeError, Out, Src};
use crate::map_elementwise::{input, shape};
use crate::map_nn::axis_of;
use crate::node::Node;
use crate::table::Mapping;
use crate::tensor::{Data, Elem};

/// Integer data of a shape-like input (`None` when the input is omitted).
pub fn ints_input(l: &Lower, n: &Node, i: usize) -> LResult<Option<Vec<i64>>> {
    match n.input(i) {
        None => Ok(None),
        Some(name) => match l.arg_data(name) {
            Some(d) => Ok(Some(d.as_i64())),
            None => unsupported(format!(
                "input {i} (`{name}`) must be known at import time (a constant or initializer); it is computed at run time"
            )),
        },
    }
}

/// The output shape of a view op (Reshape, Flatten, Squeeze, Unsqueeze,
/// Identity) on an input of shape `s`.
pub fn view_shape(l: &Lower, n: &Node, s: &[usize]) -> LResult<Vec<usize>> {
    let r = s.len();
    match n.op_type() {
        "Identity" => Ok(s.to_vec()),
        "Reshape" => {
            let target = if n.opset < 5 {
                n.attrs.ints("shape").unwrap_or_default()
            } else {
                ints_input(l, n, 1)?.unwrap_or_default()
            };
            let allowzero = n.attrs.int("allowzero", 0) != 0;
            let mut out: Vec<i64> = Vec::with_capacity(target.len());
            for (i, &d) in target.iter().enumerate() {
                out.push(if d == 0 && !allowzero {
                    *s.get(i).ok_or_else(|| {
                        NodeError::Unsupported(format!(
                            "shape {target:?}: 0 copies dim {i}, which x lacks"
                        ))
                    })? as i64
                } else {
                    d
                });
            }
            let total: usize = s.iter().product();
            if out.iter().filter(|&&d| d == -1).count() > 1 || out.iter().any(|&d| d < -1) {
                return unsupported(format!("shape {target:?}"));
            }
            let Some(known) = out
                .iter()
                .filter(|&&d| d != -1)
                .try_fold(1i64, |a, &d| a.checked_mul(d))
            else {
                return unsupported(format!("shape {target:?} has too many elements"));
            };
            let out: Vec<usize> = out
                .iter()
                .map(|&d| {
                    if d == -1 {
                        if known == 0 {
                            0
                        } else {
                            total / known as usize
                        }
                    } else {
                        d as usize
                    }
                })
                .collect();
            if out.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(total) {
                return unsupported(format!(
                    "shape {target:?} does not fit {total} elements of {s:?}"
                ));
            }
            Ok(out)
        }
        "Flatten" => {
            let a = n.attrs.int("axis", 1);
            let a = if a < 0 { a + r as i64 } else { a };
            if a < 0 || a as usize > r {
                return unsupported(format!("axis {a}"));
            }
            let a = a as usize;
            Ok(vec![s[..a].iter().product(), s[a..].iter().product()])
        }
        "Squeeze" => {
            let axes = if n.opset < 13 {
                n.attrs.ints("axes")
            } else {
                ints_input(l, n, 1)?
            };
            match axes {
                None => Ok(s.iter().copied().filter(|&d| d != 1).collect()),
                Some(axes) => {
                    let axes: Vec<usize> = axes
                        .iter()
                        .map(|&a| axis_of(a, r))
                        .collect::<LResult<_>>()?;
                    if axes.iter().any(|&a| s[a] != 1) {
                        return unsupported(format!(
                            "squeezing axes {axes:?} of {s:?} that are not 1"
                        ));
                    }
                    Ok(s.iter()
                        .enumerate()
                        .filter(|(i, _)| !axes.contains(i))
                        .map(|(_, &d)| d)
                        .collect())
                }
            }
        }
        "Unsqueeze" => {
            let axes = if n.opset < 13 {
                n.attrs.ints("axes")
            } else {
                ints_input(l, n, 1)?
            };
            let axes = axes.ok_or_else(|| NodeError::Unsupported("axes are missing".into()))?;
            let out_r = r + axes.len();
            let mut axes: Vec<usize> = axes
                .iter()
                .map(|&a| axis_of(a, out_r))
                .collect::<LResult<_>>()?;
            axes.sort_unstable();
            let mut it = s.iter();
            Ok((0..out_r)
                .map(|i| {
                    if axes.contains(&i) {
                        1
                    } else {
                        *it.next().unwrap_or(&1)
                    }
                })
                .collect())
        }
        other => unsupported(format!("{other} is not a view")),
    }
}

/// Reshape / Flatten / Squeeze / Unsqueeze / Identity → `reshape_A_B` (or `identity`).
pub fn view(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let s = l.shape(x);
    let out = view_shape(l, n, &s)?;
    let y = if out == s {
        l.emit1("identity", &[x], &[])?
    } else {
        l.reshape(x, &out)?
    };
    Ok(vec![Out::T(y)])
}

/// Transpose (default perm: reversed) → block swaps.
pub fn transpose(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let r = l.shape(x).len();
    let perm: Vec<usize> = match n.attrs.ints("perm") {
        Some(p) => p.iter().map(|&a| axis_of(a, r)).collect::<LResult<_>>()?,
        None => (0..r).rev().collect(),
    };
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    if sorted != (0..r).collect::<Vec<_>>() {
        return unsupported(format!("perm {perm:?} is not a permutation"));
    }
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(vec![Out::T(l.emit1("identity", &[x], &[])?)]);
    }
    if r == 2 {
        return Ok(vec![Out::T(l.emit1("transpose", &[x], &[])?)]);
    }
    Ok(vec![Out::T(l.permute(x, &perm)?)])
}

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
    if ts.len() == 1 {
        return Ok(vec![Out::T(l.emit1("identity", &[first], &[])?)]);
    }
    if axis == 1 && r >= 3 {
        let mut acc = first;
        for &t in &ts[1..] {
            acc = l.emit1("concat_channels", &[acc, t], &[])?;
        }
        return Ok(vec![Out::T(acc)]);
    }
    let mut moved = Vec::new();
    for &t in &ts {
        moved.push(l.axis_to_last(t, axis)?);
    }
    let mut acc = moved[0];
    for &t in &moved[1..] {
        acc = l.emit1("concat", &[acc, t], &[])?;
    }
    Ok(vec![Out::T(l.last_to_axis(acc, axis)?)])
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
    // Empty parts are empty constants; the others peel off the front.
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

/// An empty (zero-element) value of the given shape.
pub fn empty(elem: Elem, shape: Vec<usize>) -> Data {
    Data {
        elem,
        shape,
        values: Vec::new(),
    }
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

/// Expand → `broadcast_R` to the broadcast of x's shape and the given shape.
pub fn expand(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let target: Vec<usize> = ints_input(l, n, 1)?
        .unwrap_or_default()
        .iter()
        .map(|&d| d.max(0) as usize)
        .collect();
    let out = crate::lower::broadcast_shape(&l.shape(x), &target).ok_or_else(|| {
        NodeError::Unsupported(format!("shape {target:?} does not broadcast with x"))
    })?;
    let y = l.broadcast_to(x, &out)?;
    let y = if y == x {
        l.emit1("identity", &[x], &[])?
    } else {
        y
    };
    Ok(vec![Out::T(y)])
}

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
    let si = l.shape(ids);
    if axis == 0 && sd.len() == 2 && !si.is_empty() {
        return Ok(vec![Out::T(l.emit1("embedding", &[data, ids], &[])?)]);
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
    Ok(vec![Out::T(l.permute(g, &perm)?)])
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

/// DepthToSpace (DCR / CRD) and SpaceToDepth: reshape → permute → reshape.
pub fn depth_space(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let s = l.shape(x);
    if s.len() != 4 {
        return unsupported("input of rank ≠ 4");
    }
    let bs = n.attrs.int("blocksize", 0).max(0) as usize;
    if bs == 0 {
        return unsupported("blocksize");
    }
    let (b, c, h, w) = (s[0], s[1], s[2], s[3]);
    let (view, perm, out): (Vec<usize>, Vec<usize>, Vec<usize>) = if m.op == "DepthToSpace" {
        if c % (bs * bs) != 0 {
            return unsupported("channels not divisible by blocksize²");
        }
        let cc = c / (bs * bs);
        if n.attrs.string("mode", "DCR") == "DCR" {
            (
                vec![b, bs, bs, cc, h, w],
                vec![0, 3, 4, 1, 5, 2],
                vec![b, cc, h * bs, w * bs],
            )
        } else {
            (
                vec![b, cc, bs, bs, h, w],
                vec![0, 1, 4, 2, 5, 3],
                vec![b, cc, h * bs, w * bs],
            )
        }
    } else {
        if h % bs != 0 || w % bs != 0 {
            return unsupported("spatial dims not divisible by blocksize");
        }
        (
            vec![b, c, h / bs, bs, w / bs, bs],
            vec![0, 3, 5, 1, 2, 4],
            vec![b, c * bs * bs, h / bs, w / bs],
        )
    };
    let v = l.reshape(x, &view)?;
    let p = l.permute(v, &perm)?;
    Ok(vec![Out::T(l.reshape(p, &out)?)])
}

/// CumSum along a known axis → `cumsum<reverse, exclusive>`.
pub fn cumsum(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let r = l.shape(x).len();
    let axis = ints_input(l, n, 1)?
        .and_then(|v| v.first().copied())
        .unwrap_or(0);
    let axis = axis_of(axis, r)?;
    let t = l.axis_to_last(x, axis)?;
    let t = l.emit1(
        "cumsum",
        &[t],
        &[
            ("reverse", int(n.attrs.int("reverse", 0))),
            ("exclusive", int(n.attrs.int("exclusive", 0))),
        ],
    )?;
    Ok(vec![Out::T(l.last_to_axis(t, axis)?)])
}

/// A known value defined from data (for folded outputs).
pub fn known_from(d: Data, kind: Kind) -> Known {
    Known {
        elem: d.elem,
        shape: d.shape.clone(),
        src: Src::Dense(d),
        kind,
    }
}

/// Whether an element type is float.
pub fn is_float(e: Elem) -> bool {
    !e.is_integer()
}
