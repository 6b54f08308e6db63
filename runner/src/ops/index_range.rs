//! The values an index expression takes over a box of index variables:
//! its affine form (`c + Σ k·var`) where it has one, and that form's
//! smallest and largest value over the box.
//!
//! Takes one integer-position expression of a bound op ([`tdl::Binding`]:
//! every dim and attribute a number) and, per index variable, the range of
//! values it takes; gives the expression's [`Affine`] form, or `None` where
//! it is not affine in the variables (a read, a comparison, a division of
//! variables, …). Keeps true: the forms and the constants folded on the way
//! are exactly those of the CPU's compiled evaluator (its index compiler
//! keeps the same affine forms and folds the same constants), so a buffer
//! layout computed here ([`super::window_layouts`]) is the one every
//! backend's kernel reads with.

use tdl::{BinOp, Binding, Builtin, Expr, ExprKind, Semantics, Type, UnOp};

/// `c + Σ k·vars[v]` over the op's index variables (`VarId` order); no
/// term has coefficient 0. Without terms it is the constant `c`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Affine {
    /// The constant.
    pub c: i64,
    /// (variable, coefficient) pairs.
    pub terms: Vec<(usize, i64)>,
}

impl Affine {
    fn constant(c: i64) -> Affine {
        Affine { c, terms: vec![] }
    }

    fn as_const(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.c)
    }

    /// `self + sign·o`.
    pub(crate) fn add(mut self, o: &Affine, sign: i64) -> Affine {
        self.c += sign * o.c;
        for &(v, k) in &o.terms {
            match self.terms.iter_mut().find(|t| t.0 == v) {
                Some(t) => t.1 += sign * k,
                None => self.terms.push((v, sign * k)),
            }
        }
        self.terms.retain(|t| t.1 != 0);
        self
    }

    /// `k·self`.
    pub(crate) fn scale(mut self, k: i64) -> Affine {
        self.c *= k;
        self.terms.iter_mut().for_each(|t| t.1 *= k);
        self.terms.retain(|t| t.1 != 0);
        self
    }
}

/// Floor division (`a // b` rounds towards −∞), `b` ≠ 0.
fn floor_div(a: i64, b: i64) -> i64 {
    let q = a.div_euclid(b);
    if b < 0 && a.rem_euclid(b) != 0 {
        q - 1
    } else {
        q
    }
}

/// The index variables' boxes of one bound op: variable `v` takes the
/// values `lo[v]..lo[v] + ranges[v]`.
pub struct IndexRanges<'b> {
    /// The op.
    pub b: &'b Binding,
    /// First value of every variable.
    pub lo: Vec<i64>,
    /// Values every variable takes (≤ 0: none).
    pub ranges: Vec<i64>,
}

impl IndexRanges<'_> {
    /// The affine form of `e` in integer position, `None` where it has none.
    pub fn affine(&self, e: &Expr) -> Option<Affine> {
        match &e.kind {
            ExprKind::Int(i) => Some(Affine::constant(*i)),
            ExprKind::Var(v) => Some(Affine {
                c: 0,
                terms: vec![(v.0 as usize, 1)],
            }),
            ExprKind::Dim(d) => Some(Affine::constant(self.b.dims[d.0 as usize])),
            ExprKind::Attr(a) => Some(Affine::constant(self.b.attrs[a.0 as usize].as_f64() as i64)),
            ExprKind::Unary(UnOp::Neg, a) if a.ty == Type::Int => Some(self.affine(a)?.scale(-1)),
            // Logical values are never affine (comparisons, `&&` and `||`
            // are integer binaries: [`IndexRanges::arith`]).
            ExprKind::Unary(UnOp::Not, _) => None,
            ExprKind::Binary(op, a, c) if e.ty == Type::Int => self.arith(*op, a, c),
            ExprKind::Call(f @ (Builtin::Max | Builtin::Min), args) if e.ty == Type::Int => {
                let p = self.affine(&args[0])?.as_const()?;
                let q = self.affine(&args[1])?.as_const()?;
                Some(Affine::constant(if *f == Builtin::Max {
                    p.max(q)
                } else {
                    p.min(q)
                }))
            }
            ExprKind::Call(Builtin::Select, _) if e.ty == Type::Int => None,
            _ => Some(Affine::constant(self.fold(e)?.round() as i64)),
        }
    }

    /// Integer arithmetic: sums of affine forms, products by a constant,
    /// floor division and modulo of constants.
    fn arith(&self, op: BinOp, a: &Expr, c: &Expr) -> Option<Affine> {
        let (x, y) = (self.affine(a), self.affine(c));
        match op {
            BinOp::Add => Some(x?.add(&y?, 1)),
            BinOp::Sub => Some(x?.add(&y?, -1)),
            BinOp::Mul => {
                let (x, y) = (x?, y?);
                match (x.as_const(), y.as_const()) {
                    (Some(k), _) => Some(y.scale(k)),
                    (None, Some(k)) => Some(x.scale(k)),
                    (None, None) => None,
                }
            }
            BinOp::FloorDiv | BinOp::Mod => {
                let (p, q) = (x?.as_const()?, y?.as_const()?);
                if q == 0 {
                    return None;
                }
                let d = floor_div(p, q);
                Some(Affine::constant(if op == BinOp::FloorDiv {
                    d
                } else {
                    p - q * d
                }))
            }
            _ => None,
        }
    }

    /// The value of `e` in value position where it is a constant.
    fn real(&self, e: &Expr) -> Option<f64> {
        if e.ty == Type::Int {
            return self.affine(e)?.as_const().map(|c| c as f64);
        }
        self.fold(e)
    }

    /// The value of `e` where it folds to a constant, whatever its static
    /// type (the evaluator's value position past its integer shortcut).
    fn fold(&self, e: &Expr) -> Option<f64> {
        match &e.kind {
            ExprKind::Int(i) => Some(*i as f64),
            ExprKind::Real(r) => Some(*r),
            ExprKind::Attr(a) => Some(self.b.attrs[a.0 as usize].as_f64()),
            ExprKind::Var(_) | ExprKind::Dim(_) => self.affine(e)?.as_const().map(|c| c as f64),
            ExprKind::Read { .. } | ExprKind::Opaque { .. } => None,
            ExprKind::Unary(UnOp::Neg, a) => Some(-self.real(a)?),
            ExprKind::Unary(UnOp::Not, a) => Some((self.real(a)? == 0.0) as i64 as f64),
            ExprKind::Binary(op, a, c) => {
                let (x, y) = (self.real(a)?, self.real(c)?);
                Some(match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => x / y,
                    BinOp::FloorDiv => (x / y).floor(),
                    BinOp::Mod => x - y * (x / y).floor(),
                    _ => return None,
                })
            }
            ExprKind::Call(Builtin::Select, args) => {
                let c = self.real(&args[0]);
                let (x, y) = (self.real(&args[1]), self.real(&args[2]));
                if c? != 0.0 {
                    x
                } else {
                    y
                }
            }
            ExprKind::Call(f, args) => match f.semantics() {
                Semantics::Unary(g) => Some(g(self.real(&args[0])?)),
                Semantics::Binary(g) => {
                    let x = self.real(&args[0]);
                    Some(g(x?, self.real(&args[1])?))
                }
                Semantics::Select => None,
            },
            ExprKind::Reduce { reducer, vars, .. } => vars
                .iter()
                .any(|v| self.ranges[v.0 as usize] <= 0)
                .then(|| reducer.identity()),
        }
    }

    /// Smallest and largest value of `a` over the variables' boxes;
    /// `None` if some box is empty (the expression is never evaluated).
    pub fn hull(&self, a: &Affine) -> Option<(i64, i64)> {
        if a.terms.iter().any(|&(v, _)| self.ranges[v] <= 0) {
            return None;
        }
        let (mut lo, mut hi) = (a.c, a.c);
        for &(v, k) in &a.terms {
            let (x, y) = (k * self.lo[v], k * (self.lo[v] + self.ranges[v] - 1));
            lo += x.min(y);
            hi += x.max(y);
        }
        Some((lo, hi))
    }
}
