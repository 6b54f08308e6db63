//! Output shapes of opaque nodes when the model does not declare them:
//! tofu's own folding and the ONNX type information instead of onnx's
//! Python shape inference.
//!
//! Takes a node without a spec mapping, the values known so far (folded
//! `scales` / `sizes`, input shapes) and the dims the model declares for
//! its outputs, possibly partly (`[batch, 3, ?, ?]`); gives each output's
//! shape where it can be derived. Rules, in order: a fully declared shape;
//! the operator's shape rule where tofu knows it (`Resize` / `Upsample` from
//! folded sizes or scales, `GatherND`, `QuantizeLinear` /
//! `DequantizeLinear` / `DynamicQuantizeLinear`); else a partly declared
//! shape of input 0's rank, its unknown dims taken from input 0 (the usual
//! case of ops that keep their input's shape). Source: ONNX operator spec
//! (Resize, GatherND, the quantization operators).

use std::collections::HashMap;

use crate::lower::Lower;
use crate::node::Node;

/// Output `j`'s shape (see the module doc), or `None`.
pub fn output_shape(
    n: &Node,
    l: &Lower,
    j: usize,
    declared: &HashMap<String, Vec<usize>>,
    partial: &HashMap<String, Vec<Option<usize>>>,
) -> Option<Vec<usize>> {
    let name = n.proto.output.get(j)?;
    if let Some(s) = declared.get(name) {
        return Some(s.clone());
    }
    let x = n.input(0).and_then(|x| l.shape_of(x));
    if let Some(s) = rule(n, l, j, x.as_deref()) {
        return Some(s);
    }
    let p = partial.get(name)?;
    let x = x?;
    if p.len() != x.len() {
        return None;
    }
    Some(p.iter().zip(&x).map(|(d, &xd)| d.unwrap_or(xd)).collect())
}

fn rule(n: &Node, l: &Lower, j: usize, x: Option<&[usize]>) -> Option<Vec<usize>> {
    let x = x?;
    let arg = |i: usize| {
        n.input(i)
            .and_then(|v| l.arg_data(v))
            .filter(|d| d.numel() > 0)
    };
    match n.op_type() {
        "Resize" | "Upsample" => {
            let (scales_at, sizes_at) = if n.op_type() == "Upsample" || n.opset < 11 {
                (1, usize::MAX)
            } else {
                (2, 3)
            };
            let axes: Vec<usize> = match n.attrs.ints("axes") {
                Some(a) => a
                    .iter()
                    .map(|&a| if a < 0 { a + x.len() as i64 } else { a } as usize)
                    .collect(),
                None => (0..x.len()).collect(),
            };
            let mut out = x.to_vec();
            if let Some(s) = arg(sizes_at) {
                for (&a, &v) in axes.iter().zip(&s.as_i64()) {
                    *out.get_mut(a)? = v.max(0) as usize;
                }
                return Some(out);
            }
            let s = arg(scales_at)?;
            for (&a, &v) in axes.iter().zip(&s.values) {
                let d = out.get_mut(a)?;
                *d = (*d as f64 * v).floor().max(0.0) as usize;
            }
            Some(out)
        }
        "GatherND" => {
            let q = n.input(1).and_then(|v| l.shape_of(v))?;
            let k = *q.last()?;
            let b = n.attrs.int("batch_dims", 0).max(0) as usize;
            let mut out = q[..q.len() - 1].to_vec();
            out.extend(x.get(b + k..)?);
            Some(out)
        }
        "QuantizeLinear" | "DequantizeLinear" => (j == 0).then(|| x.to_vec()),
        "DynamicQuantizeLinear" => Some(if j == 0 { x.to_vec() } else { vec![] }),
        _ => None,
    }
}
