//! The exact reference: the pairwise strategy-selection MIP with marginal
//! constraints, solved by good_lp's pure-Rust `microlp` backend.
//!
//! Takes a [`Problem`]; gives a proven optimum. Variables: binary x[v,a]
//! (node v takes configuration a) and continuous y[e,a,b] ∈ [0, 1] (edge e
//! has ends configured a, b), with Σ_a x[v,a] = 1, Σ_b y[e,a,b] = x[u,a] and
//! Σ_a y[e,a,b] = x[v,b]. The marginal form is tight on trees and keeps
//! branch-and-bound small on DAGs, where the one-sided linearisation
//! (y ≥ x_u + x_v − 1) blows up. Infinite costs fix their variable to 0.
//!
//! With a time limit ([`SearchLimits::ilp_time_limit`]) the solve starts from
//! CriticalDP's assignment and stops at the limit with the best assignment
//! found ([`StopReason::TimeLimit`]); without one it runs to a proven optimum.

use good_lp::{
    microlp, variable, Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus,
    SolverModel, Variable, WithInitialSolution, WithTimeLimit,
};

use super::problem::{Problem, ProblemError, SearchLimits, SearchResult, StopReason};

/// Solve exactly (see the module doc), without a time limit.
///
/// Errors: malformed problem; infeasible; the solver's own failure.
pub fn ilp(p: &Problem) -> Result<SearchResult, ProblemError> {
    ilp_with(p, &SearchLimits::default())
}

/// Solve within `limits.ilp_time_limit` (see the module doc): `Optimal` when
/// the optimum was proved, [`StopReason::TimeLimit`] when the limit stopped
/// the solve first.
///
/// Errors: as [`ilp`].
pub fn ilp_with(p: &Problem, limits: &SearchLimits) -> Result<SearchResult, ProblemError> {
    p.validate()?;
    let mut vars = ProblemVariables::new();
    let mut objective = Expression::default();
    let x: Vec<Vec<Variable>> = p
        .nodes
        .iter()
        .map(|n| {
            n.costs
                .iter()
                .map(|&c| {
                    let v = if c.is_finite() {
                        vars.add(variable().binary())
                    } else {
                        vars.add(variable().min(0).max(0))
                    };
                    if c.is_finite() && c != 0.0 {
                        objective += c * v;
                    }
                    v
                })
                .collect()
        })
        .collect();
    let y: Vec<Vec<Variable>> = p
        .edges
        .iter()
        .map(|e| {
            e.cost
                .iter()
                .map(|&c| {
                    let v = if c.is_finite() {
                        vars.add(variable().min(0).max(1))
                    } else {
                        vars.add(variable().min(0).max(0))
                    };
                    if c.is_finite() && c != 0.0 {
                        objective += c * v;
                    }
                    v
                })
                .collect()
        })
        .collect();
    let mut model = vars.minimise(objective).using(microlp);
    let start = match limits.ilp_time_limit {
        Some(limit) => {
            let start = super::critical_dp::critical_dp_with(p, limits)?.assignment;
            model = model
                .with_time_limit(limit.as_secs_f64())
                .with_initial_solution(initial_solution(p, &x, &y, &start));
            Some(start)
        }
        None => None,
    };
    for xv in &x {
        let sum: Expression = xv.iter().copied().sum();
        model.add_constraint(sum.eq(1));
    }
    for (e, ye) in p.edges.iter().zip(&y) {
        let (su, sv) = (p.configs(e.from), p.configs(e.to));
        for a in 0..su {
            let sum: Expression = (0..sv).map(|b| ye[a * sv + b]).sum();
            model.add_constraint(sum.eq(x[e.from][a]));
        }
        for b in 0..sv {
            let sum: Expression = (0..su).map(|a| ye[a * sv + b]).sum();
            model.add_constraint(sum.eq(x[e.to][b]));
        }
    }
    let sol = match (model.solve(), start) {
        (Ok(sol), _) => sol,
        // The limit struck before the solver held an incumbent of its own:
        // the warm start is the best assignment known.
        (Err(ResolutionError::Other(why)), Some(start)) if why.starts_with("Time limit") => {
            return Ok(SearchResult {
                cost: p.cost(&start),
                assignment: start,
                stop_reason: StopReason::TimeLimit,
            });
        }
        (Err(ResolutionError::Infeasible), _) => return Err(ProblemError::Infeasible),
        (Err(other), _) => return Err(ProblemError::Solver(other.to_string())),
    };
    let assignment: Vec<usize> = x
        .iter()
        .map(|xv| {
            let mut best = (0, f64::NEG_INFINITY);
            for (a, v) in xv.iter().enumerate() {
                let val = sol.value(*v);
                if val > best.1 {
                    best = (a, val);
                }
            }
            best.0
        })
        .collect();
    let cost = p.cost(&assignment);
    if !cost.is_finite() {
        return Err(ProblemError::Infeasible);
    }
    let stop_reason = match sol.status() {
        SolutionStatus::Optimal => StopReason::Optimal,
        // good_lp reports every other stop of microlp (time or node limit) as
        // a time limit; only the time limit is ever set here.
        SolutionStatus::TimeLimit | SolutionStatus::GapLimit => StopReason::TimeLimit,
    };
    Ok(SearchResult {
        assignment,
        cost,
        stop_reason,
    })
}

/// The values of every variable for `assignment` (a warm start).
fn initial_solution(
    p: &Problem,
    x: &[Vec<Variable>],
    y: &[Vec<Variable>],
    assignment: &[usize],
) -> Vec<(Variable, f64)> {
    let one = |on: bool| if on { 1.0 } else { 0.0 };
    let nodes = x
        .iter()
        .zip(assignment)
        .flat_map(|(xv, &a)| xv.iter().enumerate().map(move |(i, v)| (*v, one(i == a))));
    let edges = p.edges.iter().zip(y).flat_map(|(e, ye)| {
        let pair = assignment[e.from] * p.configs(e.to) + assignment[e.to];
        ye.iter()
            .enumerate()
            .map(move |(i, v)| (*v, one(i == pair)))
    });
    nodes.chain(edges).collect()
}
