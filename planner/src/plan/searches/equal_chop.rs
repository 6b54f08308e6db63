//! `equal-chop`: the non-recursive baseline (Tofu §6.3).

use super::{Candidate, LayoutRule, PlanOptions, Search};

/// One k-way level (no recursion), solved with CriticalDP.
pub struct EqualChop;

impl Search for EqualChop {
    fn name(&self) -> &'static str {
        "equal-chop"
    }

    fn candidates(&self, workers: usize, _opts: &PlanOptions) -> Vec<Candidate> {
        let factors = if workers > 1 {
            vec![workers]
        } else {
            crate::plan::tile::factorize(workers)
        };
        Candidate::uniform(factors, LayoutRule::Free, None)
    }
}
