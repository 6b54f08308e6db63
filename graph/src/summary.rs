//! The summary of a training graph that `tofu graph` prints: operator
//! counts by role, tensors, parameters and the memory figures of a
//! [`MemoryReport`], as text lines ([`GraphSummary`]) and as JSON fields (`ops`, `forward_ops`, `backward_ops`,
//! `update_ops`, `tensors`, `parameters`, `parameter_bytes`,
//! `gradient_bytes`, `optimizer_state_bytes`, `training_state_bytes`,
//! `input_bytes`, `peak_activation_bytes`, `peak_bytes`; sizes in bytes).

use std::fmt;

use serde_json::{json, Map, Value};

use crate::{Graph, MemoryReport, OpRole};

/// Operators of `graph` by role: (forward, backward, update).
pub fn role_counts(graph: &Graph) -> (usize, usize, usize) {
    let count = |r: OpRole| graph.ops().iter().filter(|o| o.role == r).count();
    (
        count(OpRole::Forward),
        count(OpRole::Backward),
        count(OpRole::Update),
    )
}

/// The summary fields of `graph` with its memory report `mem` (see the
/// module doc).
pub fn summary_fields(graph: &Graph, mem: &MemoryReport) -> Map<String, Value> {
    let (forward, backward, update) = role_counts(graph);
    let Value::Object(m) = json!({
        "ops": graph.ops().len(),
        "forward_ops": forward,
        "backward_ops": backward,
        "update_ops": update,
        "tensors": graph.tensors().len(),
        "parameters": mem.parameters,
        "parameter_bytes": mem.parameter_bytes,
        "gradient_bytes": mem.gradient_bytes,
        "optimizer_state_bytes": mem.optimizer_state_bytes,
        "training_state_bytes": mem.training_state_bytes(),
        "input_bytes": mem.input_bytes,
        "peak_activation_bytes": mem.peak_activation_bytes,
        "peak_bytes": mem.peak_bytes(),
    }) else {
        unreachable!("json! of an object literal is an object")
    };
    m
}

/// A graph with its memory report, shown as the lines every `tofu graph`
/// text report has.
#[derive(Clone, Copy, Debug)]
pub struct GraphSummary<'a> {
    /// The graph.
    pub graph: &'a Graph,
    /// Its memory report.
    pub memory: &'a MemoryReport,
}

/// Operators by role, tensors, parameters, training state (bytes and GiB,
/// by part) and the activation peak.
impl fmt::Display for GraphSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (graph, mem) = (self.graph, self.memory);
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let (forward, backward, update) = role_counts(graph);
        writeln!(
            f,
            "operators    {} ({forward} forward, {backward} backward, {update} update)",
            graph.ops().len(),
        )?;
        writeln!(f, "tensors      {}", graph.tensors().len())?;
        writeln!(f, "parameters   {}", mem.parameters)?;
        writeln!(
            f,
            "state        {} bytes ({:.2} GiB) = parameters {} + gradients {} + optimizer state {}",
            mem.training_state_bytes(),
            gib(mem.training_state_bytes()),
            mem.parameter_bytes,
            mem.gradient_bytes,
            mem.optimizer_state_bytes
        )?;
        writeln!(
            f,
            "activations  peak {} bytes ({:.2} GiB)",
            mem.peak_activation_bytes,
            gib(mem.peak_activation_bytes)
        )
    }
}
