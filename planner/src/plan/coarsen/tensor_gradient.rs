//! Rule 2 (Tofu §4.2.1): a tensor and its gradient (with the operators that
//! sum gradient contributions) form one cluster; for a weight, also its
//! optimizer state and the update operators.
//!
//! Takes the graph's tensor groups; adds one cluster per [`Group::Tensor`]
//! whose tensors of the same shape share one slot (one layout). Operators of
//! the group (gradient sums, optimizer updates) become single-op slots whose
//! choice follows the layout (see `level`). Tensors of another shape in the
//! group get a slot of their own.

use super::{Cluster, Context, Rule};
use crate::graph::{Graph, Group, OpId, TensorId};

/// Rule 2 (see the module doc).
pub struct TensorGradient;

impl Rule for TensorGradient {
    fn name(&self) -> &'static str {
        "tensor_gradient"
    }

    fn apply(&self, cx: &Context, mut clusters: Vec<Cluster>) -> Vec<Cluster> {
        clusters.extend(tensor_group_clusters(cx.graph));
        clusters
    }
}

/// One cluster per tensor group.
fn tensor_group_clusters(graph: &Graph) -> Vec<Cluster> {
    let mut out: Vec<Option<Cluster>> = vec![None; graph.groups().len()];
    for (i, t) in graph.tensors().iter().enumerate() {
        let g = t.group.index();
        if let Group::Tensor(root) = graph.groups()[g] {
            let c = out[g].get_or_insert_with(|| Cluster {
                name: graph.tensor(root).name.clone(),
                ..Cluster::default()
            });
            let id = TensorId(i as u32);
            match c
                .tensor_slots
                .iter_mut()
                .find(|s| graph.tensor(s[0]).shape == t.shape)
            {
                Some(slot) => slot.push(id),
                None => c.tensor_slots.push(vec![id]),
            }
        }
    }
    for (i, op) in graph.ops().iter().enumerate() {
        let g = op.group.index();
        if let (Group::Tensor(_), Some(c)) = (graph.groups()[g], out[g].as_mut()) {
            c.op_slots.push(vec![OpId(i as u32)]);
        }
    }
    out.into_iter().flatten().collect()
}
