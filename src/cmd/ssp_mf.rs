//! `tofu ssp mf`: SGD matrix factorisation on MovieLens-100K (the
//! `ml-100k.inter` file that `scripts/fetch-movielens.sh` caches, or
//! `--data FILE`), 90/10 split, with progress on stderr and a `--json`
//! summary (`rmse_per_epoch`, `heldout_rmse`, `epochs`, `seconds`,
//! `bytes_sent`, …), all in one process (`--clients` row caches, `--shards`
//! server shards, on threads). Also the MF settings, data and report the
//! other subcommands share (`ssp_bench`, `ssp_processes`).

use std::path::Path;
use std::process::ExitCode;

use ssp::mf::summary::MfSummary;
use ssp::mf::{load_split, train, MfConfig, Rating, Ratings};
use ssp::placement::Policy;

use super::lib_err;
use super::ssp::{comm_config, CommArgs, MfDataArgs, MfModelArgs, PlacementArg};

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

/// MovieLens-100K (or `data`), split 90/10 with `seed`
/// ([`ssp::mf::load_split`]).
pub(crate) fn load_movielens(
    data: Option<&Path>,
    seed: u64,
) -> miette::Result<(Ratings, Vec<Rating>, Vec<Rating>)> {
    load_split(data, seed).map_err(lib_err)
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

/// The placement policy of `--placement` (`None` for `hash`).
pub(crate) fn placement_policy(arg: PlacementArg) -> Option<Policy> {
    match arg {
        PlacementArg::Hash => None,
        PlacementArg::Greedy => Some(Policy::GreedyLargestFirst),
        PlacementArg::Uniform => Some(Policy::UniformSplit),
        PlacementArg::RoundRobin => Some(Policy::RoundRobin),
    }
}

/// Prints an MF run's summary: one JSON object on stdout, or a line.
pub(crate) fn print_summary(summary: &MfSummary, json: bool) -> miette::Result<()> {
    if json {
        println!("{}", serde_json::to_value(summary).map_err(lib_err)?);
    } else {
        print!("{summary}");
    }
    Ok(())
}

/// Run `tofu ssp mf`.
pub fn mf(a: MfArgs) -> miette::Result<ExitCode> {
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
    cfg.comm.placement = cfg
        .placement(placement_policy(a.run.placement), &data)
        .map_err(|e| miette::miette!("--placement: {e}"))?;
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
    .map_err(lib_err)?;
    let summary = MfSummary {
        report: &report,
        adarevision: a.model.adarevision,
        bandwidth: c.bandwidth,
        client: None,
        clients: a.clients,
        resumed_at: None,
        shards: a.shards,
        staleness: c.staleness,
        workers: c.workers,
    };
    print_summary(&summary, c.json)?;
    Ok(ExitCode::SUCCESS)
}
