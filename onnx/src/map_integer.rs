//! Lowering of ONNX's integer products: MatMulInteger (`matmul_integer`),
//! ConvInteger (the operands less their zero points with `sub`, then the
//! Conv lowering, [`crate::map_nn::conv_of`]), QLinearMatMul
//! (`matmul_integer`, `scale` by the requantization factor, `quantize`) and
//! QLinearConv (the same after the shifted convolution).

use graph::{float, TensorId};
use tdl::AttrValue;

use crate::lower::{unsupported, LResult, Lower, Out};
use crate::map_elementwise::{broadcast_binary, shape, splat_const};
use crate::mapping::Mapping;
use crate::node::Node;
use crate::tensor::Elem;

/// Zero point input `i` as a scalar graph tensor (0 when omitted); `None`
/// when it holds more than one value.
fn scalar_zero_point(l: &mut Lower, n: &Node, i: usize) -> LResult<Option<TensorId>> {
    let Some(name) = n.input(i) else {
        let z = splat_const(l, &format!("{}#zero_point{i}", n.name), &[], 0.0)?;
        return Ok(Some(z));
    };
    if shape(l, name)?.iter().product::<usize>() != 1 {
        return Ok(None);
    }
    let t = l.tensor(name)?;
    Ok(Some(l.reshape(t, &[])?))
}

/// MatMulInteger: A [..., M, K] (rank ≥ 2), B [K, N] or [..., K, N]
/// (batch dims broadcast), scalar zero points (per-row or per-column zero
/// points are not mapped).
pub fn matmul_integer(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let (Some(an), Some(bn)) = (n.input(0), n.input(1)) else {
        return unsupported("A and B are required");
    };
    let (Some(az), Some(bz)) = (scalar_zero_point(l, n, 2)?, scalar_zero_point(l, n, 3)?) else {
        return unsupported("per-row or per-column zero points (scalar ones are mapped)");
    };
    Ok(vec![Out::T(integer_product(l, an, bn, az, bz)?)])
}

/// `matmul_integer` (2-D b) or `batch_matmul_integer` (b with batch dims,
/// both operands broadcast to the common batch shape) of the named operands.
fn integer_product(
    l: &mut Lower,
    an: &str,
    bn: &str,
    az: TensorId,
    bz: TensorId,
) -> LResult<TensorId> {
    let (sa, sb) = (shape(l, an)?, shape(l, bn)?);
    if sa.len() < 2 || sb.len() < 2 {
        return unsupported(format!(
            "a of shape {sa:?} and b of shape {sb:?} (operands of rank ≥ 2 are mapped)"
        ));
    }
    let (a, b) = (l.tensor(an)?, l.tensor(bn)?);
    if sb.len() == 2 {
        return l.emit1("matmul_integer", &[a, b, az, bz], &[]);
    }
    let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
    let batch = crate::lower::broadcast_shape(ba, bb).ok_or_else(|| {
        crate::lower::NodeError::Unsupported(format!(
            "batch dims {ba:?} and {bb:?} do not broadcast"
        ))
    })?;
    let a = l.broadcast_to(a, &[&batch[..], &sa[sa.len() - 2..]].concat())?;
    let b = l.broadcast_to(b, &[&batch[..], &sb[sb.len() - 2..]].concat())?;
    l.emit1("batch_matmul_integer", &[a, b, az, bz], &[])
}

/// ConvInteger: x - x_zero_point (a scalar) and w - w_zero_point (a scalar
/// or one per output channel), then the Conv lowering with the node's
/// attributes.
pub fn conv_integer(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    Ok(vec![Out::T(shifted_conv(l, n, [0, 2, 1, 3], None)?)])
}

/// The convolution of x - x_zero_point with w - w_zero_point (inputs at
/// positions `[x, x_zero_point, w, w_zero_point]`), plus `bias`.
fn shifted_conv(
    l: &mut Lower,
    n: &Node,
    [xi, xzi, wi, wzi]: [usize; 4],
    bias: Option<TensorId>,
) -> LResult<TensorId> {
    let (Some(xn), Some(wn)) = (n.input(xi), n.input(wi)) else {
        return unsupported("x and w are required");
    };
    let x = match n.input(xzi) {
        None => l.tensor(xn)?,
        Some(z) if shape(l, z)?.iter().product::<usize>() == 1 => {
            let t = l.tensor(z)?;
            let t = l.reshape(t, &[])?;
            let zn = format!("{}#x_zero_point", n.name);
            l.bind(&zn, t);
            broadcast_binary(l, "sub", xn, &zn)?
        }
        Some(z) => return unsupported(format!("x_zero_point `{z}` must hold one value")),
    };
    let sw = shape(l, wn)?;
    let w = match n.input(wzi) {
        None => l.tensor(wn)?,
        Some(z) => {
            let numel: usize = shape(l, z)?.iter().product();
            let mut view = vec![1; sw.len()];
            if numel != 1 {
                if sw.is_empty() || numel != sw[0] {
                    return unsupported(format!(
                        "w_zero_point `{z}` of {numel} values for {} output channels",
                        sw.first().copied().unwrap_or(0)
                    ));
                }
                view[0] = numel;
            }
            let t = l.tensor(z)?;
            let t = l.reshape(t, &view)?;
            let zn = format!("{}#w_zero_point", n.name);
            l.bind(&zn, t);
            broadcast_binary(l, "sub", wn, &zn)?
        }
    };
    crate::map_nn::conv_of(l, n, x, w, bias)
}

/// QLinearConv: the convolution of the zero-point-shifted integers (plus the
/// int32 bias), times x_scale · w_scale / y_scale (w_scale a scalar or one
/// per output channel; float32 scales known at import), quantized onto
/// y_zero_point's integer type.
pub fn qlinear_conv(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let xs = f32_scale(l, n, 1)?;
    let ys = f32_scale(l, n, 6)?;
    let ws = f32_scales(l, n, 4)?;
    let factors: Vec<f64> = ws.iter().map(|&w| f64::from(xs * w / ys)).collect();
    let bias = match n.input(8) {
        Some(b) => Some(l.tensor(b)?),
        None => None,
    };
    let c = shifted_conv(l, n, [0, 2, 3, 5], bias)?;
    let d = if factors.len() == 1 {
        l.emit1("scale", &[c], &[("alpha", float(factors[0]))])?
    } else {
        let name = format!("{}#requantize", n.name);
        l.define_known(
            &name,
            crate::lower::Known {
                elem: Elem::F32,
                shape: vec![factors.len()],
                src: crate::lower::Src::Dense(crate::tensor::Data {
                    elem: Elem::F32,
                    shape: vec![factors.len()],
                    values: factors,
                }),
                kind: crate::lower::Kind::Constant,
            },
        );
        let f = l.tensor(&name)?;
        l.emit1("channel_mul", &[c, f], &[])?
    };
    let Some(yz) = scalar_zero_point(l, n, 7)? else {
        return unsupported("y_zero_point must hold one value");
    };
    let to = n.input(7).map_or(Elem::UInt(8), |z| l.elem_of(z));
    let Some((lo, hi)) = crate::map_quant::int_range(to) else {
        return unsupported(format!("output type {to:?} (integer outputs are mapped)"));
    };
    let one = splat_const(l, &format!("{}#unit_scale", n.name), &[], 1.0)?;
    let y = l.emit1(
        "quantize",
        &[d, one, yz],
        &[("lo", AttrValue::Int(lo)), ("hi", AttrValue::Int(hi))],
    )?;
    Ok(vec![Out::T(y)])
}

/// The float32 values of a scale known at import (one or per channel).
fn f32_scales(l: &Lower, n: &Node, i: usize) -> LResult<Vec<f32>> {
    let Some(name) = n.input(i) else {
        return unsupported(format!("input {i} (a scale) is missing"));
    };
    match l.arg_data(name) {
        Some(d) if !d.values.is_empty() && matches!(d.elem, Elem::F32 | Elem::F64) => {
            Ok(d.values.iter().map(|&v| v as f32).collect())
        }
        _ => unsupported(format!(
            "scale `{name}` must be float32 values known at import time (a constant, an \
             initializer or --input-value {name}=...)"
        )),
    }
}

/// A scalar scale known at import, in float32 (what ONNX's reference
/// computes with for float32 scales); float16 / bfloat16 scales are not
/// mapped (the reference multiplies them in their own precision).
fn f32_scale(l: &Lower, n: &Node, i: usize) -> LResult<f32> {
    let Some(name) = n.input(i) else {
        return unsupported(format!("input {i} (a scale) is missing"));
    };
    match l.arg_data(name) {
        Some(d) if d.values.len() == 1 && matches!(d.elem, Elem::F32 | Elem::F64) => {
            Ok(d.values[0] as f32)
        }
        Some(d) if d.values.len() == 1 => unsupported(format!(
            "scale `{name}` of element type {:?} (float32 scales are mapped)",
            d.elem
        )),
        _ => unsupported(format!(
            "scale `{name}` must be one value known at import time (a constant, an initializer \
             or --input-value {name}=...)"
        )),
    }
}

/// QLinearMatMul: y = saturate(round((A - a_zp) · (B - b_zp) · a_scale ·
/// b_scale / y_scale) + y_zp) onto y_zero_point's integer type; scalar
/// float32 scales known at import and scalar zero points (ONNX's reference
/// forms the factor a_scale · b_scale / y_scale in float32).
pub fn qlinear_matmul(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let (Some(an), Some(bn)) = (n.input(0), n.input(3)) else {
        return unsupported("a and b are required");
    };
    let factor = f32_scale(l, n, 1)? * f32_scale(l, n, 4)? / f32_scale(l, n, 6)?;
    let (Some(az), Some(bz), Some(yz)) = (
        scalar_zero_point(l, n, 2)?,
        scalar_zero_point(l, n, 5)?,
        scalar_zero_point(l, n, 7)?,
    ) else {
        return unsupported("per-row or per-column zero points (scalar ones are mapped)");
    };
    let to = n.input(7).map_or(Elem::UInt(8), |z| l.elem_of(z));
    let Some((lo, hi)) = crate::map_quant::int_range(to) else {
        return unsupported(format!("output type {to:?} (integer outputs are mapped)"));
    };
    let c = integer_product(l, an, bn, az, bz)?;
    let d = l.emit1("scale", &[c], &[("alpha", float(f64::from(factor)))])?;
    let one = splat_const(l, &format!("{}#unit_scale", n.name), &[], 1.0)?;
    let y = l.emit1(
        "quantize",
        &[d, one, yz],
        &[("lo", AttrValue::Int(lo)), ("hi", AttrValue::Int(hi))],
    )?;
    Ok(vec![Out::T(y)])
}
