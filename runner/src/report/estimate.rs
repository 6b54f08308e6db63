//! The report of `tofu run --estimate GPU`: the static cost model of one
//! CUDA step per rank ([`crate::backend::cuda::estimate`]), as a table of
//! the slowest rank's operators or one JSON object. A model, not a
//! measurement: both say so.

use std::fmt;

use program::Program;
use serde_json::{json, Value};

use crate::backend::cuda::estimate::{estimate_program, Roofline, StepEstimate};
use crate::ExecError;

/// The estimate of every rank of a plan on one modelled GPU.
#[derive(Clone, Debug)]
pub struct EstimateSummary {
    /// The model's name.
    pub model: String,
    /// The GPU modelled.
    pub gpu: Roofline,
    /// One estimate per rank.
    pub ranks: Vec<StepEstimate>,
    /// The rank with the longest step.
    pub slowest: usize,
}

impl EstimateSummary {
    /// Estimates every program of `programs` on `gpu`.
    ///
    /// Errors: as [`estimate_program`].
    pub fn new(model: &str, programs: &[Program], gpu: Roofline) -> Result<Self, ExecError> {
        let ranks: Vec<StepEstimate> = programs
            .iter()
            .map(|p| estimate_program(p, &gpu))
            .collect::<Result<_, _>>()?;
        let slowest = (0..ranks.len())
            .max_by(|&a, &b| ranks[a].seconds().total_cmp(&ranks[b].seconds()))
            .unwrap_or(0);
        Ok(EstimateSummary {
            model: model.to_string(),
            gpu,
            ranks,
            slowest,
        })
    }

    /// The `--json` object: `model`, `gpu`, `estimate` (what it is),
    /// `step_seconds_per_rank`, `slowest_rank` and the slowest rank's
    /// `ops` (`op`, `provider`, `instances`, `launches`, `bytes`, `flops`,
    /// `seconds`).
    pub fn json(&self) -> Value {
        let step: Vec<f64> = self.ranks.iter().map(StepEstimate::seconds).collect();
        let ops: Vec<_> = self.ranks[self.slowest]
            .ops
            .iter()
            .map(|(op, n, e)| {
                json!({
                    "op": op, "provider": e.provider, "instances": n, "launches": e.launches,
                    "bytes": e.bytes, "flops": e.flops, "seconds": e.seconds,
                })
            })
            .collect();
        json!({
            "model": self.model,
            "gpu": self.gpu.name,
            "estimate": "static roofline model, not a measurement",
            "step_seconds_per_rank": step,
            "slowest_rank": self.slowest,
            "ops": ops,
        })
    }
}

/// The GPU's figures, then the slowest rank's operators and its total.
impl fmt::Display for EstimateSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (gpu, slowest) = (&self.gpu, self.slowest);
        writeln!(
            f,
            "{}: estimated step on a modelled {} ({:.2} TB/s, {:.0} TFLOP/s FP32, {:.0} TFLOP/s \
             FP64, {:.0} µs a launch), rank {slowest} of {} (the slowest)",
            self.model,
            gpu.name.to_uppercase(),
            gpu.bandwidth / 1e12,
            gpu.f32_flops / 1e12,
            gpu.f64_flops / 1e12,
            gpu.launch * 1e6,
            self.ranks.len()
        )?;
        writeln!(
            f,
            "a static roofline model, not a measurement: index arithmetic, caches, allocation, \
             memsets and communication are not modelled"
        )?;
        let r = &self.ranks[slowest];
        let total = r.seconds();
        writeln!(
            f,
            "{:<30} {:<12} {:>6} {:>8} {:>10} {:>10} {:>10} {:>6}",
            "op", "provider", "count", "launches", "GB", "GFLOP", "ms", "share"
        )?;
        for (op, n, e) in &r.ops {
            writeln!(
                f,
                "{:<30} {:<12} {:>6} {:>8} {:>10.3} {:>10.2} {:>10.3} {:>5.1}%",
                op,
                e.provider,
                n,
                e.launches,
                e.bytes / 1e9,
                e.flops / 1e9,
                e.seconds * 1e3,
                100.0 * e.seconds / total.max(f64::MIN_POSITIVE)
            )?;
        }
        writeln!(
            f,
            "{:<30} {:<12} {:>6} {:>8} {:>10.3} {:>10.2} {:>10.3}",
            "step (modelled)",
            "",
            "",
            r.launches(),
            r.ops.iter().map(|o| o.2.bytes).sum::<f64>() / 1e9,
            r.ops.iter().map(|o| o.2.flops).sum::<f64>() / 1e9,
            total * 1e3
        )
    }
}
