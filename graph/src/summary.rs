//! The summary of a training graph that `tofu graph` prints: operator
//! counts by role, tensors, parameters and the memory figures of a
//! [`MemoryReport`], as JSON fields (`ops`, `forward_ops`, `backward_ops`,
//! `update_ops`, `tensors`, `parameters`, `parameter_bytes`,
//! `gradient_bytes`, `optimizer_state_bytes`, `training_state_bytes`,
//! `input_bytes`, `peak_activation_bytes`, `peak_bytes`; sizes in bytes).

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
