//! The searches against their references: chain DP against brute force
//! (≥ 200 random chains), CriticalDP against the exact ILP on chains (equal)
//! and on DAGs (never better than the optimum), the ILP against brute force on
//! small random DAGs; a search stopped by a limit says which limit.

use std::time::Duration;

use planner::search::brute::brute;
use planner::search::critical_dp::{critical_dp, critical_dp_with};
use planner::search::ilp::{ilp, ilp_with};
use planner::search::path_dp::chain_dp;
use planner::search::{Edge, Node, Problem, SearchLimits, StopReason};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A random problem: `n` nodes with 1..=max_s configurations; a chain when
/// `extra == 0`, otherwise `extra` further edges between random earlier→later nodes.
fn random_problem(seed: u64, n: usize, max_s: usize, extra: usize) -> Problem {
    let mut rng = StdRng::seed_from_u64(seed);
    let cost = |rng: &mut StdRng| -> f64 {
        // Integers keep sums exact, so "equal" means equal; some infinities.
        if rng.gen_ratio(1, 25) {
            f64::INFINITY
        } else {
            rng.gen_range(0..100) as f64
        }
    };
    let nodes: Vec<Node> = (0..n)
        .map(|i| {
            let s = rng.gen_range(1..=max_s);
            let mut costs: Vec<f64> = (0..s).map(|_| cost(&mut rng)).collect();
            costs[0] = costs[0].min(1e3); // keep every problem feasible
            Node {
                name: format!("n{i}"),
                costs,
                weight: rng.gen_range(0..10) as f64,
            }
        })
        .collect();
    let mut edges = Vec::new();
    let add = |rng: &mut StdRng, from: usize, to: usize, edges: &mut Vec<Edge>| {
        let (a, b) = (nodes[from].costs.len(), nodes[to].costs.len());
        // Infinite pairwise costs only on chains: CriticalDP fixes a path
        // without seeing off-path edges, so an infinite off-path pair can
        // leave it without a feasible choice (node infinities are fine).
        let mut c: Vec<f64> = (0..a * b)
            .map(|_| {
                if extra == 0 {
                    cost(rng)
                } else {
                    rng.gen_range(0..100) as f64
                }
            })
            .collect();
        c[0] = c[0].min(1e3);
        edges.push(Edge {
            from,
            to,
            cost: c,
            weight: rng.gen_range(1..100) as f64,
        });
    };
    for i in 1..n {
        add(&mut rng, i - 1, i, &mut edges);
    }
    for _ in 0..extra {
        let u = rng.gen_range(0..n - 1);
        let v = rng.gen_range(u + 1..n);
        add(&mut rng, u, v, &mut edges);
    }
    Problem { nodes, edges }
}

#[test]
fn chain_dp_equals_brute_force_on_200_random_chains() {
    for seed in 0..240 {
        let n = 1 + (seed as usize % 7);
        let p = random_problem(seed, n, 4, 0);
        let dp = chain_dp(&p).unwrap();
        let bf = brute(&p, 1 << 20).unwrap();
        assert_eq!(
            dp.cost, bf.cost,
            "seed {seed}: chain DP {} vs brute force {}",
            dp.cost, bf.cost
        );
        assert_eq!(dp.stop_reason, StopReason::Optimal);
    }
}

#[test]
fn critical_dp_equals_ilp_on_every_chain() {
    for seed in 0..120 {
        let n = 2 + (seed as usize % 30);
        let p = random_problem(1000 + seed, n, 3, 0);
        let cdp = critical_dp(&p).unwrap();
        let opt = ilp(&p).unwrap();
        assert_eq!(cdp.cost, opt.cost, "seed {seed}");
    }
}

#[test]
fn ilp_equals_brute_force_on_random_dags() {
    for seed in 0..80 {
        let n = 2 + (seed as usize % 6);
        let p = random_problem(5000 + seed, n, 3, 1 + seed as usize % 5);
        let opt = ilp(&p).unwrap();
        let bf = brute(&p, 1 << 20).unwrap();
        assert_eq!(opt.cost, bf.cost, "seed {seed}");
        let cdp = critical_dp(&p).unwrap();
        assert!(
            cdp.cost >= opt.cost,
            "seed {seed}: a heuristic cannot beat the optimum"
        );
    }
}

#[test]
fn malformed_problems_are_errors_not_panics() {
    let mut p = random_problem(1, 3, 2, 0);
    p.edges[0].cost.pop();
    assert!(critical_dp(&p).is_err() && ilp(&p).is_err() && chain_dp(&p).is_err());
    let mut p = random_problem(1, 3, 2, 0);
    p.edges[0].to = 7;
    assert!(critical_dp(&p).is_err());
    let mut p = random_problem(1, 3, 2, 0);
    p.nodes[1].costs.clear();
    assert!(ilp(&p).is_err());
}

#[test]
fn ilp_solves_1000_node_problems_with_marginal_constraints() {
    // Chains, trees and DAGs with 3 configurations per node: the marginal MIP
    // must solve them to optimality (the issue measured < 1 s with microlp).
    for (name, extra) in [("chain", 0usize), ("dag", 300)] {
        let p = random_problem(77, 1000, 3, extra);
        let p = Problem {
            nodes: p
                .nodes
                .into_iter()
                .map(|mut n| {
                    n.costs.resize(3, 50.0);
                    n.costs.iter_mut().for_each(|c| *c = c.min(1e3));
                    n
                })
                .collect(),
            edges: p.edges,
        };
        let p = Problem {
            edges: p
                .edges
                .iter()
                .map(|e| Edge {
                    cost: (0..9)
                        .map(|i| e.cost.get(i).copied().unwrap_or(30.0).min(1e3))
                        .collect(),
                    ..e.clone()
                })
                .collect(),
            nodes: p.nodes,
        };
        let opt = ilp(&p).unwrap();
        let cdp = critical_dp(&p).unwrap();
        assert!(cdp.cost >= opt.cost, "{name}");
        if extra == 0 {
            assert_eq!(cdp.cost, opt.cost, "{name}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn critical_dp_is_feasible_and_never_beats_brute_force(seed in 0u64..1_000_000, n in 2usize..7, extra in 0usize..6) {
        let p = random_problem(seed, n, 3, extra);
        let cdp = critical_dp(&p).unwrap();
        let bf = brute(&p, 1 << 20).unwrap();
        prop_assert!(cdp.cost >= bf.cost);
        prop_assert_eq!(cdp.cost, p.cost(&cdp.assignment));
    }
}

#[test]
fn elimination_is_exact_on_random_dags() {
    use planner::search::elimination::eliminate;
    for seed in 0..120 {
        let n = 2 + (seed as usize % 7);
        let p = random_problem(9000 + seed, n, 3, seed as usize % 6);
        let a = eliminate(&p, 1 << 20).expect("small problems fit the budget");
        let bf = brute(&p, 1 << 20).unwrap();
        assert_eq!(p.cost(&a), bf.cost, "seed {seed}");
    }
    // A budget too small to hold any table gives up instead of guessing.
    let p = random_problem(3, 6, 3, 4);
    assert!(eliminate(&p, 1).is_none());
}

/// Limits are results: CriticalDP cut short by its refinement round limit
/// says `RoundLimit` (never `Completed`) and still returns a feasible plan;
/// once its refinement converges within the limit it says `Completed`, and
/// further rounds change nothing.
#[test]
fn critical_dp_reports_its_round_limit() {
    // Dense enough that elimination's tables exceed their budget: the
    // critical paths and their refinement run.
    let p = random_problem(11, 48, 4, 160);
    let with = |rounds: usize| {
        let limits = SearchLimits {
            refine_rounds: rounds,
            ..SearchLimits::default()
        };
        critical_dp_with(&p, &limits).unwrap()
    };
    let zero = with(0);
    assert_eq!(zero.stop_reason, StopReason::RoundLimit);
    assert_eq!(zero.cost, p.cost(&zero.assignment));
    let converged = (1..=64)
        .find(|&r| with(r).stop_reason != StopReason::RoundLimit)
        .expect("refinement converges");
    assert!(converged > 1, "the first round improves this problem");
    for r in 0..converged {
        let cut = with(r);
        assert_eq!(cut.stop_reason, StopReason::RoundLimit, "{r} rounds");
        assert!(cut.cost >= with(converged).cost, "{r} rounds");
    }
    let done = with(converged);
    assert_eq!(done.stop_reason, StopReason::Completed);
    let more = with(converged + 5);
    assert_eq!(
        (more.stop_reason, &more.assignment),
        (StopReason::Completed, &done.assignment)
    );
    // The default limit is one of these budgets.
    let default = critical_dp(&p).unwrap();
    assert_eq!(
        default.stop_reason,
        with(SearchLimits::REFINE_ROUNDS).stop_reason
    );
}

/// Limits are results: the ILP stopped by its time limit says `TimeLimit`
/// (never `Optimal`) and returns its warm start or better; without a limit
/// the same problem is solved to a proven optimum.
#[test]
fn ilp_reports_its_time_limit() {
    let p = random_problem(5, 16, 3, 24);
    let limits = SearchLimits {
        ilp_time_limit: Some(Duration::ZERO),
        ..SearchLimits::default()
    };
    let timed = ilp_with(&p, &limits).unwrap();
    assert_eq!(timed.stop_reason, StopReason::TimeLimit);
    assert_eq!(timed.cost, p.cost(&timed.assignment));
    let start = critical_dp(&p).unwrap();
    assert!(timed.cost <= start.cost);
    let exact = ilp(&p).unwrap();
    assert_eq!(exact.stop_reason, StopReason::Optimal);
    assert!(exact.cost <= timed.cost);
    let generous = SearchLimits {
        ilp_time_limit: Some(Duration::from_secs(3600)),
        ..SearchLimits::default()
    };
    let within = ilp_with(&p, &generous).unwrap();
    assert_eq!(
        (within.stop_reason, within.cost),
        (StopReason::Optimal, exact.cost)
    );
}

/// A plan's reason is the first limit that stopped one of its levels.
#[test]
fn the_overall_reason_is_the_first_limit() {
    use StopReason::*;
    assert_eq!(StopReason::overall([]), Optimal);
    assert_eq!(StopReason::overall([Optimal, Optimal]), Optimal);
    assert_eq!(StopReason::overall([Optimal, Completed]), Completed);
    assert_eq!(
        StopReason::overall([Completed, TimeLimit, RoundLimit]),
        TimeLimit
    );
    assert_eq!(StopReason::overall([RoundLimit, Optimal]), RoundLimit);
    assert!(!Optimal.is_limit() && !Completed.is_limit());
}
