//! `tofu run PLAN.json`: execute a plan's training steps on CPU threads
//! (one per worker) and report step time, bytes sent and peak memory per
//! worker; `--verify` also runs the unpartitioned graph on the same data and
//! compares the loss and every updated weight and optimizer state.
//!
//! Before anything runs, the plan file is checked (format, graph hash,
//! decisions fit the graph; then [`codegen::check_recorded`]: its recorded
//! per-operator bytes and per-worker memory equal what its decisions imply,
//! which catches tampered tiles), and the generated programs are validated
//! ([`codegen::validate`]: every tile produced exactly once, every receive
//! matched by a send). Exit code: 0, or 1 when a check fails or
//! the verification exceeds the tolerance (max relative error 1e-4).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use interval::cache::StrategyCache;
use planner::plan::model::Model;
use planner::plan::PlanFile;
use runner::{max_rel_error, run_programs, RunOptions};
use tdl::Library;

/// Tolerance of `--verify` (max relative error, f32).
const TOLERANCE: f64 = 1e-4;

/// Arguments of `tofu run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The plan file (`tofu plan … -o PLAN.json`).
    pub plan: PathBuf,
    /// Execution backend (only `cpu` so far).
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Training steps to run.
    #[arg(long, default_value_t = 1)]
    pub steps: usize,
    /// Seed of the synthetic data.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Also run the unpartitioned graph and compare results.
    #[arg(long)]
    pub verify: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Run the subcommand.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    if args.backend != "cpu" {
        return Err(miette::miette!(
            "backend `{}` is not available; use --backend cpu",
            args.backend
        ));
    }
    if args.steps == 0 {
        return Err(miette::miette!("--steps must be at least 1"));
    }
    let lib = Library::shipped().map_err(|e| miette::miette!("{e}"))?;
    let cache = StrategyCache::new();
    let (file, graph, decisions) =
        PlanFile::load(&args.plan, &lib, &cache).map_err(|e| miette::miette!("{e}"))?;
    let model = Model::new(&graph, &lib, &cache).map_err(|e| miette::miette!("{e}"))?;
    // Recorded costs vs decisions: catches an edited tile or strategy that
    // still passes the loader's structural checks.
    codegen::check_recorded(&file, &graph, &model, &decisions)
        .map_err(|e| miette::miette!("{}: {e}", args.plan.display()))?;
    let progs = codegen::generate(&graph, &lib, &model, &file.factors, &decisions)
        .map_err(|e| miette::miette!("{}: {e}", args.plan.display()))?;
    codegen::validate(&graph, &model, &file.factors, &decisions, &progs)
        .map_err(|e| miette::miette!("{}: {e}", args.plan.display()))?;
    let start = Instant::now();
    let quiet = args.json;
    let steps = args.steps;
    let progress = move |s: usize| {
        if !quiet && start.elapsed().as_secs_f64() > 3.0 {
            eprintln!("step {s}/{steps} ({:.1} s)", start.elapsed().as_secs_f64());
        }
    };
    let opts = RunOptions {
        steps: args.steps,
        seed: args.seed,
    };
    let report = run_programs(&graph, &lib, &progs, opts, Some(&progress))
        .map_err(|e| miette::miette!("{e}"))?;
    let (verified, err) = if args.verify {
        let one = codegen::generate_unpartitioned(&graph, &lib, &model)
            .map_err(|e| miette::miette!("{e}"))?;
        let r1 =
            run_programs(&graph, &lib, &one, opts, None).map_err(|e| miette::miette!("{e}"))?;
        let (e, _) = max_rel_error(&report, &r1);
        (Some(e <= TOLERANCE), Some(e))
    } else {
        (None, None)
    };
    let bytes = report.bytes_sent_per_rank();
    if args.json {
        let v = serde_json::json!({
            "plan": args.plan.display().to_string(),
            "workers": file.workers,
            "steps": args.steps,
            "step_seconds": report.step_seconds,
            "bytes_sent_per_rank": bytes,
            "predicted_bytes_per_rank": progs.predicted_bytes_per_rank.iter().map(|b| b * args.steps as u64).collect::<Vec<_>>(),
            "peak_bytes_per_rank": report.peak_bytes_per_rank,
            "comm_seconds_per_rank": (0..file.workers).map(|r| report.comm_seconds.iter().map(|s| s[r]).sum::<f64>()).collect::<Vec<_>>(),
            "verified": verified,
            "max_rel_error": err,
        });
        println!("{v}");
    } else {
        println!(
            "{} on {} CPU workers, {} step(s)",
            graph.name(),
            file.workers,
            args.steps
        );
        for (s, t) in report.step_seconds.iter().enumerate() {
            println!(
                "step {s}: {:.4} s, bytes sent per rank {:?}",
                t, report.bytes_sent[s]
            );
        }
        println!("peak bytes per rank: {:?}", report.peak_bytes_per_rank);
        if let (Some(ok), Some(e)) = (verified, err) {
            println!(
                "verify: max relative error {e:.3e} ({})",
                if ok { "ok" } else { "FAILED" }
            );
        }
    }
    Ok(if verified == Some(false) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
