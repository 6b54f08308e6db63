//! `ilp`: the exact pairwise MIP at every recursion level (the reference).

use super::{Problem, ProblemError, Search, SearchResult};

/// The exact marginal MIP ([`crate::search::ilp`], good_lp) per level over
/// the prime factors of k, free layouts.
pub struct Ilp;

impl Search for Ilp {
    fn name(&self) -> &'static str {
        "ilp"
    }

    fn solve(&self, problem: &Problem) -> Result<SearchResult, ProblemError> {
        crate::search::ilp::ilp(problem)
    }
}
