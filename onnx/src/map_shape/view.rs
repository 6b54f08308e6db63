//! Views and layout changes: Reshape, Flatten, Squeeze, Unsqueeze (one
//! `reshape_A_B` each, shape from [`view_shape`]), Transpose (block swaps),
//! Expand (`broadcast_R`), DepthToSpace / SpaceToDepth (reshape → permute →
//! reshape). Takes a node whose shape-like arguments are known at import time;
//! gives the emitted tensors.

use crate::lower::{unsupported, LResult, Lower, NodeError, Out};
use crate::map_elementwise::input;
use crate::map_nn::axis_of;
use crate::mapping::Mapping;
use crate::node::Node;

use super::ints_input;

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
