//! Lowering of ONNX's bitwise operators: BitwiseAnd / Or / Xor / Not and
//! BitShift. The specs (`specs/onnx_bitwise.tdl`) take the integer width
//! (and BitwiseNot its signedness) as attributes, read from the element type
//! of the first input;
//! so that input's type must be known at import (a graph input, an
//! initializer, a constant or a supplied value).

use graph::{int, Attr, TensorId};

use crate::lower::{broadcast_shape, unsupported, LResult, Lower, NodeError, Out};
use crate::map_elementwise::shape;
use crate::mapping::Mapping;
use crate::node::Node;
use crate::tensor::Elem;

/// (bits, signed) of the integer input `name`.
fn width(l: &Lower, name: &str) -> LResult<(i64, bool)> {
    match l.elem_of(name) {
        Elem::Int(b) => Ok((i64::from(b), true)),
        Elem::UInt(b) => Ok((i64::from(b), false)),
        Elem::Bool => Ok((1, false)),
        other => unsupported(format!(
            "input `{name}` has element type {other:?}: the bitwise specs need an integer \
             type known at import (a graph input, initializer or constant)"
        )),
    }
}

/// The two inputs broadcast to their common shape.
fn operands(l: &mut Lower, n: &Node) -> LResult<(TensorId, TensorId)> {
    let (Some(a), Some(b)) = (n.input(0), n.input(1)) else {
        return unsupported("two inputs are required");
    };
    let (sa, sb) = (shape(l, a)?, shape(l, b)?);
    let out = broadcast_shape(&sa, &sb).ok_or_else(|| {
        NodeError::Unsupported(format!("shapes {sa:?} and {sb:?} do not broadcast"))
    })?;
    let (ta, tb) = (l.tensor(a)?, l.tensor(b)?);
    Ok((l.broadcast_to(ta, &out)?, l.broadcast_to(tb, &out)?))
}

/// BitwiseAnd / BitwiseOr / BitwiseXor with numpy broadcasting.
pub fn binary(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    // Negative values are two's complement whatever the signedness.
    let (bits, _) = width(l, n.input(0).unwrap_or_default())?;
    let (a, b) = operands(l, n)?;
    Ok(vec![Out::T(l.emit1(
        m.specs[0],
        &[a, b],
        &[("bits", int(bits))],
    )?)])
}

/// BitwiseNot.
pub fn not(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let Some(xn) = n.input(0) else {
        return unsupported("input 0 is missing");
    };
    let (bits, signed) = width(l, xn)?;
    let x = l.tensor(xn)?;
    let attrs: [Attr; 2] = [("bits", int(bits)), ("signed", int(i64::from(signed)))];
    Ok(vec![Out::T(l.emit1("bitwise_not", &[x], &attrs)?)])
}

/// BitShift of unsigned integers: direction "LEFT" → `bit_shift_left`
/// (wrapping at the type's width), "RIGHT" → `bit_shift_right`.
pub fn bit_shift(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let (bits, signed) = width(l, n.input(0).unwrap_or_default())?;
    if signed {
        return unsupported("BitShift of signed integers (ONNX defines it for unsigned ones)");
    }
    let direction = n.attrs.string("direction", "");
    let (a, b) = operands(l, n)?;
    let y = match direction.as_str() {
        "LEFT" => l.emit1("bit_shift_left", &[a, b], &[("bits", int(bits))])?,
        "RIGHT" => l.emit1("bit_shift_right", &[a, b], &[])?,
        other => return unsupported(format!("direction = \"{other}\" (LEFT or RIGHT)")),
    };
    Ok(vec![Out::T(y)])
}
