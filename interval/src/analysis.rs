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

use crate::affine::Poly;
use crate::canon::{Canonicaliser, IndexForm};
use crate::error::AnalysisError;
use crate::interval::{classify, join, DimRegion, SiteIndex, WholeReason};
use crate::strategy::{InputRegion, OpStrategies, Rejected, SplitKind, SplitVar, Strategy};

/// Most input reads one statement may expand to by inlining.
const MAX_SITES: usize = 4096;
/// Most candidate combinations examined for ops with several outputs.
const MAX_CANDIDATES: usize = 256;

/// One input read after inlining.
#[derive(Clone, Debug)]
struct Site {
    input: u32,
    dims: Vec<SiteIndex>,
    /// The read as written (for reasons).
    shown: String,
    /// Conditions guarding the read (`select`, `&&`, `||` evaluate one side
    /// only): the variables each depends on and whether it reads data.
    guards: Vec<Guard>,
}

/// A condition that decides whether a read happens.
#[derive(Clone, Debug)]
struct Guard {
    vars: BTreeSet<VarId>,
    data: bool,
    shown: String,
}

/// What symbolic execution learns about one output statement.
#[derive(Debug)]
struct StmtFacts {
    output: u32,
    vars: Vec<VarId>,
    top: Option<(Reducer, Vec<VarId>)>,
    sites: Vec<Site>,
    opaque_vars: BTreeSet<VarId>,
    output_reads: Vec<(u32, Vec<SiteIndex>, String)>,
    has_reduce: bool,
    has_opaque: bool,
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
    guards: Vec<Guard>,
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

/// Strictly elementwise: no reduction or opaque call, every output has the
/// same rank, and every input read indexes exactly the statement's coordinates.
fn is_elementwise(facts: &[StmtFacts]) -> bool {
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

fn discover(spec: &OpSpec, facts: &[StmtFacts]) -> (Vec<Strategy>, Vec<Rejected>) {
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
