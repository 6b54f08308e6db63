//! Symbolic intervals: which part of one input dim a part of a split reads.
//!
//! Takes one index of an input read (in canonical form, with `let`
//! temporaries already substituted: a [`SiteIndex`]) and the split variable
//! `v`, whose part ranges over a symbolic `[L, H)` while every other variable
//! ranges over its whole `[0, X)`. Gives a [`DimRegion`] (Tofu §3.2,
//! Figure 5):
//!
//! * `a·v + c` with `a`, `c` free of variables → [`DimRegion::Split`]: the
//!   part reads `[a·L + c, a·(H-1) + c + 1)` (for `a > 0`; mirrored for
//!   `a < 0`). This is Tofu's interval `(l, u, c)` times a constant plus an
//!   offset; `a` and `c` may be symbolic (`o * stride - pad`).
//! * an index without `v` → [`DimRegion::Replicated`] (affine: the hull of
//!   `c + Σ b_w·w` over the whole ranges of the `w`) or [`DimRegion::Whole`]
//!   (data-dependent, opaque `:`, or non-affine): every part reads the same.
//! * `v` together with another ranging variable (interval + interval, e.g.
//!   `o + dx`), `v` in a non-affine index (`v // 2`), or `v·w` → the candidate
//!   is imprecise and rejected with a reason.
//!
//! * `a·v + w + c` where `w` is one other variable, coefficient 1, whose range
//!   is `a` itself (symbolically: `D // heads` for both) → [`DimRegion::Block`]:
//!   every `v` owns a contiguous block of `a` elements and the part reads
//!   `[a·L + c, a·H + c)` exactly (split_heads' `h * (D // heads) + d`). A
//!   quotient of parameters (`D // heads`) is an atom of the polynomial
//!   ([`crate::affine::Atom::Quot`]).
//! * `(v + c) // q` and `(v + c) % q` with `q` free of variables, the two
//!   coordinates of a flattened index (merge_heads' `k // DH`, `k % DH`) →
//!   [`DimRegion::Quotient`] (`[⌊(L+c)/q⌋, ⌊(H-1+c)/q⌋ + 1)`, exact) and
//!   [`DimRegion::Residue`] (the hull of the residues: all of `[0, q)` once the
//!   part spans two blocks). A residue must come with its quotient in the same
//!   read (the analysis rejects it otherwise). Their box is exact when the
//!   part's boundaries `L + c` and `H + c` are multiples of `q` (an even split
//!   of `NH·DH` into `p | NH` parts) or the part lies inside one block; it is
//!   otherwise a *stated superset*: [`crate::PartRegions::exact`] says which,
//!   and the soundness proptest checks exactness where it is claimed and
//!   soundness always.
//!
//! * `m·u·v + j·u + w + c`… precisely `a·v + j·u + w` where `w` ranges over
//!   `u`, `a = m·u` for an integer constant `m ≥ 2` and `0 ≤ j < m` (symbolically:
//!   split_qkv's `h·(3·DH) + which·DH + d` with `DH = E // (3 * heads)`) →
//!   [`DimRegion::Slots`]: every `v` owns the block `[a·v, a·v + a)` and reads
//!   slot `j` of it, a block with gaps. [`join`] unions the slots of several
//!   reads; all `m` of them make an exact [`DimRegion::Block`] (split_qkv's
//!   q, k and v together). Fewer give the hull of the slots read, inside the
//!   part's blocks: exact only for a one-element part reading contiguous
//!   slots, otherwise a stated superset ([`crate::PartRegions::exact`]).
//! * A residue `(v + c) % q` may also come with a quotient by a multiple
//!   `Q = m·q` (merge_qkv's `c // (3 * DH)` beside `c % DH`): its box is then
//!   exact only for parts whose boundaries are multiples of `Q`.
//!
//! [`join`] combines the regions of several reads of the same input dim; a
//! dim read both aligned with the split and independently of it (softmax's
//! normalised axis), or aligned in two different ways (a halo, `x[i] + x[i+1]`),
//! is not an exact per-part region and rejects the candidate.

use std::collections::BTreeSet;

use serde::Serialize;
use tdl::{DimExpr, OpSpec, VarId};

use crate::affine::Poly;

/// One index of an input read after substitution of temporaries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SiteIndex {
    /// A polynomial over variables, dims and attributes.
    Poly(Poly),
    /// `num // den`, `den` free of variables (see [`crate::canon::IndexForm::Div`]).
    Div(Poly, Poly),
    /// `num % den`, `den` free of variables (see [`crate::canon::IndexForm::Mod`]).
    Mod(Poly, Poly),
    /// Not a polynomial; the variables it depends on.
    NonAffine(BTreeSet<VarId>),
    /// Depends on tensor data (`table[ids[b], d]`).
    DataDependent,
    /// `:` in an opaque function's argument: the whole dim.
    Full,
}

/// Why a dim is needed whole by every part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum WholeReason {
    /// The index is tensor data; which elements are read is unknown statically.
    DataDependent,
    /// `:` in an opaque function's argument.
    Opaque,
    /// A non-affine index that does not involve the split variable.
    NonAffine,
}

/// `offset + Σ coef_w · w` for `w` over `[0, range_w)`: the elements read along
/// a dim whose index does not involve the split variable.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AffineRange {
    /// Constant part (dims and attributes).
    pub offset: Poly,
    /// Per ranging variable: its coefficient and its range (extent).
    pub terms: Vec<(Poly, DimExpr)>,
}

impl AffineRange {
    /// Human-readable form: `[0, K)` for a bare variable over `K`, otherwise
    /// the offset plus each coefficient times its variable's range.
    pub fn describe(&self, op: &OpSpec) -> String {
        let off = self.offset.show(op).to_string();
        match self.terms.as_slice() {
            [] => format!("{{{off}}}"),
            [(c, range)] if c.as_constant() == Some(1) => {
                let r = op.show_dim(range).to_string();
                if self.offset.is_zero() {
                    format!("[0, {r})")
                } else {
                    format!("[{off}, {off} + {r})")
                }
            }
            terms => {
                let mut s = if self.offset.is_zero() {
                    String::new()
                } else {
                    format!("{off} + ")
                };
                let t: Vec<String> = terms
                    .iter()
                    .map(|(c, r)| format!("({})*[0, {})", c.show(op), op.show_dim(r)))
                    .collect();
                s += &t.join(" + ");
                s
            }
        }
    }
}

/// The part of one input dim a part reads, symbolically (see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum DimRegion {
    /// Aligned with the split: `coef · v + offset` for `v` in the part's range.
    Split {
        /// `a` (free of variables, nonzero).
        coef: Poly,
        /// `c` (free of variables).
        offset: Poly,
    },
    /// Aligned with the split in blocks of `width`: `width · v + w + offset`
    /// with `w` over `[0, width)`; the part `[L, H)` reads
    /// `[width·L + offset, width·H + offset)`.
    Block {
        /// `a`, also the range of the inner variable (free of variables).
        width: Poly,
        /// `c` (free of variables).
        offset: Poly,
    },
    /// Aligned with the split in blocks of `count · unit`, of which a part
    /// reads the slots `slots` (`unit` elements each, sorted, distinct):
    /// `count·unit·v + j·unit + w` with `w` over `[0, unit)` for each `j` in
    /// `slots`. The part `[L, H)` reads inside `[count·unit·L + first·unit,
    /// count·unit·(H-1) + (last+1)·unit)`, the hull (see the module doc).
    Slots {
        /// `u`, the range of the inner variable (free of variables).
        unit: Poly,
        /// `m ≥ 2`: slots per block.
        count: i64,
        /// The slots `j` read, each in `[0, count)`.
        slots: Vec<i64>,
    },
    /// Outer coordinate of a flattened index, `(v + offset) // den`: the part
    /// `[L, H)` reads `[⌊(L+offset)/den⌋, ⌊(H-1+offset)/den⌋ + 1)`.
    Quotient {
        /// `q` (free of variables).
        den: Poly,
        /// `c` (free of variables).
        offset: Poly,
    },
    /// Inner coordinate of a flattened index, `(v + offset) % den`, read
    /// together with its [`DimRegion::Quotient`] by `block` (`den` itself,
    /// or a multiple of it): the hull of the residues (see the module doc
    /// for when the box is exact).
    Residue {
        /// `q` (free of variables).
        den: Poly,
        /// `c` (free of variables).
        offset: Poly,
        /// The divisor of the quotient read beside it: `den` or `m · den`.
        block: Poly,
    },
    /// The same for every part: the hull of these ranges.
    Replicated(Vec<AffineRange>),
    /// The whole dim, the same for every part.
    Whole(WholeReason),
}

impl DimRegion {
    /// Whether the dim is split with the part (the input's layout is split
    /// along it). A [`DimRegion::Residue`] is not: with aligned parts every
    /// part reads the whole inner dim.
    pub fn is_split(&self) -> bool {
        matches!(
            self,
            DimRegion::Split { .. }
                | DimRegion::Block { .. }
                | DimRegion::Slots { .. }
                | DimRegion::Quotient { .. }
        )
    }

    /// Whether the region depends on the part at all.
    pub fn moves(&self) -> bool {
        self.is_split() || matches!(self, DimRegion::Residue { .. })
    }

    /// Human-readable form with the op's names; `part` names the split range.
    pub fn describe(&self, op: &OpSpec, part: &str) -> String {
        match self {
            DimRegion::Split { coef, offset } => {
                let c = coef.show(op).to_string();
                let o = offset.show(op).to_string();
                match (coef.as_constant(), offset.is_zero()) {
                    (Some(1), true) => part.to_string(),
                    (Some(1), false) => format!("{part} + ({o})"),
                    (_, true) => format!("({c})*{part}"),
                    (_, false) => format!("({c})*{part} + ({o})"),
                }
            }
            DimRegion::Block { width, offset } => {
                let w = atomic(op, width);
                if offset.is_zero() {
                    format!("{part} in blocks of {w}")
                } else {
                    format!("{part} in blocks of {w} + ({})", offset.show(op))
                }
            }
            DimRegion::Slots { unit, count, slots } => {
                let u = atomic(op, unit);
                let js: Vec<String> = slots.iter().map(i64::to_string).collect();
                format!(
                    "{part} in blocks of {count}*{u}, slots {{{}}} of {u}",
                    js.join(", ")
                )
            }
            DimRegion::Quotient { den, offset } => {
                format!("{} // {}", shifted(op, part, offset), atomic(op, den))
            }
            DimRegion::Residue { den, offset, .. } => {
                format!("{} % {}", shifted(op, part, offset), atomic(op, den))
            }
            DimRegion::Replicated(rs) => {
                let parts: Vec<String> = rs.iter().map(|r| r.describe(op)).collect();
                format!("all {}", parts.join(" ∪ "))
            }
            DimRegion::Whole(r) => format!("whole ({})", whole_reason_name(*r)),
        }
    }
}

/// A polynomial shown bare when it is one symbol or a constant, else in parentheses.
fn atomic(op: &OpSpec, p: &Poly) -> String {
    let shown = p.show(op).to_string();
    let single =
        p.as_constant().is_some() || matches!(p.terms().collect::<Vec<_>>().as_slice(), [([_], 1)]);
    if single {
        shown
    } else {
        format!("({shown})")
    }
}

/// `part` or `(part + (offset))`.
fn shifted(op: &OpSpec, part: &str, offset: &Poly) -> String {
    if offset.is_zero() {
        part.to_string()
    } else {
        format!("({part} + ({}))", offset.show(op))
    }
}

fn whole_reason_name(r: WholeReason) -> &'static str {
    match r {
        WholeReason::DataDependent => "data-dependent",
        WholeReason::Opaque => "opaque",
        WholeReason::NonAffine => "non-affine",
    }
}

/// The region of one index of a read when `v` is split (see the module doc);
/// `Err(reason)` when it is not exact.
pub fn classify(op: &OpSpec, ix: &SiteIndex, v: VarId) -> Result<DimRegion, String> {
    let name = |w: VarId| op.vars[w.0 as usize].name.clone();
    match ix {
        SiteIndex::Full => Ok(DimRegion::Whole(WholeReason::Opaque)),
        SiteIndex::DataDependent => Ok(DimRegion::Whole(WholeReason::DataDependent)),
        SiteIndex::NonAffine(vs) if vs.contains(&v) => {
            Err(format!("`{}` is in a non-affine index", name(v)))
        }
        SiteIndex::NonAffine(_) => Ok(DimRegion::Whole(WholeReason::NonAffine)),
        SiteIndex::Div(num, den) | SiteIndex::Mod(num, den) => {
            if !num.vars().contains(&v) {
                return Ok(DimRegion::Whole(WholeReason::NonAffine));
            }
            let offset = match num.split_var(v) {
                Some((a, c)) if a.as_constant() == Some(1) && c.is_param_only() => c,
                _ => return Err(format!("`{}` is in a non-affine index", name(v))),
            };
            let den = den.clone();
            Ok(match ix {
                SiteIndex::Div(..) => DimRegion::Quotient { den, offset },
                _ => DimRegion::Residue {
                    block: den.clone(),
                    den,
                    offset,
                },
            })
        }
        SiteIndex::Poly(p) => {
            let shown = p.show(op).to_string();
            let Some((a, r)) = p.split_var(v) else {
                return Err(format!(
                    "`{}` is multiplied by itself in `{shown}`",
                    name(v)
                ));
            };
            if !a.is_param_only() {
                let w = a.vars().into_iter().next().map(name).unwrap_or_default();
                return Err(format!(
                    "interval × interval: `{}` times `{w}` in `{shown}`",
                    name(v)
                ));
            }
            if !a.is_zero() {
                if let Some(offset) = block_offset(op, &a, &r) {
                    return Ok(DimRegion::Block { width: a, offset });
                }
                if let Some(slots) = slot_of(op, &a, &r) {
                    return Ok(slots);
                }
                if let Some(w) = r.vars().into_iter().next() {
                    return Err(format!(
                        "interval + interval: `{}` and `{}` both range in `{shown}`",
                        name(v),
                        name(w)
                    ));
                }
                return Ok(DimRegion::Split { coef: a, offset: r });
            }
            // Independent of the split: the hull over the ranging variables.
            let mut offset = r.clone();
            let mut terms = Vec::new();
            for w in r.vars() {
                match offset.split_var(w) {
                    Some((b, rest)) if b.is_param_only() => {
                        terms.push((b, op.vars[w.0 as usize].range.clone()));
                        offset = rest;
                    }
                    _ => return Ok(DimRegion::Whole(WholeReason::NonAffine)),
                }
            }
            if !offset.is_param_only() {
                return Ok(DimRegion::Whole(WholeReason::NonAffine));
            }
            Ok(DimRegion::Replicated(vec![AffineRange { offset, terms }]))
        }
    }
}

/// For `a·v + r`: the offset `c` when `r = w + c` for one variable `w` whose
/// range is `a` (symbolically), so that every `v` owns the block
/// `[a·v + c, a·v + c + a)`.
fn block_offset(op: &OpSpec, a: &Poly, r: &Poly) -> Option<Poly> {
    let vars = r.vars();
    let [w] = vars.iter().copied().collect::<Vec<_>>()[..] else {
        return None;
    };
    let (b, c) = r.split_var(w)?;
    let range = Poly::of_dim(&op.vars[w.0 as usize].range)?;
    (b.as_constant() == Some(1) && c.is_param_only() && range == *a).then_some(c)
}

/// For `a·v + r`: [`DimRegion::Slots`] when `r = j·u + w` for one variable
/// `w` whose range is `u`, `a = m·u` with a constant `m ≥ 2` and `0 ≤ j < m`.
fn slot_of(op: &OpSpec, a: &Poly, r: &Poly) -> Option<DimRegion> {
    let vars = r.vars();
    let [w] = vars.iter().copied().collect::<Vec<_>>()[..] else {
        return None;
    };
    let (b, c) = r.split_var(w)?;
    let unit = Poly::of_dim(&op.vars[w.0 as usize].range)?;
    if b.as_constant() != Some(1) || unit.is_zero() {
        return None;
    }
    let count = a.multiple_of(&unit).filter(|&m| m >= 2)?;
    let j = c.multiple_of(&unit).filter(|&j| (0..count).contains(&j))?;
    Some(DimRegion::Slots {
        unit,
        count,
        slots: vec![j],
    })
}

/// The union of two slot sets of the same blocks: [`DimRegion::Slots`], or
/// the whole [`DimRegion::Block`] once every slot is read.
fn join_slots(unit: Poly, count: i64, mut slots: Vec<i64>, more: &[i64]) -> DimRegion {
    slots.extend_from_slice(more);
    slots.sort_unstable();
    slots.dedup();
    if slots.len() as i64 == count {
        DimRegion::Block {
            width: unit.scale(count),
            offset: Poly::zero(),
        }
    } else {
        DimRegion::Slots { unit, count, slots }
    }
}

/// Combine the regions of two reads of the same input dim; `Err(reason)` when
/// their union is not an exact per-part region.
pub fn join(a: DimRegion, b: DimRegion) -> Result<DimRegion, &'static str> {
    use DimRegion::*;
    match (&a, &b) {
        (
            Slots { unit, count, slots },
            Slots {
                unit: u2,
                count: c2,
                slots: s2,
            },
        ) if unit == u2 && count == c2 => {
            return Ok(join_slots(unit.clone(), *count, slots.clone(), s2));
        }
        (Slots { unit, count, .. }, Block { width, offset })
        | (Block { width, offset }, Slots { unit, count, .. })
            if offset.is_zero() && *width == unit.scale(*count) =>
        {
            return Ok(Block {
                width: width.clone(),
                offset: offset.clone(),
            });
        }
        _ => {}
    }
    match (a.moves(), b.moves()) {
        (true, true) if a == b => return Ok(a),
        (true, true) => return Err("two reads need different parts of the dim (a halo)"),
        (true, false) | (false, true) => return Err(
            "the dim is read both with the part and independently of it (every part would recompute the rest)",
        ),
        (false, false) => {}
    }
    match (a, b) {
        (Replicated(mut x), Replicated(y)) => {
            for r in y {
                if !x.contains(&r) {
                    x.push(r);
                }
            }
            Ok(Replicated(x))
        }
        (Whole(r), _) | (_, Whole(r)) => Ok(Whole(r)),
        (x, _) => Ok(x),
    }
}
