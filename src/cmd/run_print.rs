//! The report of `tofu run` (`run.rs`): per step its time and bytes sent
//! per rank, peak memory, the collectives' share of the bytes, the
//! verification, and with `TOFU_PROFILE=1` rank 0's seconds per operator;
//! as a table, or one JSON object under `--json`.

use codegen::Programs;
use planner::plan::BoundPlan;
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
    let per_step: u64 = progs.programs.iter().map(|p| p.bytes_sent()).sum();
    let collective: u64 = progs
        .programs
        .iter()
        .map(|p| p.collective_bytes_sent())
        .sum();
    let share = if per_step == 0 {
        0.0
    } else {
        collective as f64 / per_step as f64
    };
    if !report.op_seconds.is_empty() {
        print_profile(args, report);
    }
    if args.json {
        print_json(args, (plan, progs), report, verification, share);
        return;
    }
    println!(
        "{} on {} {} workers, {} step(s)",
        plan.graph.name(),
        plan.workers(),
        args.backend.to_uppercase(),
        args.steps
    );
    for (s, t) in report.step_seconds.iter().enumerate() {
        println!(
            "step {s}: {:.4} s, bytes sent per rank {:?}",
            t, report.bytes_sent[s]
        );
    }
    println!("peak bytes per rank: {:?}", report.peak_bytes_per_rank);
    println!(
        "bytes moved by collectives: {:.1}% (the rest by grouped send/recv)",
        100.0 * share
    );
    if let Some((v, one)) = verification {
        super::run_verify::print(v, one);
    }
}

/// The `--json` object of a run.
fn print_json(
    args: &Args,
    (plan, progs): (&BoundPlan, &Programs),
    report: &RunReport,
    verification: Option<&(Verification, Programs)>,
    share: f64,
) {
    let v = serde_json::json!({
        "plan": args.plan.display().to_string(),
        "backend": args.backend,
        "workers": plan.workers(),
        "steps": args.steps,
        "step_seconds": report.step_seconds,
        "bytes_sent_per_rank": report.bytes_sent_per_rank(),
        "predicted_bytes_per_rank": progs.predicted_bytes_per_rank.iter().map(|b| b * args.steps as u64).collect::<Vec<_>>(),
        "peak_bytes_per_rank": report.peak_bytes_per_rank,
        "comm_seconds_per_rank": (0..plan.workers()).map(|r| report.comm_seconds.iter().map(|s| s[r]).sum::<f64>()).collect::<Vec<_>>(),
        "verified": verification.map(|(v, _)| v.passed()),
        "max_rel_error": verification.map(|(v, _)| v.max_rel_error),
        "verify": verification.map(|(v, one)| super::run_verify::details(v, one)),
        "collective_share": share,
        "op_seconds": report.op_seconds,
    });
    println!("{v}");
}

/// `TOFU_PROFILE=1`: rank 0's seconds per operator, on stderr.
fn print_profile(args: &Args, report: &RunReport) {
    let (from, steps) = if args.steps > 1 {
        (2, &report.step_seconds[1..])
    } else {
        (1, &report.step_seconds[..])
    };
    let total: f64 = report.op_seconds.iter().map(|o| o.1).sum();
    eprintln!(
        "TOFU_PROFILE: rank 0 seconds per operator over steps {from}..{} \
         (each instruction synchronised; the first step's start-up left out):",
        args.steps
    );
    for (op, s) in report.op_seconds.iter().take(24) {
        eprintln!("  {op:<32} {s:>10.4}");
    }
    eprintln!(
        "  {:<32} {total:>10.4} of {:.4} s in those steps",
        "all instructions",
        steps.iter().sum::<f64>()
    );
}
