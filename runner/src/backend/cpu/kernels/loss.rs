//! Softmax cross-entropy losses and their gradients, one pass per row,
//! blocks of rows in parallel on rayon.
//!
//! Takes a bound `softmax_cross_entropy(logits[..., N], labels[..., N]) ->
//! loss[]`, `softmax_cross_entropy_grad(logits, labels, dloss[]) ->
//! dlogits[..., N]`, `sparse_softmax_cross_entropy(logits[..., N], ids[...])
//! -> loss[]` or `sparse_softmax_cross_entropy_grad(logits, ids, dloss[]) ->
//! dlogits`, or `cross_entropy(logits[..., N], ids[...], cnt[]) -> loss[]` /
//! `cross_entropy_grad(logits, ids, cnt[], dloss[]) -> dlogits` (PyTorch's
//! `F.cross_entropy`: ids that are no class, as its ignore_index -100, add
//! nothing; the divisor is the given count of targets) (`specs/loss.tdl`):
//! `R` rows of `N` logits, the loss averaged over the rows (divided by
//! max(cnt, 1) for `cross_entropy`). Gives a kernel computing what the spec computes, sums in
//! f64 (log-sum-exp with the row max subtracted; the exponentials in f32); the loss sums each block of
//! rows, then the blocks in order, so it does not depend on the thread
//! count. In the loss a class id is rounded to the nearest integer (as every
//! data-dependent index) and one outside `0..N` is
//! [`KernelError::OutOfBounds`], as the spec's read of `logits[..., ids[...]]`
//! is; the gradient compares `ids == n` exactly, as its spec does.

use rayon::prelude::*;
use tdl::Binding;

use super::KernelImpl;
use crate::ops::{inputs_named, only_attrs, KernelError};

/// Rows per parallel block (fixed: results do not depend on threads).
const BLOCK: usize = 8;

/// What the labels are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Targets {
    /// Probabilities `[..., N]`.
    Dense,
    /// Class ids `[...]`, each inside `0..N` (an index).
    Ids,
    /// Class ids `[...]` matched against `0..N` (any other id adds
    /// nothing), the sum divided by a given count `cnt[]`.
    Counted,
}

/// The class `id` names exactly, if it is one of `0..n` (the specs'
/// `ids == n`: an id that is no class, as PyTorch's ignore_index -100, or
/// not an integer, names none). Shared with `cross_entropy_parts`.
#[inline]
pub(super) fn counted(id: f32, n: usize) -> Option<usize> {
    let v = id as f64;
    (v >= 0.0 && v < n as f64 && v.fract() == 0.0).then_some(v as usize)
}

struct CrossEntropy {
    n: usize,
    targets: Targets,
    grad: bool,
    op: String,
    /// The logits' shape (for error messages).
    shape: Vec<usize>,
}

/// exp(x − max) in f32 ([`super::f32_math::exp_nonpositive`]: x − max ≤ 0;
/// within 1e-7 relative of f64's exp, well inside what the outputs keep, at
/// a fifth of its time), widened for the f64 sums.
#[inline(always)]
fn exp(x: f32, max: f64) -> f64 {
    super::f32_math::exp_nonpositive(x - max as f32) as f64
}

/// Row max and Σ exp(x − max).
fn lse_parts(x: &[f32]) -> (f64, f64) {
    let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    (m, x.iter().map(|&v| exp(v, m)).sum())
}

impl CrossEntropy {
    fn class(&self, id: f32, row: usize) -> Result<usize, KernelError> {
        let c = (id as f64).round() as i64;
        if c < 0 || c >= self.n as i64 {
            let mut index: Vec<i64> = Vec::new();
            let mut r = row;
            for &d in self.shape[..self.shape.len() - 1].iter().rev() {
                index.push((r % d.max(1)) as i64);
                r /= d.max(1);
            }
            index.reverse();
            index.push(c);
            return Err(KernelError::OutOfBounds {
                op: self.op.clone(),
                tensor: "logits".into(),
                index,
                shape: self.shape.clone(),
            });
        }
        Ok(c as usize)
    }

    /// Σ over rows `first..` of a block of one row's loss term.
    fn loss_block(&self, x: &[f32], labels: &[f32], first: usize) -> Result<f64, KernelError> {
        let n = self.n;
        let mut total = 0.0;
        for (r, row) in x.chunks(n).enumerate() {
            let (m, s) = lse_parts(row);
            let lse = m + s.ln();
            total += match self.targets {
                Targets::Ids => lse - row[self.class(labels[r], first + r)?] as f64,
                Targets::Counted => counted(labels[r], n).map_or(0.0, |c| lse - row[c] as f64),
                Targets::Dense => row
                    .iter()
                    .zip(&labels[r * n..(r + 1) * n])
                    .map(|(&x, &l)| l as f64 * (lse - x as f64))
                    .sum::<f64>(),
            };
        }
        Ok(total)
    }

    fn grad_block(&self, x: &[f32], labels: &[f32], scale: f64, dx: &mut [f32]) {
        let n = self.n;
        // exp(x − max) of the current row, computed once.
        let mut e = vec![0.0f64; n];
        for (r, (row, dx)) in x.chunks(n).zip(dx.chunks_mut(n)).enumerate() {
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            e.iter_mut().zip(row).for_each(|(e, &v)| *e = exp(v, m));
            let s: f64 = e.iter().sum();
            if self.targets == Targets::Counted && counted(labels[r], n).is_none() {
                dx.iter_mut().for_each(|d| *d = 0.0);
            } else if self.targets != Targets::Dense {
                // The spec compares `ids == n` (no rounding, no bounds).
                let id = labels[r] as f64;
                for (j, (d, &e)) in dx.iter_mut().zip(&e).enumerate() {
                    let onehot = if id == j as f64 { 1.0 } else { 0.0 };
                    *d = (scale * (e / s - onehot)) as f32;
                }
            } else {
                let l = &labels[r * n..(r + 1) * n];
                let sl: f64 = l.iter().map(|&v| v as f64).sum();
                for ((d, &e), &lv) in dx.iter_mut().zip(&e).zip(l) {
                    *d = (scale * (e / s * sl - lv as f64)) as f32;
                }
            }
        }
    }
}

impl KernelImpl for CrossEntropy {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let n = self.n;
        let (x, labels) = (inputs[0], inputs[1]);
        let rows = x.len() / n;
        // Rows of the labels per block: N probabilities or one id each.
        let per = if self.targets == Targets::Dense { n } else { 1 };
        let chunk = n * BLOCK;
        let cnt = if self.targets == Targets::Counted {
            (inputs[2][0] as f64).max(1.0)
        } else {
            self.shape[..self.shape.len() - 1].iter().product::<usize>() as f64
        };
        if !self.grad {
            if rows == 0 {
                // An empty sum over the rows.
                outputs[0][0] = 0.0;
                return Ok(());
            }
            let parts: Vec<Result<f64, KernelError>> = x
                .par_chunks(chunk)
                .enumerate()
                .map(|(c, xb)| {
                    let r0 = c * BLOCK;
                    let l = &labels[r0 * per..(r0 + xb.len() / n) * per];
                    self.loss_block(xb, l, r0)
                })
                .collect();
            let mut total = 0.0;
            for p in parts {
                total += p?;
            }
            outputs[0][0] = (total / cnt) as f32;
            return Ok(());
        }
        let dloss = if self.targets == Targets::Counted {
            3
        } else {
            2
        };
        let scale = inputs[dloss][0] as f64 / cnt;
        outputs[0]
            .par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(c, dx)| {
                let r0 = c * BLOCK;
                let m = dx.len() / n;
                self.grad_block(
                    &x[r0 * n..(r0 + m) * n],
                    &labels[r0 * per..(r0 + m) * per],
                    scale,
                    dx,
                )
            });
        Ok(())
    }
}

fn build(b: &Binding, targets: Targets, grad: bool) -> Option<Box<dyn KernelImpl>> {
    let sparse = targets != Targets::Dense;
    let labels = if sparse { "ids" } else { "labels" };
    let want: &[&str] = match (grad, targets == Targets::Counted) {
        (true, true) => &["logits", labels, "cnt", "dloss"],
        (false, true) => &["logits", labels, "cnt"],
        (true, false) => &["logits", labels, "dloss"],
        (false, false) => &["logits", labels],
    };
    if !inputs_named(b, want) || !only_attrs(b, &[]) || b.output_shapes.len() != 1 {
        return None;
    }
    let shape = b.input_shapes[0].clone();
    let (&n, batch) = shape.split_last()?;
    if n == 0 {
        return None;
    }
    let labels_fit = if sparse {
        b.input_shapes[1] == batch
    } else {
        b.input_shapes[1] == shape
    };
    let out_fits = b.input_shapes[2..].iter().all(Vec::is_empty)
        && if grad {
            b.output_shapes[0] == shape
        } else {
            b.output_shapes[0].is_empty()
        };
    (labels_fit && out_fits).then(|| {
        Box::new(CrossEntropy {
            n,
            targets,
            grad,
            op: b.spec.name.clone(),
            shape,
        }) as Box<dyn KernelImpl>
    })
}

/// `softmax_cross_entropy(logits[..., N], labels[..., N]) -> loss[]`.
pub fn softmax_cross_entropy(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, Targets::Dense, false)
}

/// `softmax_cross_entropy_grad(logits, labels, dloss[]) -> dlogits[..., N]`.
pub fn softmax_cross_entropy_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, Targets::Dense, true)
}

/// `sparse_softmax_cross_entropy(logits[..., N], ids[...]) -> loss[]`.
pub fn sparse_softmax_cross_entropy(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, Targets::Ids, false)
}

/// `sparse_softmax_cross_entropy_grad(logits, ids, dloss[]) -> dlogits[..., N]`.
pub fn sparse_softmax_cross_entropy_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, Targets::Ids, true)
}

/// `cross_entropy(logits[..., N], ids[...], cnt[]) -> loss[]`.
pub fn cross_entropy(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, Targets::Counted, false)
}

/// `cross_entropy_grad(logits, ids, cnt[], dloss[]) -> dlogits[..., N]`.
pub fn cross_entropy_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, Targets::Counted, true)
}
