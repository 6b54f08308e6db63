//! The report of a `tofu run`: per step its time and bytes sent per rank,
//! peak memory, the collectives' share of the bytes, the verdict, and with
//! `TOFU_PROFILE=1` rank 0's seconds per operator ([`RunSummary::profile`]).

use std::fmt;

use program::Program;
use serde_json::{json, Value};

use super::verdict::Verdict;
use crate::{RunReport, Verification};

/// A run of a plan's programs as `tofu run` reports it.
#[derive(Clone, Copy, Debug)]
pub struct RunSummary<'a> {
    /// The plan file, as given.
    pub plan: &'a str,
    /// The model's name.
    pub model: &'a str,
    /// The backend's name (`cpu`, `cuda`).
    pub backend: &'a str,
    /// The plan's workers.
    pub workers: usize,
    /// Steps run.
    pub steps: usize,
    /// The programs run, one per rank.
    pub programs: &'a [Program],
    /// Bytes each rank sends per step by the plan's transfers.
    pub predicted_bytes_per_rank: &'a [u64],
    /// What the run measured.
    pub report: &'a RunReport,
    /// The `--verify` verdict (`None` without it).
    pub verdict: Option<Verdict<'a>>,
}

impl RunSummary<'_> {
    /// The share of the bytes a step sends that collectives move (0 when
    /// nothing is sent).
    pub fn collective_share(&self) -> f64 {
        let per_step: u64 = self.programs.iter().map(Program::bytes_sent).sum();
        let collective: u64 = self
            .programs
            .iter()
            .map(Program::collective_bytes_sent)
            .sum();
        if per_step == 0 {
            0.0
        } else {
            collective as f64 / per_step as f64
        }
    }

    /// The `--json` object: `plan`, `backend`, `workers`, `steps`,
    /// `step_seconds`, `bytes_sent_per_rank`, `predicted_bytes_per_rank`
    /// (over all steps), `peak_bytes_per_rank`, `comm_seconds_per_rank`,
    /// `verified`, `max_rel_error`, `verify` ([`Verdict::json`]),
    /// `collective_share`, `op_seconds`.
    pub fn json(&self) -> Value {
        let (r, steps) = (self.report, self.steps as u64);
        let v = self.verdict.map(|v| v.verification);
        json!({
            "plan": self.plan,
            "backend": self.backend,
            "workers": self.workers,
            "steps": self.steps,
            "step_seconds": r.step_seconds,
            "bytes_sent_per_rank": r.bytes_sent_per_rank(),
            "predicted_bytes_per_rank": self.predicted_bytes_per_rank.iter().map(|b| b * steps).collect::<Vec<_>>(),
            "peak_bytes_per_rank": r.peak_bytes_per_rank,
            "comm_seconds_per_rank": (0..self.workers).map(|k| r.comm_seconds.iter().map(|s| s[k]).sum::<f64>()).collect::<Vec<_>>(),
            "verified": v.map(Verification::passed),
            "max_rel_error": v.map(|v| v.max_rel_error),
            "verify": self.verdict.map(|v| v.json()),
            "collective_share": self.collective_share(),
            "op_seconds": r.op_seconds,
        })
    }

    /// `TOFU_PROFILE=1`: rank 0's seconds per operator (the 24 largest),
    /// as lines; empty without a profile.
    pub fn profile(&self) -> String {
        let r = self.report;
        if r.op_seconds.is_empty() {
            return String::new();
        }
        let (from, steps) = if self.steps > 1 {
            (2, &r.step_seconds[1..])
        } else {
            (1, &r.step_seconds[..])
        };
        let total: f64 = r.op_seconds.iter().map(|o| o.1).sum();
        let mut out = format!(
            "TOFU_PROFILE: rank 0 seconds per operator over steps {from}..{} \
             (each instruction synchronised; the first step's start-up left out):\n",
            self.steps
        );
        for (op, s) in r.op_seconds.iter().take(24) {
            out += &format!("  {op:<32} {s:>10.4}\n");
        }
        out += &format!(
            "  {:<32} {total:>10.4} of {:.4} s in those steps\n",
            "all instructions",
            steps.iter().sum::<f64>()
        );
        out
    }
}

/// The table: the run, a line per step, peak memory, the collectives'
/// share and the verdict.
impl fmt::Display for RunSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.report;
        writeln!(
            f,
            "{} on {} {} workers, {} step(s)",
            self.model,
            self.workers,
            self.backend.to_uppercase(),
            self.steps
        )?;
        for (s, t) in r.step_seconds.iter().enumerate() {
            writeln!(
                f,
                "step {s}: {:.4} s, bytes sent per rank {:?}",
                t, r.bytes_sent[s]
            )?;
        }
        writeln!(f, "peak bytes per rank: {:?}", r.peak_bytes_per_rank)?;
        writeln!(
            f,
            "bytes moved by collectives: {:.1}% (the rest by grouped send/recv)",
            100.0 * self.collective_share()
        )?;
        match self.verdict {
            Some(v) => write!(f, "{v}"),
            None => Ok(()),
        }
    }
}
