//! `spartan`: a Spartan-style greedy baseline (Tofu §6.3).

use super::{Problem, ProblemError, Search, SearchLimits, SearchResult};

/// Free layouts, each level solved greedily, largest tensors decided first
/// ([`crate::search::greedy`]).
pub struct Spartan;

impl Search for Spartan {
    fn name(&self) -> &'static str {
        "spartan"
    }

    fn solve(
        &self,
        problem: &Problem,
        _limits: &SearchLimits,
    ) -> Result<SearchResult, ProblemError> {
        crate::search::greedy::greedy(problem)
    }
}
