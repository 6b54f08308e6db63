//! Exact dynamic programming on graphs of small treewidth: min-sum variable
//! elimination.
//!
//! Takes a [`Problem`] and a budget (table entries); gives an optimal
//! assignment, or `None` when the greedy elimination order below makes a
//! table larger than the budget. This is the DP of Tofu §4.1 generalised
//! from chains (width 1) to any graph: nodes are eliminated one at a time
//! (the one whose new table is smallest first, ties to the lowest index);
//! eliminating a node replaces the factors that mention it by one factor over
//! its neighbours holding, for every neighbour configuration, the cheapest
//! choice for the node. On a chain or tree every table is a vector.
//!
//! The interaction graph (which nodes share a factor) is kept as neighbour
//! sets and each node's table size is cached, so choosing the next node
//! costs O(n) and eliminating one updates only its neighbours: O(n²) over
//! the whole problem plus the table work.

use std::collections::BTreeSet;

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
    // Factors mentioning each node (some may have been consumed since).
    let mut by_var: Vec<Vec<usize>> = (0..n).map(|v| vec![v]).collect();
    let mut nbrs: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for (i, e) in p.edges.iter().enumerate() {
        by_var[e.from].push(n + i);
        by_var[e.to].push(n + i);
        nbrs[e.from].insert(e.to);
        nbrs[e.to].insert(e.from);
    }
    // Entries of the table eliminating v would make (product of neighbour sizes).
    let entries_of = |nb: &BTreeSet<usize>| {
        nb.iter()
            .try_fold(1usize, |acc, &u| acc.checked_mul(size(u)))
            .unwrap_or(usize::MAX)
    };
    let mut entries: Vec<usize> = nbrs.iter().map(entries_of).collect();
    let mut alive = vec![true; n];
    // Per eliminated node: its scope (neighbours at elimination) and best choice per scope assignment.
    let mut record: Vec<(usize, Vec<usize>, Vec<u32>)> = Vec::with_capacity(n);
    for _ in 0..n {
        let mut pick: Option<usize> = None;
        for v in (0..n).filter(|&v| alive[v]) {
            if pick.is_none_or(|b| entries[v] < entries[b]) {
                pick = Some(v);
            }
        }
        let v = pick?;
        let (count, sv) = (entries[v], size(v));
        if count.saturating_mul(sv) > budget {
            return None;
        }
        let scope: Vec<usize> = nbrs[v].iter().copied().collect();
        let involved: Vec<Factor> = by_var[v]
            .iter()
            .filter_map(|&f| factors[f].take())
            .collect();
        // Per involved factor: its stride for each scope position and for v.
        let strides: Vec<(Vec<usize>, usize)> = involved
            .iter()
            .map(|f| {
                let mut s = vec![0usize; scope.len()];
                let mut sv_stride = 0;
                let mut stride = 1;
                for &u in f.vars.iter().rev() {
                    if u == v {
                        sv_stride = stride;
                    } else {
                        s[scope.binary_search(&u).expect("factor vars are in scope")] = stride;
                    }
                    stride *= size(u);
                }
                (s, sv_stride)
            })
            .collect();
        let radix: Vec<usize> = scope.iter().map(|&u| size(u)).collect();
        let mut table = vec![0.0; count];
        let mut best = vec![0u32; count];
        let mut assign = vec![0usize; scope.len()];
        let mut base = vec![0usize; involved.len()];
        for slot in 0..count {
            for (b, (s, _)) in base.iter_mut().zip(&strides) {
                *b = assign.iter().zip(s).map(|(a, s)| a * s).sum();
            }
            let mut min = (f64::INFINITY, 0u32);
            for c in 0..sv {
                let mut total = 0.0;
                for ((f, (_, s_v)), b) in involved.iter().zip(&strides).zip(&base) {
                    total += f.table[b + c * s_v];
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
        let id = factors.len();
        factors.push(Some(Factor {
            vars: scope.clone(),
            table,
        }));
        alive[v] = false;
        for &u in &scope {
            by_var[u].push(id);
            nbrs[u].remove(&v);
            nbrs[u].extend(scope.iter().copied().filter(|&w| w != u));
            entries[u] = entries_of(&nbrs[u]);
        }
        nbrs[v].clear();
        record.push((v, scope, best));
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
