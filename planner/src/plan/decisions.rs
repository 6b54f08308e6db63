//! A plan's decisions and the layout rules that restrict them.
//!
//! Takes nothing; gives the vocabulary every other part of the planner
//! speaks: an operator's [`OpChoice`] and a tensor's split dim (or
//! replication) per recursion level ([`Decisions`]), and the
//! [`LayoutRule`]s a search may restrict tensor layouts to (Tofu §6.3's
//! baselines), with the candidate layouts each rule allows at a level
//! (`LayoutRule::layouts`; Megatron-LM's weight splits, [`weight_split`]).

use crate::graph::{Graph, OpRole, TensorId, TensorRole};

/// What an operator does at one recursion level.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum OpChoice {
    /// Use strategy `i` of the op's exact strategies (interval analysis order).
    Strategy(u32),
    /// Every worker of the group computes the whole op (no valid split).
    Replicate,
    /// Every worker of the group applies the op to its partial sums of the
    /// inputs in the bit mask (bit i = input i, a set the op is linear in,
    /// [`tdl::linear_input_sets`]), which must be [`PARTIAL`] at the level,
    /// and holds its outputs as partial sums (issue 41; only under
    /// `PlanOptions::partial_sums`). Geometry as [`OpChoice::Replicate`].
    Linear(u32),
}

/// The split-dim sentinel of a tensor held as per-worker *partial sums* at a
/// level (issue 41): every worker of the level holds a full-extent buffer
/// (geometry as replicated) and the value is their sum. Only plans made
/// with `PlanOptions::partial_sums` contain it; codegen refuses it for now.
pub const PARTIAL: u32 = u32::MAX;

/// Whether a tensor's layout at a level is [`PARTIAL`].
pub fn is_partial(layout: Option<u32>) -> bool {
    layout == Some(PARTIAL)
}

/// Tensors at most this large (bytes) may be replicated on every worker
/// instead of split (scalars, biases, norm scales of small models). Weights,
/// their gradients and optimizer state may be replicated at any level
/// whatever their size under [`LayoutRule::Free`] (replicated weights and a
/// split batch are data parallelism at that level, the gradient summed over
/// the level's replicas).
pub const REPLICATE_MAX_BYTES: u64 = 64 * 1024;

/// The decisions of a plan so far: per tensor and per operator, one entry per
/// decided level (outermost first).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Decisions {
    /// Split dim per level (`None` = replicated at that level), indexed by tensor id.
    pub tensors: Vec<Vec<Option<u32>>>,
    /// Choice per level, indexed by op id.
    pub ops: Vec<Vec<OpChoice>>,
}

impl Decisions {
    /// No level decided.
    pub fn empty(graph: &Graph) -> Self {
        Decisions {
            tensors: vec![Vec::new(); graph.tensors().len()],
            ops: vec![Vec::new(); graph.ops().len()],
        }
    }
}

/// Which tensor layouts a search may use (baselines restrict them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutRule {
    /// Any split dim; replication for weight-like tensors (weights, their
    /// gradients, optimizer state) and small tensors (Tofu's searches).
    Free,
    /// Data parallelism: weights, their gradients and optimizer state
    /// replicated, everything else split along dim 0 (the batch).
    DataParallel,
    /// Every tensor split along dim 0 (AllRow-Greedy, Tofu §6.3).
    AllRow,
    /// Megatron-LM's tensor parallelism: the weights of matmuls split as
    /// [`weight_split`] says (with their gradients and optimizer state),
    /// every other weight-like tensor replicated; activations split along
    /// any dim as under [`LayoutRule::Free`] or, when the graph has weights
    /// [`weight_split`] splits, also **replicated** inside the group whatever
    /// their size (Megatron keeps LayerNorm inputs, residuals and the
    /// row-parallel matmuls' all-reduced outputs whole on every rank of a
    /// tensor-parallel group; the operators on them then run replicated,
    /// [`OpChoice::Replicate`]).
    TensorParallel,
}

impl LayoutRule {
    /// Candidate layouts (split dim, or `None`: replicated) of tensor `t` at
    /// `level` under this rule, after the outer levels' decisions `d`
    /// (`factors`: every level's worker factor, outermost first).
    /// `tensor_parallel`: the graph has weights [`weight_split`] splits
    /// ([`has_tensor_parallel_weights`]); only then may
    /// [`LayoutRule::TensorParallel`] replicate an activation at a level
    /// (without split weights, a replicated activation at a tensor-parallel
    /// level would only be a redundant copy: every worker the whole model).
    pub(crate) fn layouts(
        self,
        graph: &Graph,
        factors: &[usize],
        t: TensorId,
        d: &Decisions,
        level: usize,
        tensor_parallel: bool,
    ) -> Vec<Option<u32>> {
        let p = factors[level];
        let shape = local_shape(graph, factors, t, d, level);
        let replicated_so_far = d.tensors[t.index()].iter().take(level).all(Option::is_none);
        let bytes = graph.tensor(t).bytes();
        let splittable: Vec<Option<u32>> = (0..shape.len())
            .filter(|&i| shape[i] >= p)
            .map(|i| Some(i as u32))
            .collect();
        let mut out = match self {
            LayoutRule::DataParallel
                if tensor_parallel && is_gradient_contribution(graph, t) && replicated_so_far =>
            {
                // Reduce-scattered, summed split, the sum all-gathered.
                std::iter::once(None)
                    .chain(splittable.iter().copied())
                    .collect()
            }
            LayoutRule::DataParallel if is_weight_like(graph, t) && replicated_so_far => vec![None],
            LayoutRule::TensorParallel if is_weight_like(graph, t) => {
                match weight_split(graph, t) {
                    Some(dim) if shape.get(dim as usize).is_some_and(|&n| n >= p) => {
                        vec![Some(dim)]
                    }
                    _ if replicated_so_far => vec![None],
                    _ => splittable.clone(),
                }
            }
            LayoutRule::DataParallel | LayoutRule::AllRow if !shape.is_empty() => vec![Some(0)],
            _ => splittable.clone(),
        };
        let weight_like = is_weight_like(graph, t);
        if self == LayoutRule::TensorParallel && tensor_parallel && !weight_like {
            // Replicated inside the tensor-parallel group, split or not at
            // the outer (data-parallel) levels.
            out.push(None);
        } else if matches!(self, LayoutRule::Free | LayoutRule::TensorParallel)
            && !(self == LayoutRule::TensorParallel && weight_like)
            && replicated_so_far
            && (bytes <= REPLICATE_MAX_BYTES
                || splittable.is_empty()
                || (self == LayoutRule::Free && weight_like))
        {
            out.push(None);
        }
        if out.is_empty() {
            // Nothing divides evenly: split the largest local dim (some parts
            // empty), or replicate a scalar.
            out.push(if shape.is_empty() {
                None
            } else {
                Some(
                    (0..shape.len())
                        .max_by_key(|&i| (shape[i], usize::MAX - i))
                        .unwrap_or(0) as u32,
                )
            });
        }
        out
    }
}

/// Local size of every dim of a tensor after the outer levels.
fn local_shape(
    graph: &Graph,
    factors: &[usize],
    t: TensorId,
    d: &Decisions,
    level: usize,
) -> Vec<usize> {
    let mut shape = graph.tensor(t).shape.clone();
    for (l, s) in d.tensors[t.index()].iter().enumerate().take(level) {
        if let Some(dim) = s {
            if let Some(n) = shape.get_mut(*dim as usize) {
                *n = n.div_ceil(factors[l]);
            }
        }
    }
    shape
}

/// Whether `t` is one contribution to the gradient of a weight used more
/// than once (a tied weight: GPT's token embedding, also the output
/// projection), summed with the others into the weight's gradient: a
/// gradient of a weight that is not the weight's own `grad`. At a
/// data-parallel level of a tensor-parallel hybrid it may be split as well
/// as replicated: each contribution is then reduce-scattered over the
/// replicas, the sum runs on the shards and only the sum is all-gathered,
/// the bytes of the one all-reduce Megatron-LM gives a tied embedding's
/// summed gradient instead of one per contribution.
pub(crate) fn is_gradient_contribution(graph: &Graph, t: TensorId) -> bool {
    let tensor = graph.tensor(t);
    tensor.role == TensorRole::Gradient
        && tensor.grad_of.is_some_and(|w| {
            graph.tensor(w).role == TensorRole::Weight && graph.tensor(w).grad != Some(t)
        })
}

/// Whether `t` is a weight, a weight's gradient or optimizer state.
pub(crate) fn is_weight_like(graph: &Graph, t: TensorId) -> bool {
    let tensor = graph.tensor(t);
    match tensor.role {
        TensorRole::Weight | TensorRole::OptimizerState => true,
        TensorRole::Gradient => tensor
            .grad_of
            .is_some_and(|f| graph.tensor(f).role == TensorRole::Weight),
        _ => false,
    }
}

/// The weight a weight-like tensor belongs to: itself, the weight it is the
/// gradient of, the weight an optimizer output replaces, or the weight an
/// optimizer state is updated with.
fn weight_of(graph: &Graph, t: TensorId) -> Option<TensorId> {
    let tensor = graph.tensor(t);
    if let Some(r) = tensor.updates {
        return weight_of(graph, r);
    }
    match tensor.role {
        TensorRole::Weight => Some(t),
        TensorRole::Gradient => tensor
            .grad_of
            .filter(|w| graph.tensor(*w).role == TensorRole::Weight),
        TensorRole::OptimizerState => graph
            .consumers(t)
            .iter()
            .find(|o| graph.op(**o).role == OpRole::Update)
            .and_then(|o| graph.op(*o).inputs.first().copied()),
        _ => None,
    }
}

/// Megatron-LM's split dim of a weight-like tensor (weights, their gradients
/// and optimizer state follow the weight): `Some(0)` for the rows of a
/// `dense` weight `[din, dout]` whose output (after its `bias_add`) feeds an
/// `add` (the residual: attention's output projection, the MLP's second
/// linear) and for the vocabulary rows of an `embedding`, `vocab_embedding`
/// or `dense_nt` table; `Some(1)` for the columns of any other `dense` weight; `None`
/// (replicated) for every other weight.
pub fn weight_split(graph: &Graph, t: TensorId) -> Option<u32> {
    let w = weight_of(graph, t)?;
    let forward = graph
        .consumers(w)
        .iter()
        .map(|o| graph.op(*o))
        .filter(|op| op.role == OpRole::Forward);
    let mut dim = None;
    for op in forward {
        let here = match op.spec.as_str() {
            "embedding" | "vocab_embedding" | "dense_nt" => Some(0),
            "dense" | "matmul" if op.inputs.get(1) == Some(&w) => {
                Some(if feeds_residual(graph, op.outputs[0]) {
                    0
                } else {
                    1
                })
            }
            _ => None,
        };
        if here.is_some() {
            dim = here;
        }
    }
    dim
}

/// Whether some weight of `graph` is split by [`weight_split`] (a
/// transformer's matmul, embedding or output projection): the graphs on
/// which [`LayoutRule::TensorParallel`] may replicate activations.
pub fn has_tensor_parallel_weights(graph: &Graph) -> bool {
    graph.tensors().iter().enumerate().any(|(i, t)| {
        t.role == TensorRole::Weight && weight_split(graph, TensorId(i as u32)).is_some()
    })
}

/// Whether `t` (through `bias_add`s) is read by an `add`.
fn feeds_residual(graph: &Graph, t: TensorId) -> bool {
    graph.consumers(t).iter().any(|o| {
        let op = graph.op(*o);
        op.role == OpRole::Forward
            && match op.spec.as_str() {
                "add" => true,
                "bias_add" => feeds_residual(graph, op.outputs[0]),
                _ => false,
            }
    })
}
