//! Greedy search in the style of Spartan (Tofu §6.3 baseline): decide nodes
//! from the heaviest (most tensor bytes) to the lightest, each taking the
//! configuration that is cheapest given the nodes decided before it; edges
//! to undecided nodes are ignored.
//!
//! Takes a [`Problem`]; gives an assignment ([`StopReason::Completed`]).

use super::problem::{Problem, ProblemError, SearchResult, StopReason};

/// Run the greedy search (see the module doc).
///
/// Errors: malformed problem; an assignment of infinite cost.
pub fn greedy(p: &Problem) -> Result<SearchResult, ProblemError> {
    p.validate()?;
    let inc = p.incidence();
    let mut order: Vec<usize> = (0..p.nodes.len()).collect();
    order.sort_by(|&a, &b| {
        p.nodes[b]
            .weight
            .total_cmp(&p.nodes[a].weight)
            .then(a.cmp(&b))
    });
    let mut fixed: Vec<Option<usize>> = vec![None; p.nodes.len()];
    for v in order {
        let mut best = (f64::INFINITY, 0);
        for a in 0..p.configs(v) {
            let mut c = p.nodes[v].costs[a];
            for &ei in &inc[v] {
                let e = &p.edges[ei];
                if e.from == v {
                    if let Some(b) = fixed[e.to] {
                        c += p.edge_cost(e, a, b);
                    }
                } else if let Some(b) = fixed[e.from] {
                    c += p.edge_cost(e, b, a);
                }
            }
            if c < best.0 {
                best = (c, a);
            }
        }
        fixed[v] = Some(best.1);
    }
    let assignment: Vec<usize> = fixed.into_iter().map(|x| x.unwrap_or(0)).collect();
    let cost = p.cost(&assignment);
    if !cost.is_finite() {
        return Err(ProblemError::Infeasible);
    }
    Ok(SearchResult {
        assignment,
        cost,
        stop_reason: StopReason::Completed,
    })
}
