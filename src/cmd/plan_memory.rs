//! What `tofu plan` says about memory: the `--device-memory` report (did
//! the limit bind, what it traded) and the `--pareto` frontier.
//!
//! Takes a [`Planned`] (with its [`planner::plan::budget::BudgetReport`]) or
//! the frontier of [`planner::plan::pareto::pareto`]; gives summary lines and
//! JSON values. Units: bytes (per step for communication, per worker for
//! memory).

use planner::plan::pareto::ParetoPoint;
use planner::plan::{max_memory, Planned};

use super::plan_print::human;

/// The summary lines of the device memory limit: which limit bound (the
/// device memory, on which worker, state + activations) and what the plan
/// traded against the plan with the fewest bytes.
pub fn budget_lines(p: &Planned) -> Vec<String> {
    let Some(b) = &p.budget else {
        return Vec::new();
    };
    if !b.bound {
        return vec![format!(
            "limit      device memory {} did not bind: the plan with the fewest bytes fits",
            human(b.device_memory)
        )];
    }
    let (w, m) = p
        .memory
        .iter()
        .enumerate()
        .max_by_key(|(_, m)| m.total())
        .map(|(w, m)| (w, m.clone()))
        .unwrap_or_default();
    vec![
        format!(
            "limit      device memory {} bound: worker {w} peaks at {} ({} training state + {} activations)",
            human(b.device_memory),
            human(m.total()),
            human(m.training_state_bytes),
            human(m.peak_activation_bytes)
        ),
        format!(
            "traded     +{} per step for -{} per worker against the plan with the fewest bytes ({}: {}, {} per worker); memory price {}, {} plans tried",
            human(p.comm_bytes.saturating_sub(b.unconstrained_comm_bytes)),
            human(b.unconstrained_max_memory_bytes.saturating_sub(max_memory(p))),
            b.unconstrained_choice,
            human(b.unconstrained_comm_bytes),
            human(b.unconstrained_max_memory_bytes),
            b.price,
            b.plans_tried
        ),
    ]
}

/// The `budget` JSON object (`null` without `--device-memory`).
pub fn budget_json(p: &Planned) -> serde_json::Value {
    p.budget
        .as_ref()
        .map_or(serde_json::Value::Null, |b| serde_json::json!(b))
}

/// The `pareto` JSON array: per point its `index` (for `--pareto-point`),
/// `comm_bytes_per_step`, `max_worker_memory_bytes`, `choice`, `factors`,
/// `price` and the arguments that write its plan; with `--topology` also
/// `estimated_seconds_per_step` (the frontier's coordinate then).
pub fn pareto_json(front: &[ParetoPoint]) -> serde_json::Value {
    front
        .iter()
        .enumerate()
        .map(|(i, p)| {
            serde_json::json!({
                "index": i,
                "comm_bytes_per_step": p.plan.comm_bytes,
                "max_worker_memory_bytes": max_memory(&p.plan),
                "choice": p.plan.choice,
                "factors": p.plan.factors,
                "price": p.price,
                "estimated_seconds_per_step": p.plan.links.as_ref().map(|l| l.seconds()),
                "write": format!("--pareto --pareto-point {i} -o plan.json"),
            })
        })
        .collect()
}

/// Print the frontier, marking point `chosen`.
pub fn print_pareto(front: &[ParetoPoint], chosen: usize) {
    println!("pareto     communication per step against memory per worker (write one with --pareto-point I -o plan.json):");
    println!(
        "   I  {:>12}  {:>12}  {:>12}  plan",
        "comm/step", "estimated", "memory"
    );
    for (i, p) in front.iter().enumerate() {
        let secs = p.plan.links.as_ref().map_or_else(
            || "–".to_string(),
            |l| format!("{:.3} ms", l.seconds() * 1e3),
        );
        println!(
            "{} {i:>2}  {:>12}  {secs:>12}  {:>12}  {} (price {})",
            if i == chosen { "*" } else { " " },
            human(p.plan.comm_bytes),
            human(max_memory(&p.plan)),
            p.plan.choice,
            p.price
        );
    }
}

/// Point `index` of the frontier (default 0, the fewest bytes).
///
/// Errors: an index past the frontier, naming its size.
pub fn pick(front: &[ParetoPoint], index: Option<usize>) -> miette::Result<(usize, Planned)> {
    let i = index.unwrap_or(0);
    front.get(i).map(|p| (i, p.plan.clone())).ok_or_else(|| {
        miette::miette!(
            "--pareto-point {i}: the frontier has {} points; choose 0 to {}",
            front.len(),
            front.len().saturating_sub(1)
        )
    })
}
