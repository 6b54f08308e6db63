//! Comparing a partitioned run with the unpartitioned one.
//!
//! Takes two [`RunReport`]s of the same graph and data (e.g. k workers and
//! k = 1); gives the largest relative error over their common outputs (the
//! loss, updated weights and optimizer state after the last step). Per
//! tensor the error is normwise: `‖a − b‖₂ / max(‖b‖₂, 1e-3·√n)`. The floor
//! (an RMS of 1e-3) keeps tensors that are zero in exact arithmetic (e.g.
//! the gradient of an attention key bias, of a batch-norm shift followed by
//! another normalisation) from turning f32 round-off of order 1e-9 into a
//! "relative error" of order 1: below that RMS the comparison is absolute.

use crate::exec::RunReport;

/// Per-tensor relative errors and their maximum (see the module doc).
/// Gives `(max, per tensor)`; `f64::INFINITY` for a tensor missing from one
/// side or of a different length, or for a non-finite value.
pub fn max_rel_error(
    run: &RunReport,
    reference: &RunReport,
) -> (f64, Vec<(codegen::TensorId, f64)>) {
    let mut per = Vec::new();
    for (t, b) in &reference.outputs {
        let e = match run.outputs.iter().find(|(u, _)| u == t) {
            Some((_, a)) if a.len() == b.len() => {
                let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
                let nd: f64 = a
                    .iter()
                    .zip(b)
                    .map(|(x, y)| (*x as f64 - *y as f64).powi(2))
                    .sum::<f64>()
                    .sqrt();
                let floor = 1e-3 * (b.len().max(1) as f64).sqrt();
                if nd.is_finite() {
                    nd / nb.max(floor)
                } else {
                    f64::INFINITY
                }
            }
            _ => f64::INFINITY,
        };
        per.push((*t, e));
    }
    let max = per.iter().fold(0.0f64, |m, (_, e)| m.max(*e));
    (max, per)
}
