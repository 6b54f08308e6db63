//! What `tofu plan` says about memory: the `--device-memory` lines (did
//! the limit bind, what it traded) and the `--pareto` table.
//!
//! Takes a [`Planned`] (with its [`crate::plan::budget::BudgetReport`]) or
//! the frontier of [`crate::plan::pareto::pareto`]; writes text lines (the
//! JSON values: [`crate::plan::summary`]). Units: bytes (per step for
//! communication, per worker for memory).

use std::fmt;

use super::human_bytes as human;
use crate::plan::pareto::ParetoPoint;
use crate::plan::{max_memory, Planned};

/// The lines of the device memory limit (none without one): which limit
/// bound (the device memory, on which worker, state + activations) and
/// what the plan traded against the plan with the fewest bytes.
pub fn budget(f: &mut fmt::Formatter<'_>, p: &Planned) -> fmt::Result {
    let Some(b) = &p.budget else {
        return Ok(());
    };
    if !b.bound {
        return writeln!(
            f,
            "limit      device memory {} did not bind: the plan with the fewest bytes fits",
            human(b.device_memory)
        );
    }
    let (w, m) = p
        .memory
        .iter()
        .enumerate()
        .max_by_key(|(_, m)| m.total())
        .map(|(w, m)| (w, m.clone()))
        .unwrap_or_default();
    writeln!(
        f,
        "limit      device memory {} bound: worker {w} peaks at {} ({} training state + {} activations)",
        human(b.device_memory),
        human(m.total()),
        human(m.training_state_bytes),
        human(m.peak_activation_bytes)
    )?;
    writeln!(
        f,
        "traded     +{} per step for -{} per worker against the plan with the fewest bytes ({}: {}, {} per worker); memory price {}, {} plans tried",
        human(p.comm_bytes.saturating_sub(b.unconstrained_comm_bytes)),
        human(b.unconstrained_max_memory_bytes.saturating_sub(max_memory(p))),
        b.unconstrained_choice,
        human(b.unconstrained_comm_bytes),
        human(b.unconstrained_max_memory_bytes),
        b.price,
        b.plans_tried
    )
}

/// The frontier's table, marking point `chosen`.
pub fn pareto(f: &mut fmt::Formatter<'_>, front: &[ParetoPoint], chosen: usize) -> fmt::Result {
    writeln!(f, "pareto     communication per step against memory per worker (write one with --pareto-point I -o plan.json):")?;
    writeln!(
        f,
        "   I  {:>12}  {:>12}  {:>12}  plan",
        "comm/step", "estimated", "memory"
    )?;
    for (i, p) in front.iter().enumerate() {
        let secs = p.plan.links.as_ref().map_or_else(
            || "–".to_string(),
            |l| format!("{:.3} ms", l.seconds() * 1e3),
        );
        writeln!(
            f,
            "{} {i:>2}  {:>12}  {secs:>12}  {:>12}  {} (price {})",
            if i == chosen { "*" } else { " " },
            human(p.plan.comm_bytes),
            human(max_memory(&p.plan)),
            p.plan.choice,
            p.price
        )?;
    }
    Ok(())
}
