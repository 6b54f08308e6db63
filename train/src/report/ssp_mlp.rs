//! What `tofu ssp mlp` prints of a run ([`crate::ssp_mlp`]): the first
//! line ([`header`]) and one per epoch ([`EpochEnd`]'s `Display`) on
//! stderr; at the end the loss and test accuracy per epoch, the epochs to a
//! target accuracy, seconds and bytes sent, with the settings the run had.
//!
//! Takes an [`SspMlp`] or its [`SspMlpRun`] and the settings; gives text
//! and [`SspMlpSummary`], whose `Serialize` is the `--json` object (fields
//! in declaration order, as `serde_json::to_string` writes them) and whose
//! [`fmt::Display`] is the text line.

use std::fmt;

use serde::Serialize;

use crate::ssp_mlp::{EpochEnd, SspMlp, SspMlpOptions, SspMlpRun};

/// What an MLP run measured, with its settings.
#[derive(Clone, Debug, Serialize)]
pub struct SspMlpSummary {
    /// Mean training loss per epoch.
    pub loss_per_epoch: Vec<f64>,
    /// Worker 0's test accuracy after each epoch (fraction).
    pub accuracy_per_epoch: Vec<f64>,
    /// The test accuracy after the last epoch (0 without epochs).
    pub test_accuracy: f64,
    /// Epochs run.
    pub epochs: u32,
    /// The test accuracy whose first reach is reported.
    pub target_accuracy: f64,
    /// The first epoch (from 1) at the target accuracy, if any.
    pub epochs_to_target: Option<u32>,
    /// Seconds from the workers' start to the end.
    pub seconds: f64,
    /// Bytes of updates the clients sent.
    pub bytes_sent: u64,
    /// Worker threads.
    pub workers: usize,
    /// Staleness s in clocks.
    pub staleness: u32,
    /// The fraction of each tensor's entries sent per step, if limited.
    pub top_k: Option<f32>,
}

impl SspMlpSummary {
    /// The summary of `run` made with `opts`, against `target_accuracy`.
    pub fn new(run: SspMlpRun, opts: &SspMlpOptions, target_accuracy: f64) -> Self {
        let accuracy_per_epoch = run.accuracy_per_epoch;
        SspMlpSummary {
            loss_per_epoch: run.loss_per_epoch,
            test_accuracy: accuracy_per_epoch.last().copied().unwrap_or(0.0),
            epochs_to_target: accuracy_per_epoch
                .iter()
                .position(|&x| x >= target_accuracy)
                .map(|e| e as u32 + 1),
            accuracy_per_epoch,
            epochs: opts.epochs,
            target_accuracy,
            seconds: run.seconds,
            bytes_sent: run.bytes_sent,
            workers: opts.workers,
            staleness: opts.staleness,
            top_k: opts.top_k,
        }
    }
}

/// One line: the test accuracy, epochs, seconds and bytes sent.
impl fmt::Display for SspMlpSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "test accuracy {:.4} after {} epochs, {:.2} s, {} bytes of updates sent",
            self.test_accuracy, self.epochs, self.seconds, self.bytes_sent
        )
    }
}

/// The first line: images for training and test, workers, clocks of a
/// batch per epoch, staleness and (when set) top-k.
pub fn header(run: &SspMlp<'_>, opts: &SspMlpOptions) -> String {
    format!(
        "ssp mlp: {} train / {} test images, {} workers × {} clocks of batch {} per epoch, s = {}{}",
        run.train_len(),
        run.test_len(),
        opts.workers,
        run.clocks_per_epoch(),
        opts.batch,
        opts.staleness,
        opts.top_k.map(|f| format!(", top-k {f}")).unwrap_or_default()
    )
}

/// Worker 0's loss and test accuracy after the epoch, and the seconds so
/// far (no newline).
impl fmt::Display for EpochEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "epoch {}: worker 0 loss {:.4}, test accuracy {:.4} ({:.1} s)",
            self.epoch, self.loss, self.accuracy, self.seconds
        )
    }
}
