//! The exact reference: the pairwise strategy-selection MIP with marginal
//! constraints, solved by good_lp's pure-Rust `microlp` backend.
//!
//! Takes a [`Problem`]; gives a proven optimum. Variables: binary x[v,a]
//! (node v takes configuration a) and continuous y[e,a,b] ∈ [0, 1] (edge e
//! has ends configured a, b), with Σ_a x[v,a] = 1, Σ_b y[e,a,b] = x[u,a] and
//! Σ_a y[e,a,b] = x[v,b]. The marginal form is tight on trees and keeps
//! branch-and-bound small on DAGs, where the one-sided linearisation
//! (y ≥ x_u + x_v − 1) blows up. Infinite costs fix their variable to 0.

use good_lp::{microlp, variable, Expression, ProblemVariables, Solution, SolverModel, Variable};

use super::problem::{Problem, ProblemError, SearchResult, StopReason};

/// Solve exactly (see the module doc).
///
/// Errors: malformed problem; infeasible; the solver's own failure.
pub fn ilp(p: &Problem) -> Result<SearchResult, ProblemError> {
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
    let sol = model.solve().map_err(|e| match e {
        good_lp::ResolutionError::Infeasible => ProblemError::Infeasible,
        other => ProblemError::Solver(other.to_string()),
    })?;
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
    Ok(SearchResult {
        assignment,
        cost,
        stop_reason: StopReason::Optimal,
    })
}
