//! Held-out evaluation: the loss and accuracy of trained weights.
//!
//! Takes the unpartitioned programs of the training graph (one rank, the
//! logits kept), the weights (whole tensors by graph id) and a held-out
//! data set ([`Samples`]); runs one step per batch of held-out samples with
//! the weights and the batch given (the step's update is computed and
//! discarded), on the run's backend (`runner::choose`), and gives the mean
//! cross-entropy per prediction and the
//! fraction of right predictions (one per image; one per position for a
//! language model), computed on the host from the logits, so a last,
//! partial batch, padded by repeating samples, counts only its real rows.

use codegen::{Programs, TensorId};
use runner::choose::{CudaComm, ExecChoice, FedJob};
use runner::{Given, NoFeed, RunOptions};

use crate::feed::TaskTensors;
use crate::samples::Samples;
use crate::TrainError;

/// Held-out loss and accuracy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    /// Mean cross-entropy per prediction (nats).
    pub loss: f64,
    /// Fraction of predictions whose largest logit is right.
    pub accuracy: f64,
    /// Samples evaluated.
    pub samples: usize,
}

/// Evaluate `weights` on the first `limit` samples of `test` (all with
/// `None`; see the module doc) on the backend of `exec` (one rank; per
/// batch one step with the weights and the batch uploaded, the logits
/// downloaded): `one` are the training graph's unpartitioned programs with
/// `logits[batch, …]` kept (`codegen::Program::keep_tiles`).
///
/// Errors: [`TrainError::Run`] when a step fails; [`TrainError::Backend`]
/// when the backend cannot start; [`TrainError::Input`] when the logits
/// are missing from the run's outputs.
pub fn evaluate(
    one: &Programs,
    tensors: &TaskTensors,
    logits: TensorId,
    weights: &Given,
    test: &dyn Samples,
    (batch, limit): (usize, Option<usize>),
    exec: &ExecChoice,
) -> Result<Evaluation, TrainError> {
    let n = limit.map_or(test.len(), |l| l.min(test.len()));
    let starts: Vec<usize> = (0..n).step_by(batch.max(1)).collect();
    if starts.is_empty() {
        return Ok(Evaluation {
            loss: 0.0,
            accuracy: 0.0,
            samples: 0,
        });
    }
    // One rank talks to no one: host-staged, so a launched process needs
    // no NCCL clique for its evaluation.
    let exec = ExecChoice {
        comm: Some(CudaComm::Host),
        ..exec.clone()
    };
    let (mut loss, mut right, mut predictions) = (0.0, 0usize, 0usize);
    for start in starts {
        // One step per batch from the given weights: the programs update
        // and carry the weights, so a second step would see updated ones.
        let idx: Vec<usize> = (0..batch).map(|i| (start + i) % n).collect();
        let mut given = weights.clone();
        for (k, (t, _)) in tensors.inputs.iter().enumerate() {
            let v: Vec<f32> = idx
                .iter()
                .flat_map(|&s| tensors.sample(test, s, k).into_owned())
                .collect();
            given.insert(*t, v);
        }
        let job = FedJob {
            programs: &one.programs,
            opts: RunOptions { steps: 1, seed: 0 },
            progress: None,
            given: &given,
            feed: &NoFeed,
        };
        let report = exec.run_job(job).map_err(TrainError::from)?;
        let out = report
            .outputs
            .iter()
            .find(|(t, _)| *t == logits)
            .map(|(_, v)| v)
            .ok_or_else(|| TrainError::Input("the evaluation run kept no logits".into()))?;
        let per = out.len() / batch.max(1);
        for (i, &s) in idx.iter().take(batch.min(n - start)).enumerate() {
            let (l, ok, p) = test.score(s, &out[i * per..(i + 1) * per]);
            loss += l;
            right += ok;
            predictions += p;
        }
    }
    let p = predictions.max(1) as f64;
    Ok(Evaluation {
        loss: loss / p,
        accuracy: right as f64 / p,
        samples: n,
    })
}
