//! Axis permutations (transposes, attention's head split and merge) as
//! strided copies, output rows in parallel on rayon.
//!
//! Takes a bound `transpose(x[M, N]) -> y[N, M]`, `batch_transpose(x[...,
//! M, N]) -> y[..., N, M]`, `transpose_0213(x[A, B, C, D]) -> y[A, C, B,
//! D]` (`specs/shape.tdl`), `swap_blocks(x[..., A, B, C]) -> y[..., B, A,
//! C]` (`specs/onnx_nn.tdl`), `split_heads<heads>(x[B, S, D]) -> y[B, heads,
//! S, D / heads]` or `merge_heads(x[B, NH, S, DH]) -> y[B, S, NH·DH]`
//! (`specs/attention.tdl`); each is the input seen with some dims
//! (`[B, S, heads, D / heads]` for `split_heads`) and its axes permuted.
//! Gives a kernel that writes each output row (the last output axis) from
//! the input: a slice copy when that axis is the input's last, a strided
//! gather otherwise. A constructor declines (`None`) an instance it cannot
//! see as a permutation (e.g. `split_heads` with `D` not a multiple of
//! `heads`, whose spec drops the remainder).

use rayon::prelude::*;
use tdl::Binding;

use super::KernelImpl;
use crate::ops::{inputs_named, int_attr, only_attrs, KernelError};

struct Permute {
    /// Input dims (the view).
    dims: Vec<usize>,
    /// Output axis i is input axis `perm[i]`.
    perm: Vec<usize>,
}

impl KernelImpl for Permute {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let x = inputs[0];
        let rank = self.dims.len();
        let mut in_strides = vec![1usize; rank];
        for d in (0..rank.saturating_sub(1)).rev() {
            in_strides[d] = in_strides[d + 1] * self.dims[d + 1];
        }
        let out_dims: Vec<usize> = self.perm.iter().map(|&p| self.dims[p]).collect();
        let strides: Vec<usize> = self.perm.iter().map(|&p| in_strides[p]).collect();
        let (Some(&row), Some(&step)) = (out_dims.last(), strides.last()) else {
            outputs[0].copy_from_slice(x);
            return Ok(());
        };
        if row == 0 {
            return Ok(());
        }
        let outer = &out_dims[..rank - 1];
        outputs[0]
            .par_chunks_mut(row)
            .enumerate()
            .for_each(|(r, y)| {
                // The input offset of output row r.
                let (mut rest, mut at) = (r, 0);
                for (d, &n) in outer.iter().enumerate().rev() {
                    at += (rest % n) * strides[d];
                    rest /= n;
                }
                if step == 1 {
                    y.copy_from_slice(&x[at..at + row]);
                } else {
                    for (j, y) in y.iter_mut().enumerate() {
                        *y = x[at + j * step];
                    }
                }
            });
        Ok(())
    }
}

fn build(b: &Binding, dims: Vec<usize>, perm: Vec<usize>) -> Option<Box<dyn KernelImpl>> {
    let elems: usize = dims.iter().product();
    let fits = inputs_named(b, &["x"])
        && b.input_shapes[0].iter().product::<usize>() == elems
        && b.output_shapes.len() == 1
        && b.output_shapes[0].iter().product::<usize>() == elems;
    let (dims, perm) = simplify(&dims, &perm);
    fits.then(|| Box::new(Permute { dims, perm }) as Box<dyn KernelImpl>)
}

/// The same permutation on fewer, longer axes: axes of size 1 dropped, and
/// input axes that stay adjacent and in order in the output merged into one
/// (e.g. `swap_blocks` of `[24, 128, 64, 1]` is a transpose of `[128, 64]`
/// 24 times, written as rows of 128, not rows of 1).
fn simplify(dims: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<usize>) {
    // Output order of the kept input axes.
    let kept: Vec<usize> = perm.iter().copied().filter(|&p| dims[p] != 1).collect();
    // Runs of consecutive input axes in output order.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &p in &kept {
        match runs.last_mut() {
            Some((_, last))
                if *last + 1 == p || (*last < p && (*last + 1..p).all(|a| dims[a] == 1)) =>
            {
                *last = p
            }
            _ => runs.push((p, p)),
        }
    }
    // Each run becomes one axis; rank the runs by their first input axis.
    let mut by_input: Vec<usize> = (0..runs.len()).collect();
    by_input.sort_by_key(|&r| runs[r].0);
    let new_dims: Vec<usize> = by_input
        .iter()
        .map(|&r| (runs[r].0..=runs[r].1).map(|a| dims[a]).product())
        .collect();
    let mut new_perm = vec![0; runs.len()];
    for (axis, &r) in by_input.iter().enumerate() {
        new_perm[r] = axis;
    }
    (new_dims, new_perm)
}

/// `transpose(x[M, N]) -> y[N, M]`.
pub fn transpose(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    let x = b.input_shapes[0].clone();
    (x.len() == 2 && only_attrs(b, &[])).then_some(())?;
    build(b, x, vec![1, 0])
}

/// `batch_transpose(x[..., M, N]) -> y[..., N, M]`.
pub fn batch_transpose(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    swap_axes(b, 2)
}

/// Axes `r - from_end` and `r - from_end + 1` of the rank-`r` input
/// swapped (`r ≥ from_end`).
fn swap_axes(b: &Binding, from_end: usize) -> Option<Box<dyn KernelImpl>> {
    let x = b.input_shapes[0].clone();
    (x.len() >= from_end && only_attrs(b, &[])).then_some(())?;
    let r = x.len();
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - from_end, r - from_end + 1);
    build(b, x, perm)
}

/// `swap_blocks(x[..., A, B, C]) -> y[..., B, A, C]` (`specs/onnx_nn.tdl`).
pub fn swap_blocks(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    swap_axes(b, 3)
}

/// `transpose_0213(x[A, B, C, D]) -> y[A, C, B, D]`.
pub fn transpose_0213(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    let x = b.input_shapes[0].clone();
    (x.len() == 4 && only_attrs(b, &[])).then_some(())?;
    build(b, x, vec![0, 2, 1, 3])
}

/// `split_heads<heads>(x[B, S, D]) -> y[B, heads, S, D / heads]`.
pub fn split_heads(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    let &[bs, s, d] = b.input_shapes[0].as_slice() else {
        return None;
    };
    let heads = usize::try_from(int_attr(b, "heads")?).ok()?;
    (only_attrs(b, &["heads"]) && heads > 0 && d % heads == 0).then_some(())?;
    build(b, vec![bs, s, heads, d / heads], vec![0, 2, 1, 3])
}

/// `merge_heads(x[B, NH, S, DH]) -> y[B, S, NH·DH]`.
pub fn merge_heads(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    let x = b.input_shapes[0].clone();
    (x.len() == 4 && only_attrs(b, &[])).then_some(())?;
    build(b, x, vec![0, 2, 1, 3])
}
