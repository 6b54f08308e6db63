//! Which inputs an operator is linear in (issue 41: partial sums as a
//! layout).
//!
//! Takes an [`OpSpec`] and a set of its inputs; gives whether every output
//! is a *homogeneous linear* function of those inputs jointly, the others
//! held fixed: f(x + x′) = f(x) + f(x′) and f(c·x) = c·f(x). That is what
//! lets a tensor held as per-worker partial sums (x = Σ_w x_w) flow through
//! the operator without communication: each worker applies the operator to
//! its own partials and the outputs are partial sums of the true output,
//! Σ_w f(x_w) = f(Σ_w x_w). Every input of the set must then be partial
//! together (`add(a, b)` is linear in {a, b}, not in {a} alone: with b
//! whole on every worker, Σ_w (a_w + b) counts b once per worker).
//!
//! The check is syntactic over the spec's statements, by degree in the
//! set's inputs: a literal zero is *zero*; an expression reading none of
//! them is *constant*; a read of one of them, at indices that read none of
//! them, is *linear*; `a + b`, `a - b` and `select(c, a, b)` are linear when
//! each operand is linear or zero (and `c` constant); `a · b` when one
//! factor is constant or zero and the other linear; `a / b` when `b` is
//! constant; `-a`, and `Sum` over a linear body, stay linear. Anything else
//! that involves the set (a builtin such as `exp`, `max`, a comparison, a
//! `Max` reduction, an opaque function, a data-dependent index) is
//! nonlinear. Sound, not complete: an operator it calls nonlinear may still
//! be linear (e.g. `relu(x) - relu(-x)`), never the reverse.

use crate::ast::{BinOp, Builtin, Expr, ExprKind, Index, OpSpec, Reducer, TensorRef, UnOp};

/// The degree of an expression in the chosen inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Degree {
    /// The literal 0 (compatible with any degree in a sum or select).
    Zero,
    /// Reads none of the chosen inputs.
    Const,
    /// Homogeneous linear in the chosen inputs.
    Linear,
    /// Anything else.
    Nonlinear,
}

use Degree::{Const, Linear, Nonlinear, Zero};

/// Whether every output of `spec` is homogeneous linear in the inputs
/// `inputs` (indices into `spec.inputs`) jointly, the other inputs fixed
/// (see the module doc). An empty set, or an index past the inputs, gives
/// `false`.
pub fn is_linear_in(spec: &OpSpec, inputs: &[u32]) -> bool {
    if inputs.is_empty() || inputs.iter().any(|&i| i as usize >= spec.inputs.len()) {
        return false;
    }
    let mut locals = vec![Nonlinear; spec.locals.len()];
    let mut outputs = vec![Nonlinear; spec.outputs.len()];
    for stmt in &spec.stmts {
        let ctx = Ctx {
            inputs,
            locals: &locals,
        };
        let d = ctx.degree(&stmt.body);
        match stmt.target {
            TensorRef::Local(i) => locals[i as usize] = d,
            TensorRef::Output(i) => outputs[i as usize] = d,
            TensorRef::Input(_) => return false,
        }
    }
    // An output that is constant in the set would be counted once per
    // worker; zero is fine.
    outputs.iter().all(|d| matches!(d, Linear | Zero))
}

/// Every nonempty set of `spec`'s inputs (as bit masks, bit i = input i)
/// it is linear in, for operators of at most 8 inputs (else none).
pub fn linear_input_sets(spec: &OpSpec) -> Vec<u32> {
    let n = spec.inputs.len();
    if n > 8 {
        return Vec::new();
    }
    (1u32..(1 << n))
        .filter(|mask| {
            let set: Vec<u32> = (0..n as u32).filter(|i| mask & (1 << i) != 0).collect();
            is_linear_in(spec, &set)
        })
        .collect()
}

struct Ctx<'a> {
    inputs: &'a [u32],
    locals: &'a [Degree],
}

impl Ctx<'_> {
    fn degree(&self, e: &Expr) -> Degree {
        match &e.kind {
            ExprKind::Int(0) => Zero,
            ExprKind::Real(r) if *r == 0.0 => Zero,
            ExprKind::Int(_)
            | ExprKind::Real(_)
            | ExprKind::Var(_)
            | ExprKind::Dim(_)
            | ExprKind::Attr(_) => Const,
            ExprKind::Read { tensor, indices } => {
                let index_reads_set = indices.iter().any(|i| match i {
                    Index::Expr(x) => self.degree(x) != Const && self.degree(x) != Zero,
                    _ => false,
                });
                if index_reads_set {
                    return Nonlinear;
                }
                match tensor {
                    TensorRef::Input(i) if self.inputs.contains(i) => Linear,
                    TensorRef::Input(_) | TensorRef::Output(_) => Const,
                    TensorRef::Local(i) => self.locals[*i as usize],
                }
            }
            ExprKind::Unary(UnOp::Neg, a) => self.degree(a),
            ExprKind::Unary(UnOp::Not, a) => constant_only(self.degree(a)),
            ExprKind::Binary(op, a, b) => {
                let (a, b) = (self.degree(a), self.degree(b));
                match op {
                    BinOp::Add | BinOp::Sub => sum(a, b),
                    BinOp::Mul => product(a, b),
                    BinOp::Div => match (a, b) {
                        (Zero, Const) => Zero,
                        (x, Const) => x,
                        _ => constant_only(sum_all(a, b)),
                    },
                    _ => constant_only(sum_all(a, b)),
                }
            }
            ExprKind::Call(Builtin::Select, args) if args.len() == 3 => {
                match self.degree(&args[0]) {
                    Const | Zero => sum(self.degree(&args[1]), self.degree(&args[2])),
                    _ => Nonlinear,
                }
            }
            ExprKind::Call(_, args) => args
                .iter()
                .map(|a| constant_only(self.degree(a)))
                .fold(Const, sum_all),
            ExprKind::Reduce { reducer, body, .. } => match (reducer, self.degree(body)) {
                (_, Zero) => Zero,
                (_, Const) => Const,
                (Reducer::Sum, Linear) => Linear,
                _ => Nonlinear,
            },
            ExprKind::Opaque { .. } => {
                if e.children().all(|c| matches!(self.degree(c), Const | Zero)) {
                    Const
                } else {
                    Nonlinear
                }
            }
        }
    }
}

/// The degree of `a + b` (and of a select's two branches).
fn sum(a: Degree, b: Degree) -> Degree {
    match (a, b) {
        (Nonlinear, _) | (_, Nonlinear) => Nonlinear,
        (Zero, x) | (x, Zero) => x,
        (Const, Const) => Const,
        (Linear, Linear) => Linear,
        _ => Nonlinear,
    }
}

/// The degree of `a · b`.
fn product(a: Degree, b: Degree) -> Degree {
    match (a, b) {
        (Nonlinear, _) | (_, Nonlinear) => Nonlinear,
        (Zero, _) | (_, Zero) => Zero,
        (Const, x) | (x, Const) => x,
        (Linear, Linear) => Nonlinear,
    }
}

/// Constant when both are, else nonlinear (for folding operands of
/// functions that are not linear).
fn sum_all(a: Degree, b: Degree) -> Degree {
    match (constant_only(a), constant_only(b)) {
        (Const, Const) => Const,
        _ => Nonlinear,
    }
}

/// `d` as the operand of a function that is not linear: constant stays
/// constant (zero included), anything reading the set is nonlinear.
fn constant_only(d: Degree) -> Degree {
    match d {
        Zero | Const => Const,
        _ => Nonlinear,
    }
}
