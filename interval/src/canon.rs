//! Canonicalisation of one index expression with egg.
//!
//! Takes a TDL index expression (integer-typed [`tdl::Expr`]); gives its
//! [`IndexForm`]: a [`Poly`] when egg's rules ([`crate::rules`]) bring it to a
//! polynomial, [`IndexForm::NonAffine`] with the variables it mentions when a
//! floor division, modulo, min/max, comparison or real arithmetic remains,
//! [`IndexForm::DataDependent`] when it reads a tensor (`table[ids[b], d]`).
//!
//! The expression is translated to [`IndexLang`], saturated (bounded by the
//! node and iteration counts of [`EggLimits`], never by wall-clock time, so
//! the forms found do not depend on the machine's speed; a limit is not an
//! error: the best form found is used and [`Canonicaliser::saturation`] says
//! which limit stopped egg), and the cheapest sum-of-products form is
//! extracted with [`NormalFormCost`], which makes products over sums and
//! subtractions costly. Bare variables and constants skip egg (they are
//! already normal).

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use egg::{CostFunction, Extractor, Id, Language, RecExpr, Runner, Symbol};
use tdl::{BinOp, Builtin, Expr, ExprKind, OpSpec, Type, UnOp, VarId};

use crate::affine::{Atom, Poly};
use crate::error::AnalysisError;
use crate::rules::{rules, IndexGraph, IndexLang};

/// The canonical form of one index expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexForm {
    /// A polynomial over variables, dims and attributes.
    Poly(Poly),
    /// `num // den` with `num` a polynomial and `den` free of variables (a
    /// flattened index's outer coordinate, `k // DH`).
    Div(Poly, Poly),
    /// `num % den` with `num` a polynomial and `den` free of variables (a
    /// flattened index's inner coordinate, `k % DH`).
    Mod(Poly, Poly),
    /// Not a polynomial after canonicalisation; the variables it mentions.
    NonAffine(BTreeSet<VarId>),
    /// Holds a tensor read: its value is data, so the whole dim may be read.
    DataDependent,
}

/// Extraction cost that prefers the sum-of-products normal form: a product
/// with a (non-constant) sum as an operand, a subtraction or a negation costs
/// 1000; every other node costs 1.
pub struct NormalFormCost<'a> {
    egraph: &'a IndexGraph,
}

impl CostFunction<IndexLang> for NormalFormCost<'_> {
    type Cost = usize;
    fn cost<C>(&mut self, enode: &IndexLang, mut costs: C) -> usize
    where
        C: FnMut(Id) -> usize,
    {
        let sumlike = |id: &Id| {
            let class = &self.egraph[*id];
            class.data.is_none()
                && class
                    .nodes
                    .iter()
                    .any(|n| matches!(n, IndexLang::Add(_) | IndexLang::Sub(_)))
        };
        let own = match enode {
            IndexLang::Mul([a, b]) if sumlike(a) || sumlike(b) => 1000,
            IndexLang::Sub(_) | IndexLang::Neg(_) => 1000,
            _ => 1,
        };
        enode.fold(own, |s, id| s.saturating_add(costs(id)))
    }
}

/// The budget of egg's equality saturation of one index expression: counts
/// only, so the result is the same on any machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EggLimits {
    /// Most iterations (each applies every rule once).
    pub iterations: usize,
    /// Most e-nodes in the e-graph.
    pub nodes: usize,
}

impl EggLimits {
    /// The limits the analysis uses.
    pub const DEFAULT: EggLimits = EggLimits {
        iterations: 12,
        nodes: 2_000,
    };
}

impl Default for EggLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Why egg stopped rewriting index expressions: saturated (no rule adds
/// anything: the normal form is the best there is), or the limit of
/// [`EggLimits`] it reached first (the best form found so far is used).
/// Ordered from the best outcome to the worst.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Saturation {
    /// Every rewrite was exhausted (or egg was not needed).
    #[default]
    Saturated,
    /// [`EggLimits::iterations`] stopped it.
    IterationLimit,
    /// [`EggLimits::nodes`] stopped it.
    NodeLimit,
}

impl Saturation {
    /// Whether a limit stopped egg.
    pub fn is_limit(self) -> bool {
        self != Saturation::Saturated
    }

    /// Whether egg saturated (no limit stopped it); `skip_serializing_if`
    /// takes a reference.
    pub fn is_saturated(&self) -> bool {
        *self == Saturation::Saturated
    }

    /// Egg's reason as ours.
    ///
    /// Panics on a reason the canonicaliser's runner cannot give (it sets
    /// no time limit and its hooks never fail): a broken invariant of
    /// [`Canonicaliser`].
    fn from_egg(r: &egg::StopReason) -> Saturation {
        match r {
            egg::StopReason::Saturated => Saturation::Saturated,
            egg::StopReason::IterationLimit(_) => Saturation::IterationLimit,
            egg::StopReason::NodeLimit(_) => Saturation::NodeLimit,
            other => panic!("canon: egg stopped for a reason no count limit gives: {other:?}"),
        }
    }
}

/// Memoised canonicaliser for the index expressions of one op.
pub struct Canonicaliser {
    memo: HashMap<String, IndexForm>,
    limits: EggLimits,
    /// Every egg iteration takes this many times as long (1: as fast as the
    /// machine goes).
    slowdown: u32,
    /// The worst stop of egg so far.
    saturation: Saturation,
}

impl Default for Canonicaliser {
    fn default() -> Self {
        Self::with_limits(EggLimits::DEFAULT)
    }
}

impl Canonicaliser {
    /// A canonicaliser with an empty memo and the default [`EggLimits`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A canonicaliser with an empty memo and these limits.
    pub fn with_limits(limits: EggLimits) -> Self {
        Canonicaliser {
            memo: HashMap::new(),
            limits,
            slowdown: 1,
            saturation: Saturation::Saturated,
        }
    }

    /// The same canonicaliser on a machine `factor` times slower: every egg
    /// iteration sleeps `factor − 1` times what it took. For tests that the
    /// forms found depend on counts only.
    pub fn slowed_down(mut self, factor: u32) -> Self {
        self.slowdown = factor.max(1);
        self
    }

    /// The worst reason egg stopped for, over every expression
    /// canonicalised so far ([`Saturation::Saturated`] when none needed egg).
    pub fn saturation(&self) -> Saturation {
        self.saturation
    }

    /// The canonical form of index expression `e` of `op`.
    ///
    /// Errors: [`AnalysisError::Unsupported`] for a construct that cannot
    /// stand in an index (a reduction, an opaque call, `...`/`:`).
    pub fn canonicalise(&mut self, op: &OpSpec, e: &Expr) -> Result<IndexForm, AnalysisError> {
        // Fast paths: already normal.
        match &e.kind {
            ExprKind::Var(v) => return Ok(IndexForm::Poly(Poly::var(*v))),
            ExprKind::Int(i) => return Ok(IndexForm::Poly(Poly::constant(*i))),
            _ => {}
        }
        if reads_tensor(e) {
            return Ok(IndexForm::DataDependent);
        }
        let mut rec = RecExpr::default();
        let root = match to_lang(op, e, &mut rec)? {
            Some(root) => root,
            None => return Ok(IndexForm::NonAffine(vars_of(e))),
        };
        let _ = root;
        let key = rec.to_string();
        if let Some(f) = self.memo.get(&key) {
            return Ok(f.clone());
        }
        let runner = self.runner().with_expr(&rec).run(&rules());
        let stop = runner
            .stop_reason
            .as_ref()
            .map_or(Saturation::Saturated, Saturation::from_egg);
        self.saturation = self.saturation.max(stop);
        let root = runner.roots[0];
        let cost = NormalFormCost {
            egraph: &runner.egraph,
        };
        let extractor = Extractor::new(&runner.egraph, cost);
        let (_, best) = extractor.find_best(root);
        let form = from_lang(&best).unwrap_or_else(|| IndexForm::NonAffine(vars_of(e)));
        self.memo.insert(key, form.clone());
        Ok(form)
    }

    /// An egg runner with the count limits and no wall-clock limit (egg's
    /// default of 5 s is lifted), slowed down when asked.
    fn runner(&self) -> Runner<IndexLang, crate::rules::ConstFold> {
        let runner = Runner::default()
            .with_iter_limit(self.limits.iterations)
            .with_node_limit(self.limits.nodes)
            .with_time_limit(Duration::MAX);
        if self.slowdown <= 1 {
            return runner;
        }
        let extra = self.slowdown - 1;
        let mut since = Instant::now();
        runner.with_hook(move |_| {
            std::thread::sleep(since.elapsed() * extra);
            since = Instant::now();
            Ok(())
        })
    }
}

/// Whether an expression reads a tensor (anywhere inside).
pub(crate) fn reads_tensor(e: &Expr) -> bool {
    e.any(&mut |x| matches!(x.kind, ExprKind::Read { .. } | ExprKind::Opaque { .. }))
}

/// Every variable an expression mentions.
pub(crate) fn vars_of(e: &Expr) -> BTreeSet<VarId> {
    let mut out = BTreeSet::new();
    e.visit(&mut |x| {
        if let ExprKind::Var(v) = x.kind {
            out.insert(v);
        }
    });
    out
}

/// Translate to [`IndexLang`]; `None` when a node has no integer meaning in
/// the language (comparison, real arithmetic, select…): the index is then
/// non-affine. Errors for constructs that are malformed in an index.
fn to_lang(
    op: &OpSpec,
    e: &Expr,
    rec: &mut RecExpr<IndexLang>,
) -> Result<Option<Id>, AnalysisError> {
    let unsupported = |what: &str| AnalysisError::Unsupported {
        op: op.name.clone(),
        expr: op.show(e).to_string(),
        what: what.to_string(),
    };
    let node = match &e.kind {
        ExprKind::Int(i) => IndexLang::Num(*i),
        ExprKind::Var(v) => IndexLang::Symbol(Symbol::from(format!("v{}", v.0))),
        ExprKind::Dim(d) => IndexLang::Symbol(Symbol::from(format!("d{}", d.0))),
        ExprKind::Attr(a) if e.ty == Type::Int => {
            IndexLang::Symbol(Symbol::from(format!("a{}", a.0)))
        }
        ExprKind::Unary(UnOp::Neg, a) if e.ty == Type::Int => match to_lang(op, a, rec)? {
            Some(a) => IndexLang::Neg(a),
            None => return Ok(None),
        },
        ExprKind::Binary(o, a, b)
            if e.ty == Type::Int && a.ty == Type::Int && b.ty == Type::Int =>
        {
            let mk: fn([Id; 2]) -> IndexLang = match o {
                BinOp::Add => IndexLang::Add,
                BinOp::Sub => IndexLang::Sub,
                BinOp::Mul => IndexLang::Mul,
                BinOp::FloorDiv => IndexLang::FloorDiv,
                BinOp::Mod => IndexLang::Mod,
                _ => return Ok(None),
            };
            let (Some(x), Some(y)) = (to_lang(op, a, rec)?, to_lang(op, b, rec)?) else {
                return Ok(None);
            };
            mk([x, y])
        }
        ExprKind::Call(b @ (Builtin::Max | Builtin::Min), args)
            if e.ty == Type::Int && args.len() == 2 =>
        {
            let (Some(x), Some(y)) = (to_lang(op, &args[0], rec)?, to_lang(op, &args[1], rec)?)
            else {
                return Ok(None);
            };
            if *b == Builtin::Max {
                IndexLang::Max([x, y])
            } else {
                IndexLang::Min([x, y])
            }
        }
        ExprKind::Reduce { .. } => {
            return Err(unsupported("a reduction inside an index expression"))
        }
        ExprKind::Read { .. } | ExprKind::Opaque { .. } => {
            return Err(unsupported(
                "a tensor read where a data-independent index was expected",
            ))
        }
        _ => return Ok(None),
    };
    Ok(Some(rec.add(node)))
}

/// Read a sum-of-products [`IndexLang`] term back: a [`Poly`] (a floor
/// division of two parameters is an [`crate::affine::Atom::Quot`]), or at
/// the root a floor division or modulo of a polynomial by a variable-free
/// one ([`IndexForm::Div`], [`IndexForm::Mod`]); `None` if other floor
/// divisions, modulos, min or max remain.
fn from_lang(rec: &RecExpr<IndexLang>) -> Option<IndexForm> {
    let nodes = rec.as_ref();
    let mut val: Vec<Option<Poly>> = Vec::with_capacity(nodes.len());
    for n in nodes {
        let g = |i: &Id| val[usize::from(*i)].clone();
        let p = match n {
            IndexLang::Num(c) => Some(Poly::constant(*c)),
            IndexLang::Symbol(s) => parse_symbol(s.as_str()).map(Poly::atom),
            IndexLang::Add([a, b]) => g(a).zip(g(b)).map(|(a, b)| a.add(&b)),
            IndexLang::Sub([a, b]) => g(a).zip(g(b)).map(|(a, b)| a.sub(&b)),
            IndexLang::Mul([a, b]) => g(a).zip(g(b)).map(|(a, b)| a.mul(&b)),
            IndexLang::Neg(a) => g(a).map(|a| a.scale(-1)),
            IndexLang::FloorDiv([a, b]) => g(a).zip(g(b)).and_then(|(a, b)| Poly::quotient(&a, &b)),
            IndexLang::Mod(_) | IndexLang::Min(_) | IndexLang::Max(_) => None,
        };
        val.push(p);
    }
    if let Some(p) = val.last().cloned().flatten() {
        return Some(IndexForm::Poly(p));
    }
    let g = |i: &Id| val[usize::from(*i)].clone();
    let flat = |a: &Id, b: &Id| {
        let (num, den) = (g(a)?, g(b)?);
        (den.is_param_only() && !den.is_zero()).then_some((num, den))
    };
    match nodes.last()? {
        IndexLang::FloorDiv([a, b]) => flat(a, b).map(|(n, d)| IndexForm::Div(n, d)),
        IndexLang::Mod([a, b]) => flat(a, b).map(|(n, d)| IndexForm::Mod(n, d)),
        _ => None,
    }
}

fn parse_symbol(s: &str) -> Option<Atom> {
    let (k, n) = s.split_at(1);
    let n: u32 = n.parse().ok()?;
    Some(match k {
        "v" => Atom::Var(VarId(n)),
        "d" => Atom::Dim(tdl::DimId(n)),
        "a" => Atom::Attr(tdl::AttrId(n)),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Canonicalise an s-expression and print the extracted normal form.
    fn normal(s: &str) -> String {
        let rec: RecExpr<IndexLang> = s.parse().unwrap();
        let runner = Runner::<IndexLang, crate::rules::ConstFold>::default()
            .with_expr(&rec)
            .run(&rules());
        let cost = NormalFormCost {
            egraph: &runner.egraph,
        };
        let (_, best) = Extractor::new(&runner.egraph, cost).find_best(runner.roots[0]);
        best.to_string()
    }

    #[test]
    fn egg_reaches_sum_of_products() {
        assert_eq!(normal("(- (* 2 (+ v0 1)) 2)"), "(* 2 v0)");
        assert_eq!(normal("(+ 3 (+ v0 -3))"), "v0");
        assert_eq!(normal("(* (+ v0 1) a0)"), "(+ (* v0 a0) a0)");
        assert_eq!(normal("(// (* 4 v1) 4)"), "v1");
        // conv1d: o * stride + dx * dilation - pad
        let n = normal("(- (+ (* v0 a0) (* v1 a1)) a2)");
        assert!(!n.contains('-') || n.contains("-1"), "{n}");
        assert!(!n.contains("(* (+"), "{n}");
    }
}
