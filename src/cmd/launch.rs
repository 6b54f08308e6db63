//! `tofu launch --nproc-per-node N [--nnodes M --node-rank R --master-addr
//! HOST --master-port P] -- SUBCOMMAND ARGS…`: start one `tofu` process per
//! local rank (one per GPU), in torchrun's conventions.
//!
//! Takes the layout and a tofu subcommand; re-executes this executable once
//! per local rank with `RANK` = R·N + local, `LOCAL_RANK`, `WORLD_SIZE` =
//! N·M, `LOCAL_WORLD_SIZE` = N, `MASTER_ADDR`, `MASTER_PORT` set (rank 0,
//! on node 0, hosts the rendezvous of the `rendezvous` crate there), forwards
//! every line the children print with a `[rank r] ` prefix (stdout to stdout,
//! stderr to stderr), and waits for all. Gives exit code 0 when every rank
//! exits 0; otherwise, once a rank exits non-zero or is killed, the others get
//! `--grace-s` seconds to finish (they normally fail by themselves: the
//! rendezvous names the dead rank), are then killed, and `tofu launch` fails
//! with a message naming the first failed rank and its exit status, and every
//! rank's status.
//!
//! Unless `RAYON_NUM_THREADS` is set, each child gets `RAYON_NUM_THREADS` =
//! cores / N (at least 1): the kernels' thread pools of the node's ranks
//! share its cores instead of each taking all of them. The supervisor is
//! `rendezvous::launcher`; this file checks the arguments and reports.
//!
//! Also the hidden `tofu rendezvous-check`, what the launcher's tests run in
//! each rank: read the environment, join, check that every rank got rank 0's
//! payload, pass barriers, print one JSON line.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use miette::miette;
use rendezvous::check::{check, Faults};
use rendezvous::heartbeat::Heartbeat;
use rendezvous::launcher::{launch, Layout};
use rendezvous::Env;

/// Arguments of `tofu launch`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Processes to start on this node (one per local GPU).
    #[arg(long)]
    pub nproc_per_node: usize,
    /// Number of nodes (hosts) in the run.
    #[arg(long, default_value_t = 1)]
    pub nnodes: usize,
    /// This node's index, 0..nnodes; node 0 runs rank 0, which hosts the
    /// rendezvous.
    #[arg(long, default_value_t = 0)]
    pub node_rank: usize,
    /// Address of node 0 as the other nodes reach it.
    #[arg(long, default_value = "127.0.0.1")]
    pub master_addr: String,
    /// TCP port of the rendezvous on node 0.
    #[arg(long, default_value_t = 29500)]
    pub master_port: u16,
    /// Seconds the other ranks get to exit after one fails, before they are
    /// killed.
    #[arg(long, default_value_t = 5.0)]
    pub grace_s: f64,
    /// Seconds of silence before another node's launcher counts as lost and
    /// this node stops its ranks (node 0 listens on --master-port + 1).
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = rendezvous::seconds)]
    pub heartbeat_timeout: Duration,
    /// Restart this node's ranks up to N times after one fails (torchrun's).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_restarts: usize,
    /// The tofu subcommand each rank runs, and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "SUBCOMMAND")]
    pub command: Vec<OsString>,
}

/// Run `tofu launch`.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    let layout = Layout {
        nproc_per_node: args.nproc_per_node,
        nnodes: args.nnodes,
        node_rank: args.node_rank,
        master_addr: args.master_addr.clone(),
        master_port: args.master_port,
    };
    layout.check().map_err(|e| miette!("{e}"))?;
    if !(args.grace_s.is_finite() && args.grace_s >= 0.0) {
        return Err(miette!(
            "--grace-s must be a non-negative number of seconds"
        ));
    }
    if args.command.first().is_some_and(|c| c == "launch") {
        return Err(miette!(
            "`tofu launch -- launch …` would launch launchers; give the subcommand each rank runs, e.g. `-- run plan.json`"
        ));
    }
    let exe = std::env::current_exe()
        .map_err(|e| miette!("cannot find the tofu executable to start the ranks: {e}"))?;
    let grace = Duration::from_secs_f64(args.grace_s);
    let heartbeat =
        Heartbeat::start(&layout, args.heartbeat_timeout).map_err(|e| miette!("{e}"))?;
    let timing = (grace, args.max_restarts);
    let outcome =
        launch(&exe, &args.command, &layout, timing, &heartbeat).map_err(|e| miette!("{e}"))?;
    match outcome.failure(args.grace_s) {
        Some(message) => Err(miette!("{message}")),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Arguments of the hidden `tofu rendezvous-check` (run under `tofu launch`).
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Seconds the join and each barrier may take.
    #[arg(long, default_value = "30", value_parser = rendezvous::seconds)]
    pub timeout_s: Duration,
    /// Barriers to pass (at least 2; the mean time of all but the first is
    /// reported).
    #[arg(long, default_value_t = 2)]
    pub barriers: usize,
    /// This rank aborts (SIGABRT) after the first barrier, without closing
    /// its session: the others must fail naming it.
    #[arg(long)]
    pub kill_rank: Option<usize>,
    /// This rank sleeps for twice the timeout after the first barrier,
    /// ignoring the others: with `--kill-rank`, `tofu launch` must kill it
    /// after the grace period.
    #[arg(long)]
    pub hang_rank: Option<usize>,
}

/// Run `tofu rendezvous-check` ([`rendezvous::check`]): print
/// `{"rank", "local_rank", "world_size", "payload", "same_payload",
/// "barriers", "join_ms", "barrier_us"}` (payload in hex; times: the join
/// and the mean of barriers 2.., this rank's view).
pub fn run_check(args: CheckArgs) -> miette::Result<ExitCode> {
    let env = Env::from_env()
        .map_err(|e| miette!("{e}"))?
        .ok_or_else(|| {
            miette!("RANK and WORLD_SIZE are not set: run it as `tofu launch --nproc-per-node N -- rendezvous-check`")
        })?;
    let faults = Faults {
        kill_rank: args.kill_rank,
        hang_rank: args.hang_rank,
    };
    let report = check(&env, args.timeout_s, args.barriers, faults).map_err(|e| miette!("{e}"))?;
    println!(
        "{}",
        serde_json::to_value(report).map_err(|e| miette!("{e}"))?
    );
    Ok(ExitCode::SUCCESS)
}
