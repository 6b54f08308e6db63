//! Held-out evaluation: test loss and accuracy of trained weights.
//!
//! Takes the unpartitioned programs of the training graph (one rank, the
//! logits kept), the weights (whole tensors by graph id) and a held-out
//! [`DataSet`]; runs one step per batch of held-out samples with the
//! weights and the batch given (the step's update is computed and
//! discarded), and gives the mean cross-entropy and the accuracy over the
//! held-out samples, computed on the host from the logits (so a last,
//! partial batch, padded by repeating samples, counts only its real rows).

use codegen::{Programs, TensorId};
use runner::{run_programs_given, Given, RunOptions};

use crate::data::DataSet;
use crate::feed::ClassifierTensors;
use crate::TrainError;

/// Held-out loss and accuracy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    /// Mean cross-entropy of the softmax of the logits (nats per sample).
    pub loss: f64,
    /// Fraction of samples whose largest logit is their class.
    pub accuracy: f64,
    /// Samples evaluated.
    pub samples: usize,
}

/// Cross-entropy (nats) of `softmax(logits)` at class `y`, and whether the
/// largest logit is `y`.
fn score(logits: &[f32], y: usize) -> (f64, bool) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&v| (v as f64 - max).exp()).sum();
    let best = (0..logits.len())
        .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
        .unwrap_or(0);
    (max + sum.ln() - logits[y] as f64, best == y)
}

/// Evaluate `weights` on `test` (see the module doc): `one` are the
/// training graph's unpartitioned programs with `logits[batch, classes]`
/// kept (`codegen::Program::keep_tiles`).
///
/// Errors: [`TrainError::Run`] when a step fails; [`TrainError::Input`]
/// when the logits are missing from the run's outputs.
pub fn evaluate(
    one: &Programs,
    tensors: ClassifierTensors,
    logits: TensorId,
    weights: &Given,
    test: &DataSet,
    batch: usize,
) -> Result<Evaluation, TrainError> {
    let (mut loss, mut right) = (0.0, 0usize);
    let classes = test.classes;
    for start in (0..test.len()).step_by(batch.max(1)) {
        let idx: Vec<usize> = (0..batch).map(|i| (start + i) % test.len()).collect();
        let real = batch.min(test.len() - start);
        let mut given = weights.clone();
        given.insert(tensors.x, test.subset(&idx).x);
        let mut labels = vec![0.0; batch * classes];
        for (i, &s) in idx.iter().enumerate() {
            labels[i * classes + test.y[s]] = 1.0;
        }
        given.insert(tensors.labels, labels);
        let opts = RunOptions { steps: 1, seed: 0 };
        let ranks = runner::LocalCommunicator::create(1)
            .into_iter()
            .map(|c| (runner::CpuBackend::new(), c))
            .collect();
        let report = run_programs_given(&one.programs, opts, None, ranks, &given)
            .map_err(TrainError::Run)?;
        let out = report
            .outputs
            .iter()
            .find(|(t, _)| *t == logits)
            .map(|(_, v)| v)
            .ok_or_else(|| TrainError::Input("the evaluation run kept no logits".into()))?;
        for (i, &s) in idx.iter().take(real).enumerate() {
            let (l, ok) = score(&out[i * classes..(i + 1) * classes], test.y[s]);
            loss += l;
            right += usize::from(ok);
        }
    }
    let n = test.len().max(1) as f64;
    Ok(Evaluation {
        loss: loss / n,
        accuracy: right as f64 / n,
        samples: test.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_is_cross_entropy_and_argmax() {
        let (l, _) = score(&[0.0, 0.0], 1);
        assert!((l - std::f64::consts::LN_2).abs() < 1e-12);
        let (_, ok) = score(&[2.0, 0.5], 1);
        assert!(!ok);
        let (l, ok) = score(&[1.0, 3.0, 0.0], 1);
        let z = 1f64.exp() + 3f64.exp() + 1.0;
        assert!((l - (z.ln() - 3.0)).abs() < 1e-9);
        assert!(ok);
    }
}
