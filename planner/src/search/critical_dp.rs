//! CriticalDP (Tofu §4.2.2): DP along the critical path, fix, repeat.
//!
//! Takes a [`Problem`] whose node indices are in a topological order of the
//! coarsened graph (edges are oriented from the lower to the higher index for
//! path finding). The length of a path is the total bytes of the tensors on it
//! (node weights plus edge weights). The longest path among the unfixed nodes
//! is optimised with [`solve_path`], holding every fixed node at its
//! configuration; its nodes are then fixed and the next ("secondary") critical
//! path is taken among the remaining nodes, until every node is fixed.
//! Gives the assignment; on a chain the first path is the whole chain, so the
//! result is the optimum.
//!
//! Before the paths, every dangling tree (a weight hanging off its operator, a
//! branch that rejoins nothing) is folded into the node it hangs from, as
//! Tofu's DP step does when it adds an operator "with all ways of partitioning
//! the operator and its input/output tensors": a leaf's best configuration
//! for each configuration of its neighbour is added to the neighbour's costs
//! (tree-DP messages), leaves are peeled until none is left, CriticalDP runs
//! on the remaining core, and the peeled nodes take their best response in
//! reverse order. On a tree the core is one node, so the result is optimal.
//!
//! The core is then solved exactly by variable elimination (the DP of §4.1
//! generalised to small treewidth, [`super::elimination`]) when its tables
//! stay within [`ELIMINATION_BUDGET`] entries; only larger cores go through
//! the critical paths.

use std::collections::BTreeMap;

use super::path_dp::solve_path;
use super::problem::{Edge, Node, Problem, ProblemError, SearchLimits, SearchResult, StopReason};

/// Run CriticalDP (see the module doc) with the default [`SearchLimits`].
///
/// Errors: malformed problem; a path with no feasible choice given the nodes
/// fixed before it.
pub fn critical_dp(p: &Problem) -> Result<SearchResult, ProblemError> {
    critical_dp_with(p, &SearchLimits::default())
}

/// Run CriticalDP with `limits.refine_rounds` rounds of refinement at most:
/// [`StopReason::RoundLimit`] when refinement was still improving after them
/// (the best assignment found is returned); `Optimal` when the result is
/// exact (a tree, or a core small enough for elimination), else `Completed`.
///
/// Errors: as [`critical_dp`].
pub fn critical_dp_with(p: &Problem, limits: &SearchLimits) -> Result<SearchResult, ProblemError> {
    p.validate()?;
    let peeled = peel(p);
    // The DP is exact whenever the core's elimination tables stay small
    // (chains, trees, ladders of unrolled RNNs); otherwise critical paths.
    let exact = super::elimination::eliminate(&peeled.core, ELIMINATION_BUDGET);
    let (core, cut_short) = match &exact {
        Some(a) => (a.clone(), false),
        None => critical_dp_core(&peeled.core, limits.refine_rounds)?,
    };
    let mut assignment = vec![0usize; p.nodes.len()];
    for (ci, &v) in peeled.core_nodes.iter().enumerate() {
        assignment[v] = core[ci];
    }
    for (u, v, best) in peeled.order.iter().rev() {
        assignment[*u] = best[assignment[*v]];
    }
    let cost = p.cost(&assignment);
    if !cost.is_finite() {
        return Err(ProblemError::Infeasible);
    }
    let is_tree =
        p.edges.iter().all(|e| e.from.abs_diff(e.to) == 1) || peeled.core_nodes.len() <= 1;
    let stop_reason = if is_tree || exact.is_some() {
        StopReason::Optimal
    } else if cut_short {
        StopReason::RoundLimit
    } else {
        StopReason::Completed
    };
    Ok(SearchResult {
        assignment,
        cost,
        stop_reason,
    })
}

/// Largest DP table (entries) the exact elimination may build before
/// CriticalDP falls back to critical paths.
pub const ELIMINATION_BUDGET: usize = 1 << 16;

/// A problem with its dangling trees folded in.
struct Peeled {
    /// The remaining nodes (original indices, increasing).
    core_nodes: Vec<usize>,
    /// The problem over them (node costs include the folded trees).
    core: Problem,
    /// Peel order: (leaf, its neighbour, leaf's best configuration per neighbour configuration).
    order: Vec<(usize, usize, Vec<usize>)>,
}

fn peel(p: &Problem) -> Peeled {
    let n = p.nodes.len();
    let mut unary: Vec<Vec<f64>> = p.nodes.iter().map(|x| x.costs.clone()).collect();
    // Neighbour → edges, per node.
    let mut nbrs: Vec<BTreeMap<usize, Vec<usize>>> = vec![BTreeMap::new(); n];
    for (i, e) in p.edges.iter().enumerate() {
        nbrs[e.from].entry(e.to).or_default().push(i);
        nbrs[e.to].entry(e.from).or_default().push(i);
    }
    let mut alive = vec![true; n];
    let mut order = Vec::new();
    let mut stack: Vec<usize> = (0..n).filter(|&v| nbrs[v].len() == 1).collect();
    while let Some(u) = stack.pop() {
        if !alive[u] || nbrs[u].len() != 1 {
            continue;
        }
        let (&v, edges) = nbrs[u].iter().next().expect("one neighbour");
        let edges = edges.clone();
        let (su, sv) = (p.configs(u), p.configs(v));
        let mut best = vec![0usize; sv];
        let unary_u = unary[u].clone();
        for (a, slot) in best.iter_mut().enumerate() {
            let mut m = (f64::INFINITY, 0usize);
            for (b, &ub) in unary_u.iter().enumerate().take(su) {
                let mut c = ub;
                for &ei in &edges {
                    let e = &p.edges[ei];
                    c += if e.from == u {
                        p.edge_cost(e, b, a)
                    } else {
                        p.edge_cost(e, a, b)
                    };
                }
                if c < m.0 {
                    m = (c, b);
                }
            }
            unary[v][a] += m.0;
            *slot = m.1;
        }
        alive[u] = false;
        nbrs[u].clear();
        nbrs[v].remove(&u);
        order.push((u, v, best));
        if nbrs[v].len() == 1 {
            stack.push(v);
        }
    }
    let core_nodes: Vec<usize> = (0..n).filter(|&v| alive[v]).collect();
    let mut index = vec![usize::MAX; n];
    for (i, &v) in core_nodes.iter().enumerate() {
        index[v] = i;
    }
    let core = Problem {
        nodes: core_nodes
            .iter()
            .map(|&v| Node {
                name: p.nodes[v].name.clone(),
                costs: unary[v].clone(),
                weight: p.nodes[v].weight,
            })
            .collect(),
        edges: p
            .edges
            .iter()
            .filter(|e| alive[e.from] && alive[e.to])
            .map(|e| Edge {
                from: index[e.from],
                to: index[e.to],
                cost: e.cost.clone(),
                weight: e.weight,
            })
            .collect(),
    };
    Peeled {
        core_nodes,
        core,
        order,
    }
}

/// CriticalDP proper on a problem without dangling trees, then refinement:
/// each critical path, each pair of adjacent nodes, then each node is
/// re-optimised with every other node held fixed (block coordinate descent);
/// a change is kept only if it lowers the total cost, so refinement never
/// makes the plan worse. At most `rounds` rounds per refinement; also gives
/// whether a refinement was still improving when it ran out of rounds.
fn critical_dp_core(p: &Problem, rounds: usize) -> Result<(Vec<usize>, bool), ProblemError> {
    let (first, paths) = first_pass(p)?;
    // Refine from the critical-path assignment and from the heaviest-first
    // greedy one; keep the cheaper result.
    let (mut best, mut cut_short) = refine(p, &paths, first, rounds);
    if let Ok(g) = super::greedy::greedy(p) {
        let (other, cut) = refine(p, &paths, g.assignment, rounds);
        cut_short |= cut;
        if p.cost(&other) < p.cost(&best) {
            best = other;
        }
    }
    Ok((best, cut_short))
}

/// Block coordinate descent from `assignment` (see [`critical_dp_core`]), at
/// most `rounds` rounds; whether the last round still improved (the limit,
/// not convergence, stopped it).
fn refine(
    p: &Problem,
    paths: &[Vec<usize>],
    mut assignment: Vec<usize>,
    rounds: usize,
) -> (Vec<usize>, bool) {
    let incidence = p.incidence();
    let mut cost = p.cost(&assignment);
    let singles: Vec<Vec<usize>> = (0..p.nodes.len()).map(|v| vec![v]).collect();
    // Adjacent pairs, optimised jointly: escapes optima where two coupled
    // nodes must change together.
    let mut pairs: Vec<Vec<usize>> = p
        .edges
        .iter()
        .map(|e| vec![e.from.min(e.to), e.from.max(e.to)])
        .collect();
    pairs.sort();
    pairs.dedup();
    for _round in 0..rounds {
        let before = cost;
        for path in paths.iter().chain(&pairs).chain(&singles) {
            let mut fixed: Vec<Option<usize>> = assignment.iter().map(|&a| Some(a)).collect();
            for &v in path {
                fixed[v] = None;
            }
            let Ok(configs) = solve_path(p, &incidence, path, &fixed) else {
                continue;
            };
            let mut candidate = assignment.clone();
            for (&v, c) in path.iter().zip(configs) {
                candidate[v] = c;
            }
            let c = p.cost(&candidate);
            if c < cost {
                cost = c;
                assignment = candidate;
            }
        }
        if cost >= before {
            return (assignment, false);
        }
    }
    (assignment, true)
}

/// The critical paths, in the order they were fixed, and the assignment.
fn first_pass(p: &Problem) -> Result<(Vec<usize>, Vec<Vec<usize>>), ProblemError> {
    let n = p.nodes.len();
    let incidence = p.incidence();
    // Predecessors (lower index) with the summed weight of the joining edges.
    let mut preds: Vec<BTreeMap<usize, f64>> = vec![BTreeMap::new(); n];
    for e in &p.edges {
        let (lo, hi) = if e.from < e.to {
            (e.from, e.to)
        } else {
            (e.to, e.from)
        };
        *preds[hi].entry(lo).or_insert(0.0) += e.weight;
    }
    let mut fixed: Vec<Option<usize>> = vec![None; n];
    let mut remaining = n;
    let mut paths: Vec<Vec<usize>> = Vec::new();
    while remaining > 0 {
        // Longest path over unfixed nodes; ties prefer more nodes, then lower indices.
        let mut dist: Vec<(f64, usize)> = vec![(0.0, 0); n];
        let mut pred: Vec<Option<usize>> = vec![None; n];
        let mut end = None;
        for v in 0..n {
            if fixed[v].is_some() {
                continue;
            }
            let mut best = (0.0, 0usize);
            let mut bp = None;
            for (&u, &w) in &preds[v] {
                if fixed[u].is_some() {
                    continue;
                }
                let cand = (dist[u].0 + w, dist[u].1);
                if better(cand, best) {
                    best = cand;
                    bp = Some(u);
                }
            }
            dist[v] = (best.0 + p.nodes[v].weight, best.1 + 1);
            pred[v] = bp;
            if end.is_none_or(|e: usize| better(dist[v], dist[e])) {
                end = Some(v);
            }
        }
        let Some(mut v) = end else { break };
        let mut path = vec![v];
        while let Some(u) = pred[v] {
            path.push(u);
            v = u;
        }
        path.reverse();
        let configs = solve_path(p, &incidence, &path, &fixed)?;
        for (&v, c) in path.iter().zip(configs) {
            fixed[v] = Some(c);
        }
        remaining -= path.len();
        paths.push(path);
    }
    Ok((fixed.into_iter().map(|c| c.unwrap_or(0)).collect(), paths))
}

fn better(a: (f64, usize), b: (f64, usize)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 > b.1)
}
