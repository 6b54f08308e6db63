//! The recursive planner (Tofu §4.4): the entry points on top of the plan
//! module.
//!
//! Takes a training graph, the spec library (or its bound [`Model`]), k
//! workers, a [`SearchKind`] (one of [`super::searches::SEARCHES`]) and
//! [`PlanOptions`]; gives a [`Planned`]: every tensor's split dim and every
//! operator's strategy per recursion level, the exact communication bytes
//! per training step (total and per operator), per-worker memory, and why
//! the search stopped. The search says which factorisations of k
//! (k = p₀·p₁·…, prime factors, largest first, unless it says otherwise)
//! and layout rules to try and how to solve a level. Each level builds a
//! pairwise problem over the coarsened graph ([`super::level`]) with the
//! outer levels fixed and solves it with the chosen search
//! (`candidates.rs`); the baselines of Tofu §6.3 run through the same
//! code path with restricted layouts or another solver. This module keeps
//! only the entry points ([`plan`], [`plan_with`], [`plan_with_model`]);
//! the types they return live below it ([`super::planned`],
//! [`super::options`], [`super::coarse`]) and nothing below imports it.

use std::time::Instant;

use interval::cache::StrategyCache;
use tdl::Library;

use super::candidates::{choose, Candidates};
use super::model::Model;
use crate::graph::Graph;

/// Kept at their old paths (`plan::driver::Planned`, …): the types the
/// entry points take and return, and the exact cost of a finished plan.
pub use super::{
    coarse::CoarseGraph,
    cost::exact_cost,
    options::PlanOptions,
    planned::{max_memory, LevelReport, MemoryFit, PlanError, Planned},
    searches::SearchKind,
};

/// Plan `graph` for `workers` workers with `search` and no device-memory
/// limit: [`plan_with`] with the default [`PlanOptions`].
///
/// Errors: as [`plan_with`].
pub fn plan(
    graph: &Graph,
    lib: &Library,
    cache: &StrategyCache,
    workers: usize,
    search: SearchKind,
) -> Result<Planned, PlanError> {
    plan_with(graph, lib, cache, workers, search, PlanOptions::default())
}

/// Plan `graph` for `workers` workers with `search` (see the module doc).
///
/// Errors: k = 0; a topology without k GPUs; an operator whose spec is
/// missing or does not fit; a level whose problem has no feasible assignment.
///
/// The search names its candidate plans ([`super::searches::Search::candidates`]);
/// the driver builds each and keeps the one with the fewest bytes (with a
/// topology: the least estimated time, [`Planned::objective`]) among
/// those whose largest worker fits `opts.device_memory` (all of them when no
/// limit is given). An alternative marked `only_if_fits` (CriticalDP's
/// whole-model data parallelism) is kept only when it fits. When none fits,
/// the levels are searched again with memory priced
/// ([`super::budget`]), and [`Planned::budget`] says what the limit
/// traded.
///
/// When no plan the search finds fits `opts.device_memory`, the result is
/// the plan with the smallest largest worker, its [`Planned::fit`]
/// [`MemoryFit::DoesNotFit`].
pub fn plan_with(
    graph: &Graph,
    lib: &Library,
    cache: &StrategyCache,
    workers: usize,
    search: SearchKind,
    opts: PlanOptions,
) -> Result<Planned, PlanError> {
    let start = Instant::now();
    let model = Model::new(graph, lib, cache)?;
    let (mut best, _) = plan_with_model(graph, model, workers, search, opts)?;
    best.plan_seconds = start.elapsed().as_secs_f64();
    Ok(best)
}

/// [`plan_with`] with the graph's bound model (bound once by the caller);
/// gives the model back for code generation.
///
/// Errors: as [`plan_with`].
pub fn plan_with_model(
    graph: &Graph,
    model: Model,
    workers: usize,
    search: SearchKind,
    opts: PlanOptions,
) -> Result<(Planned, Model), PlanError> {
    if let Some(t) = &opts.topology {
        t.check_workers(workers)?;
    }
    let start = Instant::now();
    // With partial sums, the plans without them compete too (first, so a
    // tie keeps the executable one): the level-by-level search can be led
    // by a cheap partial layout at an outer level to a dearer whole plan.
    let mut plans = if opts.partial_sums {
        let plain = PlanOptions {
            partial_sums: false,
            ..opts
        };
        Candidates::with_model(graph, model.clone(), workers, search, &plain)?.plan_all(None)?
    } else {
        Vec::new()
    };
    let ctx = Candidates::with_model(graph, model, workers, search, &opts)?;
    plans.extend(ctx.plan_all(None)?);
    let free = plans
        .iter()
        .map(|b| &b.plan)
        .min_by_key(|p| p.comm_bytes)
        .map(|p| (p.choice.clone(), p.comm_bytes, max_memory(p)))
        .expect("at least one candidate");
    let mut best = choose(plans, opts.device_memory);
    if let Some(cap) = opts.device_memory {
        best = super::budget::fit(&ctx, best, free, cap)?;
    }
    best.plan_seconds = start.elapsed().as_secs_f64();
    Ok((best, ctx.into_model()))
}
