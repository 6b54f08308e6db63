//! The graph summary both `tofu graph` forms print (zoo model and ONNX
//! file): operator counts by role, tensors, parameters and the memory
//! figures of [`MemoryReport`], as text lines (the JSON fields:
//! [`planner::graph::summary::summary_fields`]).

use planner::graph::summary::role_counts;
pub use planner::graph::summary::summary_fields as graph_fields;
use planner::graph::{Graph, MemoryReport};

/// The summary lines every `tofu graph` text report has (operators, tensors,
/// parameters, training state, activation peak).
pub fn print_graph_summary(graph: &Graph, mem: &MemoryReport) {
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let (forward, backward, update) = role_counts(graph);
    println!(
        "operators    {} ({forward} forward, {backward} backward, {update} update)",
        graph.ops().len(),
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
