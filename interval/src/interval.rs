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
    /// The same for every part: the hull of these ranges.
    Replicated(Vec<AffineRange>),
    /// The whole dim, the same for every part.
    Whole(WholeReason),
}

impl DimRegion {
    /// Whether the region moves with the part.
    pub fn is_split(&self) -> bool {
        matches!(self, DimRegion::Split { .. })
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
            DimRegion::Replicated(rs) => {
                let parts: Vec<String> = rs.iter().map(|r| r.describe(op)).collect();
                format!("all {}", parts.join(" ∪ "))
            }
            DimRegion::Whole(r) => format!("whole ({})", whole_reason_name(*r)),
        }
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

/// Combine the regions of two reads of the same input dim; `Err(reason)` when
/// their union is not an exact per-part region.
pub fn join(a: DimRegion, b: DimRegion) -> Result<DimRegion, &'static str> {
    use DimRegion::*;
    match (a, b) {
        (x @ Split { .. }, y @ Split { .. }) => {
            if x == y {
                Ok(x)
            } else {
                Err("two reads need different parts of the dim (a halo)")
            }
        }
        (Split { .. }, _) | (_, Split { .. }) => {
            Err("the dim is read both with the part and independently of it (every part would recompute the rest)")
        }
        (Whole(r), _) | (_, Whole(r)) => Ok(Whole(r)),
        (Replicated(mut x), Replicated(y)) => {
            for r in y {
                if !x.contains(&r) {
                    x.push(r);
                }
            }
            Ok(Replicated(x))
        }
    }
}
