//! The device memory limit inside the search (`--device-memory`, issue 14).
//!
//! Takes a search's candidate plans ([`Candidates`]) and a limit in bytes per
//! worker; gives the plan with the fewest bytes per step among those the
//! search finds whose every worker's peak (training state + live
//! activations, [`super::memory`]) fits, with a [`BudgetReport`] saying
//! whether the limit bound and what it traded, or, when none fits, the plan
//! with the smallest peak found, marked [`MemoryFit::DoesNotFit`].
//!
//! Memory is priced in the level problems, not only checked between whole
//! plans: a Lagrangian relaxation of "peak ≤ limit". Each level's node cost
//! becomes `bytes + λ · m`, where `m` is a linear estimate of the memory per
//! worker the node's configuration leaves ([`MemoryPrice`]): the tile bytes,
//! after this level and the outer ones, of every training-state tensor
//! (weights, their gradients, optimizer state) and of every transient tensor
//! live at the peak step of the unpartitioned schedule, divided by the
//! product of the inner levels' factors (which are assumed to split it
//! further). λ = 0 is the unconstrained search; as λ grows the search trades
//! bytes for memory. The smallest λ whose plan fits is found by bisection on
//! a geometric grid (grow ×4 from 1 until a plan fits, then halve the ratio
//! [`BISECTIONS`] times; while no price failed, each step divides it by 4,
//! so prices below 1 are reached too: the search is scale-free, whether the
//! levels cost bytes or, with a topology, nanoseconds); every plan built on
//! the way is checked exactly, and the fitting one with the fewest bytes
//! (with a topology: the least estimated time, [`Planned::objective`]) is
//! kept.

use super::candidates::{choose, Built, Candidates};
use super::driver::{max_memory, MemoryFit, PlanError, Planned};
use super::level::{Decisions, LevelInput, LevelProblem};
use crate::graph::memory::{classify, lifetime, MemoryClass, MemoryReport};
use crate::graph::{Graph, TensorId};
use crate::search::Problem;

/// Bisection steps between the last λ that did not fit and the first that did.
pub const BISECTIONS: usize = 6;

/// The largest λ tried (bytes moved per byte of memory per worker); past it
/// the search is taken to minimise memory alone.
pub const MAX_PRICE: f64 = 1_048_576.0;

/// What the device memory limit did to a plan (bytes unless said otherwise).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BudgetReport {
    /// The limit: memory of one device.
    pub device_memory: u64,
    /// Whether the plan with the fewest bytes (no limit) exceeded it, so
    /// the search had to trade bytes for memory.
    pub bound: bool,
    /// The plan the search keeps without a limit: its choice label.
    pub unconstrained_choice: String,
    /// Its bytes per step (all workers together).
    pub unconstrained_comm_bytes: u64,
    /// Its largest worker's memory.
    pub unconstrained_max_memory_bytes: u64,
    /// The memory price λ of the kept plan (0: priced-free search).
    pub price: f64,
    /// Candidate plans built and checked exactly.
    pub plans_tried: usize,
}

/// Memory priced into a level problem (see the module doc).
#[derive(Clone, Debug)]
pub struct MemoryPrice {
    /// λ: bytes moved per step one byte of memory per worker is worth.
    pub lambda: f64,
    /// Per tensor: whether its tile counts toward the estimate.
    counted: Vec<bool>,
}

impl MemoryPrice {
    /// The price λ for `graph`: training state always counts; a transient
    /// tensor counts when it is live at the step where the unpartitioned
    /// schedule peaks ([`MemoryReport::peak_at`]).
    pub fn new(graph: &Graph, lambda: f64) -> Self {
        let peak = MemoryReport::of(graph).peak_at.map(|o| o.index());
        let counted = graph
            .tensor_ids()
            .map(|t| match classify(graph, t) {
                MemoryClass::Alias => false,
                MemoryClass::Transient => peak.is_some_and(|s| {
                    let (a, b) = lifetime(graph, t);
                    a <= s && s <= b
                }),
                _ => true,
            })
            .collect();
        MemoryPrice { lambda, counted }
    }

    /// The same tensors priced at another λ.
    pub fn at(&self, lambda: f64) -> Self {
        MemoryPrice {
            lambda,
            counted: self.counted.clone(),
        }
    }

    /// Estimated memory per worker (bytes) of tensor `t` if it is laid out
    /// `layout` at `level` after the outer levels' decisions `d`.
    fn tile_bytes(
        &self,
        input: &LevelInput,
        t: TensorId,
        d: &Decisions,
        level: usize,
        layout: Option<u32>,
    ) -> f64 {
        let tensor = input.graph.tensor(t);
        let mut shape = tensor.shape.clone();
        let splits = d.tensors[t.index()].iter().take(level).copied();
        for (l, s) in splits.chain(std::iter::once(layout)).enumerate() {
            if let Some(n) = s.and_then(|dim| shape.get_mut(dim as usize)) {
                *n = n.div_ceil(input.factors[l]);
            }
        }
        let inner: usize = input.factors[level + 1..].iter().product();
        (shape.iter().product::<usize>() as u64 * tensor.dtype.size_bytes()) as f64 / inner as f64
    }

    /// `lp`'s problem with λ × the estimated memory of each node's
    /// configuration added to its cost.
    pub(crate) fn apply(
        &self,
        input: &LevelInput,
        lp: &LevelProblem,
        d: &Decisions,
        level: usize,
    ) -> Problem {
        let mut problem = lp.problem.clone();
        for (node, cfgs) in problem.nodes.iter_mut().zip(&lp.configs) {
            for (cost, cfg) in node.costs.iter_mut().zip(cfgs) {
                let mem: f64 = cfg
                    .tensors
                    .iter()
                    .filter(|(t, _)| self.counted[t.index()])
                    .map(|(t, l)| self.tile_bytes(input, *t, d, level, *l))
                    .sum();
                *cost += self.lambda * mem;
            }
        }
        problem
    }
}

/// The plans built so far and the best of them under the limit.
struct Tally {
    cap: u64,
    tried: usize,
    /// The fitting plan with the fewest bytes (with a topology: the least
    /// estimated time), with its λ.
    best: Option<(f64, Planned)>,
    /// The plan with the smallest largest worker.
    smallest: Option<Planned>,
}

impl Tally {
    /// Record `plans` (built at price `lambda`); whether one of them fits.
    fn add(&mut self, lambda: f64, plans: Vec<Built>) -> bool {
        self.tried += plans.len();
        for b in &plans {
            if self
                .smallest
                .as_ref()
                .is_none_or(|s| max_memory(&b.plan) < max_memory(s))
            {
                self.smallest = Some(b.plan.clone());
            }
        }
        let kept = choose(plans, Some(self.cap));
        if max_memory(&kept) > self.cap {
            return false;
        }
        if self
            .best
            .as_ref()
            .is_none_or(|(_, b)| kept.objective() < b.objective())
        {
            self.best = Some((lambda, kept));
        }
        true
    }
}

/// Make `kept` (the plan [`choose`] kept among the unpriced candidates under
/// `cap`) fit `cap`, pricing memory when it does not (see the module doc);
/// `free` is the plan kept without a limit: (choice, bytes, memory).
///
/// When no plan fits even at [`MAX_PRICE`], gives the plan with the smallest
/// largest worker, marked [`MemoryFit::DoesNotFit`]; a fitting plan is
/// marked [`MemoryFit::Fits`].
///
/// Errors: a level's search failing.
pub(crate) fn fit(
    ctx: &Candidates,
    kept: Planned,
    free: (String, u64, u64),
    cap: u64,
) -> Result<Planned, PlanError> {
    let report = |price: f64, tried: usize, plan: &Planned| BudgetReport {
        device_memory: cap,
        bound: free.2 > cap || plan.comm_bytes > free.1,
        unconstrained_choice: free.0.clone(),
        unconstrained_comm_bytes: free.1,
        unconstrained_max_memory_bytes: free.2,
        price,
        plans_tried: tried,
    };
    let fits = MemoryFit::Fits { device_memory: cap };
    if max_memory(&kept) <= cap {
        let mut kept = kept;
        kept.budget = Some(report(0.0, ctx.len(), &kept));
        kept.fit = fits;
        return Ok(kept);
    }
    let mut tally = Tally {
        cap,
        tried: ctx.len(),
        best: None,
        smallest: Some(kept),
    };
    let base = MemoryPrice::new(ctx.graph(), 0.0);
    // Grow λ until a plan fits, then bisect between the last two.
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    loop {
        if tally.add(hi, ctx.plan_all(Some(&base.at(hi)))?) {
            break;
        }
        if hi >= MAX_PRICE {
            let smallest = tally.smallest.expect("a plan was built");
            return Ok(does_not_fit(smallest, cap));
        }
        lo = hi;
        hi *= 4.0;
    }
    for _ in 0..BISECTIONS {
        let mid = if lo == 0.0 {
            hi / 4.0
        } else {
            (lo * hi).sqrt()
        };
        if tally.add(mid, ctx.plan_all(Some(&base.at(mid)))?) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let (price, mut best) = tally.best.expect("a plan fits");
    best.budget = Some(report(price, tally.tried, &best));
    best.fit = fits;
    Ok(best)
}

/// `smallest`, the plan with the smallest largest worker, marked as not
/// fitting `cap`.
pub(crate) fn does_not_fit(mut smallest: Planned, cap: u64) -> Planned {
    smallest.fit = MemoryFit::DoesNotFit {
        device_memory: cap,
        smallest: max_memory(&smallest),
    };
    smallest
}
