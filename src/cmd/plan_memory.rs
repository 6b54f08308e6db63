//! Which plan `tofu plan` shows and writes: the one plan, or the
//! `--pareto-point` of the frontier of bytes per step against memory per
//! worker (the lines about memory: [`planner::plan::report::memory`]).
//!
//! Takes the [`Plans`] of a [`planner::plan::request::PlanRequest`]; gives
//! the plan chosen, and the frontier with the index chosen.

use planner::plan::pareto::ParetoPoint;
use planner::plan::request::Plans;
use planner::plan::{summary, Planned};

/// The `--pareto` frontier and the index of the point chosen.
type Front = (Vec<ParetoPoint>, usize);

/// The plan shown and written: the one plan, or the `--pareto-point` of
/// the frontier (with the frontier and the index). A plan that does not
/// fit the device memory is the smallest found (DOES NOT FIT, exit 2).
pub fn chosen(
    pareto_point: Option<usize>,
    plans: Plans,
) -> miette::Result<(Planned, Option<Front>)> {
    Ok(match plans {
        Plans::One(p) => (*p, None),
        Plans::Frontier(mut front) => {
            if front.len() == 1 && front[0].plan.fit.does_not_fit() {
                (front.remove(0).plan, None)
            } else {
                let (i, p) = pick(&front, pareto_point)?;
                (p, Some((front, i)))
            }
        }
    })
}

/// Point `index` of the frontier (default 0, the fewest bytes).
///
/// Errors: an index past the frontier, naming its size.
fn pick(front: &[ParetoPoint], index: Option<usize>) -> miette::Result<(usize, Planned)> {
    summary::pick(front, index).ok_or_else(|| {
        miette::miette!(
            "--pareto-point {}: the frontier has {} points; choose 0 to {}",
            index.unwrap_or(0),
            front.len(),
            front.len().saturating_sub(1)
        )
    })
}
