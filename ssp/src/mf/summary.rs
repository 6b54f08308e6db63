//! What `tofu ssp mf`, `tofu ssp worker --app mf` and `tofu ssp bench`
//! print of an MF run: the report with the settings it ran under
//! ([`MfSummary`]) and the benchmark's table ([`BenchSummary`]), as text
//! ([`fmt::Display`]) and as serde values whose fields are in sorted
//! order (printed through `serde_json::Value`, which sorts keys at every
//! level).
//!
//! Takes an [`MfReport`] or the [`BenchRun`]s of [`super::bench::bench`];
//! gives text and `Serialize` values. Units: RMSE, seconds, bytes, bytes
//! per second per client.

use std::fmt;

use serde::Serialize;

use super::bench::BenchRun;
use super::MfReport;

/// An MF run's report with the settings it ran under (the `--json`
/// object: the report's fields and these).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct MfSummary<'a> {
    /// What the run measured.
    #[serde(flatten)]
    pub report: &'a MfReport,
    /// AdaRevision on the servers.
    pub adarevision: bool,
    /// Bandwidth budget, bytes per second per client (0: off).
    pub bandwidth: u64,
    /// A worker process: its client index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<usize>,
    /// Client row caches (processes).
    pub clients: usize,
    /// A worker process: the clock it resumed at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<u32>,
    /// Server shards.
    pub shards: usize,
    /// Staleness s in clocks.
    pub staleness: u32,
    /// Worker threads.
    pub workers: usize,
}

/// One line: the held-out RMSE, epochs, seconds and bytes sent.
impl fmt::Display for MfSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.report;
        writeln!(
            f,
            "held-out RMSE {:.4} after {} epochs, {:.2} s, {} bytes of updates sent",
            r.heldout_rmse, r.epochs, r.seconds, r.bytes_sent
        )
    }
}

/// The benchmark's runs with what they were run for (the `--json`
/// object).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct BenchSummary<'a> {
    /// Epochs per run.
    pub epochs: u32,
    /// Order of early sends in the managed run.
    pub priority: &'a str,
    /// BSP, SSP and SSP + managed communication.
    pub runs: &'a [BenchRun],
    /// The held-out RMSE to reach.
    pub target_rmse: f64,
    /// Worker threads.
    pub workers: usize,
}

/// `x` with `digits` decimals, `-` for none.
fn or_dash(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

/// A table of the runs (epochs and seconds to the target, seconds, bytes,
/// held-out RMSE, ratios to BSP), then a line saying what the target was.
impl fmt::Display for BenchSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<12} {:>3} {:>10} {:>9} {:>9} {:>8} {:>12} {:>9} {:>10} {:>11}",
            "config",
            "s",
            "bandwidth",
            "epochs→t",
            "secs→t",
            "secs",
            "bytes sent",
            "held-out",
            "time/BSP",
            "epochs/BSP"
        )?;
        for r in self.runs {
            writeln!(
                f,
                "{:<12} {:>3} {:>10} {:>9} {:>9} {:>8.2} {:>12} {:>9.4} {:>10} {:>11}",
                r.config,
                r.staleness,
                r.bandwidth,
                r.epochs_to_target
                    .map_or_else(|| "-".to_string(), |e| e.to_string()),
                or_dash(r.seconds_to_target, 2),
                r.seconds,
                r.bytes_sent,
                r.heldout_rmse,
                or_dash(r.seconds_to_target_vs_bsp, 3),
                or_dash(r.epochs_to_target_vs_bsp, 3),
            )?;
        }
        writeln!(
            f,
            "target: held-out RMSE ≤ {} (\"-\": not reached in {} epochs); ratios are run / BSP, below 1 is faster",
            self.target_rmse, self.epochs
        )
    }
}
