//! The report of `tofu run` (`run.rs`): a table, or one JSON object under
//! `--json` ([`runner::report::run::RunSummary`]); with `TOFU_PROFILE=1`
//! rank 0's seconds per operator on stderr first.

use codegen::Programs;
use planner::plan::BoundPlan;
use runner::report::run::RunSummary;
use runner::report::verdict::Verdict;
use runner::{RunReport, Verification};

use super::run::Args;

/// Print the report of a run of `progs` (`verification`: the `--verify`
/// verdict and the unpartitioned programs it ran, `None` without it).
pub fn print(
    args: &Args,
    plan: &BoundPlan,
    progs: &Programs,
    report: &RunReport,
    verification: Option<&(Verification, Programs)>,
) {
    let summary = RunSummary {
        plan: &args.plan.display().to_string(),
        model: plan.graph.name(),
        backend: &args.backend,
        workers: plan.workers(),
        steps: args.steps,
        programs: &progs.programs,
        predicted_bytes_per_rank: &progs.predicted_bytes_per_rank,
        report,
        verdict: verification.map(|(v, one)| Verdict {
            verification: v,
            reference: &one.programs[0],
        }),
    };
    eprint!("{}", summary.profile());
    if args.json {
        println!("{}", summary.json());
    } else {
        print!("{summary}");
    }
}
