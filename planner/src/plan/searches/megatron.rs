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
//! laid out by CriticalDP at every level; at the inner levels they may stay
//! replicated inside the group, with the weightless operators on them
//! (LayerNorm, residual adds, biases) run replicated and a row-parallel
//! matmul's partial sums all-reduced, as Megatron-LM runs them; attention
//! splits by heads (the interval analysis' block regions of `split_qkv`, the
//! fused, head-interleaved QKV projection, so that one column-parallel
//! linear per attention block all-reduces its input gradient once).
//! On gpt-24-2048 (batch 8, k = 8, t = 2) the transformer blocks move exactly
//! the hand count of that plan (`planner/tests/megatron.rs`). Without
//! `--tensor-parallel` the driver keeps the t with the fewest bytes (t = 1 is
//! data parallelism).

use super::{Candidate, LayoutRule, PlanOptions, Search};
/// The inner levels' weight splits; the rule itself lives with the other
/// layout rules ([`crate::plan::decisions`]).
pub use crate::plan::decisions::weight_split;
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
