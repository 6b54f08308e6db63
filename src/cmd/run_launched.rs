//! `tofu run PLAN.json --backend cpu` under a launcher (`tofu launch
//! --nproc-per-node K -- run …`): this process runs rank `RANK` of the
//! K-worker plan only, over TCP to the other processes (the rendezvous
//! exchanges their addresses, `train::launched`). Prints this rank's step
//! times, bytes sent (and the plan's prediction for it) and peak memory, as
//! one JSON object with `rank` and `world_size` under `--json`.

use std::process::ExitCode;

use codegen::Programs;
use rendezvous::Env;
use runner::report::rank::RankSummary;
use runner::{run_rank_fed, CpuBackend, Given, NoFeed, RunOptions};

use super::lib_err;
use super::run::Args;

/// Run this process's rank (see the module doc).
pub fn run(
    args: &Args,
    progs: &Programs,
    opts: RunOptions,
    given: &Given,
    env: Env,
) -> miette::Result<ExitCode> {
    let world = progs.programs.len();
    if env.world_size != world {
        return Err(miette::miette!(
            "the launcher started {} processes for a plan of {world} workers: use --nproc-per-node {world}",
            env.world_size
        ));
    }
    if args.verify {
        return Err(miette::miette!(
            "--verify compares with the unpartitioned run in one process: run it without a launcher"
        ));
    }
    let (comm, session) = train::launched::join_tcp(&env, args.comm_timeout).map_err(lib_err)?;
    let rank = env.rank;
    let program = &progs.programs[rank];
    let run = run_rank_fed(program, CpuBackend::new(), comm, opts, None, given, &NoFeed);
    let (report, _comm) = match run {
        Ok(r) => r,
        Err(e) => {
            // Failing: leave at once, not after the peers (maybe hung).
            session.abandon(&e.to_string());
            return Err(lib_err(e));
        }
    };
    let summary = RankSummary {
        rank,
        world,
        steps: opts.steps,
        predicted_bytes: progs.predicted_bytes_per_rank[rank] * opts.steps as u64,
        report: &report,
    };
    if args.json {
        println!("{}", summary.json());
    } else {
        print!("{summary}");
    }
    session.close().map_err(lib_err)?;
    Ok(ExitCode::SUCCESS)
}
