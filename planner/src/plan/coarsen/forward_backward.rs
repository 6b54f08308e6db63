//! Rule 1 (Tofu §4.2.1): a forward operator and its generated backward
//! operators form one cluster, each operator its own slot.
//!
//! Takes the graph's op groups; adds one cluster per [`Group::Op`].

use super::{Cluster, Context, Rule};
use crate::graph::{Graph, Group};

/// Rule 1 (see the module doc).
pub struct ForwardBackward;

impl Rule for ForwardBackward {
    fn name(&self) -> &'static str {
        "forward_backward"
    }

    fn apply(&self, cx: &Context, mut clusters: Vec<Cluster>) -> Vec<Cluster> {
        clusters.extend(op_group_clusters(cx.graph));
        clusters
    }
}

/// One cluster per forward-op group, members in graph order.
fn op_group_clusters(graph: &Graph) -> Vec<Cluster> {
    let mut out: Vec<Option<Cluster>> = vec![None; graph.groups().len()];
    for (i, op) in graph.ops().iter().enumerate() {
        let g = op.group.index();
        if let Group::Op(f) = graph.groups()[g] {
            let c = out[g].get_or_insert_with(|| Cluster {
                name: graph.op(f).name.clone(),
                ..Cluster::default()
            });
            c.op_slots.push(vec![crate::graph::OpId(i as u32)]);
        }
    }
    out.into_iter().flatten().collect()
}
