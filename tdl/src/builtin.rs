//! What each built-in scalar function computes: the one definition the
//! interpreter ([`crate::interp`]) and the runner's compiled evaluators
//! share, so a built-in means the same everywhere (Tofu §3.1; `Round` is
//! ONNX's round half to even).

use crate::ast::Builtin;

/// How a built-in evaluates: a total function of its real arguments, or
/// `select`, which evaluators handle themselves (it picks a branch, and the
/// integer-typed form keeps integers).
#[derive(Clone, Copy, Debug)]
pub enum Semantics {
    /// One argument.
    Unary(fn(f64) -> f64),
    /// Two arguments.
    Binary(fn(f64, f64) -> f64),
    /// `select(c, a, b)`: `a` where `c != 0`, else `b`.
    Select,
}

impl Builtin {
    /// Its real-valued semantics.
    pub fn semantics(self) -> Semantics {
        use Semantics::{Binary, Unary};
        match self {
            Builtin::Exp => Unary(f64::exp),
            Builtin::Log => Unary(f64::ln),
            Builtin::Sqrt => Unary(f64::sqrt),
            Builtin::Tanh => Unary(f64::tanh),
            Builtin::Sigmoid => Unary(sigmoid),
            Builtin::Erf => Unary(erf),
            Builtin::Abs => Unary(f64::abs),
            Builtin::Max => Binary(f64::max),
            Builtin::Min => Binary(f64::min),
            Builtin::Pow => Binary(f64::powf),
            Builtin::Sin => Unary(f64::sin),
            Builtin::Cos => Unary(f64::cos),
            Builtin::Tan => Unary(f64::tan),
            Builtin::Asin => Unary(f64::asin),
            Builtin::Acos => Unary(f64::acos),
            Builtin::Atan => Unary(f64::atan),
            Builtin::Sinh => Unary(f64::sinh),
            Builtin::Cosh => Unary(f64::cosh),
            Builtin::Asinh => Unary(f64::asinh),
            Builtin::Acosh => Unary(f64::acosh),
            Builtin::Atanh => Unary(f64::atanh),
            Builtin::Floor => Unary(f64::floor),
            Builtin::Ceil => Unary(f64::ceil),
            Builtin::Round => Unary(round_half_even),
            Builtin::Sign => Unary(sign),
            Builtin::Select => Semantics::Select,
        }
    }

    /// Evaluates the built-in on real arguments (`args.len()` is its arity,
    /// see [`Builtin::ALL`]; missing arguments read as 0).
    pub fn eval(self, args: &[f64]) -> f64 {
        let arg = |i: usize| args.get(i).copied().unwrap_or(0.0);
        match self.semantics() {
            Semantics::Unary(f) => f(arg(0)),
            Semantics::Binary(f) => f(arg(0), arg(1)),
            Semantics::Select => {
                if arg(0) != 0.0 {
                    arg(1)
                } else {
                    arg(2)
                }
            }
        }
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// Round half to even (ONNX `Round` semantics).
fn round_half_even(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        r
    }
}

/// The error function erf(x) = 2/√π ∫₀ˣ e^(−t²) dt, from the `libm`
/// crate (the musl/FreeBSD implementation, within 1 ulp).
pub fn erf(x: f64) -> f64 {
    libm::erf(x)
}
