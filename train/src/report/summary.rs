//! The summary `tofu train` prints at the end: the held-out loss and
//! accuracy of the trained weights, steps, seconds and checkpoints; in one
//! process ([`TrainSummary`]) or on a launched rank ([`RankSummary`]).

use std::fmt;

use serde_json::{json, Value};

use crate::rank_trainer::RankTrainReport;
use crate::TrainReport;

/// The end of a run in one process.
#[derive(Clone, Copy, Debug)]
pub struct TrainSummary<'a> {
    /// Workers (ranks).
    pub workers: usize,
    /// The first step run.
    pub start: usize,
    /// The step the run stopped before.
    pub steps: usize,
    /// What training gave.
    pub report: &'a TrainReport,
    /// A corpus's unigram entropy (nats per byte), the loss to beat.
    pub unigram: Option<f64>,
}

impl TrainSummary<'_> {
    /// The final `--json` object: `done`, `workers`, `steps`,
    /// `start_step`, `checkpoints`, `steps_per_epoch`, `seconds`,
    /// `final_loss`, `test_loss`, `test_accuracy`, `test_samples`,
    /// `unigram_entropy`.
    pub fn json(&self) -> Value {
        let (r, test) = (self.report, self.report.test);
        let checkpoints: Vec<String> = r
            .checkpoints
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        json!({
            "done": true,
            "workers": self.workers,
            "steps": self.steps,
            "start_step": self.start,
            "checkpoints": checkpoints,
            "steps_per_epoch": r.steps_per_epoch,
            "seconds": r.seconds,
            "final_loss": r.losses.last(),
            "test_loss": test.map(|t| t.loss),
            "test_accuracy": test.map(|t| t.accuracy),
            "test_samples": test.map(|t| t.samples),
            "unigram_entropy": self.unigram,
        })
    }
}

/// The held-out line (and the unigram entropy to beat); nothing without
/// an evaluation.
impl fmt::Display for TrainSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(t) = self.report.test else {
            return Ok(());
        };
        writeln!(
            f,
            "trained steps {}..{} in {:.2} s; held-out loss {:.4}, accuracy {:.4} ({} samples)",
            self.start, self.steps, self.report.seconds, t.loss, t.accuracy, t.samples
        )?;
        if let Some(h) = self.unigram {
            writeln!(f, "the corpus's unigram entropy: {h:.4} nats per byte (a model of byte frequencies alone)")?;
        }
        Ok(())
    }
}

/// The end of a run on one launched rank.
#[derive(Clone, Copy, Debug)]
pub struct RankSummary<'a> {
    /// This rank.
    pub rank: usize,
    /// Ranks.
    pub world: usize,
    /// Steps of the run.
    pub steps: usize,
    /// What this rank's training gave.
    pub report: &'a RankTrainReport,
}

impl RankSummary<'_> {
    /// The final `--json` object: `rank`, `world_size`, `done`, `steps`,
    /// `seconds`, `final_loss` (where this rank keeps it), `test_loss`,
    /// `test_accuracy` (rank 0).
    pub fn json(&self) -> Value {
        let t = self.report.test;
        json!({
            "rank": self.rank,
            "world_size": self.world,
            "done": true,
            "steps": self.steps,
            "seconds": self.report.seconds,
            "final_loss": self.report.losses.last().copied().flatten(),
            "test_loss": t.map(|t| t.loss),
            "test_accuracy": t.map(|t| t.accuracy),
        })
    }
}

/// The held-out line (rank 0); nothing elsewhere.
impl fmt::Display for RankSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(t) = self.report.test else {
            return Ok(());
        };
        writeln!(
            f,
            "trained {} steps in {:.2} s on {} processes; held-out loss {:.4}, accuracy {:.4}",
            self.steps, self.report.seconds, self.world, t.loss, t.accuracy
        )
    }
}
