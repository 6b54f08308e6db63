//! What `tofu loops` prints of a run: MF ([`MfSummary`]), logistic
//! regression ([`LrSummary`]) and the benchmark ([`BenchSummary`]), each
//! as text lines ([`fmt::Display`]) and as the `--json` object (keys
//! sorted; the command prints it pretty).
//!
//! Takes the applications' reports ([`MfReport`], [`LrReport`], [`Bench`])
//! with the settings they ran under; gives text and `serde_json` values.
//! Units: seconds, RMSE, log-loss, DistArray elements.

use std::fmt;

use serde_json::{json, Value};

use super::bench::Bench;
use super::lr::LrReport;
use super::mf::MfReport;
use crate::DepVec;

/// The mean of `x` (0 when empty).
fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len().max(1) as f64
}

/// Each dependence vector's components, as JSON wants them.
fn components(dvecs: &[DepVec]) -> Vec<Vec<String>> {
    dvecs.iter().map(DepVec::components).collect()
}

/// An MF run on `workers` threads.
#[derive(Clone, Copy, Debug)]
pub struct MfSummary<'a> {
    /// What the run measured.
    pub report: &'a MfReport,
    /// Worker threads.
    pub workers: usize,
}

impl MfSummary<'_> {
    /// The `--json` object: `schedule`, `workers`, `schedule_detail`,
    /// `dependence_vectors`, `comm_elements_per_epoch`, `rmse_per_epoch`,
    /// `heldout_rmse_per_epoch`, `heldout_rmse`, `seconds_per_epoch`.
    pub fn json(&self) -> Value {
        let rep = self.report;
        json!({
            "schedule": rep.schedule,
            "workers": self.workers,
            "schedule_detail": rep.detail,
            "dependence_vectors": components(&rep.dvecs),
            "comm_elements_per_epoch": rep.comm_elements,
            "rmse_per_epoch": rep.train_rmse,
            "heldout_rmse_per_epoch": rep.heldout_rmse,
            "heldout_rmse": rep.heldout_rmse.last(),
            "seconds_per_epoch": rep.seconds,
        })
    }
}

/// The schedule, dependence vectors, elements per epoch, final held-out
/// RMSE and mean seconds per epoch.
impl fmt::Display for MfSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rep = self.report;
        let vs: Vec<String> = rep.dvecs.iter().map(|v| v.to_string()).collect();
        writeln!(f, "schedule            {}", rep.schedule)?;
        writeln!(f, "dependence vectors  {}", vs.join(" "))?;
        writeln!(f, "elements per epoch  {}", rep.comm_elements)?;
        writeln!(
            f,
            "held-out RMSE       {:.4}",
            rep.heldout_rmse.last().copied().unwrap_or(f64::NAN)
        )?;
        writeln!(f, "seconds per epoch   {:.3} (mean)", mean(&rep.seconds))
    }
}

/// A logistic-regression run on `workers` threads.
#[derive(Clone, Copy, Debug)]
pub struct LrSummary<'a> {
    /// What the run measured.
    pub report: &'a LrReport,
    /// Worker threads.
    pub workers: usize,
}

impl LrSummary<'_> {
    /// The `--json` object: `schedule`, `workers`, `dependence_vectors`,
    /// `loss_per_epoch`, `seconds_per_epoch`.
    pub fn json(&self) -> Value {
        let rep = self.report;
        json!({
            "schedule": rep.schedule, "workers": self.workers,
            "dependence_vectors": components(&rep.dvecs),
            "loss_per_epoch": rep.loss, "seconds_per_epoch": rep.seconds,
        })
    }
}

/// The schedule, final log-loss and mean seconds per epoch.
impl fmt::Display for LrSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rep = self.report;
        writeln!(f, "schedule           {}", rep.schedule)?;
        writeln!(
            f,
            "final log-loss     {:.5}",
            rep.loss.last().copied().unwrap_or(f64::NAN)
        )?;
        writeln!(f, "seconds per epoch  {:.3} (mean)", mean(&rep.seconds))
    }
}

/// The benchmark with the settings it ran under.
#[derive(Clone, Copy, Debug)]
pub struct BenchSummary<'a> {
    /// What the benchmark measured.
    pub bench: &'a Bench,
    /// Epochs timed per worker count.
    pub epochs: usize,
    /// Most epochs tried towards the target.
    pub max_epochs: usize,
    /// Target held-out RMSE.
    pub target: f64,
    /// Cores visible to the process.
    pub cores: usize,
}

impl BenchSummary<'_> {
    /// The `--json` object: `seconds_per_epoch` (per worker count:
    /// `workers`, `schedule`, `median_seconds`), `target_rmse`,
    /// `epochs_to_target`, `heldout_rmse_per_epoch`.
    pub fn json(&self) -> Value {
        let b = self.bench;
        let (eo, ed) = b.epochs_to_target;
        json!({
            "seconds_per_epoch": b.times.iter().map(|(w, s, t)| json!({"workers": w, "schedule": s, "median_seconds": t})).collect::<Vec<_>>(),
            "target_rmse": self.target,
            "epochs_to_target": {"orion_unordered_2d_4_workers": eo, "data_parallel_4_workers": ed},
            "heldout_rmse_per_epoch": {"orion": b.orion.heldout_rmse, "data_parallel": b.data_parallel.heldout_rmse},
        })
    }
}

/// Median seconds per epoch per worker count, then epochs to the target
/// RMSE of both schedules.
impl fmt::Display for BenchSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.bench;
        let (eo, ed) = b.epochs_to_target;
        writeln!(
            f,
            "SGD MF, MovieLens-100K (90/10), rank 16: median seconds per epoch over {} epochs ({} cores visible)",
            self.epochs, self.cores
        )?;
        for (w, s, t) in &b.times {
            writeln!(f, "  {w} worker(s)  {s:<13} {t:.4} s")?;
        }
        let show = |e: Option<usize>| {
            e.map_or(format!("not within {} epochs", self.max_epochs), |e| {
                e.to_string()
            })
        };
        writeln!(
            f,
            "epochs to held-out RMSE ≤ {} with 4 workers:",
            self.target
        )?;
        writeln!(f, "  {:<24} {}", b.orion.schedule, show(eo))?;
        writeln!(f, "  {:<24} {}", "data-parallel (1 sync/epoch)", show(ed))
    }
}
