//! Elementwise operators as contiguous loops over flat buffers, split into
//! fixed chunks run on rayon: the optimizer updates ([`super::optim`]) and
//! the activations and sums that every training step runs many times
//! (`relu`, `relu_grad`, `gelu`, `gelu_grad`, `add`, `identity`, and the
//! ONNX exports' `mul`, `div`, `div_grad_b`, `scale`, `erf`, `erf_grad`,
//! `where`, `where_grad`).
//!
//! Takes a bound op whose tensors all have one shape; gives a kernel that
//! computes each element as the spec does (in f64, stored as f32, where the
//! spec's arithmetic is not exact in f32; one IEEE operation on f32 values
//! in f32, which rounds the same), except `erf` and `erf_grad`, computed in
//! f32 within 5e-7 of the f64 value. A constructor declines (`None`)
//! an instance whose inputs, outputs or attributes are not the shipped
//! spec's.

use rayon::prelude::*;
use tdl::Binding;

use super::f32_math;
use super::KernelImpl;
use crate::ops::{float_attr, inputs_named, only_attrs, outputs_named, KernelError};

/// Elements per parallel chunk (each chunk is a contiguous slice of every buffer).
const CHUNK: usize = 1 << 15;

/// The update of one chunk: (inputs in the spec's order, outputs to
/// write), every slice of the same length.
pub(super) type Update = Box<dyn Fn(&[&[f32]], &mut [&mut [f32]]) + Send + Sync>;

pub(super) struct Elementwise {
    update: Update,
}

impl KernelImpl for Elementwise {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let n = inputs.first().map_or(0, |x| x.len());
        // Chunk c of every output, then of every input.
        let mut chunks: Vec<Vec<&mut [f32]>> = (0..n.div_ceil(CHUNK)).map(|_| Vec::new()).collect();
        for out in outputs.iter_mut() {
            for (c, part) in out.chunks_mut(CHUNK).enumerate() {
                chunks[c].push(part);
            }
        }
        let run = |(c, outs): (usize, &mut Vec<&mut [f32]>)| {
            let lo = c * CHUNK;
            let ins: Vec<&[f32]> = inputs.iter().map(|x| &x[lo..(lo + CHUNK).min(n)]).collect();
            (self.update)(&ins, outs);
        };
        if chunks.len() > 1 {
            chunks.par_iter_mut().enumerate().for_each(run);
        } else {
            chunks.iter_mut().enumerate().for_each(run);
        }
        Ok(())
    }
}

/// Whether the instance has these inputs and outputs, in order, all of one shape.
pub(super) fn fits(b: &Binding, inputs: &[&str], outputs: &[&str], attrs: &[&str]) -> bool {
    only_attrs(b, attrs)
        && inputs_named(b, inputs)
        && outputs_named(b, outputs)
        && b.input_shapes
            .iter()
            .chain(&b.output_shapes)
            .all(|s| *s == b.input_shapes[0])
}

pub(super) fn kernel(update: Update) -> Option<Box<dyn KernelImpl>> {
    Some(Box::new(Elementwise { update }))
}

/// `relu(x) -> y`: `max(x, 0)`.
pub fn relu(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["x"], &["y"], &[]) {
        return None;
    }
    kernel(Box::new(|x, o| {
        for (o, &v) in o[0].iter_mut().zip(x[0]) {
            *o = v.max(0.0);
        }
    }))
}

/// `relu_grad(x, dy) -> dx`: `dy` where `x > 0`, else 0.
pub fn relu_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["x", "dy"], &["dx"], &[]) {
        return None;
    }
    kernel(Box::new(|x, o| {
        for ((o, &v), &d) in o[0].iter_mut().zip(x[0]).zip(x[1]) {
            *o = if v > 0.0 { d } else { 0.0 };
        }
    }))
}

/// `add(a, b) -> y`: `a + b` (same shapes; the f32 sum of two f32 values
/// is the f64 sum rounded, as the spec stores it).
pub fn add(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["a", "b"], &["y"], &[]) {
        return None;
    }
    kernel(Box::new(|x, o| {
        for ((o, &a), &c) in o[0].iter_mut().zip(x[0]).zip(x[1]) {
            *o = a + c;
        }
    }))
}

/// `identity(x) -> y`: a copy.
pub fn identity(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["x"], &["y"], &[]) {
        return None;
    }
    kernel(Box::new(|x, o| o[0].copy_from_slice(x[0])))
}

/// `gelu(x) -> y`: `x/2 · (1 + erf(x/√2))` in f64 (erf: `tdl::interp::erf`).
pub fn gelu(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["x"], &["y"], &[]) {
        return None;
    }
    kernel(Box::new(|x, o| {
        for (o, &v) in o[0].iter_mut().zip(x[0]) {
            let v = v as f64;
            *o = (0.5 * v * (1.0 + tdl::interp::erf(v * std::f64::consts::FRAC_1_SQRT_2))) as f32;
        }
    }))
}

/// `gelu_grad(x, dy) -> dx`: `dy · (Φ(x) + x·φ(x))` in f64.
pub fn gelu_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["x", "dy"], &["dx"], &[]) {
        return None;
    }
    kernel(Box::new(|x, o| {
        for ((o, &v), &d) in o[0].iter_mut().zip(x[0]).zip(x[1]) {
            let v = v as f64;
            let cdf = 0.5 * (1.0 + tdl::interp::erf(v * std::f64::consts::FRAC_1_SQRT_2));
            let pdf = 0.3989422804014327 * (-0.5 * v * v).exp();
            *o = (d as f64 * (cdf + v * pdf)) as f32;
        }
    }))
}

/// An elementwise op of one input computed as the spec does, in f64 (`f`
/// a closure, monomorphised: the loop inlines and vectorises it).
fn unary<F>(b: &Binding, names: (&str, &str), f: F) -> Option<Box<dyn KernelImpl>>
where
    F: Fn(f64) -> f64 + Copy + Send + Sync + 'static,
{
    if !fits(b, &[names.0], &[names.1], &[]) {
        return None;
    }
    kernel(Box::new(move |x, o| {
        for (o, &v) in o[0].iter_mut().zip(x[0]) {
            *o = f(v as f64) as f32;
        }
    }))
}

/// An elementwise op of two inputs as an f32 function: for one IEEE
/// operation (`+`, `−`, `·`, `/`) the f32 result is the f64 one rounded to
/// f32 (f64 has more than 2·24 + 2 significand bits, so rounding twice is
/// exact), and the loop runs 8 lanes wide instead of 2.
fn binary_f32<F>(b: &Binding, names: (&str, &str, &str), f: F) -> Option<Box<dyn KernelImpl>>
where
    F: Fn(f32, f32) -> f32 + Copy + Send + Sync + 'static,
{
    if !fits(b, &[names.0, names.1], &[names.2], &[]) {
        return None;
    }
    kernel(Box::new(move |x, o| {
        let n = o[0].len();
        let (a, c) = (&x[0][..n], &x[1][..n]);
        for ((o, &a), &c) in o[0].iter_mut().zip(a).zip(c) {
            *o = f(a, c);
        }
    }))
}

/// `erf(x) -> y`: a rational approximation in f32 (Eigen's
/// `generic_fast_erf_float`, the one PyTorch's CPU kernels vectorise), within
/// 5e-7 of `tdl::interp::erf` (the interpreter's, f64 libm) over all f32
/// inputs, NaN to NaN, and 30× faster than the f64 libm call per element.
pub fn erf(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["x"], &["y"], &[]) {
        return None;
    }
    kernel(Box::new(|x, o| {
        for (o, &v) in o[0].iter_mut().zip(x[0]) {
            *o = f32_math::erf(v);
        }
    }))
}

/// `erf_grad(x, dy) -> dx`: `dy · 2/√π · exp(-x²)`, the exponential in f32
/// ([`f32_math::exp_nonpositive`], 5× faster than f64's libm call) of x²
/// split into its f32 rounding `h` and the rest `l` (x² is exact in f64):
/// `exp(-h)·(1 − l)`, within 3e-7 of the f64 value.
pub fn erf_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["x", "dy"], &["dx"], &[]) {
        return None;
    }
    kernel(Box::new(|x, o| {
        let n = o[0].len();
        let (xs, ds) = (&x[0][..n], &x[1][..n]);
        for ((o, &v), &d) in o[0].iter_mut().zip(xs).zip(ds) {
            let x2 = v as f64 * v as f64;
            let h = x2 as f32;
            let l = (x2 - h as f64) as f32;
            *o = d * std::f32::consts::FRAC_2_SQRT_PI * (f32_math::exp_nonpositive(-h) * (1.0 - l));
        }
    }))
}

/// `mul(a, b) -> y` (same shapes).
pub fn mul(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    binary_f32(b, ("a", "b", "y"), |a, c| a * c)
}

/// `div(a, b) -> y` (same shapes).
pub fn div(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    binary_f32(b, ("a", "b", "y"), |a, c| a / c)
}

/// `div_grad_b(a, b, dy) -> db`: `-dy · a / b²`.
pub fn div_grad_b(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["a", "b", "dy"], &["db"], &[]) {
        return None;
    }
    kernel(Box::new(|x, o| {
        for (((o, &a), &c), &d) in o[0].iter_mut().zip(x[0]).zip(x[1]).zip(x[2]) {
            let (a, c, d) = (a as f64, c as f64, d as f64);
            *o = (-d * a / (c * c)) as f32;
        }
    }))
}

/// `scale<alpha>(x) -> y`: `alpha · x`.
pub fn scale(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["x"], &["y"], &["alpha"]) {
        return None;
    }
    let alpha = float_attr(b, "alpha")?;
    let a32 = alpha as f32;
    if a32 as f64 == alpha {
        // An f32 factor (0.5, 1/8, …): one f32 product is the f64 one rounded.
        return kernel(Box::new(move |x, o| {
            for (o, &v) in o[0].iter_mut().zip(x[0]) {
                *o = a32 * v;
            }
        }));
    }
    kernel(Box::new(move |x, o| {
        for (o, &v) in o[0].iter_mut().zip(x[0]) {
            *o = (alpha * v as f64) as f32;
        }
    }))
}

/// `is_nan(x) -> y`: 1 where `x` is NaN, else 0 (the spec's `x != x`).
pub fn is_nan(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    unary(b, ("x", "y"), |x| if x.is_nan() { 1.0 } else { 0.0 })
}

/// `where(cond, a, b) -> y`: `a` where `cond ≠ 0` (NaN included), else `b`.
pub fn where_select(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["cond", "a", "b"], &["y"], &[]) {
        return None;
    }
    kernel(Box::new(|x, o| {
        let n = o[0].len();
        let (c, a, e) = (&x[0][..n], &x[1][..n], &x[2][..n]);
        for (((o, &c), &a), &e) in o[0].iter_mut().zip(c).zip(a).zip(e) {
            *o = if c != 0.0 { a } else { e };
        }
    }))
}

/// `where_grad(cond, dy) -> (da, db)`: `dy` into `da` where `cond ≠ 0`,
/// into `db` elsewhere, 0 in the other.
pub fn where_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["cond", "dy"], &["da", "db"], &[]) {
        return None;
    }
    kernel(Box::new(|x, o| {
        let [da, db] = o else { return };
        let n = da.len();
        let (c, d, db) = (&x[0][..n], &x[1][..n], &mut db[..n]);
        for (((a, b), &c), &d) in da.iter_mut().zip(db.iter_mut()).zip(c).zip(d) {
            (*a, *b) = if c != 0.0 { (d, 0.0) } else { (0.0, d) };
        }
    }))
}
