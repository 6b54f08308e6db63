//! The graph summary both `tofu graph` forms print (zoo model and ONNX
//! file): operator counts by role, tensors, parameters and the memory
//! figures of [`MemoryReport`], as text lines or JSON fields.

use planner::graph::{Graph, MemoryReport, OpRole};

/// The summary fields every `tofu graph` JSON object has: operator counts by
/// role, tensors, parameters and the memory figures (bytes) of `mem`.
pub fn graph_fields(
    graph: &Graph,
    mem: &MemoryReport,
) -> serde_json::Map<String, serde_json::Value> {
    let count = |r: OpRole| graph.ops().iter().filter(|o| o.role == r).count();
    let serde_json::Value::Object(m) = serde_json::json!({
        "ops": graph.ops().len(),
        "forward_ops": count(OpRole::Forward),
        "backward_ops": count(OpRole::Backward),
        "update_ops": count(OpRole::Update),
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

/// The summary lines every `tofu graph` text report has (operators, tensors,
/// parameters, training state, activation peak).
pub fn print_graph_summary(graph: &Graph, mem: &MemoryReport) {
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let count = |r: OpRole| graph.ops().iter().filter(|o| o.role == r).count();
    println!(
        "operators    {} ({} forward, {} backward, {} update)",
        graph.ops().len(),
        count(OpRole::Forward),
        count(OpRole::Backward),
        count(OpRole::Update)
    );
    println!("tensors      {}", graph.tensors().len());
    println!("parameters   {}", mem.parameters);
    println!(
        "state        {} bytes ({:.2} GiB) = parameters {} + gradients {} + optimizer state {}",
        mem.training_state_bytes(),
        gib(mem.training_state_bytes()),
        mem.parameter_bytes,
        mem.gradient_bytes,
        mem.optimizer_state_bytes
    );
    println!(
        "activations  peak {} bytes ({:.2} GiB)",
        mem.peak_activation_bytes,
        gib(mem.peak_activation_bytes)
    );
}
