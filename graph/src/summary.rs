//! The summary of a training graph that `tofu graph` prints: operator
//! counts by role, tensors, parameters and the memory figures of a
//! [`MemoryReport`], as text lines ([`GraphSummary`]; for a zoo model
//! with its name, batch and optimizer: [`ZooSummary`]) and as JSON fields (`ops`, `forward_ops`, `backward_ops`,
//! `update_ops`, `tensors`, `parameters`, `parameter_bytes`,
//! `gradient_bytes`, `optimizer_state_bytes`, `training_state_bytes`,
//! `input_bytes`, `peak_activation_bytes`, `peak_bytes`; sizes in bytes).

use std::fmt;

use serde_json::{json, Map, Value};

use crate::zoo::Model;
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

/// A zoo model's training graph as `tofu graph --model` reports it.
#[derive(Clone, Copy, Debug)]
pub struct ZooSummary<'a> {
    /// The zoo model.
    pub model: &'a Model,
    /// The optimizer's name, as given.
    pub optimizer: &'a str,
    /// The graph and its memory report.
    pub graph: GraphSummary<'a>,
}

impl ZooSummary<'_> {
    /// The `--json` object: [`summary_fields`] and `model`, `batch`,
    /// `optimizer`.
    pub fn json(&self) -> Value {
        let mut m = summary_fields(self.graph.graph, self.graph.memory);
        m.insert("model".into(), json!(self.model.name()));
        m.insert("batch".into(), json!(self.model.batch()));
        m.insert("optimizer".into(), json!(self.optimizer));
        Value::Object(m)
    }
}

/// The model's line (name, batch, optimizer), then the graph's lines.
impl fmt::Display for ZooSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "model        {} (batch {}, optimizer {})",
            self.model.name(),
            self.model.batch(),
            self.optimizer
        )?;
        write!(f, "{}", self.graph)
    }
}
