//! Strategy candidates and their verdict (Tofu §3.2, steps 2 and 3 of
//! [`crate::analysis`]).
//!
//! Takes the per-statement facts symbolic execution gathered
//! ([`crate::analysis`]); gives the op's exact strategies and the rejected
//! candidates with their reasons. Candidates: output 0's coordinates (case 1)
//! and top-level reduction variables (case 2), each combined with a variable
//! of the same extent in every other output statement. Verdict: every dim of
//! every read is classified against its statement's split variable
//! ([`crate::interval::classify`]), a residue is paired with its quotient,
//! and reads of the same input are joined ([`crate::interval::join`]).

use tdl::{OpSpec, VarId};

use crate::affine::Poly;
use crate::analysis::StmtFacts;
use crate::interval::{classify, join, DimRegion, SiteIndex, WholeReason};
use crate::strategy::{InputRegion, Rejected, SplitKind, SplitVar, Strategy};

/// Most candidate combinations examined for ops with several outputs.
const MAX_CANDIDATES: usize = 256;

/// Strictly elementwise: no reduction or opaque call, every output has the
/// same rank, and every input read indexes exactly the statement's coordinates.
pub(crate) fn is_elementwise(facts: &[StmtFacts]) -> bool {
    let Some(rank) = facts.first().map(|f| f.vars.len()) else {
        return false;
    };
    facts.iter().all(|f| {
        !f.has_reduce
            && !f.has_opaque
            && f.vars.len() == rank
            && !f.sites.is_empty()
            && f.sites.iter().all(|s| {
                s.dims.len() == f.vars.len()
                    && s.dims
                        .iter()
                        .zip(&f.vars)
                        .all(|(d, v)| *d == SiteIndex::Poly(Poly::var(*v)))
            })
    })
}

/// One way to split one statement.
#[derive(Clone, Debug)]
struct Option1 {
    var: VarId,
    kind: SplitKind,
}

fn options(spec: &OpSpec, f: &StmtFacts) -> Vec<Option1> {
    let mut out: Vec<Option1> = f
        .vars
        .iter()
        .enumerate()
        .map(|(axis, &var)| Option1 {
            var,
            kind: SplitKind::Output { axis: axis as u32 },
        })
        .collect();
    if let Some((reducer, vars)) = &f.top {
        out.extend(vars.iter().map(|&var| Option1 {
            var,
            kind: SplitKind::Reduction { reducer: *reducer },
        }));
    }
    // Variables of zero extent cannot be split.
    out.retain(|o| spec.vars[o.var.0 as usize].range != tdl::DimExpr::Const(0));
    out
}

pub(crate) fn discover(spec: &OpSpec, facts: &[StmtFacts]) -> (Vec<Strategy>, Vec<Rejected>) {
    let mut strategies = Vec::new();
    let mut rejected = Vec::new();
    let Some(first) = facts.first() else {
        return (strategies, rejected);
    };
    let range = |v: VarId| &spec.vars[v.0 as usize].range;
    let per_stmt: Vec<Vec<Option1>> = facts.iter().map(|f| options(spec, f)).collect();
    let mut budget = MAX_CANDIDATES;
    for o0 in &per_stmt[0] {
        // Combine with every same-extent option of the other statements.
        let mut combos: Vec<Vec<Option1>> = vec![vec![o0.clone()]];
        let mut missing = None;
        for (f, opts) in facts.iter().zip(&per_stmt).skip(1) {
            let same: Vec<&Option1> = opts
                .iter()
                .filter(|o| range(o.var) == range(o0.var))
                .collect();
            if same.is_empty() {
                missing = Some(f.output);
                break;
            }
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    same.iter()
                        .map(move |o| [c.clone(), vec![(*o).clone()]].concat())
                })
                .collect();
            combos.truncate(budget.max(1));
        }
        if let Some(o) = missing {
            rejected.push(Rejected {
                name: name_of(spec, facts, std::slice::from_ref(o0)),
                reason: format!(
                    "output `{}` has no coordinate or reduction variable over `{}`, so it cannot be split the same way",
                    spec.outputs[o as usize].name,
                    spec.show_dim(range(o0.var))
                ),
            });
            continue;
        }
        for combo in combos {
            if budget == 0 {
                break;
            }
            budget -= 1;
            let name = name_of(spec, facts, &combo);
            match verdict(spec, facts, &combo) {
                Ok(inputs) => strategies.push(Strategy {
                    name,
                    extent: range(combo[0].var).clone(),
                    splits: facts
                        .iter()
                        .zip(&combo)
                        .map(|(f, o)| SplitVar {
                            output: f.output,
                            var: o.var,
                            name: spec.vars[o.var.0 as usize].name.clone(),
                            kind: o.kind,
                        })
                        .collect(),
                    inputs,
                }),
                Err(reason) => rejected.push(Rejected { name, reason }),
            }
        }
    }
    let _ = first;
    (strategies, rejected)
}

fn option_name(spec: &OpSpec, o: &Option1) -> String {
    let v = &spec.vars[o.var.0 as usize].name;
    match o.kind {
        SplitKind::Output { .. } => format!("split {v}"),
        SplitKind::Reduction { reducer } => format!("reduce {v} ({})", reducer.name()),
    }
}

fn name_of(spec: &OpSpec, facts: &[StmtFacts], combo: &[Option1]) -> String {
    let names: Vec<String> = combo.iter().map(|o| option_name(spec, o)).collect();
    if combo.len() == facts.len() && names.iter().all(|n| *n == names[0])
        || facts.len() == 1
        || combo.len() == 1
    {
        return names[0].clone();
    }
    facts
        .iter()
        .zip(&names)
        .map(|(f, n)| format!("{}: {n}", spec.outputs[f.output as usize].name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether the element read determines the split variable's value: some
/// dim is aligned one-to-one ([`DimRegion::Split`], [`DimRegion::Block`]) or
/// a flattened index is read whole (a quotient beside its remainder).
fn determines_part(dims: &[DimRegion]) -> bool {
    dims.iter().any(|d| match d {
        DimRegion::Split { .. } | DimRegion::Block { .. } | DimRegion::Slots { .. } => true,
        DimRegion::Residue { offset, block, .. } => dims.contains(&DimRegion::Quotient {
            den: block.clone(),
            offset: offset.clone(),
        }),
        _ => false,
    })
}

/// Point each [`DimRegion::Residue`] without a quotient by its own divisor at
/// a quotient of the same offset by a constant multiple of it, if the read
/// has one (its `block`).
fn pair_residues(dims: &mut [DimRegion]) {
    let quotients: Vec<(Poly, Poly)> = dims
        .iter()
        .filter_map(|d| match d {
            DimRegion::Quotient { den, offset } => Some((den.clone(), offset.clone())),
            _ => None,
        })
        .collect();
    for d in dims.iter_mut() {
        if let DimRegion::Residue { den, offset, block } = d {
            if quotients.iter().any(|(q, o)| q == den && o == offset) {
                continue;
            }
            if let Some((q, _)) = quotients
                .iter()
                .find(|(q, o)| o == offset && q.multiple_of(den).is_some_and(|m| m >= 2))
            {
                *block = q.clone();
            }
        }
    }
}

/// The exact regions of a candidate, or why there are none.
fn verdict(
    spec: &OpSpec,
    facts: &[StmtFacts],
    combo: &[Option1],
) -> Result<Vec<InputRegion>, String> {
    let mut regions: Vec<Option<Vec<DimRegion>>> = vec![None; spec.inputs.len()];
    let mut data_dependent = vec![false; spec.inputs.len()];
    for (f, o) in facts.iter().zip(combo) {
        let v = o.var;
        let vname = &spec.vars[v.0 as usize].name;
        if f.opaque_vars.contains(&v) {
            return Err(format!("`{vname}` indexes the result of an opaque function: every part would compute it whole"));
        }
        for (other, idx, shown) in &f.output_reads {
            let Some(j) = facts.iter().position(|g| g.output == *other) else {
                continue;
            };
            match combo[j].kind {
                SplitKind::Reduction { .. } => {
                    return Err(format!(
                        "`{shown}` reads an output that is only partial under this split"
                    ))
                }
                SplitKind::Output { axis } => {
                    if idx.get(axis as usize) != Some(&SiteIndex::Poly(Poly::var(v))) {
                        return Err(format!(
                            "`{shown}` reads output elements another part computes"
                        ));
                    }
                }
            }
        }
        for site in &f.sites {
            let mut dims = Vec::with_capacity(site.dims.len());
            for ix in &site.dims {
                dims.push(classify(spec, ix, v).map_err(|r| format!("{r} (in `{}`)", site.shown))?);
            }
            // A residue `(v + c) % q` is a box per part only beside its
            // quotient `(v + c) // q` (a flattened index) or a quotient by a
            // multiple of `q` (`c // (3 * DH)` beside `c % DH`); alone it wraps.
            pair_residues(&mut dims);
            for d in &dims {
                if let DimRegion::Residue { offset, block, .. } = d {
                    let partner = DimRegion::Quotient {
                        den: block.clone(),
                        offset: offset.clone(),
                    };
                    if !dims.contains(&partner) {
                        return Err(format!(
                            "`{vname}` is in a non-affine index: a remainder without its quotient (in `{}`)",
                            site.shown
                        ));
                    }
                }
            }
            // A condition decides which elements are read. That is exact if
            // the element determines `v` (an aligned dim, a block, or a
            // quotient with its remainder; a quotient alone does not). Otherwise a
            // condition on `v` alone makes the region depend on the part in a
            // way a box cannot say (reject), and a condition on data makes
            // the read set data: the dims are needed whole.
            if !determines_part(&dims) {
                if let Some(g) = site.guards.iter().find(|g| g.vars.contains(&v) && !g.data) {
                    return Err(format!(
                        "whether `{}` is read depends on `{vname}` through the condition `{}`",
                        site.shown, g.shown
                    ));
                }
                if site.guards.iter().any(|g| g.data) {
                    for d in dims.iter_mut() {
                        *d = DimRegion::Whole(WholeReason::DataDependent);
                    }
                    data_dependent[site.input as usize] = true;
                }
            }
            if dims.contains(&DimRegion::Whole(WholeReason::DataDependent)) {
                data_dependent[site.input as usize] = true;
            }
            let slot = &mut regions[site.input as usize];
            *slot = Some(match slot.take() {
                None => dims,
                Some(prev) => {
                    let mut joined = Vec::with_capacity(prev.len());
                    for (d, (a, b)) in prev.into_iter().zip(dims).enumerate() {
                        joined.push(join(a, b).map_err(|r| {
                            format!(
                                "input `{}` dim {d}: {r} (in `{}`)",
                                spec.inputs[site.input as usize].name, site.shown
                            )
                        })?);
                    }
                    joined
                }
            });
        }
    }
    Ok(regions
        .into_iter()
        .zip(data_dependent)
        .map(|(dims, data_dependent)| InputRegion {
            dims,
            data_dependent,
        })
        .collect())
}
