//! The lines `tofu train` prints per step: which steps are logged, the
//! `--json` object of a step (in one process or on a launched rank) and
//! the text line of an evaluation or of a launched rank's step.

use serde_json::{json, Value};

use crate::StepLog;

/// Whether step `s` of a run of `steps` steps is logged: every
/// `log_every`-th step and the last.
pub fn logged(s: &StepLog, log_every: usize, steps: usize) -> bool {
    s.step.is_multiple_of(log_every) || s.step + 1 == steps
}

/// The `--json` object of a step: `step`, `epoch`, `loss`,
/// `samples_per_second`, and after an evaluation `test_loss` and
/// `test_accuracy`.
pub fn json(s: &StepLog) -> Value {
    let mut v = json!({
        "step": s.step,
        "epoch": s.epoch,
        "loss": s.loss,
        "samples_per_second": s.samples_per_second,
    });
    if let Some(t) = s.test {
        v["test_loss"] = t.loss.into();
        v["test_accuracy"] = t.accuracy.into();
    }
    v
}

/// The steps since the last [`epoch_line`]: their losses, samples and
/// the training seconds at the start.
#[derive(Clone, Debug, Default)]
pub struct Interval {
    losses: Vec<f32>,
    samples: f64,
    since: Option<f64>,
}

impl Interval {
    /// Count step `s` in.
    pub fn add(&mut self, s: &StepLog) {
        self.losses.push(s.loss);
        // The step's samples: its rate times its seconds.
        self.samples += s.samples_per_second * s.step_seconds;
        self.since.get_or_insert(s.train_seconds - s.step_seconds);
    }

    /// The line of an evaluation (or of the last step) `s` over the steps
    /// counted ([`epoch_line`]), then an empty interval.
    pub fn line(&mut self, s: &StepLog) -> String {
        let mean = self.losses.iter().sum::<f32>() / self.losses.len().max(1) as f32;
        let seconds = s.train_seconds - self.since.unwrap_or(0.0);
        let rate = self.samples / seconds.max(1e-9);
        *self = Interval::default();
        epoch_line(s, mean, rate)
    }
}

/// The line of an evaluation (or of the last step): epoch and step
/// (1-based), `mean` (the mean training loss since the last such line),
/// the held-out loss and accuracy, `rate` (samples per second over the
/// training steps since the last line: checkpoints and evaluations not
/// counted), seconds so far.
pub fn epoch_line(s: &StepLog, mean: f32, rate: f64) -> String {
    let test = s.test.map_or(String::new(), |t| {
        format!("  held-out loss {:.4}  accuracy {:.4}", t.loss, t.accuracy)
    });
    format!(
        "epoch {:>3}  step {:>6}  loss {mean:.4}{test}  {rate:.0} samples/s  {:.1} s",
        s.epoch + 1,
        s.step + 1,
        s.elapsed
    )
}

/// A launched rank's step: its loss where this rank keeps it (a NaN loss
/// is a rank that does not).
pub fn rank_loss(s: &StepLog) -> Option<f32> {
    (!s.loss.is_nan()).then_some(s.loss)
}

/// The `--json` object of a launched rank's step: `rank`, `world_size`,
/// `step`, `epoch`, `loss` (`null` where this rank does not keep it),
/// `samples_per_second`.
pub fn rank_json(s: &StepLog, (rank, world): (usize, usize)) -> Value {
    json!({
        "rank": rank,
        "world_size": world,
        "step": s.step,
        "epoch": s.epoch,
        "loss": rank_loss(s),
        "samples_per_second": s.samples_per_second,
    })
}

/// The text line of a launched rank's step with loss `loss`.
pub fn rank_line(s: &StepLog, loss: f32) -> String {
    format!(
        "step {:>6}  loss {loss:.4}  {:.0} samples/s",
        s.step, s.samples_per_second
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Step `i` of 16 samples in `dt` seconds, `train` seconds of steps
    /// so far, `wall` seconds since the start.
    fn step(i: usize, dt: f64, train: f64, wall: f64) -> StepLog {
        StepLog {
            step: i,
            epoch: 0,
            loss: 1.0,
            samples_per_second: 16.0 / dt,
            elapsed: wall,
            train_seconds: train,
            step_seconds: dt,
            test: None,
        }
    }

    #[test]
    fn the_epoch_line_rate_is_samples_over_training_seconds_since_the_last_line() {
        let mut iv = Interval::default();
        // Ten steps of 0.01 s, then an evaluation of 5 s (wall time only).
        for i in 0..10 {
            let t = 0.01 * (i + 1) as f64;
            iv.add(&step(i, 0.01, t, t));
        }
        let line = iv.line(&step(9, 0.01, 0.1, 5.1));
        assert!(line.contains("  1600 samples/s"), "{line}");
        // The next line counts only its own steps: two of 0.02 s.
        iv.add(&step(10, 0.02, 0.12, 5.12));
        iv.add(&step(11, 0.02, 0.14, 5.14));
        let line = iv.line(&step(11, 0.02, 0.14, 5.14));
        assert!(line.contains("  800 samples/s"), "{line}");
    }
}
