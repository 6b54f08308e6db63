//! Lowering of ONNX's integer products: MatMulInteger (`matmul_integer`)
//! and ConvInteger (the operands less their zero points with `sub`, then
//! the Conv lowering, [`crate::map_nn::conv_of`]).

use planner::graph::TensorId;

use crate::lower::{unsupported, LResult, Lower, Out};
use crate::map_elementwise::{broadcast_binary, shape, splat_const};
use crate::mapping::Mapping;
use crate::node::Node;

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

/// MatMulInteger: A [..., M, K] (rank ≥ 2), B [K, N], scalar zero points
/// (per-row or per-column zero points are not mapped).
pub fn matmul_integer(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let (Some(an), Some(bn)) = (n.input(0), n.input(1)) else {
        return unsupported("A and B are required");
    };
    let (sa, sb) = (shape(l, an)?, shape(l, bn)?);
    if sa.len() < 2 || sb.len() != 2 {
        return unsupported(format!(
            "A of shape {sa:?} and B of shape {sb:?} (A of rank ≥ 2 and a 2-D B are mapped)"
        ));
    }
    let (Some(az), Some(bz)) = (scalar_zero_point(l, n, 2)?, scalar_zero_point(l, n, 3)?) else {
        return unsupported("per-row or per-column zero points (scalar ones are mapped)");
    };
    let (a, b) = (l.tensor(an)?, l.tensor(bn)?);
    Ok(vec![Out::T(l.emit1(
        "matmul_integer",
        &[a, b, az, bz],
        &[],
    )?)])
}

/// ConvInteger: x - x_zero_point (a scalar) and w - w_zero_point (a scalar
/// or one per output channel), then the Conv lowering with the node's
/// attributes.
pub fn conv_integer(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let (Some(xn), Some(wn)) = (n.input(0), n.input(1)) else {
        return unsupported("x and w are required");
    };
    let x = match n.input(2) {
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
    let w = match n.input(3) {
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
    Ok(vec![Out::T(crate::map_nn::conv_of(l, n, x, w, None)?)])
}
