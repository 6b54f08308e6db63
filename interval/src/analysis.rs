//! Symbolic execution of an op's statements and strategy discovery (Tofu §3.2).
//!
//! Takes an ellipsis-expanded [`OpSpec`]; gives its [`OpStrategies`].
//!
//! 1. *Facts.* Every output statement is executed symbolically: each index of
//!    each input read is canonicalised with egg ([`crate::canon`]) and `let`
//!    temporaries (and earlier outputs) are inlined — a read `t[e0, e1]`
//!    substitutes `e0, e1` for `t`'s coordinates in `t`'s body. The result per
//!    statement is the list of input reads ([`SiteIndex`] per dim), the
//!    variables used to index opaque results, reads of other outputs and the
//!    statement's top-level reduction (peeling `-`, and `·`/`/` by constants
//!    for `Sum`).
//! 2. *Candidates.* Output 0's coordinates (case 1) and top-level reduction
//!    variables (case 2), each combined with a variable of the same extent in
//!    every other output statement.
//! 3. *Verdict.* Every dim of every read is classified against its
//!    statement's split variable ([`crate::interval::classify`]) and reads of
//!    the same input are joined ([`crate::interval::join`]). Any imprecision
//!    rejects the candidate, with the reason; the rest are the strategies.
//!
//! Steps 2 and 3 live in `candidates.rs`.
//!
//! Invariant: an accepted strategy's regions are sound — on concrete shapes
//! a part reads nothing outside its region — and exact (the elements a part
//! reads are exactly its region, up to elements the op never reads at all,
//! e.g. strided gaps) except where a superset is stated: a data-dependent
//! read ([`crate::InputRegion::data_dependent`]) or a flattened index split
//! off its block boundaries ([`crate::PartRegions::exact`], see
//! [`crate::interval`]). The soundness proptest checks this against the
//! interpreter.

use std::collections::{BTreeSet, HashMap};

use tdl::{BinOp, DimEntry, Expr, ExprKind, Index, OpSpec, Reducer, TensorRef, UnOp, VarId};

use crate::candidates::{discover, is_elementwise};
use crate::canon::{Canonicaliser, IndexForm};
use crate::error::AnalysisError;
use crate::interval::SiteIndex;
use crate::strategy::OpStrategies;

/// Most input reads one statement may expand to by inlining.
const MAX_SITES: usize = 4096;

/// One input read after inlining.
#[derive(Clone, Debug)]
pub(crate) struct Site {
    pub(crate) input: u32,
    pub(crate) dims: Vec<SiteIndex>,
    /// The read as written (for reasons).
    pub(crate) shown: String,
    /// Conditions guarding the read (`select`, `&&`, `||` evaluate one side
    /// only): the variables each depends on and whether it reads data.
    pub(crate) guards: Vec<Guard>,
}

/// A condition that decides whether a read happens.
#[derive(Clone, Debug)]
pub(crate) struct Guard {
    pub(crate) vars: BTreeSet<VarId>,
    pub(crate) data: bool,
    pub(crate) shown: String,
}

/// What symbolic execution learns about one output statement.
#[derive(Debug)]
pub(crate) struct StmtFacts {
    pub(crate) output: u32,
    pub(crate) vars: Vec<VarId>,
    pub(crate) top: Option<(Reducer, Vec<VarId>)>,
    pub(crate) sites: Vec<Site>,
    pub(crate) opaque_vars: BTreeSet<VarId>,
    pub(crate) output_reads: Vec<(u32, Vec<SiteIndex>, String)>,
    pub(crate) has_reduce: bool,
    pub(crate) has_opaque: bool,
}

type Subst = HashMap<VarId, SiteIndex>;

/// Analyse an expanded spec (see the module doc).
///
/// Errors: [`AnalysisError::Unexpanded`] if the spec still has `...`;
/// [`AnalysisError::Unsupported`] for constructs with no meaning here (a
/// reduction inside an index, `:` outside an opaque function…);
/// [`AnalysisError::Cyclic`], [`AnalysisError::TooComplex`].
pub fn analyse(spec: &OpSpec) -> Result<OpStrategies, AnalysisError> {
    analyse_with(spec, Canonicaliser::new())
}

/// [`analyse`] with index expressions canonicalised by `canon` (its egg
/// limits, or a slowed-down machine); the result's
/// [`OpStrategies::saturation`] is its worst stop.
///
/// Errors: as [`analyse`].
pub fn analyse_with(
    spec: &OpSpec,
    mut canon: Canonicaliser,
) -> Result<OpStrategies, AnalysisError> {
    if spec.has_ellipsis() {
        let t = spec
            .inputs
            .iter()
            .map(|t| (&t.name, &t.dims))
            .chain(
                spec.outputs
                    .iter()
                    .chain(&spec.locals)
                    .map(|t| (&t.name, &t.dims)),
            )
            .find(|(_, d)| d.iter().any(|d| matches!(d, DimEntry::Ellipsis)))
            .map(|(n, _)| format!("{n}[...]"))
            .unwrap_or_default();
        return Err(AnalysisError::Unexpanded {
            op: spec.name.clone(),
            expr: t,
        });
    }
    let mut facts = Vec::new();
    for stmt in &spec.stmts {
        let TensorRef::Output(o) = stmt.target else {
            continue;
        };
        let mut w = Walker {
            op: spec,
            canon: &mut canon,
            facts: StmtFacts {
                output: o,
                vars: stmt.vars.clone(),
                top: top_reduce(&stmt.body),
                sites: Vec::new(),
                opaque_vars: BTreeSet::new(),
                output_reads: Vec::new(),
                has_reduce: false,
                has_opaque: false,
            },
            stack: vec![stmt.target],
            guards: Vec::new(),
            stmt_shown: format!(
                "{} = {}",
                spec.tensor_name(stmt.target),
                spec.show(&stmt.body)
            ),
        };
        w.walk(&stmt.body, &Subst::new())?;
        facts.push(w.facts);
    }
    facts.sort_by_key(|f| f.output);
    let elementwise = is_elementwise(&facts);
    let (strategies, rejected) = discover(spec, &facts);
    Ok(OpStrategies {
        spec: spec.clone(),
        strategies,
        rejected,
        elementwise,
        saturation: canon.saturation(),
    })
}

/// The top-level reduction of a statement body, peeling negation and, for
/// `Sum`, multiplication or division by a constant (partials stay linear).
fn top_reduce(e: &Expr) -> Option<(Reducer, Vec<VarId>)> {
    match &e.kind {
        ExprKind::Reduce { reducer, vars, .. } => Some((*reducer, vars.clone())),
        ExprKind::Unary(UnOp::Neg, a) => top_reduce(a).filter(|(r, _)| *r == Reducer::Sum),
        ExprKind::Binary(BinOp::Mul | BinOp::Div, a, b) if is_constant(b) => {
            top_reduce(a).filter(|(r, _)| *r == Reducer::Sum)
        }
        ExprKind::Binary(BinOp::Mul, a, b) if is_constant(a) => {
            top_reduce(b).filter(|(r, _)| *r == Reducer::Sum)
        }
        _ => None,
    }
}

/// No variables, reads, reductions or opaque calls: the same for every element.
fn is_constant(e: &Expr) -> bool {
    !e.any(&mut |x| {
        matches!(
            x.kind,
            ExprKind::Var(_)
                | ExprKind::Read { .. }
                | ExprKind::Reduce { .. }
                | ExprKind::Opaque { .. }
        )
    })
}

struct Walker<'a> {
    op: &'a OpSpec,
    canon: &'a mut Canonicaliser,
    facts: StmtFacts,
    stack: Vec<TensorRef>,
    stmt_shown: String,
    pub(crate) guards: Vec<Guard>,
}

impl Walker<'_> {
    fn err(&self, e: &Expr, what: &str) -> AnalysisError {
        AnalysisError::Unsupported {
            op: self.op.name.clone(),
            expr: self.op.show(e).to_string(),
            what: what.to_string(),
        }
    }

    /// Canonical form of an index, with the substitution applied.
    fn index(&mut self, e: &Expr, subst: &Subst) -> Result<SiteIndex, AnalysisError> {
        let form = self.canon.canonicalise(self.op, e)?;
        Ok(apply(form, subst))
    }

    fn indices(
        &mut self,
        read: &Expr,
        indices: &[Index],
        subst: &Subst,
        full_ok: bool,
    ) -> Result<Vec<SiteIndex>, AnalysisError> {
        let mut out = Vec::with_capacity(indices.len());
        for ix in indices {
            match ix {
                Index::Expr(x) => {
                    // Data-dependent indices read tensors themselves.
                    self.walk(x, subst)?;
                    out.push(self.index(x, subst)?);
                }
                Index::Full if full_ok => out.push(SiteIndex::Full),
                Index::Full => {
                    return Err(self.err(
                        read,
                        "`:` (whole dim) outside an opaque function's argument",
                    ))
                }
                Index::Ellipsis(_) => {
                    return Err(AnalysisError::Unexpanded {
                        op: self.op.name.clone(),
                        expr: self.op.show(read).to_string(),
                    })
                }
            }
        }
        Ok(out)
    }

    /// Walk `body` under the condition `cond`.
    fn guarded(&mut self, cond: &Expr, body: &Expr, subst: &Subst) -> Result<(), AnalysisError> {
        let vars = match apply(IndexForm::NonAffine(crate::canon::vars_of(cond)), subst) {
            SiteIndex::NonAffine(vs) => vs,
            _ => BTreeSet::new(),
        };
        let data = crate::canon::reads_tensor(cond)
            || crate::canon::vars_of(cond)
                .iter()
                .any(|v| matches!(subst.get(v), Some(SiteIndex::DataDependent)));
        self.guards.push(Guard {
            vars,
            data,
            shown: self.op.show(cond).to_string(),
        });
        let r = self.walk(body, subst);
        self.guards.pop();
        r
    }

    fn push_site(&mut self, site: Site) -> Result<(), AnalysisError> {
        if self.facts.sites.len() >= MAX_SITES {
            return Err(AnalysisError::TooComplex {
                op: self.op.name.clone(),
                expr: self.stmt_shown.clone(),
                limit: MAX_SITES,
            });
        }
        self.facts.sites.push(site);
        Ok(())
    }

    fn walk(&mut self, e: &Expr, subst: &Subst) -> Result<(), AnalysisError> {
        match &e.kind {
            ExprKind::Int(_)
            | ExprKind::Real(_)
            | ExprKind::Var(_)
            | ExprKind::Dim(_)
            | ExprKind::Attr(_) => Ok(()),
            ExprKind::Read { tensor, indices } => {
                let dims = self.indices(e, indices, subst, false)?;
                match *tensor {
                    TensorRef::Input(i) => {
                        let site = Site {
                            input: i,
                            dims,
                            shown: self.op.show(e).to_string(),
                            guards: self.guards.clone(),
                        };
                        self.push_site(site)
                    }
                    t @ (TensorRef::Local(_) | TensorRef::Output(_)) => {
                        if let TensorRef::Output(o) = t {
                            self.facts.output_reads.push((
                                o,
                                dims.clone(),
                                self.op.show(e).to_string(),
                            ));
                        }
                        if self.stack.contains(&t) {
                            return Err(AnalysisError::Cyclic {
                                op: self.op.name.clone(),
                                expr: self.op.show(e).to_string(),
                            });
                        }
                        let Some(def) = self.op.defining_stmt(t) else {
                            return Err(self.err(e, "read of a tensor that no statement defines"));
                        };
                        if def.vars.len() != dims.len() {
                            return Err(self.err(e, "wrong number of indices for the temporary"));
                        }
                        let inner: Subst = def.vars.iter().copied().zip(dims).collect();
                        self.stack.push(t);
                        let r = self.walk(&def.body, &inner);
                        self.stack.pop();
                        r
                    }
                }
            }
            ExprKind::Binary(BinOp::And | BinOp::Or, a, b) => {
                // The right side is evaluated only depending on the left.
                self.walk(a, subst)?;
                self.guarded(a, b, subst)
            }
            ExprKind::Call(tdl::Builtin::Select, args) if args.len() == 3 => {
                self.walk(&args[0], subst)?;
                self.guarded(&args[0], &args[1], subst)?;
                self.guarded(&args[0], &args[2], subst)
            }
            ExprKind::Unary(..) | ExprKind::Binary(..) | ExprKind::Call(..) => {
                e.children().try_for_each(|c| self.walk(c, subst))
            }
            ExprKind::Reduce { body, .. } => {
                self.facts.has_reduce = true;
                self.walk(body, subst)
            }
            ExprKind::Opaque { args, index, .. } => {
                self.facts.has_opaque = true;
                for a in args {
                    match &a.kind {
                        ExprKind::Read { tensor, indices }
                            if indices.iter().any(|i| matches!(i, Index::Full)) =>
                        {
                            let TensorRef::Input(i) = *tensor else {
                                return Err(self.err(
                                    a,
                                    "a slice (`:`) of a temporary or output; slice an input",
                                ));
                            };
                            let dims = self.indices(a, indices, subst, true)?;
                            let site = Site {
                                input: i,
                                dims,
                                shown: self.op.show(a).to_string(),
                                guards: self.guards.clone(),
                            };
                            self.push_site(site)?;
                        }
                        _ => self.walk(a, subst)?,
                    }
                }
                for x in index {
                    self.walk(x, subst)?;
                    match self.index(x, subst)? {
                        SiteIndex::Poly(p) | SiteIndex::Div(p, _) | SiteIndex::Mod(p, _) => {
                            self.facts.opaque_vars.extend(p.vars())
                        }
                        SiteIndex::NonAffine(vs) => self.facts.opaque_vars.extend(vs),
                        SiteIndex::DataDependent | SiteIndex::Full => {}
                    }
                }
                Ok(())
            }
        }
    }
}

/// Apply a substitution of a temporary's coordinates to a canonical index.
fn apply(form: IndexForm, subst: &Subst) -> SiteIndex {
    match form {
        IndexForm::DataDependent => SiteIndex::DataDependent,
        IndexForm::Div(num, den) => match apply(IndexForm::Poly(num), subst) {
            SiteIndex::Poly(p) => SiteIndex::Div(p, den),
            other => other,
        },
        IndexForm::Mod(num, den) => match apply(IndexForm::Poly(num), subst) {
            SiteIndex::Poly(p) => SiteIndex::Mod(p, den),
            other => other,
        },
        IndexForm::NonAffine(vs) => {
            let mut out = BTreeSet::new();
            for v in vs {
                match subst.get(&v) {
                    None => {
                        out.insert(v);
                    }
                    Some(SiteIndex::Poly(p) | SiteIndex::Div(p, _) | SiteIndex::Mod(p, _)) => {
                        out.extend(p.vars())
                    }
                    Some(SiteIndex::NonAffine(ws)) => out.extend(ws.iter().copied()),
                    Some(SiteIndex::DataDependent | SiteIndex::Full) => {
                        return SiteIndex::DataDependent
                    }
                }
            }
            SiteIndex::NonAffine(out)
        }
        IndexForm::Poly(p) => {
            let vars = p.vars();
            let mut nonaffine = false;
            for v in &vars {
                match subst.get(v) {
                    Some(SiteIndex::DataDependent | SiteIndex::Full) => {
                        return SiteIndex::DataDependent
                    }
                    // A quotient or remainder substituted into a polynomial
                    // is no longer one.
                    Some(SiteIndex::NonAffine(_) | SiteIndex::Div(..) | SiteIndex::Mod(..)) => {
                        nonaffine = true
                    }
                    _ => {}
                }
            }
            if nonaffine {
                return apply(IndexForm::NonAffine(vars), subst);
            }
            SiteIndex::Poly(p.substitute(&|v| match subst.get(&v) {
                Some(SiteIndex::Poly(q)) => Some(q.clone()),
                _ => None,
            }))
        }
    }
}
