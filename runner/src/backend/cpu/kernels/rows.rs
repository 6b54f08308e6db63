//! Normalisations over the last axis — softmax, log-softmax, layer norm and
//! their gradients — one pass per row, blocks of rows in parallel on rayon.
//!
//! Takes a bound `softmax`, `softmax_grad`, `log_softmax`,
//! `log_softmax_grad` (`specs/activation.tdl`), `layernorm` or
//! `layernorm_grad` (`specs/norm.tdl`): tensors `[..., N]` seen as `R` rows
//! of `N` elements (`R` = the product of the batch dims `...`), `gamma`,
//! `beta`, `dgamma`, `dbeta` of shape `[N]`. Gives a kernel computing what
//! the spec computes, with sums and statistics accumulated in f64 and
//! elementwise values in f64 stored as f32. The column sums of
//! `layernorm_grad` (`dgamma`, `dbeta`) are summed per block of rows, then
//! over the blocks in order, so results do not depend on the thread count.
//! A constructor declines (`None`) an instance whose tensors are not the
//! shipped spec's.

use rayon::prelude::*;
use tdl::Binding;

use super::KernelImpl;
use crate::ops::{float_attr, inputs_named, only_attrs, outputs_named, KernelError};

/// Rows per parallel block (a fixed count: results do not depend on threads).
const BLOCK: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Softmax,
    SoftmaxGrad,
    LogSoftmax,
    LogSoftmaxGrad,
    LayerNorm,
    LayerNormGrad,
}

struct RowKernel {
    kind: Kind,
    /// Elements per row.
    n: usize,
    eps: f64,
}

/// Max of a row (−∞ for an empty one).
fn row_max(x: &[f32]) -> f64 {
    x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64))
}

/// Mean and 1/√(biased variance + eps) of a row.
fn stats(x: &[f32], eps: f64) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = x
        .iter()
        .map(|&v| (v as f64 - mean) * (v as f64 - mean))
        .sum::<f64>()
        / n;
    (mean, 1.0 / (var + eps).sqrt())
}

impl RowKernel {
    /// One row of a single-output kind: `a` (and `b`) the row's inputs.
    fn row(&self, a: &[f32], b: &[f32], extra: (&[f32], &[f32]), y: &mut [f32]) {
        match self.kind {
            Kind::Softmax => {
                let m = row_max(a);
                // exp in f32 (`f32_math`, within 1e-7 relative), kept in y
                // (exactly: it is an f32) until the sum is known.
                let m = m as f32;
                for (y, &x) in y.iter_mut().zip(a) {
                    *y = super::f32_math::exp_nonpositive(x - m);
                }
                let s: f64 = y.iter().map(|&e| e as f64).sum();
                for y in y.iter_mut() {
                    *y = (*y as f64 / s) as f32;
                }
            }
            Kind::SoftmaxGrad => {
                // a = y, b = dy.
                let s: f64 = a.iter().zip(b).map(|(&y, &d)| y as f64 * d as f64).sum();
                for ((o, &y), &d) in y.iter_mut().zip(a).zip(b) {
                    *o = (y as f64 * (d as f64 - s)) as f32;
                }
            }
            Kind::LogSoftmax => {
                let m = row_max(a);
                let s: f64 = a.iter().map(|&x| (x as f64 - m).exp()).sum();
                let l = s.ln();
                for (o, &x) in y.iter_mut().zip(a) {
                    *o = (x as f64 - m - l) as f32;
                }
            }
            Kind::LogSoftmaxGrad => {
                // a = y, b = dy.
                let s: f64 = b.iter().map(|&d| d as f64).sum();
                for ((o, &y), &d) in y.iter_mut().zip(a).zip(b) {
                    *o = (d as f64 - (y as f64).exp() * s) as f32;
                }
            }
            Kind::LayerNorm => {
                let (gamma, beta) = extra;
                let (mean, inv) = stats(a, self.eps);
                for (((o, &x), &g), &bt) in y.iter_mut().zip(a).zip(gamma).zip(beta) {
                    *o = (g as f64 * (x as f64 - mean) * inv + bt as f64) as f32;
                }
            }
            Kind::LayerNormGrad => unreachable!("three outputs"),
        }
    }

    /// `layernorm_grad` over a block of rows: writes `dx` and adds the
    /// block's column sums into `dgamma`, `dbeta` (f64).
    fn layernorm_grad(
        &self,
        x: &[f32],
        gamma: &[f32],
        dy: &[f32],
        dx: &mut [f32],
        dgamma: &mut [f64],
        dbeta: &mut [f64],
    ) {
        let n = self.n;
        let nf = n as f64;
        let mut xhat = vec![0.0f64; n];
        for ((x, dy), dx) in x.chunks(n).zip(dy.chunks(n)).zip(dx.chunks_mut(n)) {
            let (mean, inv) = stats(x, self.eps);
            let (mut sg, mut sgx) = (0.0, 0.0);
            for j in 0..n {
                xhat[j] = (x[j] as f64 - mean) * inv;
                let g = dy[j] as f64 * gamma[j] as f64;
                sg += g;
                sgx += g * xhat[j];
            }
            for j in 0..n {
                let g = dy[j] as f64 * gamma[j] as f64;
                dx[j] = (inv * (g - sg / nf - xhat[j] * sgx / nf)) as f32;
                dgamma[j] += dy[j] as f64 * xhat[j];
                dbeta[j] += dy[j] as f64;
            }
        }
    }
}

impl KernelImpl for RowKernel {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let n = self.n;
        if n == 0 {
            outputs.iter_mut().for_each(|o| o.fill(0.0));
            return Ok(());
        }
        let chunk = n * BLOCK;
        if self.kind == Kind::LayerNormGrad {
            let (x, gamma, dy) = (inputs[0], inputs[1], inputs[2]);
            let [dx, dgamma, dbeta] = outputs else {
                unreachable!("checked at construction")
            };
            let partials: Vec<(Vec<f64>, Vec<f64>)> = dx
                .par_chunks_mut(chunk)
                .enumerate()
                .map(|(c, dx)| {
                    let r = c * chunk..c * chunk + dx.len();
                    let (mut dg, mut db) = (vec![0.0; n], vec![0.0; n]);
                    self.layernorm_grad(&x[r.clone()], gamma, &dy[r], dx, &mut dg, &mut db);
                    (dg, db)
                })
                .collect();
            let (mut dg, mut db) = (vec![0.0f64; n], vec![0.0f64; n]);
            for (g, b) in &partials {
                dg.iter_mut().zip(g).for_each(|(a, v)| *a += v);
                db.iter_mut().zip(b).for_each(|(a, v)| *a += v);
            }
            dgamma.iter_mut().zip(&dg).for_each(|(o, v)| *o = *v as f32);
            dbeta.iter_mut().zip(&db).for_each(|(o, v)| *o = *v as f32);
            return Ok(());
        }
        let a = inputs[0];
        let (b, extra): (&[f32], (&[f32], &[f32])) = match self.kind {
            Kind::SoftmaxGrad | Kind::LogSoftmaxGrad => (inputs[1], (&[], &[])),
            Kind::LayerNorm => (&[], (inputs[1], inputs[2])),
            _ => (&[], (&[], &[])),
        };
        outputs[0]
            .par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(c, y)| {
                let lo = c * chunk;
                for (r, y) in y.chunks_mut(n).enumerate() {
                    let at = lo + r * n..lo + (r + 1) * n;
                    let b = if b.is_empty() { b } else { &b[at.clone()] };
                    self.row(&a[at], b, extra, y);
                }
            });
        Ok(())
    }
}

fn build(
    b: &Binding,
    kind: Kind,
    inputs: &[&str],
    outputs: &[&str],
) -> Option<Box<dyn KernelImpl>> {
    let layer = matches!(kind, Kind::LayerNorm | Kind::LayerNormGrad);
    if !inputs_named(b, inputs)
        || !outputs_named(b, outputs)
        || !only_attrs(b, if layer { &["eps"] } else { &[] })
    {
        return None;
    }
    let x = &b.input_shapes[0];
    let n = *x.last()?;
    // Every row tensor has x's shape; gamma, beta and their gradients are [N].
    let row_like = |s: &Vec<usize>| s == x;
    let vec_n = |s: &Vec<usize>| *s == [n];
    let ok = match kind {
        Kind::Softmax | Kind::LogSoftmax => row_like(&b.output_shapes[0]),
        Kind::SoftmaxGrad | Kind::LogSoftmaxGrad => {
            row_like(&b.input_shapes[1]) && row_like(&b.output_shapes[0])
        }
        Kind::LayerNorm => {
            vec_n(&b.input_shapes[1]) && vec_n(&b.input_shapes[2]) && row_like(&b.output_shapes[0])
        }
        Kind::LayerNormGrad => {
            vec_n(&b.input_shapes[1])
                && row_like(&b.input_shapes[2])
                && row_like(&b.output_shapes[0])
                && vec_n(&b.output_shapes[1])
                && vec_n(&b.output_shapes[2])
        }
    };
    let eps = float_attr(b, "eps").unwrap_or(0.0);
    ok.then(|| Box::new(RowKernel { kind, n, eps }) as Box<dyn KernelImpl>)
}

/// `softmax(x[..., N]) -> y[..., N]`.
pub fn softmax(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, Kind::Softmax, &["x"], &["y"])
}

/// `softmax_grad(y[..., N], dy[..., N]) -> dx[..., N]`.
pub fn softmax_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, Kind::SoftmaxGrad, &["y", "dy"], &["dx"])
}

/// `log_softmax(x[..., N]) -> y[..., N]`.
pub fn log_softmax(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, Kind::LogSoftmax, &["x"], &["y"])
}

/// `log_softmax_grad(y[..., N], dy[..., N]) -> dx[..., N]`.
pub fn log_softmax_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, Kind::LogSoftmaxGrad, &["y", "dy"], &["dx"])
}

/// `layernorm<eps>(x[..., N], gamma[N], beta[N]) -> y[..., N]`.
pub fn layernorm(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, Kind::LayerNorm, &["x", "gamma", "beta"], &["y"])
}

/// `layernorm_grad<eps>(x[..., N], gamma[N], dy[..., N]) -> (dx[..., N], dgamma[N], dbeta[N])`.
pub fn layernorm_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(
        b,
        Kind::LayerNormGrad,
        &["x", "gamma", "dy"],
        &["dx", "dgamma", "dbeta"],
    )
}
