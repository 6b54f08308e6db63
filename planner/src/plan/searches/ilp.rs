//! `ilp`: the exact pairwise MIP at every recursion level (the reference),
//! over the same candidate plans as CriticalDP.

use super::critical_dp::CriticalDp;
use super::{Candidate, PlanOptions, Problem, ProblemError, Search, SearchLimits, SearchResult};

/// The exact marginal MIP ([`crate::search::ilp`], good_lp) per level, on
/// every candidate plan CriticalDP weighs ([`CriticalDp`]'s candidates: the
/// recursion over the prime factors of k with weights, gradients and
/// optimizer state replicable at every level, one k-way level, whole-model
/// data parallelism when it fits, the hybrids with data parallelism on
/// the outer levels, and Megatron-LM's tensor-parallel hybrids for every
/// t > 1 dividing k). Same space, same level problems and the same exact
/// byte count of the chosen plan; only the solver of a level differs, so the
/// ILP stays the exact judge of CriticalDP's per-level choices (Tofu §6.3,
/// issue 14).
pub struct Ilp;

impl Search for Ilp {
    fn name(&self) -> &'static str {
        "ilp"
    }

    fn candidates(&self, workers: usize, opts: &PlanOptions) -> Vec<Candidate> {
        CriticalDp.candidates(workers, opts)
    }

    fn solve(
        &self,
        problem: &Problem,
        limits: &SearchLimits,
    ) -> Result<SearchResult, ProblemError> {
        crate::search::ilp::ilp_with(problem, limits)
    }
}
