//! Max and min over the last axis, one pass per row, blocks of rows in
//! parallel on rayon.
//!
//! Takes a bound `reduce_max(x[..., N]) -> y[...]` or `reduce_min`
//! (`specs/reduce.tdl`): `R` rows of `N` contiguous elements (the row max of
//! the logits in the vocabulary-parallel cross-entropy, [2·1024, 50257] in
//! GPT-2's step). Gives a kernel computing what the spec computes, exactly
//! (a max of f32 values is one of them): eight running extrema per row,
//! combined at the end; a NaN is skipped as the interpreter's `f64::max`
//! skips it; an empty row gives −∞ (max) or +∞ (min), the reductions'
//! identities.

use rayon::prelude::*;
use tdl::Binding;

use super::KernelImpl;
use crate::ops::{inputs_named, only_attrs, KernelError};

/// Rows per parallel block.
const BLOCK: usize = 16;
/// Running extrema per row (one vector register of f32).
const LANES: usize = 8;

struct Extremum {
    n: usize,
    min: bool,
}

/// The extremum of a row by `pick` from `init`.
#[inline(always)]
fn row(x: &[f32], init: f32, pick: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = [init; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = pick(*a, v);
        }
    }
    let tail = chunks.remainder().iter().fold(init, |a, &v| pick(a, v));
    acc.iter().fold(tail, |a, &v| pick(a, v))
}

impl KernelImpl for Extremum {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let (n, x) = (self.n, inputs[0]);
        outputs[0]
            .par_chunks_mut(BLOCK)
            .enumerate()
            .for_each(|(c, y)| {
                for (r, y) in y.iter_mut().enumerate() {
                    let at = (c * BLOCK + r) * n;
                    let xr = &x[at..at + n];
                    *y = if self.min {
                        row(xr, f32::INFINITY, f32::min)
                    } else {
                        row(xr, f32::NEG_INFINITY, f32::max)
                    };
                }
            });
        Ok(())
    }
}

fn build(b: &Binding, min: bool) -> Option<Box<dyn KernelImpl>> {
    if !inputs_named(b, &["x"]) || !only_attrs(b, &[]) {
        return None;
    }
    let (&n, batch) = b.input_shapes[0].split_last()?;
    (b.output_shapes[0] == batch).then(|| Box::new(Extremum { n, min }) as Box<dyn KernelImpl>)
}

/// `reduce_max(x[..., N]) -> y[...]`.
pub fn reduce_max(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, false)
}

/// `reduce_min(x[..., N]) -> y[...]`.
pub fn reduce_min(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, true)
}
