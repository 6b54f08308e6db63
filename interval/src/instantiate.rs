//! Instantiation: a shape-free result on concrete shapes and attributes.
//!
//! Takes an [`OpStrategies`], the concrete input shapes (elements per dim),
//! attribute values and a number of parts `p ≥ 2`; gives an [`Instance`]: for
//! every strategy and every part, the range of the split variable and the
//! box each input region and each output region covers, in elements.
//!
//! Parts are as even as possible: with extent `n`, part `i` gets
//! `n / p + (i < n % p)` consecutive indices (so uneven when `p` does not
//! divide `n`, and empty when `n < p`). Regions are clamped to the tensor's
//! shape (padded inputs read zeros outside, which are not data). This is the
//! cheap path meant to run per operator of a graph: no spec cloning, no egg.

use tdl::bind::eval_dim;
use tdl::{AttrValue, Attrs, DimEntry, DimExpr};

use crate::affine::floor_div;
use crate::error::InstantiateError;
use crate::interval::DimRegion;
use crate::strategy::{OpStrategies, SplitKind, Strategy};
pub use graph::region::{part_range, Region};

/// What one part of one strategy computes and reads.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PartRegions {
    /// The part's range `[lo, hi)` of the split variable.
    pub range: (i64, i64),
    /// Per input: the box it reads, `None` if it reads nothing of it.
    pub inputs: Vec<Option<Region>>,
    /// Per output: the box it writes (the whole output for a partial).
    pub outputs: Vec<Region>,
    /// Per input: whether its box is exactly what the part reads of what
    /// the op reads at all (false: a stated superset, from a flattened
    /// index — [`DimRegion::Residue`] — whose part boundaries are not
    /// multiples of the inner extent; see [`crate::interval`]). Data-dependent
    /// reads are flagged on the strategy instead
    /// ([`crate::InputRegion::data_dependent`]).
    pub exact: Vec<bool>,
}

/// One strategy on concrete shapes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ConcreteStrategy {
    /// Strategy name (see [`Strategy::name`]).
    pub name: String,
    /// Extent of the split variable.
    pub extent: i64,
    /// One entry per part.
    pub parts: Vec<PartRegions>,
}

/// Every strategy of an op on concrete shapes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Instance {
    /// Input shapes (elements).
    pub input_shapes: Vec<Vec<usize>>,
    /// Output shapes (elements).
    pub output_shapes: Vec<Vec<usize>>,
    /// One per strategy, in the order of [`OpStrategies::strategies`].
    pub strategies: Vec<ConcreteStrategy>,
}

/// Concrete values of an op's dims and attributes.
struct Values {
    dims: Vec<i64>,
    attrs: Vec<AttrValue>,
}

impl OpStrategies {
    fn values(
        &self,
        input_shapes: &[Vec<usize>],
        attrs: &Attrs,
    ) -> Result<Values, InstantiateError> {
        let spec = &self.spec;
        spec.check_input_count(input_shapes.len())?;
        let attrs = spec.resolve_attrs(attrs)?;
        Ok(Values {
            dims: spec.bind_dims(input_shapes)?,
            attrs,
        })
    }

    fn eval(&self, v: &Values, e: &DimExpr) -> Result<i64, InstantiateError> {
        eval_dim(e, &v.dims, &v.attrs).ok_or_else(|| InstantiateError::Eval {
            op: self.spec.name.clone(),
            expr: self.spec.show_dim(e).to_string(),
        })
    }

    /// Evaluate every strategy for these shapes, attributes and `parts` (see the module doc).
    ///
    /// Errors: `parts < 2`; shapes or attributes that do not fit the
    /// analysed spec (input count, rank, mismatching dims, unknown or missing
    /// attributes); a division by zero in a shape expression or a region's
    /// coefficient (a split variable's range that divides by zero is empty).
    pub fn instantiate(
        &self,
        input_shapes: &[Vec<usize>],
        attrs: &Attrs,
        parts: usize,
    ) -> Result<Instance, InstantiateError> {
        if parts < 2 {
            return Err(InstantiateError::Parts {
                op: self.spec.name.clone(),
                parts,
            });
        }
        let v = self.values(input_shapes, attrs)?;
        let mut output_shapes = Vec::with_capacity(self.spec.outputs.len());
        for o in &self.spec.outputs {
            let mut s = Vec::with_capacity(o.dims.len());
            for d in &o.dims {
                let DimEntry::Dim(e) = d else {
                    unreachable!("analysed specs are expanded")
                };
                s.push(self.eval(&v, e)?.max(0) as usize);
            }
            output_shapes.push(s);
        }
        let mut strategies = Vec::with_capacity(self.strategies.len());
        for s in &self.strategies {
            strategies.push(self.concrete(s, &v, input_shapes, &output_shapes, parts)?);
        }
        Ok(Instance {
            input_shapes: input_shapes.to_vec(),
            output_shapes,
            strategies,
        })
    }

    fn concrete(
        &self,
        s: &Strategy,
        v: &Values,
        input_shapes: &[Vec<usize>],
        output_shapes: &[Vec<usize>],
        parts: usize,
    ) -> Result<ConcreteStrategy, InstantiateError> {
        // A range that divides by zero is never iterated by the interpreter
        // unless the output is non-empty (then it fails there): no elements.
        let extent = self.eval(v, &s.extent).map_or(0, |e| e.max(0));
        let mut out = Vec::with_capacity(parts);
        for i in 0..parts {
            let (lo, hi) = part_range(extent, parts, i);
            let mut inputs = Vec::with_capacity(s.inputs.len());
            let mut exact = Vec::with_capacity(s.inputs.len());
            for (r, shape) in s.inputs.iter().zip(input_shapes) {
                let mut whole_blocks = true;
                let region = match &r.dims {
                    Some(dims) if lo < hi => {
                        let mut b = Vec::with_capacity(dims.len());
                        for (d, &n) in dims.iter().zip(shape) {
                            let (range, aligned) = self.dim_range(d, v, lo, hi, n as i64)?;
                            whole_blocks &= aligned;
                            b.push(range);
                        }
                        Some(Region(b)).filter(|r| r.0.iter().all(|&(a, z)| a < z))
                    }
                    _ => None,
                };
                inputs.push(region);
                exact.push(whole_blocks);
            }
            let outputs = output_shapes
                .iter()
                .enumerate()
                .map(|(o, shape)| {
                    let sv = s.splits.iter().find(|x| x.output == o as u32);
                    Region(
                        shape
                            .iter()
                            .enumerate()
                            .map(|(axis, &n)| match sv.map(|x| x.kind) {
                                Some(SplitKind::Output { axis: a }) if a as usize == axis => {
                                    (lo, hi)
                                }
                                _ => (0, n as i64),
                            })
                            .collect(),
                    )
                })
                .collect();
            out.push(PartRegions {
                range: (lo, hi),
                inputs,
                outputs,
                exact,
            });
        }
        Ok(ConcreteStrategy {
            name: s.name.clone(),
            extent,
            parts: out,
        })
    }

    /// `[lo, hi)` of one input dim of size `n` for the part `[l, h)`
    /// (non-empty), and whether that box is exact (false only for a
    /// [`DimRegion::Residue`] whose part spans several blocks unaligned, and
    /// a [`DimRegion::Slots`] hull with gaps in it).
    fn dim_range(
        &self,
        d: &DimRegion,
        v: &Values,
        l: i64,
        h: i64,
        n: i64,
    ) -> Result<((i64, i64), bool), InstantiateError> {
        let poly = |p: &crate::affine::Poly| {
            p.eval(&v.dims, &v.attrs)
                .ok_or_else(|| InstantiateError::Eval {
                    op: self.spec.name.clone(),
                    expr: p.show(&self.spec).to_string(),
                })
        };
        let mut exact = true;
        let (lo, hi) = match d {
            DimRegion::Whole(_) => (0, n),
            DimRegion::Split { coef, offset } => {
                let (a, c) = (poly(coef)?, poly(offset)?);
                if a >= 0 {
                    (a * l + c, a * (h - 1) + c + 1)
                } else {
                    (a * (h - 1) + c, a * l + c + 1)
                }
            }
            DimRegion::Block { width, offset } => {
                let (a, c) = (poly(width)?, poly(offset)?);
                // A non-positive width is an empty inner range: nothing is read.
                if a > 0 {
                    (a * l + c, a * h + c)
                } else {
                    (0, 0)
                }
            }
            DimRegion::Slots { unit, count, slots } => {
                let u = poly(unit)?;
                let (Some(&first), Some(&last)) = (slots.first(), slots.last()) else {
                    return Ok(((0, 0), true));
                };
                // A non-positive unit is an empty inner range: nothing is read.
                if u > 0 {
                    let a = count * u;
                    let contiguous = last - first + 1 == slots.len() as i64;
                    exact = contiguous && h - l == 1;
                    (a * l + first * u, a * (h - 1) + (last + 1) * u)
                } else {
                    (0, 0)
                }
            }
            DimRegion::Quotient { den, offset } => {
                let (q, c) = (poly(den)?, poly(offset)?);
                match (floor_div(l + c, q), floor_div(h - 1 + c, q)) {
                    (Some(a), Some(b)) if q > 0 => (a, b + 1),
                    _ => (0, n),
                }
            }
            DimRegion::Residue { den, offset, block } if block != den => {
                // Beside a quotient by a multiple `bq` of `q`: the box is
                // the product of whole quotient blocks only when the part's
                // boundaries are multiples of `bq`.
                let (q, c, bq) = (poly(den)?, poly(offset)?, poly(block)?);
                let (first, last) = (l + c, h - 1 + c);
                exact = bq > 0 && first.rem_euclid(bq) == 0 && (last + 1).rem_euclid(bq) == 0;
                match (floor_div(first, q), floor_div(last, q)) {
                    (Some(a), Some(b)) if q > 0 && a == b => (first - a * q, last - b * q + 1),
                    (Some(_), Some(_)) if q > 0 => (0, q),
                    _ => {
                        exact = false;
                        (0, n)
                    }
                }
            }
            DimRegion::Residue { den, offset, .. } => {
                let (q, c) = (poly(den)?, poly(offset)?);
                let (first, last) = (l + c, h - 1 + c);
                match (floor_div(first, q), floor_div(last, q)) {
                    (Some(a), Some(b)) if q > 0 && a == b => (first - a * q, last - b * q + 1),
                    (Some(_), Some(_)) if q > 0 => {
                        exact = first.rem_euclid(q) == 0 && (last + 1).rem_euclid(q) == 0;
                        (0, q)
                    }
                    _ => {
                        exact = false;
                        (0, n)
                    }
                }
            }
            DimRegion::Replicated(ranges) => {
                let mut hull: Option<(i64, i64)> = None;
                for r in ranges {
                    let off = poly(&r.offset)?;
                    let (mut lo, mut hi) = (off, off + 1);
                    let mut empty = false;
                    for (coef, range) in &r.terms {
                        let ext = self.eval(v, range)?;
                        if ext <= 0 {
                            empty = true;
                            break;
                        }
                        let span = poly(coef)? * (ext - 1);
                        lo += span.min(0);
                        hi += span.max(0);
                    }
                    if !empty {
                        hull = Some(hull.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
                    }
                }
                hull.unwrap_or((0, 0))
            }
        };
        let (lo, hi) = (lo.clamp(0, n), hi.clamp(0, n));
        Ok((if lo < hi { (lo, hi) } else { (0, 0) }, exact))
    }
}
