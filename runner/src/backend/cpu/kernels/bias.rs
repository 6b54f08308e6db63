//! Bias rows and their gradients (`specs/elementwise.tdl`): a bias added to
//! every row, and its gradient, the column sums over all rows. The ONNX
//! exports add a bias after every matmul (72 `bias_add` and `sum_leading`
//! per BERT-base step).
//!
//! Takes a bound `bias_add(x[..., N], b[N]) -> y[..., N]`,
//! `bias_add2(x[..., G, H], b[G, H]) -> y[..., G, H]`,
//! `sum_leading(dy[..., N]) -> db[N]` or `sum_leading2(dy[..., G, H]) ->
//! db[G, H]`: `x`/`dy` seen as `R` rows of the bias's `N` (or `G·H`)
//! elements. Gives a kernel computing what the spec computes: `x + b` in f32
//! (one f32 addition is the f64 one rounded), the sums in f64 over the rows
//! in order (the spec's order), each stored as f32. Blocks of rows (of
//! columns for the sums) run in parallel on rayon; the sums do not depend
//! on the thread count. A constructor declines (`None`) an instance whose
//! tensors are not the shipped spec's.

use rayon::prelude::*;
use tdl::Binding;

use super::KernelImpl;
use crate::ops::{inputs_named, only_attrs, outputs_named, KernelError};

/// Elements per parallel block of rows (at least one row).
const BLOCK: usize = 1 << 14;

/// Columns per parallel block of a column sum.
const COLUMNS: usize = 64;

/// Elements below which a column sum runs on one thread (one pass at
/// memory speed takes less than a fork-join of the pool).
const PARALLEL: usize = 1 << 18;

/// The row length `N` (the bias's element count) of a bias op whose
/// row-shaped tensor (`x` or `dy`) has shape `rows` and bias `bias`: the
/// trailing dims of `rows` must be `bias`'s dims.
fn row_len(rows: &[usize], bias: &[usize]) -> Option<usize> {
    let split = rows.len().checked_sub(bias.len())?;
    (rows[split..] == *bias).then(|| bias.iter().product())
}

struct BiasAdd {
    n: usize,
}

impl KernelImpl for BiasAdd {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let (x, b, n) = (inputs[0], inputs[1], self.n);
        if n == 0 {
            return Ok(());
        }
        let block = n * (BLOCK / n).max(1);
        outputs[0]
            .par_chunks_mut(block)
            .zip(x.par_chunks(block))
            .for_each(|(y, x)| {
                for (y, x) in y.chunks_exact_mut(n).zip(x.chunks_exact(n)) {
                    for ((y, &x), &c) in y.iter_mut().zip(x).zip(b) {
                        *y = x + c;
                    }
                }
            });
        Ok(())
    }
}

/// `bias_add(x[..., N], b[N]) -> y[..., N]` and `bias_add2(x[..., G, H],
/// b[G, H]) -> y[..., G, H]`: `y = x + b` on every row.
pub fn bias_add(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    let fits = only_attrs(b, &[])
        && inputs_named(b, &["x", "b"])
        && outputs_named(b, &["y"])
        && b.output_shapes[0] == b.input_shapes[0];
    let n = row_len(&b.input_shapes[0], &b.input_shapes[1]).filter(|_| fits)?;
    Some(Box::new(BiasAdd { n }))
}

struct SumLeading {
    n: usize,
}

impl KernelImpl for SumLeading {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let (dy, n) = (inputs[0], self.n);
        if n == 0 {
            return Ok(());
        }
        // Columns lo..lo + db.len(), each summed over the rows in order.
        let columns = |lo: usize, db: &mut [f32]| {
            let mut acc = vec![0.0f64; db.len()];
            for row in dy.chunks_exact(n) {
                for (a, &v) in acc.iter_mut().zip(&row[lo..lo + db.len()]) {
                    *a += v as f64;
                }
            }
            for (o, &a) in db.iter_mut().zip(&acc) {
                *o = a as f32;
            }
        };
        if dy.len() < PARALLEL {
            columns(0, outputs[0]);
        } else {
            outputs[0]
                .par_chunks_mut(COLUMNS)
                .enumerate()
                .for_each(|(blk, db)| columns(blk * COLUMNS, db));
        }
        Ok(())
    }
}

/// `sum_leading(dy[..., N]) -> db[N]` and `sum_leading2(dy[..., G, H]) ->
/// db[G, H]`: the sum of `dy`'s rows.
pub fn sum_leading(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    let fits = only_attrs(b, &[])
        && inputs_named(b, &["dy"])
        && outputs_named(b, &["db"])
        && b.output_shapes.len() == 1;
    let n = row_len(&b.input_shapes[0], &b.output_shapes[0]).filter(|_| fits)?;
    Some(Box::new(SumLeading { n }))
}
