//! `tofu ssp …`: data-parallel training through the Stale Synchronous
//! Parallel parameter server (crate `ssp`, Bösen, thesis ch. 3).
//!
//! The subcommands and the flags they share: `tofu ssp mf` (`ssp_mf`),
//! `bench` (`ssp_bench`), `mlp` (`ssp_mlp`).
//!
//! `tofu ssp server` / `tofu ssp worker` (`ssp_processes`): the same runs
//! as separate processes over TCP.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use ssp::{CommConfig, Priority};

/// Arguments of `tofu ssp`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: SspCommand,
}

/// The `tofu ssp` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum SspCommand {
    /// SGD matrix factorisation on MovieLens-100K through the parameter server.
    Mf(super::ssp_mf::MfArgs),
    /// Benchmark: MF on MovieLens-100K under BSP, SSP and SSP + managed
    /// communication in one run; epochs and seconds to a held-out RMSE,
    /// with ratios against BSP.
    Bench(super::ssp_bench::BenchArgs),
    /// Data-parallel training of tofu's MLP training graph (digits) through
    /// the parameter server, gradients from the runner's CPU backend.
    Mlp(super::ssp_mlp::MlpArgs),
    /// A server process: hosts shards of a multi-process run (MF or the
    /// tagged counter) over TCP.
    Server(super::ssp_processes::ServerArgs),
    /// A client process: worker threads of a multi-process run (MF or the
    /// tagged counter) over TCP.
    Worker(super::ssp_processes::WorkerArgs),
}

/// Communication flags shared by the applications.
#[derive(clap::Args, Debug, Clone)]
pub struct CommArgs {
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Staleness s in clocks (0 = BSP).
    #[arg(long, default_value_t = 2)]
    pub staleness: u32,
    /// Managed communication (thesis §3.2): the per-node bandwidth budget,
    /// bytes per second per client, enforced by a leaky bucket that meters
    /// every increment message the client sends — clock-end flushes and
    /// early sends alike (24 bytes of header + 4 per dense value, 8 per
    /// sparse entry); early sends spend only what the bucket holds, in
    /// `--priority` order. 0 = off: no bucket, updates go out only at clock
    /// end (plain bounded staleness).
    #[arg(long, default_value_t = 0)]
    pub bandwidth: u64,
    /// Order of early sends under `--bandwidth`.
    #[arg(long, default_value = "magnitude", value_parser = parse_priority)]
    pub priority: Priority,
    /// Epochs (passes over the training data).
    #[arg(long, default_value_t = 20)]
    pub epochs: u32,
    /// Seed of initialisation, split and order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn parse_priority(s: &str) -> Result<Priority, String> {
    s.parse()
}

/// The MF model flags every process of a run must agree on.
#[derive(clap::Args, Debug, Clone)]
pub struct MfModelArgs {
    /// Latent factors.
    #[arg(long, default_value_t = 100)]
    pub rank: u32,
    /// AdaRevision on the servers (thesis §3.2.3): workers push gradients,
    /// servers take adaptive steps revised for stale reads.
    #[arg(long)]
    pub adarevision: bool,
    /// AdaRevision's base rate α (with --adarevision).
    #[arg(long, default_value_t = 0.05)]
    pub ada_alpha: f32,
}

/// Where rows live on the server shards.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlacementArg {
    /// A fixed hash of (table, row).
    Hash,
    /// Whole tables, largest first, to the least-loaded shard (seed 004).
    Greedy,
    /// Every table cut into equal contiguous row ranges, one per shard.
    Uniform,
    /// Whole tables to shards in turn.
    RoundRobin,
}

/// The MF data and schedule flags of the processes that run workers.
#[derive(clap::Args, Debug, Clone)]
pub struct MfDataArgs {
    /// Ratings file (RecBole `.inter`); default: the cached MovieLens-100K.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Clocks per epoch.
    #[arg(long, default_value_t = 10)]
    pub clocks_per_epoch: u32,
    /// Placement of the tables' rows over the shards (every client must
    /// use the same): hash, greedy (largest table first), uniform (row
    /// ranges) or round-robin (whole tables).
    #[arg(long, value_enum, default_value = "hash")]
    pub placement: PlacementArg,
}

/// Run the subcommand.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    match args.command {
        SspCommand::Mf(a) => super::ssp_mf::mf(a),
        SspCommand::Bench(a) => super::ssp_bench::bench(a),
        SspCommand::Mlp(a) => super::ssp_mlp::mlp(a),
        SspCommand::Server(a) => super::ssp_processes::server(a),
        SspCommand::Worker(a) => super::ssp_processes::worker(a),
    }
}

/// The client communication settings of the flags.
pub(crate) fn comm_config(c: &CommArgs) -> CommConfig {
    CommConfig {
        bandwidth: c.bandwidth,
        priority: c.priority,
        seed: c.seed,
        tick: Duration::from_millis(2),
        ..CommConfig::default()
    }
}
