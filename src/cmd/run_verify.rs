//! `tofu run --verify`: run the unpartitioned graph on the same data and
//! backend and compare the loss and every updated weight and optimizer
//! state with the partitioned run (`runner::verify`): each tensor within a
//! relative error of 1e-4, or — for a tensor that is zero or ill-conditioned
//! in exact arithmetic, where no two f32 programs agree — within 10× of
//! what a 64-ulp perturbation of the reference's own leaves changes it
//! (a third run, made only when some tensor exceeds the tolerance). The
//! verdict ([`runner::report::verdict`]) names the tensors that failed and
//! those that passed only by their sensitivity.

use codegen::Programs;
use planner::plan::BoundPlan;
use runner::{judge, perturbed_leaves, Given, RunOptions, RunReport, Verification};
use tdl::Library;

use super::lib_err;
use super::run::{execute, Args};

/// Tolerance of `--verify` (max relative error per tensor, f32).
pub(super) const TOLERANCE: f64 = 1e-4;

/// Run the unpartitioned graph (and, when some tensor exceeds the
/// tolerance, once more on perturbed leaves) and judge `report` against it.
///
/// Errors: generating or running the unpartitioned program.
pub(super) fn verify(
    args: &Args,
    (plan, lib): (&BoundPlan, &Library),
    opts: RunOptions,
    given: &Given,
    report: &RunReport,
) -> miette::Result<(Verification, Programs)> {
    let one = codegen::compile_unpartitioned(plan, lib).map_err(lib_err)?;
    let reference = execute(args, &one, opts, None, given)?;
    let plain = judge(report, &reference, None, TOLERANCE);
    if plain.passed() {
        return Ok((plain, one));
    }
    let mut g = given.clone();
    g.extend(perturbed_leaves(&one.programs[0], opts.seed, given).map_err(lib_err)?);
    let perturbed = execute(args, &one, opts, None, &g)?;
    Ok((judge(report, &reference, Some(&perturbed), TOLERANCE), one))
}
