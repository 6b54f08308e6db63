//! `tofu ssp bench`: the managed-communication benchmark of thesis §3.3
//! (`ssp::mf::bench`: BSP, SSP and SSP + managed communication on SGD MF
//! over MovieLens-100K, same split and seed) with the MF flags of `tofu ssp
//! mf`. Prints a table (or `--json`: `{"runs": [...], "target_rmse", ...}`)
//! of epochs and seconds to the first held-out RMSE ≤ `--target`, total
//! seconds and bytes sent, and each run's ratios to BSP (`null` when either
//! run missed the target).

use std::path::PathBuf;
use std::process::ExitCode;

use ssp::mf::bench::{self, BenchRun};
use ssp::Priority;

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

fn fmt_opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
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
    if a.json {
        let v = serde_json::json!({
            "target_rmse": a.target,
            "workers": a.workers,
            "epochs": a.epochs,
            "priority": a.priority.name(),
            "runs": runs,
        });
        println!("{v}");
    } else {
        print_table(&a, &runs);
    }
    Ok(ExitCode::SUCCESS)
}

/// The table of runs and the line saying what the target was.
fn print_table(a: &BenchArgs, runs: &[BenchRun]) {
    println!(
        "{:<12} {:>3} {:>10} {:>9} {:>9} {:>8} {:>12} {:>9} {:>10} {:>11}",
        "config",
        "s",
        "bandwidth",
        "epochs→t",
        "secs→t",
        "secs",
        "bytes sent",
        "held-out",
        "time/BSP",
        "epochs/BSP"
    );
    for r in runs {
        println!(
            "{:<12} {:>3} {:>10} {:>9} {:>9} {:>8.2} {:>12} {:>9.4} {:>10} {:>11}",
            r.config,
            r.staleness,
            r.bandwidth,
            r.epochs_to_target
                .map_or_else(|| "-".to_string(), |e| e.to_string()),
            fmt_opt(r.seconds_to_target, 2),
            r.seconds,
            r.bytes_sent,
            r.heldout_rmse,
            fmt_opt(r.seconds_to_target_vs_bsp, 3),
            fmt_opt(r.epochs_to_target_vs_bsp, 3),
        );
    }
    println!(
        "target: held-out RMSE ≤ {} (\"-\": not reached in {} epochs); ratios are run / BSP, below 1 is faster",
        a.target, a.epochs
    );
}
