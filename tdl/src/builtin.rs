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

/// The error function, to ~1e-16 relative accuracy (series for |x| < 2.5,
/// continued fraction of erfc beyond).
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let ax = x.abs();
    if ax < 2.5 {
        // erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
        let mut sum: f64 = 0.0;
        let mut term = ax;
        let x2 = ax * ax;
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs().max(1e-300) || n < 3.0 {
            sum += term / (2.0 * n + 1.0);
            n += 1.0;
            term *= -x2 / n;
            if n > 200.0 {
                break;
            }
        }
        let v = sum * 2.0 / std::f64::consts::PI.sqrt();
        v.copysign(x)
    } else {
        // erfc via Lentz continued fraction: erfc(x) = exp(-x²)/sqrt(pi) * 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...))))
        let mut f = ax;
        let mut c = ax;
        let mut d = 0.0;
        for k in 1..300 {
            let a = k as f64 / 2.0;
            d = ax + a * d;
            d = if d == 0.0 { 1e-300 } else { 1.0 / d };
            c = ax + a / c;
            let delta = c * d;
            f *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        let erfc = (-ax * ax).exp() / (std::f64::consts::PI.sqrt() * f);
        (1.0 - erfc).copysign(x)
    }
}
