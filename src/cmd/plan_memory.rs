//! What `tofu plan` says about memory: the `--device-memory` report (did
//! the limit bind, what it traded) and the `--pareto` frontier.
//!
//! Takes a [`Planned`] (with its [`planner::plan::budget::BudgetReport`]) or
//! the frontier of [`planner::plan::pareto::pareto`]; gives summary lines
//! (the JSON values: [`planner::plan::summary`]). Units: bytes (per step for communication, per worker for
//! memory).

use planner::plan::pareto::ParetoPoint;
use planner::plan::{max_memory, summary, Planned};

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
    summary::pick(front, index).ok_or_else(|| {
        miette::miette!(
            "--pareto-point {}: the frontier has {} points; choose 0 to {}",
            index.unwrap_or(0),
            front.len(),
            front.len().saturating_sub(1)
        )
    })
}
