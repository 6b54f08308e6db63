//! Exhaustive search: the oracle for tests on tiny problems.
//!
//! Takes a [`Problem`] with at most `limit` assignments; gives the optimum.

use super::problem::{Problem, ProblemError, SearchResult, StopReason};

/// Enumerate every assignment (at most `limit` of them) and return the best.
///
/// Errors: malformed problem; more than `limit` assignments (as
/// [`ProblemError::Solver`]); every assignment infeasible.
pub fn brute(p: &Problem, limit: u64) -> Result<SearchResult, ProblemError> {
    p.validate()?;
    let total = p
        .nodes
        .iter()
        .try_fold(1u64, |acc, n| acc.checked_mul(n.costs.len() as u64));
    if total.is_none_or(|t| t > limit) {
        return Err(ProblemError::Solver(format!(
            "brute force over more than {limit} assignments"
        )));
    }
    let mut a = vec![0usize; p.nodes.len()];
    let mut best = (f64::INFINITY, a.clone());
    loop {
        let c = p.cost(&a);
        if c < best.0 {
            best = (c, a.clone());
        }
        let mut i = 0;
        loop {
            if i == a.len() {
                return if best.0.is_finite() {
                    Ok(SearchResult {
                        assignment: best.1,
                        cost: best.0,
                        stop_reason: StopReason::Optimal,
                    })
                } else {
                    Err(ProblemError::Infeasible)
                };
            }
            a[i] += 1;
            if a[i] < p.nodes[i].costs.len() {
                break;
            }
            a[i] = 0;
            i += 1;
        }
    }
}
