//! Lowering of EyeLike (`eye_like`), TensorScatter (`tensor_scatter`, the
//! key-value-cache write of opset 24) and Det (`determinant`).

use graph::int;

use crate::lower::{unsupported, LResult, Lower, Out};
use crate::map_elementwise::{shape, splat_const};
use crate::mapping::Mapping;
use crate::node::Node;

/// EyeLike: a 2-D input; `k` picks the diagonal, `dtype` only the element type.
pub fn eye_like(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let Some(xn) = n.input(0) else {
        return unsupported("input 0 is missing");
    };
    let s = shape(l, xn)?;
    if s.len() != 2 {
        return unsupported(format!("input of shape {s:?} (EyeLike is 2-D)"));
    }
    if s.contains(&0) {
        return Ok(vec![Out::C(crate::map_shape::empty(l.elem_of(xn), s))]);
    }
    let x = l.tensor(xn)?;
    let k = n.attrs.int("k", 0);
    Ok(vec![Out::T(l.emit1("eye_like", &[x], &[("k", int(k))])?)])
}

/// TensorScatter: `past_cache` [B, …, S, …] (S at `axis`, default -2, never
/// the batch dim 0), `update` of the same shape but U along `axis`,
/// optional `write_indices` [B] (default zeros); `mode` linear or circular.
pub fn tensor_scatter(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let (Some(pn), Some(un)) = (n.input(0), n.input(1)) else {
        return unsupported("past_cache and update are required");
    };
    let (sp, su) = (shape(l, pn)?, shape(l, un)?);
    let r = sp.len();
    let axis = n.attrs.int("axis", -2);
    let a = if axis < 0 { axis + r as i64 } else { axis };
    if a < 1 || a >= r as i64 {
        return unsupported(format!(
            "axis {axis} of a cache of rank {r} (the sequence axis cannot be the batch axis 0)"
        ));
    }
    let a = a as usize;
    let same_elsewhere = su.len() == r && (0..r).all(|d| d == a || su[d] == sp[d]);
    if !same_elsewhere || su[a] > sp[a] || sp.contains(&0) || su[a] == 0 {
        return unsupported(format!(
            "update of shape {su:?} into a cache of shape {sp:?} along axis {a}"
        ));
    }
    let circular = match n.attrs.string("mode", "linear").as_str() {
        "linear" => 0,
        "circular" => 1,
        other => return unsupported(format!("mode = \"{other}\" (linear or circular)")),
    };
    let b = sp[0];
    let wi = match n.input(2) {
        Some(w) => {
            let t = l.tensor(w)?;
            l.reshape(t, &[b])?
        }
        None => splat_const(l, &format!("{}#write_indices", n.name), &[b], 0.0)?,
    };
    let p: usize = sp[1..a].iter().product();
    let q: usize = sp[a + 1..].iter().product();
    let past = l.tensor(pn)?;
    let past = l.reshape(past, &[b, p, sp[a], q])?;
    let upd = l.tensor(un)?;
    let upd = l.reshape(upd, &[b, p, su[a], q])?;
    let y = l.emit1(
        "tensor_scatter",
        &[past, upd, wi],
        &[("circular", int(circular))],
    )?;
    Ok(vec![Out::T(l.reshape(y, &sp)?)])
}

/// Det: x [..., M, M] → y [...] (`determinant`).
pub fn det(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let Some(xn) = n.input(0) else {
        return unsupported("input 0 is missing");
    };
    let s = shape(l, xn)?;
    let r = s.len();
    if r < 2 || s[r - 1] != s[r - 2] || s.contains(&0) {
        return unsupported(format!(
            "input of shape {s:?} (square matrices [..., M, M])"
        ));
    }
    let x = l.tensor(xn)?;
    Ok(vec![Out::T(l.emit1("determinant", &[x], &[])?)])
}
