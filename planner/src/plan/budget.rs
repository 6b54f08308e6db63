//! The device memory limit inside the search (`--device-memory`, issue 14).
//!
//! Takes a search's candidate plans (`candidates.rs`) and a limit in bytes per
//! worker; gives the plan with the fewest bytes per step among those the
//! search finds whose every worker's peak (training state + live
//! activations, [`super::memory`]) fits, with a [`BudgetReport`] saying
//! whether the limit bound and what it traded, or, when none fits, the plan
//! with the smallest peak found, marked [`MemoryFit::DoesNotFit`].
//!
//! Memory is priced in the level problems, not only checked between whole
//! plans ([`MemoryPrice`]: each level's node cost becomes `bytes + λ · m`, a
//! Lagrangian relaxation of "peak ≤ limit"). λ = 0 is the unconstrained
//! search; as λ grows the search trades bytes for memory. The smallest λ
//! whose plan fits is found by bisection on a geometric grid (grow ×4 from
//! 1 until a plan fits, then halve the ratio [`BISECTIONS`] times; while no
//! price failed, each step divides it by 4, so prices below 1 are reached
//! too: the search is scale-free, whether the levels cost bytes or, with a
//! topology, nanoseconds); every plan built on the way is checked exactly,
//! and the fitting one with the fewest bytes (with a topology: the least
//! estimated time, [`Planned::objective`]) is kept.

use super::candidates::{choose, Built, Candidates};
/// Kept at its old path (`plan::budget::MemoryPrice`).
pub use super::memory_price::MemoryPrice;
/// Kept at its old path (`plan::budget::BudgetReport`).
pub use super::planned::BudgetReport;
use super::planned::{max_memory, MemoryFit, PlanError, Planned};

/// Bisection steps between the last λ that did not fit and the first that did.
pub const BISECTIONS: usize = 6;

/// The largest λ tried (bytes moved per byte of memory per worker); past it
/// the search is taken to minimise memory alone.
pub const MAX_PRICE: f64 = 1_048_576.0;

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
