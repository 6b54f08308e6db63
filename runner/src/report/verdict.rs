//! The `--verify` verdict of `tofu run` (see [`crate::verify`]): the
//! largest relative error, the tensors that failed (worst first, at most
//! 10) and those that passed only by their sensitivity, named as the
//! unpartitioned program names them.

use std::fmt;

use graph::TensorId;
use program::Program;
use serde_json::{json, Value};

use crate::verify::{TensorCheck, Verification};

/// How many failed tensors a verdict names.
const NAMED: usize = 10;

/// A verification with the unpartitioned program it ran (for the names).
#[derive(Clone, Copy, Debug)]
pub struct Verdict<'a> {
    /// The comparison.
    pub verification: &'a Verification,
    /// The unpartitioned program (rank 0 of the reference run).
    pub reference: &'a Program,
}

impl Verdict<'_> {
    /// The name of tensor `t` in the unpartitioned program (`#id` when it
    /// has none).
    fn name(&self, t: TensorId) -> String {
        self.reference
            .tensor(t)
            .map_or_else(|| format!("#{}", t.0), |i| i.name.clone())
    }

    /// The tensors worth naming ([`Verification::notable`]) as JSON:
    /// `failed` (worst first, at most 10) and `ill_conditioned` (passed
    /// by sensitivity), each `{tensor, error, sensitivity}`.
    pub fn json(&self) -> Value {
        let entry = |c: &&TensorCheck| {
            json!({
                "tensor": self.name(c.tensor),
                "error": c.error,
                "sensitivity": c.sensitivity,
            })
        };
        let (failed, ill) = self.verification.notable(NAMED);
        json!({
            "failed": failed.iter().map(entry).collect::<Vec<_>>(),
            "ill_conditioned": ill.iter().map(entry).collect::<Vec<_>>(),
        })
    }
}

/// The verdict line, then one line per tensor worth naming.
impl fmt::Display for Verdict<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.verification;
        writeln!(
            f,
            "verify: max relative error {:.3e} ({})",
            v.max_rel_error,
            if v.passed() { "ok" } else { "FAILED" }
        )?;
        let (failed, ill) = v.notable(NAMED);
        let what = ["failed", "passed by its sensitivity (ill-conditioned)"];
        for (what, checks) in what.iter().zip([failed, ill]) {
            for c in checks {
                writeln!(
                    f,
                    "  {} {what}: error {:.3e}, sensitivity {}",
                    self.name(c.tensor),
                    c.error,
                    c.sensitivity
                        .map_or_else(|| "not measured".to_string(), |s| format!("{s:.3e}")),
                )?;
            }
        }
        Ok(())
    }
}
