//! Coarsening (Tofu §4.2.1): group operators and tensors that should be
//! partitioned together, so the search sees a near-chain of few nodes.
//!
//! Takes a [`Graph`]; gives [`Cluster`]s, each a set of operators and tensors
//! that will be decided together, with *slots*: members of one slot take the
//! same decision (same strategy index, same split dim). The rules run in this
//! order, each a file:
//!
//! 1. [`forward_backward`]: a forward op and its backward ops form a cluster;
//! 2. [`tensor_gradient`]: a tensor, its gradients, their sum and its optimizer
//!    state form a cluster (the sum and update ops follow the tensor's layout);
//! 3. [`elementwise`]: an elementwise op cluster absorbs its output tensor's
//!    cluster (must run after 1 and 2: it merges their clusters);
//! 4. [`rnn_steps`]: clusters that differ only in the time step of an unrolled
//!    RNN are coalesced into one with tied slots (must run last: it matches
//!    whole clusters by structure).

pub mod elementwise;
pub mod forward_backward;
pub mod rnn_steps;
pub mod tensor_gradient;

use crate::graph::{Graph, OpId, TensorId};

use super::model::Model;

/// A group of operators and tensors decided together (see the module doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cluster {
    /// Name for reports (its forward op or tensor).
    pub name: String,
    /// Operator slots; every op of a slot takes the same choice.
    pub op_slots: Vec<Vec<OpId>>,
    /// Tensor slots; every tensor of a slot takes the same layout.
    pub tensor_slots: Vec<Vec<TensorId>>,
    /// Whether the op and tensor slots are tied to one split axis (elementwise
    /// runs): configurations are "split axis i everywhere".
    pub tied_axis: bool,
}

impl Cluster {
    /// Every op of the cluster.
    pub fn ops(&self) -> impl Iterator<Item = OpId> + '_ {
        self.op_slots.iter().flatten().copied()
    }
    /// Every tensor of the cluster.
    pub fn tensors(&self) -> impl Iterator<Item = TensorId> + '_ {
        self.tensor_slots.iter().flatten().copied()
    }
}

/// Run every rule in order (see the module doc).
pub fn coarsen(graph: &Graph, model: &Model) -> Vec<Cluster> {
    let mut clusters = forward_backward::clusters(graph);
    clusters.extend(tensor_gradient::clusters(graph));
    let clusters = elementwise::merge(graph, model, clusters);
    rnn_steps::merge(graph, clusters)
}
