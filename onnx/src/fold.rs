//! Constant folding: nodes computed at import time instead of becoming
//! operators.
//!
//! Takes a node whose inputs are known (initializers, `Constant` outputs,
//! earlier folded values; never values the caller supplied for graph
//! inputs) and gives its outputs as known values:
//!
//! * `Constant`, `ConstantOfShape` (a splat: weights of the light models are
//!   never materialised), `Shape`, `Size`, `EyeLike`, `Range`: always
//!   (Shape and Size need only the input's shape);
//! * views (`Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`, `Identity`) of a
//!   known value: the same elements under a new shape, keeping its kind, so a
//!   weight stays a weight (DenseNet's unsqueezed batch-norm scales);
//! * `Cast`, `Concat`, `Gather`, `Slice`, `Neg`, `Add`/`Sub`/`Mul`/`Div` of
//!   small known values (shape arithmetic of exported models and of ONNX's
//!   function expansions, e.g. LayerNormalization's `Shape` → `Slice` →
//!   `ConstantOfShape` → `Concat` chain for the statistics' shape).
//!
//! Folded nodes are listed in the import summary; they emit no operator.

use crate::lower::{Kind, Known, LResult, Lower, NodeError, Src};
use crate::map_shape::{slice_args, slice_indices, view_shape};
use crate::node::Node;
use crate::tensor::{Data, Elem};

/// Fold `n` if it can be (see the module doc): `Ok(None)` when it cannot.
pub fn fold(l: &Lower, n: &Node) -> LResult<Option<Vec<Known>>> {
    let known = |i: usize| -> Option<&Known> {
        let k = l.values.get(n.input(i)?)?.known.as_ref()?;
        (k.kind != Kind::Input).then_some(k)
    };
    let small = |i: usize| known(i).filter(|k| k.numel() <= 1 << 16).map(Known::data);
    let dense = |d: Data| Known {
        elem: d.elem,
        shape: d.shape.clone(),
        src: Src::Dense(d),
        kind: Kind::Constant,
    };
    let op = n.op_type();
    Ok(Some(match op {
        "Constant" => {
            let d = if let Some(t) = n.attrs.tensor("value").map_err(NodeError::Unsupported)? {
                t
            } else if let Some(f) = n.attrs.get("value_float") {
                Data::floats(vec![], vec![f.f as f64])
            } else if let Some(v) = n.attrs.floats("value_floats") {
                Data::floats(vec![v.len()], v)
            } else if let Some(i) = n.attrs.get("value_int") {
                Data::ints(vec![], &[i.i])
            } else if let Some(v) = n.attrs.ints("value_ints") {
                Data::ints(vec![v.len()], &v)
            } else {
                return Err(NodeError::Unsupported(
                    "Constant without a numeric value (sparse or string)".into(),
                ));
            };
            let kind = if !d.elem.is_integer() && d.numel() > 1 {
                Kind::Weight
            } else {
                Kind::Constant
            };
            vec![Known { kind, ..dense(d) }]
        }
        "ConstantOfShape" => {
            let Some(shape) = n.input(0).and_then(|s| l.arg_data(s)) else {
                return Ok(None);
            };
            let shape: Vec<usize> = shape.as_i64().iter().map(|&d| d.max(0) as usize).collect();
            let (elem, v) = match n.attrs.tensor("value").map_err(NodeError::Unsupported)? {
                Some(t) if t.numel() == 1 => (t.elem, t.values[0]),
                Some(_) => {
                    return Err(NodeError::Unsupported("value must hold one element".into()))
                }
                None => (Elem::F32, 0.0),
            };
            let kind = if elem.is_integer() {
                Kind::Constant
            } else {
                Kind::Weight
            };
            vec![Known {
                elem,
                shape,
                src: Src::Splat(v),
                kind,
            }]
        }
        "Shape" => {
            let Some(s) = n.input(0).and_then(|x| l.shape_of(x)) else {
                return Ok(None);
            };
            let r = s.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let start = clamp(n.attrs.int("start", 0));
            let end = clamp(n.attrs.int("end", r));
            let dims: Vec<i64> = s[start..end.max(start)].iter().map(|&d| d as i64).collect();
            vec![dense(Data::ints(vec![dims.len()], &dims))]
        }
        "Size" => {
            let Some(s) = n.input(0).and_then(|x| l.shape_of(x)) else {
                return Ok(None);
            };
            vec![dense(Data::ints(
                vec![],
                &[s.iter().product::<usize>() as i64],
            ))]
        }
        "Range" => {
            let get = |i: usize| {
                n.input(i)
                    .and_then(|x| l.arg_data(x))
                    .filter(|d| d.numel() == 1)
            };
            let (Some(a), Some(b), Some(d)) = (get(0), get(1), get(2)) else {
                return Ok(None);
            };
            let (start, limit, delta) = (a.values[0], b.values[0], d.values[0]);
            if delta == 0.0 {
                return Err(NodeError::Unsupported("delta 0".into()));
            }
            let count = ((limit - start) / delta).ceil().max(0.0) as usize;
            if count > 1 << 20 {
                return Err(NodeError::Unsupported("range too long".into()));
            }
            let vals: Vec<f64> = (0..count).map(|i| start + i as f64 * delta).collect();
            vec![dense(Data {
                elem: a.elem,
                shape: vec![count],
                values: vals,
            })]
        }
        "EyeLike" => {
            let Some(s) = n.input(0).and_then(|x| l.shape_of(x)) else {
                return Ok(None);
            };
            if s.len() != 2 {
                return Err(NodeError::Unsupported("input of rank ≠ 2".into()));
            }
            let k = n.attrs.int("k", 0);
            let mut v = vec![0.0; s[0] * s[1]];
            for i in 0..s[0] {
                let j = i as i64 + k;
                if j >= 0 && (j as usize) < s[1] {
                    v[i * s[1] + j as usize] = 1.0;
                }
            }
            let elem = Elem::from_code(n.attrs.int("dtype", 1) as i32).unwrap_or(Elem::F32);
            vec![dense(Data {
                elem,
                shape: s,
                values: v,
            })]
        }
        "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Identity" => {
            let Some(k) = known(0) else { return Ok(None) };
            let shape = view_shape(l, n, &k.shape)?;
            let src = match &k.src {
                Src::Splat(v) => Src::Splat(*v),
                Src::Dense(d) => Src::Dense(Data {
                    shape: shape.clone(),
                    ..d.clone()
                }),
            };
            vec![Known {
                elem: k.elem,
                shape,
                src,
                kind: k.kind.clone(),
            }]
        }
        "Cast" | "CastLike" => {
            // Only constants: a cast of a supplied input runs through its spec.
            let Some(d) = small(0) else { return Ok(None) };
            let to = if op == "CastLike" {
                n.input(1)
                    .and_then(|x| l.values.get(x)?.known.as_ref())
                    .map(|k| k.elem)
                    .or_else(|| n.input(1).map(|x| l.elem_of(x)))
            } else {
                Elem::from_code(n.attrs.int("to", 1) as i32)
            };
            let Some(to) = to else { return Ok(None) };
            let saturate = n.attrs.int("saturate", 1) != 0;
            let unchanged = to == d.elem
                || (d.elem.is_integer() && to.is_integer() && to.small_int().is_none());
            let values = if unchanged {
                d.values.clone()
            } else {
                d.values
                    .iter()
                    .map(|&v| crate::tensor::round_to(to, v, saturate))
                    .collect()
            };
            vec![dense(Data {
                elem: to,
                shape: d.shape,
                values,
            })]
        }
        "Concat" => {
            let ins: Option<Vec<Data>> = (0..n.n_inputs())
                .filter(|&i| n.input(i).is_some())
                .map(small)
                .collect();
            let Some(ins) = ins else { return Ok(None) };
            if ins.iter().any(|d| d.shape.len() != 1) {
                return Ok(None);
            }
            let values: Vec<f64> = ins.iter().flat_map(|d| d.values.iter().copied()).collect();
            vec![dense(Data {
                elem: ins[0].elem,
                shape: vec![values.len()],
                values,
            })]
        }
        "Gather" => {
            let (Some(d), Some(ids)) = (small(0), small(1)) else {
                return Ok(None);
            };
            if d.shape.len() != 1 || ids.shape.len() > 1 {
                return Ok(None);
            }
            let len = d.values.len() as i64;
            let mut vals = Vec::new();
            for i in ids.as_i64() {
                let j = if i < 0 { i + len } else { i };
                if j < 0 || j >= len {
                    return Err(NodeError::Unsupported(format!("index {i} out of range")));
                }
                vals.push(d.values[j as usize]);
            }
            vec![dense(Data {
                elem: d.elem,
                shape: ids.shape.clone(),
                values: vals,
            })]
        }
        "Add" | "Sub" | "Mul" | "Div" => {
            let (Some(a), Some(b)) = (small(0), small(1)) else {
                return Ok(None);
            };
            // Only small shape arithmetic: same shape or a scalar operand, integers.
            if !(a.elem.is_integer() && b.elem.is_integer()) || a.numel() > 64 || b.numel() > 64 {
                return Ok(None);
            }
            let n_out = a.numel().max(b.numel());
            if (a.numel() != n_out && a.numel() != 1) || (b.numel() != n_out && b.numel() != 1) {
                return Ok(None);
            }
            // numpy broadcasting: a scalar and a [1] give [1].
            let Some(shape) = crate::lower::broadcast_shape(&a.shape, &b.shape) else {
                return Ok(None);
            };
            let at = |d: &Data, i: usize| {
                if d.numel() == 1 {
                    d.values[0]
                } else {
                    d.values[i]
                }
            };
            let mut values = Vec::with_capacity(n_out);
            for i in 0..n_out {
                let (x, y) = (at(&a, i), at(&b, i));
                values.push(match op {
                    "Add" => x + y,
                    "Sub" => x - y,
                    "Mul" => x * y,
                    _ if y == 0.0 => return Ok(None),
                    _ => (x / y).trunc(),
                });
            }
            vec![dense(Data {
                elem: a.elem,
                shape,
                values,
            })]
        }
        "Neg" => {
            let Some(d) = small(0) else { return Ok(None) };
            if !d.elem.is_integer() || d.numel() > 64 {
                return Ok(None);
            }
            let values = d.values.iter().map(|v| -v).collect();
            vec![dense(Data { values, ..d })]
        }
        "Slice" => {
            // Shape arithmetic (`Shape` → `Slice`): a small known value, any rank.
            let Some(d) = small(0) else { return Ok(None) };
            let args = slice_args(l, n, d.shape.len())?;
            let mut picks: Vec<Vec<usize>> = d.shape.iter().map(|&s| (0..s).collect()).collect();
            for (axis, start, end, step) in args {
                picks[axis] = slice_indices(d.shape[axis], start, end, step);
            }
            vec![dense(gather_box(&d, &picks))]
        }
        _ => return Ok(None),
    }))
}

/// The elements of `d` at the cartesian product of `picks` (one index list
/// per dim), row-major.
fn gather_box(d: &Data, picks: &[Vec<usize>]) -> Data {
    let shape: Vec<usize> = picks.iter().map(Vec::len).collect();
    let total: usize = shape.iter().product();
    let mut strides = vec![1usize; d.shape.len()];
    for i in (0..d.shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * d.shape[i + 1];
    }
    let mut values = Vec::with_capacity(total);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..total {
        let flat: usize = idx
            .iter()
            .zip(picks)
            .zip(&strides)
            .map(|((&i, p), &s)| p[i] * s)
            .sum();
        values.push(d.values[flat]);
        for k in (0..idx.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Data {
        elem: d.elem,
        shape,
        values,
    }
}
