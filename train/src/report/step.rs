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

/// The line of an evaluation (or of the last step): epoch and step
/// (1-based), `mean` (the mean training loss since the last such line),
/// the held-out loss and accuracy, samples per second, seconds so far.
pub fn epoch_line(s: &StepLog, mean: f32) -> String {
    let test = s.test.map_or(String::new(), |t| {
        format!("  held-out loss {:.4}  accuracy {:.4}", t.loss, t.accuracy)
    });
    format!(
        "epoch {:>3}  step {:>6}  loss {mean:.4}{test}  {:.0} samples/s  {:.1} s",
        s.epoch + 1,
        s.step + 1,
        s.samples_per_second,
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
