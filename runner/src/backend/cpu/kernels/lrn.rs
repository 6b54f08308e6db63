//! Local response normalisation across channels (AlexNet, GoogLeNet) and
//! its gradient, as loops over contiguous spatial rows.
//!
//! Takes a bound `lrn<size, alpha, beta, bias>(x[B, C, …]) -> y` or
//! `lrn_grad<…>(x, dy) -> dx` (`specs/onnx_nn.tdl`, ONNX LRN); gives a kernel
//! that views the tensors as `[B, C, S]` (S the product of the spatial
//! dims) and, per image, slides the channel window over whole rows of S:
//! with `d[c] = bias + alpha/size · Σ_{c' ∈ window(c)} x[c']²`,
//!
//! * `y[c] = x[c] · d[c]^-beta`
//! * `dx[c] = dy[c] · d[c]^-beta − 2·alpha·beta/size · x[c] · Σ_{c' : c ∈ window(c')} dy[c'] · x[c'] · d[c']^(-beta-1)`
//!
//! window(c) = [c − ⌊(size−1)/2⌋, c + ⌈(size−1)/2⌉] clipped to the channels.
//! Images run in parallel. Declines (`None`) an instance with other
//! attributes, tensor names or shapes, or `size < 1`.

use rayon::prelude::*;
use tdl::Binding;

use super::elementwise::fits;
use super::KernelImpl;
use crate::ops::{float_attr, int_attr, KernelError};

const ATTRS: &[&str] = &["size", "alpha", "beta", "bias"];

struct Lrn {
    /// Channels C and spatial elements S per channel.
    c: usize,
    s: usize,
    size: usize,
    alpha: f64,
    beta: f64,
    bias: f64,
    grad: bool,
}

fn build(b: &Binding, grad: bool) -> Option<Box<dyn KernelImpl>> {
    let ok = if grad {
        fits(b, &["x", "dy"], &["dx"], ATTRS)
    } else {
        fits(b, &["x"], &["y"], ATTRS)
    };
    let shape = &b.input_shapes[0];
    if !ok || shape.len() < 2 {
        return None;
    }
    let size = usize::try_from(int_attr(b, "size")?)
        .ok()
        .filter(|&s| s > 0)?;
    Some(Box::new(Lrn {
        c: shape[1],
        s: shape[2..].iter().product(),
        size,
        alpha: float_attr(b, "alpha")?,
        beta: float_attr(b, "beta")?,
        bias: float_attr(b, "bias")?,
        grad,
    }))
}

/// `lrn(x[B, C, …]) -> y`.
pub fn lrn(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, false)
}

/// `lrn_grad(x[B, C, …], dy) -> dx`.
pub fn lrn_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, true)
}

impl Lrn {
    /// `d[c, s]` of one image `x` (`[C, S]`).
    fn denominators(&self, x: &[f32]) -> Vec<f64> {
        let (c, s) = (self.c, self.s);
        let lo = (self.size - 1) / 2;
        let mut d = vec![0.0f64; c * s];
        for ch in 0..c {
            let row = &mut d[ch * s..(ch + 1) * s];
            let first = ch.saturating_sub(lo);
            let last = (ch + self.size - 1 - lo).min(c - 1);
            for src in first..=last {
                for (acc, &v) in row.iter_mut().zip(&x[src * s..(src + 1) * s]) {
                    *acc += v as f64 * v as f64;
                }
            }
            let k = self.alpha / self.size as f64;
            row.iter_mut().for_each(|v| *v = self.bias + k * *v);
        }
        d
    }

    fn forward(&self, x: &[f32], y: &mut [f32]) {
        let d = self.denominators(x);
        for ((y, &x), &d) in y.iter_mut().zip(x).zip(&d) {
            *y = (x as f64 * d.powf(-self.beta)) as f32;
        }
    }

    fn backward(&self, x: &[f32], dy: &[f32], dx: &mut [f32]) {
        let (c, s) = (self.c, self.s);
        let lo = (self.size - 1) / 2;
        let d = self.denominators(x);
        // t[c'] = dy[c'] · x[c'] · d[c']^(-beta-1)
        let t: Vec<f64> = (0..c * s)
            .map(|i| dy[i] as f64 * x[i] as f64 * d[i].powf(-self.beta - 1.0))
            .collect();
        let k = 2.0 * self.alpha * self.beta / self.size as f64;
        let mut acc = vec![0.0f64; s];
        for ch in 0..c {
            // c' with ch ∈ window(c'): c' ∈ [ch + lo + 1 − size, ch + lo].
            acc.fill(0.0);
            let first = (ch + lo + 1).saturating_sub(self.size);
            let last = (ch + lo).min(c - 1);
            for src in first..=last {
                for (a, &v) in acc.iter_mut().zip(&t[src * s..(src + 1) * s]) {
                    *a += v;
                }
            }
            let r = ch * s..(ch + 1) * s;
            for (j, o) in dx[r.clone()].iter_mut().enumerate() {
                let i = ch * s + j;
                *o = (dy[i] as f64 * d[i].powf(-self.beta) - k * x[i] as f64 * acc[j]) as f32;
            }
        }
    }
}

impl KernelImpl for Lrn {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let img = self.c * self.s;
        if img == 0 {
            return Ok(());
        }
        let x = inputs[0];
        if self.grad {
            let dy = inputs[1];
            outputs[0]
                .par_chunks_mut(img)
                .enumerate()
                .for_each(|(n, dx)| {
                    let r = n * img..(n + 1) * img;
                    self.backward(&x[r.clone()], &dy[r], dx)
                });
        } else {
            outputs[0]
                .par_chunks_mut(img)
                .enumerate()
                .for_each(|(n, y)| self.forward(&x[n * img..(n + 1) * img], y));
        }
        Ok(())
    }
}
