//! The per-row sums of the vocabulary-parallel softmax cross-entropy
//! (Megatron-LM's vocab_parallel_cross_entropy) and their gradient, one pass
//! per row over contiguous classes, blocks of rows in parallel on rayon.
//!
//! Takes a bound `softmax_cross_entropy_parts(logits[..., N], m[...],
//! labels[..., N]) -> (z[...], p[...], sl[...])` or
//! `softmax_cross_entropy_parts_grad(logits, m, labels, dz[...], dp[...]) ->
//! dlogits[..., N]`, or their class-id forms `cross_entropy_parts(logits,
//! m, ids[...])` / `cross_entropy_parts_grad(logits, m, ids, dz, dp)`
//! (`specs/loss.tdl`; ids matched exactly against `0..N`, others ignored):
//! `R` rows of `N` logits (a worker's
//! vocabulary shard when the plan splits N). Gives a kernel computing what
//! the spec computes: z = Σ exp(logits − m), p = Σ labels · logits,
//! sl = Σ labels summed in f64 per row; dlogits = dz · exp(logits − m) +
//! dp · labels. exp(logits − m) is the f32 [`super::f32_math::exp_nonpositive`]
//! (within 1e-7 relative of f64's exp) when the row's logits are at most m —
//! always in a training graph, where m is the row max — and f64's exp
//! otherwise. Each output element is computed alone, so the results do not
//! depend on the thread count.

use rayon::prelude::*;
use tdl::Binding;

use super::loss::counted;
use super::KernelImpl;
use crate::ops::{inputs_named, only_attrs, outputs_named, KernelError};

/// Rows per parallel block.
const BLOCK: usize = 8;

struct Parts {
    /// Classes per row.
    n: usize,
    grad: bool,
    /// The third input is class ids `[...]` rather than labels `[..., N]`.
    ids: bool,
}

/// exp(x − m) of every element of a row into `e` (f32: the fast path when
/// x ≤ m for the whole row).
#[inline]
fn exp_row(x: &[f32], m: f32, e: &mut [f32]) {
    let max = x.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v));
    if max <= m {
        for (e, &v) in e.iter_mut().zip(x) {
            *e = super::f32_math::exp_nonpositive(v - m);
        }
    } else {
        for (e, &v) in e.iter_mut().zip(x) {
            *e = (v as f64 - m as f64).exp() as f32;
        }
    }
}

impl Parts {
    /// z, p and sl of the rows of one block.
    fn sums(&self, x: &[f32], m: &[f32], l: &[f32], z: &mut [f32], p: &mut [f32], sl: &mut [f32]) {
        let n = self.n;
        let mut e = vec![0.0f32; n];
        for r in 0..m.len() {
            let xr = &x[r * n..(r + 1) * n];
            exp_row(xr, m[r], &mut e);
            z[r] = e.iter().map(|&v| v as f64).sum::<f64>() as f32;
            if self.ids {
                let c = counted(l[r], n);
                p[r] = c.map_or(0.0, |c| xr[c]);
                sl[r] = if c.is_some() { 1.0 } else { 0.0 };
                continue;
            }
            let lr = &l[r * n..(r + 1) * n];
            p[r] = xr
                .iter()
                .zip(lr)
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum::<f64>() as f32;
            sl[r] = lr.iter().map(|&v| v as f64).sum::<f64>() as f32;
        }
    }

    /// dlogits of the rows of one block.
    fn grad_rows(&self, x: &[f32], m: &[f32], l: &[f32], dz: &[f32], dp: &[f32], dx: &mut [f32]) {
        let n = self.n;
        for r in 0..m.len() {
            let xr = &x[r * n..(r + 1) * n];
            let d = &mut dx[r * n..(r + 1) * n];
            exp_row(xr, m[r], d);
            let (a, b) = (dz[r] as f64, dp[r] as f64);
            if self.ids {
                // As the one-hot row would: a · e + b · [j = id].
                let c = counted(l[r], n);
                for (j, v) in d.iter_mut().enumerate() {
                    let hit = if c == Some(j) { b } else { 0.0 };
                    *v = (a * *v as f64 + hit) as f32;
                }
                continue;
            }
            let lr = &l[r * n..(r + 1) * n];
            for (d, &lv) in d.iter_mut().zip(lr) {
                *d = (a * *d as f64 + b * lv as f64) as f32;
            }
        }
    }
}

impl KernelImpl for Parts {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let n = self.n;
        let (x, m, l) = (inputs[0], inputs[1], inputs[2]);
        let chunk = n * BLOCK;
        if self.grad {
            let (dz, dp) = (inputs[3], inputs[4]);
            outputs[0]
                .par_chunks_mut(chunk)
                .enumerate()
                .for_each(|(c, dx)| {
                    let (r0, rows) = (c * BLOCK, dx.len() / n);
                    let span = r0 * n..(r0 + rows) * n;
                    let rs = r0..r0 + rows;
                    let ls = if self.ids { rs.clone() } else { span.clone() };
                    self.grad_rows(
                        &x[span],
                        &m[rs.clone()],
                        &l[ls],
                        &dz[rs.clone()],
                        &dp[rs],
                        dx,
                    )
                });
            return Ok(());
        }
        let [z, p, sl] = outputs else {
            return Err(KernelError::BufferCount {
                op: "softmax_cross_entropy_parts".into(),
                what: "output",
                expected: 3,
                got: outputs.len(),
            });
        };
        z.par_chunks_mut(BLOCK)
            .zip(p.par_chunks_mut(BLOCK))
            .zip(sl.par_chunks_mut(BLOCK))
            .enumerate()
            .for_each(|(c, ((z, p), sl))| {
                let (r0, rows) = (c * BLOCK, z.len());
                let span = r0 * n..(r0 + rows) * n;
                let ls = if self.ids {
                    r0..r0 + rows
                } else {
                    span.clone()
                };
                self.sums(&x[span], &m[r0..r0 + rows], &l[ls], z, p, sl)
            });
        Ok(())
    }
}

fn build(b: &Binding, grad: bool, ids: bool) -> Option<Box<dyn KernelImpl>> {
    let t = if ids { "ids" } else { "labels" };
    let (ins, outs): (&[&str], &[&str]) = if grad {
        (&["logits", "m", t, "dz", "dp"], &["dlogits"])
    } else {
        (&["logits", "m", t], &["z", "p", "sl"])
    };
    if !inputs_named(b, ins) || !outputs_named(b, outs) || !only_attrs(b, &[]) {
        return None;
    }
    let shape = &b.input_shapes[0];
    let (&n, batch) = shape.split_last()?;
    let fits = n > 0
        && b.input_shapes[2] == if ids { batch } else { shape }
        && b.input_shapes[1] == batch
        && b.input_shapes[3..].iter().all(|s| s == batch)
        && if grad {
            b.output_shapes[0] == *shape
        } else {
            b.output_shapes.iter().all(|s| s == batch)
        };
    fits.then(|| Box::new(Parts { n, grad, ids }) as Box<dyn KernelImpl>)
}

/// `softmax_cross_entropy_parts(logits[..., N], m[...], labels[..., N]) ->
/// (z[...], p[...], sl[...])`.
pub fn softmax_cross_entropy_parts(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, false, false)
}

/// `softmax_cross_entropy_parts_grad(logits, m, labels, dz[...], dp[...]) ->
/// dlogits[..., N]`.
pub fn softmax_cross_entropy_parts_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, true, false)
}

/// `cross_entropy_parts(logits[..., N], m[...], ids[...]) -> (z[...], p[...],
/// sl[...])`.
pub fn cross_entropy_parts(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, false, true)
}

/// `cross_entropy_parts_grad(logits, m, ids, dz[...], dp[...]) -> dlogits[..., N]`.
pub fn cross_entropy_parts_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, true, true)
}
