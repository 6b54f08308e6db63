//! `tofu train` under a launcher (`tofu launch --nproc-per-node K -- train
//! …`, or torchrun's variables): this process runs one rank of the plan,
//! over TCP to the other processes on the CPU, or over NCCL on its GPU with
//! `--backend cuda` (`train::launched`, `train::rank_trainer`). Every JSON line carries `rank` and `world_size`;
//! the loss appears on the ranks that keep it (`null` elsewhere), the
//! held-out evaluation and `--save-weights` on rank 0; checkpoints are
//! written shard by shard (each process its own) and `--resume` reads them.

use std::process::ExitCode;
use std::time::Duration;

use rendezvous::Env;
use train::data::Data;
use train::rank_trainer::RankTrainReport;
use train::{launched, weights, Prepared, StepLog, TrainOptions};

use super::train::Args;

/// How long ranks wait for each other to join and, later, for a message.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Run this process's rank (see the module doc).
pub fn run(
    args: &Args,
    env: Env,
    prep: &Prepared,
    (train_set, test_set): (&Data, &Data),
    opts: &TrainOptions,
) -> miette::Result<ExitCode> {
    let e = |e: train::TrainError| miette::miette!("{e}");
    if args.plot.is_some() {
        return Err(miette::miette!(
            "--plot is not supported under a launcher yet: train in one process"
        ));
    }
    let (rank, world) = (env.rank, env.world_size);
    let steps = opts.steps;
    let on_step = |s: &StepLog| log_step(args, (rank, world), steps, s);
    let test = Some(test_set.samples()).filter(|_| rank == 0);
    let data = (train_set.samples(), test);
    let report = launched::train_launched(prep, data, &env, opts, TIMEOUT, &on_step).map_err(e)?;
    if let (Some(out), Some(w)) = (&args.save_weights, &report.weights) {
        weights::save(out, &prep.graph, w).map_err(e)?;
    }
    print_done(args, (rank, world), steps, &report);
    Ok(ExitCode::SUCCESS)
}

/// One step's line (every `--log-every` steps and the last): JSON with
/// `rank` and `world_size`, or the loss on stderr where this rank keeps it.
fn log_step(args: &Args, (rank, world): (usize, usize), steps: usize, s: &StepLog) {
    let logged = s.step.is_multiple_of(args.log_every) || s.step + 1 == steps;
    if !logged {
        return;
    }
    let loss = (!s.loss.is_nan()).then_some(s.loss);
    if args.json {
        let v = serde_json::json!({
            "rank": rank,
            "world_size": world,
            "step": s.step,
            "epoch": s.epoch,
            "loss": loss,
            "samples_per_second": s.samples_per_second,
        });
        println!("{v}");
    } else if let Some(l) = loss {
        eprintln!(
            "step {:>6}  loss {l:.4}  {:.0} samples/s",
            s.step, s.samples_per_second
        );
    }
}

/// The final JSON object, or (on rank 0) the held-out line.
fn print_done(args: &Args, (rank, world): (usize, usize), steps: usize, report: &RankTrainReport) {
    let t = report.test;
    if args.json {
        let v = serde_json::json!({
            "rank": rank,
            "world_size": world,
            "done": true,
            "steps": steps,
            "seconds": report.seconds,
            "final_loss": report.losses.last().copied().flatten(),
            "test_loss": t.map(|t| t.loss),
            "test_accuracy": t.map(|t| t.accuracy),
        });
        println!("{v}");
    } else if let Some(t) = t {
        println!(
            "trained {steps} steps in {:.2} s on {world} processes; held-out loss {:.4}, accuracy {:.4}",
            report.seconds, t.loss, t.accuracy
        );
    }
}
