//! Constant folding: nodes computed at import time instead of becoming
//! operators.
//!
//! Takes a node whose inputs are known (initializers, `Constant` outputs,
//! earlier folded values; never values the caller supplied for graph
//! inputs) and gives its outputs as known values:
//!
//! * `Constant`, `ConstantOfShape` (a splat: weights of the light models are
//!   never materialised), `Shape`, `Size`, `Range`: always
//!   (Shape and Size need only the input's shape);
//! * views (`Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`, `Identity`) of a
//!   known value: the same elements under a new shape, keeping its kind, so a
//!   weight stays a weight (DenseNet's unsqueezed batch-norm scales);
//!
//! These are what the TDL interpreter cannot compute (values from shapes
//! alone, outputs whose shape depends on input values, views that must keep
//! a weight a weight). Every other node whose inputs are known constants —
//! the shape arithmetic of exported models and of ONNX's function
//! expansions (`Cast`, `Concat`, `Gather`, `Slice`, `Add`, `Where`, `Equal`,
//! …) — is evaluated by [`crate::fold_eval`] through its specs and the
//! interpreter. Folded nodes are listed in the import summary; they emit no
//! operator.

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
        "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Identity" => {
            let Some(k) = known(0) else { return Ok(None) };
            let shape = view_shape(l, n, &k.shape)?;
            let src = match &k.src {
                Src::Splat(v) => Src::Splat(*v),
                Src::Dense(d) => Src::Dense(Data {
                    shape: shape.clone(),
                    ..d.clone()
                }),
                Src::External(x) => Src::External(x.clone()),
            };
            vec![Known {
                elem: k.elem,
                shape,
                src,
                kind: k.kind.clone(),
            }]
        }
        _ => return Ok(None),
    }))
}
