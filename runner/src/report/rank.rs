//! The report of one rank of `tofu run` under a launcher: its step times,
//! the bytes it sent (and the plan's prediction for it) and its peak
//! memory.

use std::fmt;

use serde_json::{json, Value};

use crate::RankReport;

/// One launched rank's run as `tofu run` reports it.
#[derive(Clone, Copy, Debug)]
pub struct RankSummary<'a> {
    /// This process's rank.
    pub rank: usize,
    /// Ranks in the run.
    pub world: usize,
    /// Steps run.
    pub steps: usize,
    /// Bytes the plan's transfers send from this rank over all steps.
    pub predicted_bytes: u64,
    /// What the rank measured.
    pub report: &'a RankReport,
}

impl RankSummary<'_> {
    /// Bytes this rank sent over all steps.
    fn sent(&self) -> u64 {
        self.report.bytes_sent.iter().sum()
    }

    /// The `--json` object: `rank`, `world_size`, `steps`, `step_seconds`,
    /// `bytes_sent`, `predicted_bytes`, `peak_bytes`.
    pub fn json(&self) -> Value {
        json!({
            "rank": self.rank,
            "world_size": self.world,
            "steps": self.steps,
            "step_seconds": self.report.step_seconds,
            "bytes_sent": self.sent(),
            "predicted_bytes": self.predicted_bytes,
            "peak_bytes": self.report.peak_bytes,
        })
    }
}

/// One line: steps, mean seconds per step, bytes sent against the plan,
/// peak bytes.
impl fmt::Display for RankSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.report;
        let mean = r.step_seconds.iter().sum::<f64>() / r.step_seconds.len().max(1) as f64;
        writeln!(
            f,
            "rank {} of {}: {} step(s), {mean:.4} s per step, {} bytes sent (plan: {}), peak {} bytes",
            self.rank,
            self.world,
            self.steps,
            self.sent(),
            self.predicted_bytes,
            r.peak_bytes
        )
    }
}
