//! The memory price inside a level problem (`--device-memory`, issue 14).
//!
//! Takes a graph, a price λ and a level's problem; gives the same problem
//! with the memory a configuration leaves priced into its node cost: a
//! Lagrangian relaxation of "peak ≤ limit". Each level's node cost becomes
//! `bytes + λ · m`, where `m` is a linear estimate of the memory per worker
//! the node's configuration leaves: the tile bytes, after this level and the
//! outer ones, of every training-state tensor (weights, their gradients,
//! optimizer state) and of every transient tensor live at the peak step of
//! the unpartitioned schedule, divided by the product of the inner levels'
//! factors (which are assumed to split it further). Units: λ is bytes moved
//! per step (with a topology: nanoseconds) per byte of memory per worker.
//! Which λ to search at is [`super::budget`]'s bisection and
//! [`super::pareto`]'s sweep.

use super::decisions::Decisions;
use super::level::{LevelInput, LevelProblem};
use crate::graph::memory::{classify, lifetime, MemoryClass, MemoryReport};
use crate::graph::Graph;
use crate::graph::TensorId;
use crate::search::Problem;

/// Memory priced into a level problem (see the module doc).
#[derive(Clone, Debug)]
pub struct MemoryPrice {
    /// λ: bytes moved per step one byte of memory per worker is worth.
    pub lambda: f64,
    /// Per tensor: whether its tile counts toward the estimate.
    counted: Vec<bool>,
}

impl MemoryPrice {
    /// The price λ for `graph`: training state always counts; a transient
    /// tensor counts when it is live at the step where the unpartitioned
    /// schedule peaks ([`MemoryReport::peak_at`]).
    pub fn new(graph: &Graph, lambda: f64) -> Self {
        let peak = MemoryReport::of(graph).peak_at.map(|o| o.index());
        let counted = graph
            .tensor_ids()
            .map(|t| match classify(graph, t) {
                MemoryClass::Alias => false,
                MemoryClass::Transient => peak.is_some_and(|s| {
                    let (a, b) = lifetime(graph, t);
                    a <= s && s <= b
                }),
                _ => true,
            })
            .collect();
        MemoryPrice { lambda, counted }
    }

    /// The same tensors priced at another λ.
    pub fn at(&self, lambda: f64) -> Self {
        MemoryPrice {
            lambda,
            counted: self.counted.clone(),
        }
    }

    /// Estimated memory per worker (bytes) of tensor `t` if it is laid out
    /// `layout` at `level` after the outer levels' decisions `d`.
    fn tile_bytes(
        &self,
        input: &LevelInput,
        t: TensorId,
        d: &Decisions,
        level: usize,
        layout: Option<u32>,
    ) -> f64 {
        let tensor = input.graph.tensor(t);
        let mut shape = tensor.shape.clone();
        let splits = d.tensors[t.index()].iter().take(level).copied();
        for (l, s) in splits.chain(std::iter::once(layout)).enumerate() {
            if let Some(n) = s.and_then(|dim| shape.get_mut(dim as usize)) {
                *n = n.div_ceil(input.factors[l]);
            }
        }
        let inner: usize = input.factors[level + 1..].iter().product();
        (shape.iter().product::<usize>() as u64 * tensor.dtype.size_bytes()) as f64 / inner as f64
    }

    /// `lp`'s problem with λ × the estimated memory of each node's
    /// configuration added to its cost.
    pub(crate) fn apply(
        &self,
        input: &LevelInput,
        lp: &LevelProblem,
        d: &Decisions,
        level: usize,
    ) -> Problem {
        let mut problem = lp.problem.clone();
        for (node, cfgs) in problem.nodes.iter_mut().zip(&lp.configs) {
            for (cost, cfg) in node.costs.iter_mut().zip(cfgs) {
                let mem: f64 = cfg
                    .tensors
                    .iter()
                    .filter(|(t, _)| self.counted[t.index()])
                    .map(|(t, l)| self.tile_bytes(input, *t, d, level, *l))
                    .sum();
                *cost += self.lambda * mem;
            }
        }
        problem
    }
}
