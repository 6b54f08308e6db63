//! `tofu ssp bench`: the managed-communication benchmark of thesis §3.3
//! (`ssp::mf::bench`: BSP, SSP and SSP + managed communication on SGD MF
//! over MovieLens-100K, same split and seed) with the MF flags of `tofu ssp
//! mf`. Prints a table (or `--json`: `{"runs": [...], "target_rmse", ...}`)
//! of epochs and seconds to the first held-out RMSE ≤ `--target`, total
//! seconds and bytes sent, and each run's ratios to BSP (`null` when either
//! run missed the target): [`ssp::mf::summary::BenchSummary`].

use std::path::PathBuf;
use std::process::ExitCode;

use ssp::mf::bench;
use ssp::mf::summary::BenchSummary;
use ssp::Priority;

use super::lib_err;
use super::ssp::{parse_priority, CommArgs};
use super::ssp_mf::{load_movielens, mf_config};

/// Arguments of `tofu ssp bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Staleness s in clocks of the SSP runs (the BSP run uses 0).
    #[arg(long, default_value_t = 2)]
    pub staleness: u32,
    /// Managed communication of the third run (thesis §3.2): the per-node
    /// bandwidth budget, bytes per second per client, enforced by a leaky
    /// bucket that meters every increment message the client sends —
    /// clock-end flushes and early sends alike (as `tofu ssp mf
    /// --bandwidth`). The default is below the 4–6 MB/s of updates that 4
    /// workers produce in a debug build, so it binds.
    #[arg(long, default_value_t = 1_000_000)]
    pub bandwidth: u64,
    /// Order of early sends in the managed run.
    #[arg(long, default_value = "relative-magnitude", value_parser = parse_priority)]
    pub priority: Priority,
    /// Epochs per run.
    #[arg(long, default_value_t = 20)]
    pub epochs: u32,
    /// Held-out RMSE to reach.
    #[arg(long, default_value_t = 0.95)]
    pub target: f64,
    /// Latent factors.
    #[arg(long, default_value_t = 100)]
    pub rank: u32,
    /// Clocks per epoch.
    #[arg(long, default_value_t = 10)]
    pub clocks_per_epoch: u32,
    /// Seed of initialisation, split and order (the same for all runs).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Ratings file (RecBole `.inter`); default: the cached MovieLens-100K.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Run the benchmark.
pub fn bench(a: BenchArgs) -> miette::Result<ExitCode> {
    let comm = CommArgs {
        workers: a.workers,
        staleness: a.staleness,
        bandwidth: a.bandwidth,
        priority: a.priority,
        epochs: a.epochs,
        seed: a.seed,
        json: a.json,
    };
    let mut cfg = mf_config(&comm, a.rank, a.clocks_per_epoch, None)?;
    cfg.target_rmse = a.target;
    let (data, tr, te) = load_movielens(a.data.as_deref(), a.seed)?;
    eprintln!(
        "ssp bench: {} ratings, {} train / {} held out, {} workers, target held-out RMSE {}",
        data.ratings.len(),
        tr.len(),
        te.len(),
        a.workers,
        a.target
    );
    let runs = bench::bench(&tr, &te, &cfg, &mut |name, e, trm, tem| {
        eprintln!("{name} epoch {e}: train RMSE {trm:.4}, held-out RMSE {tem:.4}");
    })
    .map_err(|(name, e)| miette::miette!("{name}: {e}"))?;
    let summary = BenchSummary {
        epochs: a.epochs,
        priority: a.priority.name(),
        runs: &runs,
        target_rmse: a.target,
        workers: a.workers,
    };
    if a.json {
        println!("{}", serde_json::to_value(summary).map_err(lib_err)?);
    } else {
        print!("{summary}");
    }
    Ok(ExitCode::SUCCESS)
}
