//! Rule 3 (Tofu §4.2.1, "merging consecutive element-wise operators"): an
//! elementwise operator's input and output are always partitioned the same
//! way, so its cluster absorbs the cluster of its output tensor and the
//! merged cluster is decided by one split axis.
//!
//! Takes the clusters of rules 1 and 2 (must run after both) and the model's
//! elementwise flags (from the interval analysis); gives the merged list.

use std::collections::HashMap;

use super::{Cluster, Context, Rule};
use crate::graph::{Graph, Group};
use crate::plan::model::Model;

/// Rule 3 (see the module doc).
pub struct Elementwise;

impl Rule for Elementwise {
    fn name(&self) -> &'static str {
        "elementwise"
    }

    fn apply(&self, cx: &Context, clusters: Vec<Cluster>) -> Vec<Cluster> {
        merge(cx.graph, cx.model, clusters)
    }
}

/// Merge each elementwise op cluster with its output tensor's cluster.
fn merge(graph: &Graph, model: &Model, clusters: Vec<Cluster>) -> Vec<Cluster> {
    // Which cluster holds each tensor.
    let mut of_tensor: HashMap<u32, usize> = HashMap::new();
    for (i, c) in clusters.iter().enumerate() {
        for t in c.tensors() {
            of_tensor.insert(t.0, i);
        }
    }
    let mut absorbed = vec![false; clusters.len()];
    let mut into: Vec<Option<usize>> = vec![None; clusters.len()];
    for (i, c) in clusters.iter().enumerate() {
        let Some(first) = c.op_slots.first().and_then(|s| s.first()) else {
            continue;
        };
        let op = graph.op(*first);
        if !matches!(graph.groups()[op.group.index()], Group::Op(_)) || !c.tensor_slots.is_empty() {
            continue;
        }
        if !model.op(*first).strategies.elementwise || op.outputs.len() != 1 {
            continue;
        }
        let out = op.outputs[0];
        let same_shape = op
            .inputs
            .iter()
            .all(|t| graph.tensor(*t).shape == graph.tensor(out).shape);
        if let Some(&j) = of_tensor.get(&out.0) {
            let target = &clusters[j];
            if same_shape
                && !absorbed[j]
                && into[j].is_none()
                && target.tensor_slots.len() == 1
                && j != i
            {
                absorbed[j] = true;
                into[i] = Some(j);
            }
        }
    }
    let mut out = Vec::new();
    for (i, c) in clusters.iter().enumerate() {
        if absorbed[i] {
            continue;
        }
        let mut c = c.clone();
        if let Some(j) = into[i] {
            let t = &clusters[j];
            c.op_slots.extend(t.op_slots.iter().cloned());
            c.tensor_slots.extend(t.tensor_slots.iter().cloned());
            c.tied_axis = true;
        }
        out.push(c);
    }
    out
}
