//! `tofu run PLAN --save-outputs FILE.safetensors`: one forward pass of the
//! plan with the model's outputs written by their ONNX names, and the
//! synthetic values it ran on ([`runner::forward_outputs`], which says
//! which forward and which values); this file checks the flags, names the
//! plan or inputs file in errors, and prints what was written
//! ([`runner::report::saved`]; one JSON object with `--json`).

use std::path::Path;
use std::process::ExitCode;

use codegen::Programs;
use planner::plan::BoundPlan;
use runner::forward_outputs::{forward_outputs, ForwardError};
use runner::report::saved::SavedSummary;
use runner::Given;

use super::lib_err;
use super::run::Args;

/// `--save-outputs`: one forward pass, the model's outputs written to
/// `path` ([`runner::forward_outputs`]), and what was written printed.
pub fn run(
    args: &Args,
    plan: &BoundPlan,
    progs: &Programs,
    given: &Given,
    path: &Path,
) -> miette::Result<ExitCode> {
    if args.steps != 1 || args.verify || args.estimate.is_some() {
        return Err(miette::miette!(
            "--save-outputs runs the forward pass of one step: leave out --steps, --verify and --estimate"
        ));
    }
    let (graph, inputs) = (&plan.graph, args.inputs.is_some());
    let saved = forward_outputs(graph, &progs.programs, &super::run::choice(args), args.seed, given, inputs, path)
        .map_err(|e| match e {
            ForwardError::NoOutputs { .. } => miette::miette!(
                help = "plan the ONNX model again with this tofu (`tofu plan MODEL.onnx -k K -o PLAN.json`): it records the model's outputs",
                "{}: {e}",
                args.plan.display()
            ),
            ForwardError::MissingInput { ref name, ref shape, ref dtype } => miette::miette!(
                help = format!(
                    "add `{name}` (shape {shape:?}, {dtype}) to the file, or leave out --inputs to run on seeded synthetic inputs"
                ),
                "{}: {e}",
                args.inputs.as_ref().map_or_else(String::new, |f| f.display().to_string())
            ),
            ForwardError::Run(e) => super::run::choose_error(e),
            e => lib_err(e),
        })?;
    let summary = SavedSummary {
        plan: &args.plan.display().to_string(),
        model: graph.name(),
        workers: progs.programs.len(),
        file: &path.display().to_string(),
        saved: &saved,
    };
    if args.json {
        println!("{}", summary.json());
    } else {
        print!("{summary}");
    }
    Ok(ExitCode::SUCCESS)
}
