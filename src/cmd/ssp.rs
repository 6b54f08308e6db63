//! `tofu ssp …`: data-parallel training through the Stale Synchronous
//! Parallel parameter server (crate `ssp`, Bösen, thesis ch. 3).
//!
//! `tofu ssp mf`: SGD matrix factorisation on MovieLens-100K (the
//! `ml-100k.inter` file that `scripts/fetch-movielens.sh` caches, or
//! `--data FILE`), 90/10 split, with progress on stderr and a `--json`
//! summary (`rmse_per_epoch`, `heldout_rmse`, `epochs`, `seconds`,
//! `bytes_sent`, …), all in one process (`--clients` row caches, `--shards`
//! server shards, on threads).
//!
//! `tofu ssp server` / `tofu ssp worker` (`ssp_processes`): the same runs
//! as separate processes over TCP.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ssp::mf::{load_inter, split, train, MfConfig, Rating, Ratings};
use ssp::placement::{Placement, Policy};
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
    Mf(MfArgs),
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

/// Arguments of `tofu ssp mf`.
#[derive(clap::Args, Debug)]
pub struct MfArgs {
    #[command(flatten)]
    pub comm: CommArgs,
    #[command(flatten)]
    pub model: MfModelArgs,
    #[command(flatten)]
    pub run: MfDataArgs,
    /// Client row caches the `--workers` threads are split over (the
    /// in-process stand-in for that many worker processes).
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    /// Server shards.
    #[arg(long, default_value_t = 2)]
    pub shards: usize,
}

/// Run the subcommand.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    match args.command {
        SspCommand::Mf(a) => mf(a),
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

fn default_movielens() -> miette::Result<PathBuf> {
    let cache = match std::env::var_os("TOFU_MOVIELENS_CACHE") {
        Some(c) => PathBuf::from(c),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/tofu/recbole-1.2.1"),
    };
    let file = cache.join("ml-100k.inter");
    if file.is_file() {
        Ok(file)
    } else {
        Err(miette::miette!(
            "{} is missing: run scripts/fetch-movielens.sh (or pass --data FILE)",
            file.display()
        ))
    }
}

/// MovieLens-100K (or `data`), split 90/10 with `seed`: the ratings and
/// the train and held-out sets.
///
/// # Errors
/// The file is missing (names the fetch script) or malformed.
pub(crate) fn load_movielens(
    data: Option<&Path>,
    seed: u64,
) -> miette::Result<(Ratings, Vec<Rating>, Vec<Rating>)> {
    let file = match data {
        Some(f) => f.to_path_buf(),
        None => default_movielens()?,
    };
    let ratings = load_inter(&file).map_err(|e| miette::miette!("--data: {e}"))?;
    let (tr, te) = split(&ratings, 0.9, seed);
    Ok((ratings, tr, te))
}

/// The MF run settings of the communication flags, rank (latent factors),
/// clocks per epoch and AdaRevision's base rate α (`None`: plain SGD).
///
/// # Errors
/// `--workers`, `--epochs`, `rank` or `clocks_per_epoch` is zero.
pub(crate) fn mf_config(
    c: &CommArgs,
    rank: u32,
    clocks_per_epoch: u32,
    adarevision: Option<f32>,
) -> miette::Result<MfConfig> {
    if c.workers == 0 || c.epochs == 0 || rank == 0 || clocks_per_epoch == 0 {
        return Err(miette::miette!(
            "--workers, --epochs, --rank and --clocks-per-epoch must be at least 1"
        ));
    }
    Ok(MfConfig {
        workers: c.workers,
        staleness: c.staleness,
        rank,
        epochs: c.epochs,
        clocks_per_epoch,
        seed: c.seed,
        comm: comm_config(c),
        adarevision,
        ..MfConfig::default()
    })
}

/// The placement of `cfg`'s tables over `cfg.shards` shards for the
/// ratings `data` (`None` for `--placement hash`).
///
/// # Errors
/// Zero shards.
pub(crate) fn placement(
    arg: PlacementArg,
    cfg: &MfConfig,
    data: &Ratings,
) -> miette::Result<Option<Arc<Placement>>> {
    let policy = match arg {
        PlacementArg::Hash => return Ok(None),
        PlacementArg::Greedy => Policy::GreedyLargestFirst,
        PlacementArg::Uniform => Policy::UniformSplit,
        PlacementArg::RoundRobin => Policy::RoundRobin,
    };
    let sizes = cfg.table_sizes(data.users, data.items);
    let p = Placement::new(&sizes, cfg.shards, policy)
        .map_err(|e| miette::miette!("--placement: {e}"))?;
    Ok(Some(Arc::new(p)))
}

/// Prints an MF report: one JSON object on stdout with `extra`'s fields
/// added, or a line of text.
pub(crate) fn print_report(
    report: &ssp::mf::MfReport,
    json: bool,
    extra: serde_json::Value,
) -> miette::Result<()> {
    if json {
        let mut v = serde_json::to_value(report).map_err(|e| miette::miette!("{e}"))?;
        if let (Some(v), serde_json::Value::Object(extra)) = (v.as_object_mut(), extra) {
            v.extend(extra);
        }
        println!("{v}");
    } else {
        println!(
            "held-out RMSE {:.4} after {} epochs, {:.2} s, {} bytes of updates sent",
            report.heldout_rmse, report.epochs, report.seconds, report.bytes_sent
        );
    }
    Ok(())
}

fn mf(a: MfArgs) -> miette::Result<ExitCode> {
    let c = &a.comm;
    let mut cfg = mf_config(
        c,
        a.model.rank,
        a.run.clocks_per_epoch,
        a.model.adarevision.then_some(a.model.ada_alpha),
    )?;
    cfg.clients = a.clients;
    cfg.shards = a.shards;
    cfg.check()
        .map_err(|e| miette::miette!("--workers/--clients/--shards: {e}"))?;
    let (data, tr, te) = load_movielens(a.run.data.as_deref(), c.seed)?;
    cfg.comm.placement = placement(a.run.placement, &cfg, &data)?;
    if !c.json {
        eprintln!(
            "ssp mf: {} ratings ({} users, {} items), {} train / {} held out, {} workers, s = {}",
            data.ratings.len(),
            data.users,
            data.items,
            tr.len(),
            te.len(),
            c.workers,
            c.staleness
        );
    }
    let report = train(&tr, &te, &cfg, &mut |e, trm, tem| {
        eprintln!("epoch {e}: train RMSE {trm:.4}, held-out RMSE {tem:.4}");
    })
    .map_err(|e| miette::miette!("{e}"))?;
    print_report(
        &report,
        c.json,
        serde_json::json!({
            "staleness": c.staleness,
            "workers": c.workers,
            "clients": a.clients,
            "shards": a.shards,
            "bandwidth": c.bandwidth,
            "adarevision": a.model.adarevision,
        }),
    )?;
    Ok(ExitCode::SUCCESS)
}
