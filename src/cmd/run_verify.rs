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

/// The tensors of a verdict worth naming, as JSON: `failed` (every tensor
/// that failed, worst first, at most 10) and `ill_conditioned` (passed by
/// sensitivity), each `{tensor, error, sensitivity}`.
pub(super) fn details(v: &Verification, one: &Programs) -> serde_json::Value {
    let name = |t| {
        one.programs[0]
            .tensor(t)
            .map_or_else(|| format!("#{}", t.0), |i| i.name.clone())
    };
    let entry = |c: &runner::verify::TensorCheck| {
        serde_json::json!({
            "tensor": name(c.tensor),
            "error": c.error,
            "sensitivity": c.sensitivity,
        })
    };
    let mut failed: Vec<_> = v.tensors.iter().filter(|c| !c.passed).collect();
    failed.sort_by(|a, b| b.error.total_cmp(&a.error));
    serde_json::json!({
        "failed": failed.iter().take(10).map(|c| entry(c)).collect::<Vec<_>>(),
        "ill_conditioned": v.ill_conditioned().map(entry).collect::<Vec<_>>(),
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
    let d = details(v, one);
    for (key, what) in [
        ("failed", "failed"),
        (
            "ill_conditioned",
            "passed by its sensitivity (ill-conditioned)",
        ),
    ] {
        for e in d[key].as_array().into_iter().flatten() {
            println!(
                "  {} {what}: error {:.3e}, sensitivity {}",
                e["tensor"].as_str().unwrap_or("?"),
                e["error"].as_f64().unwrap_or(f64::NAN),
                e["sensitivity"]
                    .as_f64()
                    .map_or_else(|| "not measured".to_string(), |s| format!("{s:.3e}")),
            );
        }
    }
}
