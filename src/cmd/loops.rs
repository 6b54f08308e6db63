//! `tofu loops …`: dependence-aware parallel loops (Orion; the `loops`
//! crate). `mf` trains SGD matrix factorisation on MovieLens-100K with the
//! schedule the dependence analysis picks (or the one asked for), `lr` runs
//! the 1D sparse logistic regression, and `bench` measures time per epoch
//! for 1, 2 and 4 workers and epochs to held-out RMSE 0.95 for the
//! dependence-aware schedule against data parallelism. Progress goes to
//! stderr; the report ([`loops::apps::report`]) to stdout, `--json` as one
//! JSON object.

use std::path::PathBuf;
use std::process::ExitCode;

use datasets::movielens;
use loops::apps::report::{BenchSummary, LrSummary, MfSummary};
use loops::apps::{bench, lr, mf};
use loops::Choice;

use super::lib_err;

/// Arguments of `tofu loops`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub app: App,
}

/// The applications.
#[derive(clap::Subcommand, Debug)]
pub enum App {
    /// SGD matrix factorisation on MovieLens-100K (90/10 split).
    Mf(MfArgs),
    /// Sparse logistic regression on synthetic data (a 1D loop).
    Lr(LrArgs),
    /// Time per epoch (1, 2, 4 workers) and epochs to RMSE 0.95 (Orion vs data parallel).
    Bench(BenchArgs),
}

/// Arguments of `tofu loops mf`.
#[derive(clap::Args, Debug)]
pub struct MfArgs {
    /// Worker threads (1: the serial loop).
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// auto, 1d, 2d, unordered-2d, unimodular or data-parallel.
    #[arg(long, default_value = "auto")]
    pub schedule: String,
    /// Passes over the training ratings.
    #[arg(long, default_value_t = 12)]
    pub epochs: usize,
    /// Factors per user and item.
    #[arg(long, default_value_t = 16)]
    pub rank: usize,
    /// SGD step size.
    #[arg(long, default_value_t = 0.01)]
    pub lr: f32,
    /// Seed of the split, the initial factors and the relabelling.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The ratings file (default: the cache of scripts/fetch-movielens.sh).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `tofu loops lr`.
#[derive(clap::Args, Debug)]
pub struct LrArgs {
    /// Worker threads (1: the serial loop).
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Passes over the samples.
    #[arg(long, default_value_t = 10)]
    pub epochs: usize,
    /// Samples of the synthetic data set.
    #[arg(long, default_value_t = 20000)]
    pub samples: usize,
    /// Features.
    #[arg(long, default_value_t = 1000)]
    pub features: usize,
    /// Step size of the full-gradient step per epoch.
    #[arg(long, default_value_t = 2.0)]
    pub lr: f32,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `tofu loops bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Epochs timed per worker count.
    #[arg(long, default_value_t = 5)]
    pub epochs: usize,
    /// Most epochs tried when counting epochs to the target RMSE.
    #[arg(long, default_value_t = 40)]
    pub max_epochs: usize,
    /// Target held-out RMSE.
    #[arg(long, default_value_t = 0.95)]
    pub target: f64,
    /// The ratings file (default: the cache of scripts/fetch-movielens.sh).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Run the subcommand.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    match args.app {
        App::Mf(a) => run_mf(a),
        App::Lr(a) => run_lr(a),
        App::Bench(a) => run_bench(a),
    }
}

fn load(data: &Option<PathBuf>) -> miette::Result<movielens::Ratings> {
    let path = data.clone().unwrap_or_else(movielens::default_path);
    movielens::load(&path).map_err(lib_err)
}

fn run_mf(a: MfArgs) -> miette::Result<ExitCode> {
    if a.workers == 0 || a.epochs == 0 {
        return Err(miette::miette!("--workers and --epochs must be at least 1"));
    }
    let schedule: mf::MfSchedule = a
        .schedule
        .parse()
        .map_err(|e| miette::miette!("--schedule {e}"))?;
    let data = load(&a.data)?;
    let (train, test) = mf::split(&mf::widen(&data.ratings), 0.1, a.seed);
    let cfg = mf::MfConfig {
        rank: a.rank,
        lr: a.lr,
        epochs: a.epochs,
        seed: a.seed,
        workers: a.workers,
        schedule,
        ..Default::default()
    };
    eprintln!(
        "mf: {} ratings ({} train, {} held out), {} users, {} items, {} workers",
        data.ratings.len(),
        train.len(),
        test.len(),
        data.users,
        data.items,
        a.workers
    );
    let rep = mf::train(
        &train,
        &test,
        data.users as usize,
        data.items as usize,
        &cfg,
        &mut |e, tr, ho, s| {
            eprintln!("epoch {e:3}: train RMSE {tr:.4}  held-out RMSE {ho:.4}  {s:.3} s");
        },
    )
    .map_err(|e| miette::miette!("--schedule {}: {e}", a.schedule))?;
    let summary = MfSummary {
        report: &rep,
        workers: a.workers,
    };
    print(a.json, summary.json(), &summary)
}

fn run_lr(a: LrArgs) -> miette::Result<ExitCode> {
    if a.workers == 0 || a.epochs == 0 || a.samples == 0 || a.features == 0 {
        return Err(miette::miette!(
            "--workers, --epochs, --samples and --features must be at least 1"
        ));
    }
    let data = lr::synthetic(a.samples, a.features, 10, 7);
    let rep = lr::train(
        &data,
        a.epochs,
        a.lr,
        a.workers,
        Choice::Auto,
        &mut |e, l, s| {
            eprintln!("epoch {e:3}: log-loss {l:.5}  {s:.3} s");
        },
    )
    .map_err(lib_err)?;
    let summary = LrSummary {
        report: &rep,
        workers: a.workers,
    };
    print(a.json, summary.json(), &summary)
}

fn run_bench(a: BenchArgs) -> miette::Result<ExitCode> {
    let data = load(&a.data)?;
    let b = bench::bench(
        &data,
        (a.epochs, a.max_epochs, a.target),
        &mut |w, schedule, e, ho, s| {
            eprintln!("  {w} workers {schedule:?} epoch {e}: held-out {ho:.4} {s:.3} s");
        },
    )
    .map_err(lib_err)?;
    let summary = BenchSummary {
        bench: &b,
        epochs: a.epochs,
        max_epochs: a.max_epochs,
        target: a.target,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    print(a.json, summary.json(), &summary)
}

/// Print `v` as pretty JSON with `json`, else the text of `summary`.
fn print(
    json: bool,
    v: serde_json::Value,
    summary: &dyn std::fmt::Display,
) -> miette::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(&v).map_err(lib_err)?);
    } else {
        print!("{summary}");
    }
    Ok(ExitCode::SUCCESS)
}
