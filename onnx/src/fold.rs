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
//! * `Cast`, `Concat`, `Gather`, `Add`/`Sub`/`Mul`/`Div` of small known values
//!   (shape arithmetic of exported models).
//!
//! Folded nodes are listed in the import summary; they emit no operator.

use crate::lower::{Kind, Known, LResult, Lower, NodeError, Src};
use crate::map_shape::view_shape;
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
            let any = |i: usize| n.input(i).and_then(|x| l.arg_data(x));
            let Some(d) = any(0) else { return Ok(None) };
            let to = if op == "CastLike" {
                any(1).map(|t| t.elem)
            } else {
                Elem::from_code(n.attrs.int("to", 1) as i32)
            };
            let Some(to) = to else { return Ok(None) };
            let values = if to == Elem::Bool {
                d.values
                    .iter()
                    .map(|&v| if v != 0.0 { 1.0 } else { 0.0 })
                    .collect()
            } else if to.is_integer() {
                d.values.iter().map(|v| v.trunc()).collect()
            } else if to == Elem::BF16 {
                d.values.iter().map(|&v| round_bf16(v)).collect()
            } else if to == Elem::F32 || to == Elem::F16 {
                d.values.iter().map(|&v| v as f32 as f64).collect()
            } else {
                d.values.clone()
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
            let shape = if a.numel() >= b.numel() {
                a.shape.clone()
            } else {
                b.shape.clone()
            };
            let n_out = a.numel().max(b.numel());
            if (a.numel() != n_out && a.numel() != 1) || (b.numel() != n_out && b.numel() != 1) {
                return Ok(None);
            }
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
        _ => return Ok(None),
    }))
}

/// Round to bfloat16 (round to nearest even on the f32 bits), as ONNX's Cast does.
fn round_bf16(v: f64) -> f64 {
    let f = v as f32;
    if f.is_nan() {
        return f64::NAN;
    }
    let bits = f.to_bits();
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) & 0xffff_0000;
    f32::from_bits(rounded) as f64
}
