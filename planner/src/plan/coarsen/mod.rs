//! Coarsening (Tofu §4.2.1): group operators and tensors that should be
//! partitioned together, so the search sees a near-chain of few nodes.
//!
//! Takes a [`Graph`]; gives [`Cluster`]s, each a set of operators and tensors
//! that will be decided together, with *slots*: members of one slot take the
//! same decision (same strategy index, same split dim). Each rule is a file
//! implementing [`Rule`]; [`RULES`] lists them in this order:
//!
//! 1. [`forward_backward`]: a forward op and its backward ops form a cluster;
//! 2. [`tensor_gradient`]: a tensor, its gradients, their sum and its optimizer
//!    state form a cluster (the sum and update ops follow the tensor's layout);
//! 3. [`elementwise`]: an elementwise op cluster absorbs its output tensor's
//!    cluster (must run after 1 and 2: it merges their clusters);
//! 4. [`rnn_steps`]: clusters that differ only in the time step of an unrolled
//!    RNN are coalesced into one with tied slots (must run last: it matches
//!    whole clusters by structure).
//!
//! After every rule, [`coarsen_checked`] checks the clusters and names the
//! rule that broke them: no op or tensor in two clusters (or twice in one),
//! no empty slot, nothing covered before the rule lost by it, and after the
//! last rule every op and tensor of the graph covered exactly once.
//!
//! Adding a rule: a file with a unit struct implementing [`Rule`], and one
//! line in [`RULES`] at its place in the order.

pub mod elementwise;
pub mod forward_backward;
pub mod rnn_steps;
pub mod tensor_gradient;

use crate::graph::{Graph, OpId, TensorId};

use super::model::Model;

/// What every rule sees besides the clusters so far.
pub struct Context<'a> {
    /// The training graph.
    pub graph: &'a Graph,
    /// Its analysed operators (elementwise flags, strategies).
    pub model: &'a Model,
}

/// One coarsening rule: takes the clusters of the rules before it, gives the
/// new list (adding clusters, or merging whole ones).
pub trait Rule: Sync {
    /// The rule's name (its file's), shown when the check after it fails.
    fn name(&self) -> &'static str;
    /// Apply the rule.
    fn apply(&self, cx: &Context, clusters: Vec<Cluster>) -> Vec<Cluster>;
}

/// The rules, in the order they run (see the module doc for why).
pub static RULES: &[&dyn Rule] = &[
    &forward_backward::ForwardBackward,
    &tensor_gradient::TensorGradient,
    // Must run after 1 and 2: it merges their clusters.
    &elementwise::Elementwise,
    // Must run last: it matches whole clusters by structure.
    &rnn_steps::RnnSteps,
];

/// A check after a rule failed (a bug in that rule, not bad input).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("coarsening rule `{rule}` broke the clusters: {what}")]
pub struct CoarsenError {
    /// The rule after which the check failed.
    pub rule: &'static str,
    /// What is wrong, naming the op or tensor.
    pub what: String,
}

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

/// Run every rule of [`RULES`] in order (see the module doc).
///
/// Panics if a check after a rule fails: that is a bug in the rule, named in
/// the message (see [`coarsen_checked`] for the error instead).
pub fn coarsen(graph: &Graph, model: &Model) -> Vec<Cluster> {
    coarsen_checked(graph, model, RULES).unwrap_or_else(|e| panic!("{e}"))
}

/// Run `rules` in order, checking the clusters after each (see the module doc).
///
/// Errors: [`CoarsenError`] naming the first rule after which the check failed.
pub fn coarsen_checked(
    graph: &Graph,
    model: &Model,
    rules: &[&dyn Rule],
) -> Result<Vec<Cluster>, CoarsenError> {
    let cx = Context { graph, model };
    let mut clusters = Vec::new();
    let mut covered = Coverage::default();
    for (i, rule) in rules.iter().enumerate() {
        clusters = rule.apply(&cx, clusters);
        let now = Coverage::of(graph, &clusters).map_err(|what| CoarsenError {
            rule: rule.name(),
            what,
        })?;
        let last = i + 1 == rules.len();
        now.check(graph, &covered, last)
            .map_err(|what| CoarsenError {
                rule: rule.name(),
                what,
            })?;
        covered = now;
    }
    Ok(clusters)
}

/// Which ops and tensors the clusters hold.
#[derive(Default)]
struct Coverage {
    ops: Vec<bool>,
    tensors: Vec<bool>,
}

impl Coverage {
    /// The coverage of `clusters`. Errors: an op or tensor held twice, an empty slot.
    fn of(graph: &Graph, clusters: &[Cluster]) -> Result<Coverage, String> {
        let mut c = Coverage {
            ops: vec![false; graph.ops().len()],
            tensors: vec![false; graph.tensors().len()],
        };
        for cl in clusters {
            if cl.op_slots.iter().any(Vec::is_empty) || cl.tensor_slots.iter().any(Vec::is_empty) {
                return Err(format!("cluster `{}` has an empty slot", cl.name));
            }
            for o in cl.ops() {
                if std::mem::replace(&mut c.ops[o.0 as usize], true) {
                    return Err(format!("op `{}` is in two clusters", graph.op(o).name));
                }
            }
            for t in cl.tensors() {
                if std::mem::replace(&mut c.tensors[t.0 as usize], true) {
                    return Err(format!(
                        "tensor `{}` is in two clusters",
                        graph.tensor(t).name
                    ));
                }
            }
        }
        Ok(c)
    }

    /// Errors: something `before` held that `self` lost, or (with `all`)
    /// something of the graph no cluster holds.
    fn check(&self, graph: &Graph, before: &Coverage, all: bool) -> Result<(), String> {
        for id in graph.op_ids() {
            let (had, has) = (
                before.ops.get(id.0 as usize) == Some(&true),
                self.ops[id.0 as usize],
            );
            if (had || all) && !has {
                return Err(format!("op `{}` is in no cluster", graph.op(id).name));
            }
        }
        for id in graph.tensor_ids() {
            let (had, has) = (
                before.tensors.get(id.0 as usize) == Some(&true),
                self.tensors[id.0 as usize],
            );
            if (had || all) && !has {
                return Err(format!(
                    "tensor `{}` is in no cluster",
                    graph.tensor(id).name
                ));
            }
        }
        Ok(())
    }
}
