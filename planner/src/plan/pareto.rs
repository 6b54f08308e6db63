//! The frontier of communication per step against memory per worker
//! (`tofu plan --pareto`, issue 14).
//!
//! Takes a graph, k and a search; gives the plans of the search's candidates
//! built at every memory price of [`PRICES`] ([`super::budget::MemoryPrice`]:
//! λ = 0 is the unpriced search, larger λ trade bytes for memory) that no
//! other of those plans dominates, ordered by bytes per step (ascending) and
//! so by memory per worker (strictly descending). A plan dominates another
//! when it moves no more bytes and holds no more memory on its largest
//! worker, and is better in one. Each point is a whole plan (its memory is
//! the exact memory report of [`super::memory`]), so a user sees what each
//! GiB of memory buys and can write any point's plan. With a topology
//! (`--topology`) communication is the estimated seconds per step
//! ([`Planned::objective`]) instead of bytes, what the search minimised.

use std::time::Instant;

use interval::cache::StrategyCache;
use tdl::Library;

use super::budget::does_not_fit;
use super::candidates::Candidates;
use super::memory_price::MemoryPrice;
use super::model::Model;
use super::options::PlanOptions;
use super::planned::{max_memory, MemoryFit, PlanError, Planned};
use super::searches::SearchKind;
use crate::graph::Graph;

/// The memory prices λ swept (bytes moved per step per byte of memory per
/// worker): 0, then powers of 4 from 1/16 to 2²⁰.
pub const PRICES: [f64; 14] = [
    0.0, 0.0625, 0.25, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0,
    1048576.0,
];

/// One point of the frontier.
#[derive(Clone, Debug)]
pub struct ParetoPoint {
    /// The memory price λ its plan was searched at.
    pub price: f64,
    /// The plan (`comm_bytes`, or with a topology its estimated seconds, and
    /// [`max_memory`] are the point's coordinates).
    pub plan: Planned,
}

/// The frontier (see the module doc). With `opts.device_memory`, only
/// points that fit it (each [`MemoryFit::Fits`]); when none does, one point:
/// the plan with the smallest largest worker, [`MemoryFit::DoesNotFit`].
///
/// Errors: k = 0; an operator whose spec is missing or does not fit; a level
/// without a feasible assignment.
pub fn pareto(
    graph: &Graph,
    lib: &Library,
    cache: &StrategyCache,
    workers: usize,
    search: SearchKind,
    opts: PlanOptions,
) -> Result<Vec<ParetoPoint>, PlanError> {
    let start = Instant::now();
    let model = Model::new(graph, lib, cache)?;
    let (mut front, _) = pareto_with_model(graph, model, workers, search, opts)?;
    let secs = start.elapsed().as_secs_f64();
    for p in &mut front {
        p.plan.plan_seconds = secs;
    }
    Ok(front)
}

/// [`pareto`] with the graph's bound model (bound once by the caller);
/// gives the model back. Each point's `plan_seconds` is the time of the
/// sweep, binding excluded.
///
/// Errors: as [`pareto`].
pub fn pareto_with_model(
    graph: &Graph,
    model: Model,
    workers: usize,
    search: SearchKind,
    opts: PlanOptions,
) -> Result<(Vec<ParetoPoint>, Model), PlanError> {
    let start = Instant::now();
    let ctx = Candidates::with_model(graph, model, workers, search, &opts)?;
    let base = MemoryPrice::new(graph, 0.0);
    let mut all: Vec<ParetoPoint> = Vec::new();
    for price in PRICES {
        let priced = base.at(price);
        let plans = ctx.plan_all((price > 0.0).then_some(&priced))?;
        all.extend(plans.into_iter().map(|b| ParetoPoint {
            price,
            plan: b.plan,
        }));
    }
    let smallest = all
        .iter()
        .min_by_key(|p| max_memory(&p.plan))
        .map(|p| (p.price, p.plan.clone()))
        .expect("at least one candidate");
    if let Some(cap) = opts.device_memory {
        all.retain(|p| max_memory(&p.plan) <= cap);
        if all.is_empty() {
            let (price, plan) = smallest;
            let mut plan = does_not_fit(plan, cap);
            plan.plan_seconds = start.elapsed().as_secs_f64();
            return Ok((vec![ParetoPoint { price, plan }], ctx.into_model()));
        }
        for p in &mut all {
            p.plan.fit = MemoryFit::Fits { device_memory: cap };
        }
    }
    let mut front = frontier(all, |p| (communication(&p.plan), max_memory(&p.plan)));
    let secs = start.elapsed().as_secs_f64();
    for p in &mut front {
        p.plan.plan_seconds = secs;
        p.plan.runner_up = None;
    }
    Ok((front, ctx.into_model()))
}

/// A plan's communication as the frontier orders it: bytes per step, or
/// with a topology the estimated picoseconds per step (integral, so equal
/// estimates compare equal).
fn communication(p: &Planned) -> u64 {
    match &p.links {
        Some(l) => (l.seconds() * 1e12).round() as u64,
        None => p.comm_bytes,
    }
}

/// The points of `items` no other dominates in `key` = (bytes, memory),
/// one per distinct key, ordered by bytes ascending (memory strictly
/// descending); on equal keys the first item is kept.
pub fn frontier<T>(items: Vec<T>, key: impl Fn(&T) -> (u64, u64)) -> Vec<T> {
    let mut items: Vec<(usize, T)> = items.into_iter().enumerate().collect();
    items.sort_by_key(|(i, t)| (key(t), *i));
    let mut out: Vec<T> = Vec::new();
    let mut least_memory = u64::MAX;
    for (_, t) in items {
        let (_, mem) = key(&t);
        if mem < least_memory {
            least_memory = mem;
            out.push(t);
        }
    }
    out
}
