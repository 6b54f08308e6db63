//! `tofu train` under a launcher (`tofu launch --nproc-per-node K -- train
//! …`, or torchrun's variables): this process runs one rank of the plan,
//! over TCP to the other processes on the CPU, or over NCCL on its GPU with
//! `--backend cuda` (`train::launched`, `train::rank_trainer`). Every JSON line carries `rank` and `world_size`;
//! the loss appears on the ranks that keep it (`null` elsewhere), the
//! held-out evaluation and `--save-weights` on rank 0; checkpoints are
//! written shard by shard (each process its own) and `--resume` reads them.

use std::process::ExitCode;

use rendezvous::Env;
use train::data::Data;
use train::report::step;
use train::report::summary::RankSummary;
use train::{launched, weights, Prepared, StepLog, TrainOptions};

use super::lib_err;
use super::train::Args;

/// Run this process's rank (see the module doc).
pub fn run(
    args: &Args,
    env: Env,
    prep: &Prepared,
    (train_set, test_set): (&Data, &Data),
    opts: &TrainOptions,
) -> miette::Result<ExitCode> {
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
    let report = launched::train_launched(prep, data, &env, opts, args.comm_timeout, &on_step)
        .map_err(lib_err)?;
    if let (Some(out), Some(w)) = (&args.save_weights, &report.weights) {
        weights::save(out, &prep.graph, w).map_err(lib_err)?;
    }
    if let Some(w) = &report.weights {
        super::train_onnx::save_onnx(args, &prep.graph, w)?;
    }
    let summary = RankSummary {
        rank,
        world,
        steps,
        report: &report,
    };
    if args.json {
        println!("{}", summary.json());
    } else {
        print!("{summary}");
    }
    Ok(ExitCode::SUCCESS)
}

/// One step's line (every `--log-every` steps and the last): JSON with
/// `rank` and `world_size`, or the loss on stderr where this rank keeps it.
fn log_step(args: &Args, ranks: (usize, usize), steps: usize, s: &StepLog) {
    if !step::logged(s, args.log_every, steps) {
        return;
    }
    if args.json {
        println!("{}", step::rank_json(s, ranks));
    } else if let Some(l) = step::rank_loss(s) {
        eprintln!("{}", step::rank_line(s, l));
    }
}
