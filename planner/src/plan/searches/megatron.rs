//! `megatron`: the hand-designed hybrid of Megatron-LM (Shoeybi et al. 2019)
//! as a baseline: tensor parallelism inside groups of t workers, data
//! parallelism across the k/t groups.
//!
//! Takes k and `--tensor-parallel t` (or every divisor t of k); gives one
//! candidate per t: the outer levels (prime factors of k/t) replicate every
//! weight, its gradient and optimizer state and split everything else along
//! dim 0 (the batch: [`LayoutRule::DataParallel`]); the inner levels (prime
//! factors of t) split the weights of the matmuls as Megatron-LM does
//! ([`LayoutRule::TensorParallel`], [`weight_split`]): the first linear of an
//! attention or MLP block by columns (its output features), the second, whose
//! output feeds the residual add, by rows (its input features), the
//! embedding and the tied output projection by vocabulary rows; every other
//! weight (norm scales, biases, convolutions) is replicated. Activations are
//! laid out by CriticalDP at every level. Without `--tensor-parallel` the
//! driver keeps the t with the fewest bytes (t = 1 is data parallelism).

use super::{Candidate, LayoutRule, PlanOptions, Search};
use crate::graph::{Graph, OpRole, TensorId, TensorRole};
use crate::plan::tile::factorize;

/// The Megatron-style baseline (see the module doc).
pub struct Megatron;

impl Search for Megatron {
    fn name(&self) -> &'static str {
        "megatron"
    }

    fn candidates(&self, workers: usize, opts: &PlanOptions) -> Vec<Candidate> {
        let ts: Vec<usize> = match opts.tensor_parallel {
            Some(t) if t >= 1 && workers.is_multiple_of(t) => vec![t],
            _ => (1..=workers)
                .filter(|t| workers.is_multiple_of(*t))
                .collect(),
        };
        ts.into_iter()
            .map(|t| {
                let outer = factorize(workers / t);
                let inner = factorize(t);
                let mut rules = vec![LayoutRule::DataParallel; outer.len()];
                rules.extend(vec![LayoutRule::TensorParallel; inner.len()]);
                Candidate {
                    factors: [outer, inner].concat(),
                    rules,
                    label: Some(format!(
                        "tensor parallel {t} × data parallel {}",
                        workers / t
                    )),
                    only_if_fits: false,
                }
            })
            .collect()
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
/// linear) and for the vocabulary rows of an `embedding` or `dense_nt`
/// table; `Some(1)` for the columns of any other `dense` weight; `None`
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
            "embedding" | "dense_nt" => Some(0),
            "dense" if op.inputs.get(1) == Some(&w) => {
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
