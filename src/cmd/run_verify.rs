//! `tofu run --verify`: run the unpartitioned graph on the same data and
//! backend and compare the loss and every updated weight and optimizer
//! state with the partitioned run (`runner::verify`): each tensor within a
//! relative error of 1e-4, or — for a tensor that is zero or ill-conditioned
//! in exact arithmetic, where no two f32 programs agree — within 10× of
//! what a 64-ulp perturbation of the reference's own leaves changes it
//! (a third run, made only when some tensor exceeds the tolerance). The
//! verdict names the tensors that failed and those that passed only by
//! their sensitivity.

use codegen::Programs;
use planner::plan::BoundPlan;
use runner::verify::TensorCheck;
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

/// The name of tensor `t` in the unpartitioned program.
fn name(one: &Programs, t: planner::graph::TensorId) -> String {
    one.programs[0]
        .tensor(t)
        .map_or_else(|| format!("#{}", t.0), |i| i.name.clone())
}

/// The tensors of a verdict worth naming ([`Verification::notable`]), as
/// JSON: `failed` (worst first, at most 10) and `ill_conditioned` (passed
/// by sensitivity), each `{tensor, error, sensitivity}`.
pub(super) fn details(v: &Verification, one: &Programs) -> serde_json::Value {
    let entry = |c: &&TensorCheck| {
        serde_json::json!({
            "tensor": name(one, c.tensor),
            "error": c.error,
            "sensitivity": c.sensitivity,
        })
    };
    let (failed, ill) = v.notable(10);
    serde_json::json!({
        "failed": failed.iter().map(entry).collect::<Vec<_>>(),
        "ill_conditioned": ill.iter().map(entry).collect::<Vec<_>>(),
    })
}

/// Print the verdict for a terminal.
pub(super) fn print(v: &Verification, one: &Programs) {
    let ok = v.passed();
    println!(
        "verify: max relative error {:.3e} ({})",
        v.max_rel_error,
        if ok { "ok" } else { "FAILED" }
    );
    let (failed, ill) = v.notable(10);
    let what = ["failed", "passed by its sensitivity (ill-conditioned)"];
    for (what, checks) in what.iter().zip([failed, ill]) {
        for c in checks {
            println!(
                "  {} {what}: error {:.3e}, sensitivity {}",
                name(one, c.tensor),
                c.error,
                c.sensitivity
                    .map_or_else(|| "not measured".to_string(), |s| format!("{s:.3e}")),
            );
        }
    }
}
