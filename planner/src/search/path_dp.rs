//! The dynamic program of Tofu §4.1: optimal configurations along a path.
//!
//! Takes a [`Problem`], a path (node indices in order) and the nodes already
//! fixed; gives the configurations of the path nodes minimising: their node
//! costs, the costs of edges between a path node and a fixed node, and the
//! costs of edges between consecutive path nodes. Edges between
//! non-consecutive path nodes or to unfixed off-path nodes are not seen (they
//! are counted when the whole assignment is evaluated). O(L·S²) for a path of
//! L nodes with S configurations each. On a chain (every edge joins consecutive
//! nodes) the result over the whole chain is the global optimum.

use super::problem::{Problem, ProblemError, SearchResult, StopReason};

/// Optimise `path` given `fixed` (see the module doc). Ties take the lowest
/// configuration index, so the result is deterministic.
///
/// Errors: every choice along the path has infinite cost.
pub fn solve_path(
    p: &Problem,
    incidence: &[Vec<usize>],
    path: &[usize],
    fixed: &[Option<usize>],
) -> Result<Vec<usize>, ProblemError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    // Node costs plus edges to fixed nodes.
    let unary: Vec<Vec<f64>> = path
        .iter()
        .map(|&v| {
            let mut u = p.nodes[v].costs.clone();
            for &ei in &incidence[v] {
                let e = &p.edges[ei];
                let (other, v_is_from) = if e.from == v {
                    (e.to, true)
                } else {
                    (e.from, false)
                };
                if let Some(c) = fixed[other] {
                    for (a, ua) in u.iter_mut().enumerate() {
                        *ua += if v_is_from {
                            p.edge_cost(e, a, c)
                        } else {
                            p.edge_cost(e, c, a)
                        };
                    }
                }
            }
            u
        })
        .collect();
    let mut best: Vec<Vec<f64>> = vec![unary[0].clone()];
    let mut back: Vec<Vec<usize>> = vec![vec![0; unary[0].len()]];
    for i in 1..path.len() {
        let (prev, cur) = (path[i - 1], path[i]);
        let (sp, sc) = (p.configs(prev), p.configs(cur));
        // Sum of edges joining prev and cur, as [prev config][cur config].
        let mut pair = vec![0.0; sp * sc];
        for &ei in &incidence[cur] {
            let e = &p.edges[ei];
            if e.from == prev && e.to == cur {
                for a in 0..sp {
                    for b in 0..sc {
                        pair[a * sc + b] += p.edge_cost(e, a, b);
                    }
                }
            } else if e.from == cur && e.to == prev {
                for a in 0..sp {
                    for b in 0..sc {
                        pair[a * sc + b] += p.edge_cost(e, b, a);
                    }
                }
            }
        }
        let mut row = vec![f64::INFINITY; sc];
        let mut brow = vec![0usize; sc];
        for b in 0..sc {
            for a in 0..sp {
                let c = best[i - 1][a] + pair[a * sc + b];
                if c < row[b] {
                    row[b] = c;
                    brow[b] = a;
                }
            }
            row[b] += unary[i][b];
        }
        best.push(row);
        back.push(brow);
    }
    let last = best.len() - 1;
    let (mut arg, mut min) = (0, f64::INFINITY);
    for (a, &c) in best[last].iter().enumerate() {
        if c < min {
            min = c;
            arg = a;
        }
    }
    if !min.is_finite() {
        return Err(ProblemError::Infeasible);
    }
    let mut out = vec![0; path.len()];
    out[last] = arg;
    for i in (1..path.len()).rev() {
        out[i - 1] = back[i][out[i]];
    }
    Ok(out)
}

/// DP over all nodes in index order, as one path. Optimal
/// ([`StopReason::Optimal`]) when every edge joins consecutive indices.
///
/// Errors: malformed or infeasible problem.
pub fn chain_dp(p: &Problem) -> Result<SearchResult, ProblemError> {
    p.validate()?;
    let path: Vec<usize> = (0..p.nodes.len()).collect();
    let fixed = vec![None; p.nodes.len()];
    let assignment = solve_path(p, &p.incidence(), &path, &fixed)?;
    let is_chain = p.edges.iter().all(|e| e.from.abs_diff(e.to) == 1);
    let cost = p.cost(&assignment);
    let stop_reason = if is_chain {
        StopReason::Optimal
    } else {
        StopReason::Completed
    };
    Ok(SearchResult {
        assignment,
        cost,
        stop_reason,
    })
}
