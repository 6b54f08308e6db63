//! `tofu ssp bench`: the managed-communication benchmark of thesis §3.3
//! (issue 12) on SGD matrix factorisation over MovieLens-100K.
//!
//! Takes the MF flags of `tofu ssp mf`; in one process, one after the
//! other on the same 90/10 split and seed, trains three runs through the
//! same code path as `tofu ssp mf` (`ssp::mf::train`): BSP (s = 0), SSP
//! (s = `--staleness`) and SSP + managed communication (`--bandwidth`
//! bytes per second per client, `--priority`, default relative magnitude).
//! Gives a table (or `--json`: `{"runs": [...], "target_rmse", ...}`) of
//! epochs and seconds to the first held-out RMSE ≤ `--target`, total
//! seconds and bytes sent, with each run's ratio to BSP:
//! `seconds_to_target_vs_bsp` = run seconds to target / BSP seconds to
//! target (below 1: faster than BSP), `epochs_to_target_vs_bsp` likewise;
//! `null` when either run missed the target.

use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use ssp::mf::{train, MfReport};
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

/// One benchmark run and its ratios to the BSP run.
#[derive(Serialize)]
struct BenchRun {
    /// `bsp`, `ssp` or `ssp+managed`.
    config: &'static str,
    staleness: u32,
    /// Bytes per second per client (0: no managed communication).
    bandwidth: u64,
    epochs_to_target: Option<u32>,
    seconds_to_target: Option<f64>,
    /// Wall-clock seconds of the whole run.
    seconds: f64,
    bytes_sent: u64,
    heldout_rmse: f64,
    heldout_rmse_per_epoch: Vec<f64>,
    seconds_to_target_vs_bsp: Option<f64>,
    epochs_to_target_vs_bsp: Option<f64>,
}

fn ratio(run: Option<f64>, bsp: Option<f64>) -> Option<f64> {
    match (run, bsp) {
        (Some(r), Some(b)) if b > 0.0 => Some(r / b),
        _ => None,
    }
}

/// The `--priority` spelling of `p`.
fn priority_name(p: Priority) -> &'static str {
    match p {
        Priority::Random => "random",
        Priority::RoundRobin => "round-robin",
        Priority::Magnitude => "magnitude",
        Priority::RelativeMagnitude => "relative-magnitude",
    }
}

fn fmt_opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

/// Run the benchmark.
pub fn bench(a: BenchArgs) -> miette::Result<ExitCode> {
    let configs: [(&'static str, u32, u64); 3] = [
        ("bsp", 0, 0),
        ("ssp", a.staleness, 0),
        ("ssp+managed", a.staleness, a.bandwidth),
    ];
    let mut cfgs = Vec::new();
    for &(name, staleness, bandwidth) in &configs {
        let comm = CommArgs {
            workers: a.workers,
            staleness,
            bandwidth,
            priority: a.priority,
            epochs: a.epochs,
            seed: a.seed,
            json: a.json,
        };
        let mut cfg = mf_config(&comm, a.rank, a.clocks_per_epoch, None)?;
        cfg.target_rmse = a.target;
        cfgs.push((name, staleness, bandwidth, cfg));
    }
    let (data, tr, te) = load_movielens(a.data.as_deref(), a.seed)?;
    eprintln!(
        "ssp bench: {} ratings, {} train / {} held out, {} workers, target held-out RMSE {}",
        data.ratings.len(),
        tr.len(),
        te.len(),
        a.workers,
        a.target
    );
    let mut reports: Vec<(&'static str, u32, u64, MfReport)> = Vec::new();
    for (name, staleness, bandwidth, cfg) in &cfgs {
        let report = train(&tr, &te, cfg, &mut |e, trm, tem| {
            eprintln!("{name} epoch {e}: train RMSE {trm:.4}, held-out RMSE {tem:.4}");
        })
        .map_err(|e| miette::miette!("{name}: {e}"))?;
        reports.push((name, *staleness, *bandwidth, report));
    }
    let bsp = &reports[0].3;
    let (bsp_secs, bsp_epochs) = (bsp.seconds_to_target, bsp.epochs_to_target.map(f64::from));
    let runs: Vec<BenchRun> = reports
        .iter()
        .map(|(config, staleness, bandwidth, r)| BenchRun {
            config,
            staleness: *staleness,
            bandwidth: *bandwidth,
            epochs_to_target: r.epochs_to_target,
            seconds_to_target: r.seconds_to_target,
            seconds: r.seconds,
            bytes_sent: r.bytes_sent,
            heldout_rmse: r.heldout_rmse,
            heldout_rmse_per_epoch: r.heldout_rmse_per_epoch.clone(),
            seconds_to_target_vs_bsp: ratio(r.seconds_to_target, bsp_secs),
            epochs_to_target_vs_bsp: ratio(r.epochs_to_target.map(f64::from), bsp_epochs),
        })
        .collect();
    if a.json {
        let v = serde_json::json!({
            "target_rmse": a.target,
            "workers": a.workers,
            "epochs": a.epochs,
            "priority": priority_name(a.priority),
            "runs": runs,
        });
        println!("{v}");
        return Ok(ExitCode::SUCCESS);
    }
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
    for r in &runs {
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
    Ok(ExitCode::SUCCESS)
}
