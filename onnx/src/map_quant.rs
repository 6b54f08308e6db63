//! Linear quantization: DequantizeLinear, QuantizeLinear and
//! DynamicQuantizeLinear → `specs/onnx_quant.tdl` (elementwise specs, so the
//! planner splits them like any elementwise op).
//!
//! Takes `x`, a scale and an optional zero point (absent: 0). A scale with
//! one element is per-tensor (`dequantize`, `quantize`); a 1-D scale of the
//! size of dim `axis` is per-axis: x is viewed as `[lead.., C, R]` (C = dim
//! `axis`, R = the product of the dims after it) for `dequantize_axis` /
//! `quantize_axis` and viewed back. Blocked quantization (`block_size`) and
//! float8/float4 outputs of QuantizeLinear are unsupported uses. Source: ONNX
//! QuantizeLinear / DequantizeLinear (opsets 10–23), DynamicQuantizeLinear.

use graph::{Attr, TensorId};
use tdl::AttrValue;

use crate::lower::{unsupported, LResult, Lower, NodeError, Out};
use crate::map_elementwise::{input, splat_const};
use crate::mapping::Mapping;
use crate::node::Node;
use crate::tensor::Elem;

/// How scale and zero point apply to x.
enum Granularity {
    /// One scale for the whole tensor.
    Tensor,
    /// One scale per index of dim `axis`.
    Axis(usize),
}

fn granularity(n: &Node, sx: &[usize], ss: &[usize]) -> LResult<Granularity> {
    if n.attrs.int("block_size", 0) != 0 {
        return unsupported("blocked quantization (block_size ≠ 0)");
    }
    if ss.iter().product::<usize>() == 1 && ss.len() <= 1 {
        return Ok(Granularity::Tensor);
    }
    let r = sx.len() as i64;
    let a = n.attrs.int("axis", 1);
    let axis = if a < 0 { a + r } else { a };
    if ss.len() != 1 || axis < 0 || axis >= r || sx[axis as usize] != ss[0] {
        return unsupported(format!(
            "scale of shape {ss:?} for x of shape {sx:?} and axis {a} (per-tensor or 1-D per-axis scales are supported)"
        ));
    }
    Ok(Granularity::Axis(axis as usize))
}

/// Scale (input 1) and zero point (input 2, or 0) as graph tensors of shape `to`.
fn scale_and_zero(l: &mut Lower, n: &Node, to: &[usize]) -> LResult<(TensorId, TensorId)> {
    let s = input(l, n, 1)?;
    let s = l.reshape(s, to)?;
    let z = match n.input(2) {
        Some(name) => l.tensor(name)?,
        None => splat_const(l, &format!("{}.zero_point", n.name), to, 0.0)?,
    };
    let z = l.reshape(z, to)?;
    Ok((s, z))
}

/// Emit `spec` (per-tensor) or `spec_axis` (per-axis) on x with scale and zero point.
fn apply(l: &mut Lower, n: &Node, spec: &str, attrs: &[Attr]) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let sx = l.shape(x);
    let ss = n
        .input(1)
        .and_then(|s| l.shape_of(s))
        .ok_or_else(|| NodeError::Unsupported("the scale is missing".into()))?;
    match granularity(n, &sx, &ss)? {
        Granularity::Tensor => {
            let (s, z) = scale_and_zero(l, n, &[])?;
            Ok(vec![Out::T(l.emit1(spec, &[x, s, z], attrs)?)])
        }
        Granularity::Axis(axis) => {
            let c = sx[axis];
            let (s, z) = scale_and_zero(l, n, &[c])?;
            let mut view = sx[..axis].to_vec();
            view.extend([c, sx[axis + 1..].iter().product()]);
            let xv = l.reshape(x, &view)?;
            let y = l.emit1(&format!("{spec}_axis"), &[xv, s, z], attrs)?;
            Ok(vec![Out::T(l.reshape(y, &sx)?)])
        }
    }
}

/// DequantizeLinear: y = (x − zero_point) · scale (see the module doc).
pub fn dequantize(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    apply(l, n, "dequantize", &[])
}

/// The integer range [lo, hi] of a quantized type, or `None` for float targets.
pub fn int_range(e: Elem) -> Option<(i64, i64)> {
    match e {
        Elem::Int(b) if b < 64 => Some((-(1i64 << (b - 1)), (1i64 << (b - 1)) - 1)),
        Elem::UInt(b) if b < 64 => Some((0, (1i64 << b) - 1)),
        _ => None,
    }
}

/// QuantizeLinear: y = clamp(round(x / scale) + zero_point) onto the output
/// integer type (the zero point's type, else `output_dtype`, else uint8).
pub fn quantize(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let to = match n.input(2) {
        Some(z) => l
            .values
            .get(z)
            .and_then(|e| e.known.as_ref())
            .map(|k| k.elem)
            .unwrap_or(Elem::UInt(8)),
        None => match n.attrs.int("output_dtype", 0) {
            0 => Elem::UInt(8),
            code => Elem::from_code(code as i32).unwrap_or(Elem::F32),
        },
    };
    let Some((lo, hi)) = int_range(to) else {
        return unsupported(format!(
            "quantization to {to:?} (integer outputs are supported)"
        ));
    };
    let attrs = [("lo", AttrValue::Int(lo)), ("hi", AttrValue::Int(hi))];
    apply(l, n, "quantize", &attrs)
}

/// DynamicQuantizeLinear: `dynamic_quantize` gives (y, scale, zero point).
pub fn dynamic_quantize(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let outs = l.emit("dynamic_quantize", &[x], &[])?;
    Ok(outs.into_iter().map(Out::T).collect())
}
