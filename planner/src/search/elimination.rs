//! Exact dynamic programming on graphs of small treewidth: min-sum variable
//! elimination.
//!
//! Takes a [`Problem`] and a budget (table entries); gives an optimal
//! assignment, or `None` when no elimination order keeps every intermediate
//! table within the budget. This is the DP of Tofu §4.1 generalised from
//! chains (width 1) to any graph: nodes are eliminated one at a time (the one
//! whose new table is smallest first); eliminating a node replaces the
//! factors that mention it by one factor over its neighbours holding, for
//! every neighbour configuration, the cheapest choice for the node. On a
//! chain or tree every table is a vector.

use super::problem::Problem;

/// A cost table over some nodes, row-major in `vars` order.
struct Factor {
    vars: Vec<usize>,
    table: Vec<f64>,
}

/// Eliminate every node optimally, or give up past `budget` table entries.
pub fn eliminate(p: &Problem, budget: usize) -> Option<Vec<usize>> {
    let n = p.nodes.len();
    let size = |v: usize| p.nodes[v].costs.len();
    let mut factors: Vec<Option<Factor>> = p
        .nodes
        .iter()
        .enumerate()
        .map(|(v, x)| {
            Some(Factor {
                vars: vec![v],
                table: x.costs.clone(),
            })
        })
        .collect();
    for e in &p.edges {
        factors.push(Some(Factor {
            vars: vec![e.from, e.to],
            table: e.cost.clone(),
        }));
    }
    let mut alive = vec![true; n];
    // Per eliminated node: its scope (neighbours at elimination) and best choice per scope assignment.
    let mut record: Vec<(usize, Vec<usize>, Vec<u32>)> = Vec::with_capacity(n);
    for _ in 0..n {
        // The node whose elimination makes the smallest table.
        let mut pick: Option<(usize, usize, Vec<usize>)> = None;
        for v in (0..n).filter(|&v| alive[v]) {
            let mut scope: Vec<usize> = factors
                .iter()
                .flatten()
                .filter(|f| f.vars.contains(&v))
                .flat_map(|f| f.vars.iter().copied())
                .filter(|&u| u != v)
                .collect();
            scope.sort_unstable();
            scope.dedup();
            let entries = scope
                .iter()
                .try_fold(1usize, |acc, &u| acc.checked_mul(size(u)))
                .unwrap_or(usize::MAX);
            if pick.as_ref().is_none_or(|(_, best, _)| entries < *best) {
                pick = Some((v, entries, scope));
            }
        }
        let (v, entries, scope) = pick?;
        if entries.saturating_mul(size(v)) > budget {
            return None;
        }
        let involved: Vec<Factor> = factors
            .iter_mut()
            .filter(|f| f.as_ref().is_some_and(|f| f.vars.contains(&v)))
            .filter_map(Option::take)
            .collect();
        let radix: Vec<usize> = scope.iter().map(|&u| size(u)).collect();
        let mut table = vec![0.0; entries];
        let mut best = vec![0u32; entries];
        let mut assign = vec![0usize; scope.len()];
        for slot in 0..entries {
            let mut min = (f64::INFINITY, 0u32);
            for c in 0..size(v) {
                let mut total = 0.0;
                for f in &involved {
                    let mut idx = 0usize;
                    for &u in &f.vars {
                        let val = if u == v {
                            c
                        } else {
                            assign[scope.binary_search(&u).expect("in scope")]
                        };
                        idx = idx * size(u) + val;
                    }
                    total += f.table[idx];
                }
                if total < min.0 {
                    min = (total, c as u32);
                }
            }
            table[slot] = min.0;
            best[slot] = min.1;
            // Next assignment of the scope (row-major).
            for d in (0..assign.len()).rev() {
                assign[d] += 1;
                if assign[d] < radix[d] {
                    break;
                }
                assign[d] = 0;
            }
        }
        factors.push(Some(Factor {
            vars: scope.clone(),
            table,
        }));
        record.push((v, scope, best));
        alive[v] = false;
    }
    // Back-substitute in reverse elimination order.
    let mut out = vec![0usize; n];
    for (v, scope, best) in record.iter().rev() {
        let mut idx = 0usize;
        for &u in scope {
            idx = idx * size(u) + out[u];
        }
        out[*v] = best[idx] as usize;
    }
    Some(out)
}
