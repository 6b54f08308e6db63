//! The training loop: a [`Prepared`] model's ranks stepped over the
//! batches of a data set, one thread per rank on the backend of
//! [`TrainOptions::exec`] (CPU with an in-process communicator, or one CUDA
//! backend per rank with NCCL or host-staged communication, through
//! `runner::choose`, the seam `tofu run --backend` uses), each rank fed
//! only its own tiles of every batch (uploaded to its device), the loss
//! and the checkpointed state downloaded from the devices.
//!
//! Takes a [`Prepared`] model, the training and held-out parts of a
//! data set ([`Samples`]) and [`TrainOptions`]; gives a [`TrainReport`]: the loss of
//! every step, the trained weights (whole tensors by graph id) and the
//! held-out [`Evaluation`]. A callback sees every step as it completes
//! ([`StepLog`]), for progress lines and JSON logs.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use codegen::TensorId;
use planner::graph::TensorRole;
use runner::choose::{ExecChoice, FedJob};
use runner::{Given, RunOptions};

use crate::batches::Batches;
use crate::checkpoint::{self, Capture};
use crate::evaluate::Evaluation;
use crate::feed::BatchFeed;
use crate::prepare::Prepared;
use crate::samples::Samples;
use crate::TrainError;

/// How long to train, from where, and where checkpoints go.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrainOptions {
    /// The step to stop before (steps are counted from the start of
    /// training, a resumed run included; one batch each).
    pub steps: usize,
    /// Seed of the batch order and of the initial weights' synthetic fill.
    pub seed: u64,
    /// The first step to run: 0, or the steps a resumed checkpoint completed.
    pub start: usize,
    /// Values of weights and optimizer state to start from instead of the
    /// synthetic fill (given weights, or a checkpoint's state), by graph id.
    pub given: Given,
    /// Write a checkpoint into this directory after every this many steps.
    pub checkpoint: Option<(PathBuf, usize)>,
    /// Evaluate the held-out set after every this many steps (0: only at
    /// the end).
    pub eval_every: usize,
    /// Evaluate only the first this many held-out samples (`None`: all).
    pub eval_samples: Option<usize>,
    /// The backend the ranks (and the held-out evaluation) run on: the CPU
    /// by default, or CUDA devices (`tofu train --backend cuda`). Weights,
    /// checkpoints and losses are the same host values either way.
    pub exec: ExecChoice,
}

/// One completed step, as the callback sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepLog {
    /// Step index (0-based).
    pub step: usize,
    /// Epoch of the step (0-based).
    pub epoch: usize,
    /// The step's training loss (the graph's loss on its batch).
    pub loss: f32,
    /// Samples per second over the step (batch / wall seconds of the step,
    /// checkpoints and evaluations not counted).
    pub samples_per_second: f64,
    /// Seconds since training started.
    pub elapsed: f64,
    /// Seconds of training steps since training started: [`Self::elapsed`]
    /// less the checkpoints and held-out evaluations.
    pub train_seconds: f64,
    /// Seconds of this step (checkpoints and evaluations not counted).
    pub step_seconds: f64,
    /// The held-out evaluation after this step, when one was due.
    pub test: Option<Evaluation>,
}

/// Wall time of a run's steps: seconds per step (since the last one) and
/// since the start, for [`StepLog`]s.
pub(crate) struct StepClock {
    start: Instant,
    /// The end of the last step (or of the work after it), and the seconds
    /// of steps so far.
    last: Mutex<(Instant, f64)>,
}

impl StepClock {
    pub(crate) fn new() -> StepClock {
        let start = Instant::now();
        StepClock {
            start,
            last: Mutex::new((start, 0.0)),
        }
    }

    /// Work done after a step's log (a checkpoint, an evaluation) ends
    /// now: it counts in no step's time.
    pub(crate) fn resume(&self) {
        self.last.lock().expect("no poisoned clock").0 = Instant::now();
    }

    /// The log of global step `step`, just completed: its time since the
    /// previous step's, `batch` samples over it, `loss` (NaN when this
    /// process does not hold it), no evaluation.
    pub(crate) fn log(
        &self,
        step: usize,
        per_epoch: usize,
        batch: usize,
        loss: Option<f32>,
    ) -> StepLog {
        let now = Instant::now();
        let (dt, train_seconds) = {
            let mut l = self.last.lock().expect("no poisoned clock");
            let dt = now.duration_since(l.0).as_secs_f64();
            *l = (now, l.1 + dt);
            (dt, l.1)
        };
        StepLog {
            step,
            epoch: step / per_epoch.max(1),
            loss: loss.unwrap_or(f32::NAN),
            samples_per_second: batch as f64 / dt.max(1e-9),
            elapsed: now.duration_since(self.start).as_secs_f64(),
            train_seconds,
            step_seconds: dt,
            test: None,
        }
    }

    /// Seconds since the start.
    pub(crate) fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}

/// What a run gave.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainReport {
    /// Training loss per step run (steps `start..steps`).
    pub losses: Vec<f32>,
    /// Checkpoints written (directories).
    pub checkpoints: Vec<PathBuf>,
    /// Held-out evaluations during training: (step, evaluation).
    pub evaluations: Vec<(usize, Evaluation)>,
    /// The trained weights: whole tensors (row-major) by graph id.
    pub weights: Given,
    /// Held-out loss and accuracy of the trained weights.
    pub test: Option<Evaluation>,
    /// Wall seconds of the training steps (evaluation excluded).
    pub seconds: f64,
    /// Whole batches per epoch.
    pub steps_per_epoch: usize,
}

/// Steps in `epochs` epochs of `train` at the model's batch.
///
/// Errors: [`TrainError::Data`] when the data set has not one whole batch.
pub fn steps_for_epochs(
    prep: &Prepared,
    train: &dyn Samples,
    epochs: usize,
) -> Result<usize, TrainError> {
    Ok(batches(prep, train, 0)?.per_epoch() * epochs)
}

/// The batch order of a run of `prep` on `train` with `seed`.
///
/// Errors: [`TrainError::Data`] when the data set has not one whole batch.
pub fn batches(prep: &Prepared, train: &dyn Samples, seed: u64) -> Result<Batches, TrainError> {
    Batches::new(train.len(), prep.batch, seed).ok_or_else(|| {
        TrainError::Data(format!(
            "{} training samples do not make one batch of {}",
            train.len(),
            prep.batch
        ))
    })
}

/// Train `prep` on `train` and evaluate on `test` (see the module doc);
/// `on_step` is called once per step, in order, after every rank finished it.
///
/// Errors: [`TrainError::Data`] (no whole batch), [`TrainError::Run`] (a
/// rank failed), [`TrainError::Input`] (a step's loss was not kept).
pub fn train(
    prep: &Prepared,
    train: &dyn Samples,
    test: Option<&dyn Samples>,
    opts: TrainOptions,
    on_step: &(dyn Fn(&StepLog) + Sync),
) -> Result<TrainReport, TrainError> {
    if opts.start >= opts.steps {
        return Err(TrainError::Data(format!(
            "nothing to train: the run starts at step {} of {}",
            opts.start, opts.steps
        )));
    }
    let batches = batches(prep, train, opts.seed)?;
    let per_epoch = batches.per_epoch();
    let eval_every = if test.is_some_and(|t| !t.is_empty()) {
        opts.eval_every
    } else {
        0
    };
    let capture = (opts.checkpoint.is_some() || eval_every > 0)
        .then(|| Capture::new(opts.checkpoint.clone(), eval_every, &prep.programs));
    let run_steps = opts.steps - opts.start;
    let feed = BatchFeed::new(
        train,
        batches,
        &prep.tensors,
        (opts.start, run_steps),
        capture.as_ref(),
    );
    let written = Mutex::new(Vec::new());
    let evaluations = Mutex::new(Vec::new());
    let clock = StepClock::new();
    let progress = |done: usize| {
        let local = done - 1;
        let step = opts.start + local;
        // The step's time ends here, before its checkpoint and evaluation.
        let mut log = clock.log(step, per_epoch, prep.batch, feed.loss(local));
        let mut eval = None;
        if let Some(c) = capture.as_ref().filter(|c| c.due(step)) {
            let tiles = c.take();
            if let Some((dir, _)) = c.checkpoint.as_ref().filter(|_| c.checkpoint_due(step)) {
                let w =
                    checkpoint::write(dir, &prep.graph, opts.seed, prep.world(), step + 1, &tiles);
                match w {
                    Ok(d) => written.lock().expect("no poisoned list").push(d),
                    Err(e) => c.fail(format!("checkpoint after step {step}: {e}")),
                }
            }
            if let Some(t) = test.filter(|_| c.eval_due(step)) {
                let e = checkpoint::assemble(&prep.graph, &prep.programs, &tiles)
                    .map_err(TrainError::Data)
                    .and_then(|w| prep.evaluate(&w, t, opts.eval_samples, &opts.exec));
                match e {
                    Ok(e) => {
                        evaluations
                            .lock()
                            .expect("no poisoned list")
                            .push((step, e));
                        eval = Some(e);
                    }
                    Err(e) => c.fail(format!("evaluation after step {step}: {e}")),
                }
            }
        }
        clock.resume();
        log.test = eval;
        on_step(&log);
    };
    let job = FedJob {
        programs: &prep.programs.programs,
        opts: RunOptions {
            steps: run_steps,
            seed: opts.seed,
        },
        progress: Some(&progress),
        given: &opts.given,
        feed: &feed,
    };
    let report = opts.exec.run_job(job).map_err(TrainError::from)?;
    if let Some(e) = capture.as_ref().and_then(Capture::failed) {
        return Err(TrainError::Data(e));
    }
    let seconds = clock.elapsed();
    let losses = feed
        .losses()
        .into_iter()
        .enumerate()
        .map(|(s, l)| {
            l.ok_or_else(|| {
                TrainError::Input(format!("no rank kept the loss of step {}", opts.start + s))
            })
        })
        .collect::<Result<Vec<f32>, _>>()?;
    let weights = trained_weights(prep, &report.outputs);
    let evaluations = evaluations.into_inner().expect("no poisoned list");
    let last_eval = evaluations
        .last()
        .filter(|(s, _)| s + 1 == opts.steps)
        .map(|&(_, e)| e);
    let test = match test {
        _ if last_eval.is_some() => last_eval,
        Some(t) if !t.is_empty() => {
            Some(prep.evaluate(&weights, t, opts.eval_samples, &opts.exec)?)
        }
        _ => None,
    };
    Ok(TrainReport {
        losses,
        checkpoints: written.into_inner().expect("no poisoned list"),
        evaluations,
        weights,
        test,
        seconds,
        steps_per_epoch: per_epoch,
    })
}

/// The weights after the last step: the kept value of each weight's update
/// (a carry `w' → w`), by the weight's id.
fn trained_weights(prep: &Prepared, outputs: &[(TensorId, Vec<f32>)]) -> Given {
    let mut weights = Given::new();
    for c in prep.programs.programs.iter().flat_map(|p| &p.carries) {
        if prep.graph.tensor(c.to).role != TensorRole::Weight || weights.contains_key(&c.to) {
            continue;
        }
        if let Some((_, v)) = outputs.iter().find(|(t, _)| *t == c.from) {
            weights.insert(c.to, v.clone());
        }
    }
    weights
}
