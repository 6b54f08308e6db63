//! The report of `tofu run --save-outputs`: the outputs written, the file,
//! and the synthetic values the pass ran on
//! ([`crate::forward_outputs`]).

use std::fmt;

use serde_json::{json, Value};

use crate::forward_outputs::SavedOutputs;

/// What a forward pass wrote, as `tofu run --save-outputs` reports it.
#[derive(Clone, Copy, Debug)]
pub struct SavedSummary<'a> {
    /// The plan file, as given.
    pub plan: &'a str,
    /// The model's name.
    pub model: &'a str,
    /// The plan's workers.
    pub workers: usize,
    /// The file written, as given.
    pub file: &'a str,
    /// What was written.
    pub saved: &'a SavedOutputs,
}

impl SavedSummary<'_> {
    /// The `--json` object: `plan`, `workers`, `file`, `outputs`,
    /// `synthetic_inputs`, `synthetic_weights`, `step_seconds`.
    pub fn json(&self) -> Value {
        let s = self.saved;
        json!({
            "plan": self.plan,
            "workers": self.workers,
            "file": self.file,
            "outputs": s.outputs,
            "synthetic_inputs": s.synthetic_inputs,
            "synthetic_weights": s.synthetic_weights,
            "step_seconds": s.step_seconds,
        })
    }
}

/// A line naming the outputs and the file, and one more naming the
/// synthetic values the pass ran on (when there were any).
impl fmt::Display for SavedSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (ins, fills) = (&self.saved.synthetic_inputs, self.saved.synthetic_weights);
        writeln!(
            f,
            "{} on {} workers: wrote outputs {} to {}",
            self.model,
            self.workers,
            self.saved.outputs.join(", "),
            self.file
        )?;
        if !ins.is_empty() || fills > 0 {
            writeln!(
                f,
                "with the seeded synthetic values it ran on: inputs {}; {fills} weights",
                if ins.is_empty() {
                    "none".to_string()
                } else {
                    ins.join(", ")
                }
            )?;
        }
        Ok(())
    }
}
