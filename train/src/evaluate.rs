//! Held-out evaluation: the loss and accuracy of trained weights.
//!
//! Takes the unpartitioned programs of the training graph (one rank, the
//! logits kept), the weights (whole tensors by graph id) and a held-out
//! data set ([`Samples`]); runs one step per batch of held-out samples with
//! the weights and the batch given (the step's update is computed and
//! discarded), on the run's backend (`runner::choose`), and gives the mean cross-entropy per prediction and the
//! fraction of right predictions (one per image; one per position for a
//! language model), computed on the host from the logits, so a last,
//! partial batch, padded by repeating samples, counts only its real rows.

use std::sync::Mutex;

use codegen::{Program, Programs, Region, TensorId};
use runner::choose::{CudaComm, ExecChoice, FedJob};
use runner::{Given, RunOptions, StepFeed};

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

/// The held-out batches as a [`StepFeed`]: before step `s` the inputs of
/// batch `s` and the weights (whole: one rank), so every batch sees the
/// same weights whatever the previous step's update carried; after it, the
/// logits, kept per step.
struct EvalFeed<'a> {
    tensors: &'a TaskTensors,
    logits: TensorId,
    weights: &'a Given,
    test: &'a dyn Samples,
    /// Batch indices of each step.
    batches: Vec<Vec<usize>>,
    /// Logits of each step.
    out: Mutex<Vec<Option<Vec<f32>>>>,
}

impl StepFeed for EvalFeed<'_> {
    fn feed(
        &self,
        step: usize,
        program: &Program,
    ) -> Result<Vec<(TensorId, Region, Vec<f32>)>, String> {
        let whole = |t: TensorId| program.tensor(t).map(|i| Region::whole(&i.shape));
        let mut set = Vec::new();
        for (&t, v) in self.weights {
            if let Some(r) = whole(t) {
                set.push((t, r, v.clone()));
            }
        }
        for (k, (t, _)) in self.tensors.inputs.iter().enumerate() {
            let v: Vec<f32> = self.batches[step]
                .iter()
                .flat_map(|&s| self.test.sample(s, k).into_owned())
                .collect();
            let r = whole(*t).ok_or("the evaluation program lacks an input")?;
            set.push((*t, r, v));
        }
        Ok(set)
    }

    fn watched(&self, _: usize) -> Vec<TensorId> {
        vec![self.logits]
    }

    fn observe(&self, step: usize, _: usize, t: TensorId, _: &Region, values: &[f32]) {
        if t == self.logits {
            self.out.lock().expect("no poisoned logits")[step] = Some(values.to_vec());
        }
    }
}

/// Evaluate `weights` on the first `limit` samples of `test` (all with
/// `None`; see the module doc) on the backend of `exec` (one rank, one
/// backend for every batch: the weights and each batch uploaded, the logits
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
    let feed = EvalFeed {
        tensors,
        logits,
        weights,
        test,
        batches: starts
            .iter()
            .map(|&start| (0..batch).map(|i| (start + i) % n).collect())
            .collect(),
        out: Mutex::new(vec![None; starts.len()]),
    };
    let opts = RunOptions {
        steps: starts.len(),
        seed: 0,
    };
    // One rank talks to no one: host-staged, so a launched process needs
    // no NCCL clique for its evaluation.
    let exec = ExecChoice {
        comm: Some(CudaComm::Host),
        ..exec.clone()
    };
    let job = FedJob {
        programs: &one.programs,
        opts,
        progress: None,
        given: weights,
        feed: &feed,
    };
    exec.run_job(job).map_err(TrainError::from)?;
    let (mut loss, mut right, mut predictions) = (0.0, 0usize, 0usize);
    let out = feed.out.into_inner().expect("no poisoned logits");
    for ((start, idx), logits) in starts.iter().zip(&feed.batches).zip(out) {
        let out =
            logits.ok_or_else(|| TrainError::Input("the evaluation run kept no logits".into()))?;
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
