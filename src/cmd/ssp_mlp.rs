//! `tofu ssp mlp`: data-parallel training of tofu's own MLP training graph
//! through the SSP parameter server (issue 12; thesis ch. 3, seed 004).
//!
//! Takes a data set (`digits`: scikit-learn's 8×8 digits, cached by
//! `scripts/fetch-digits.sh`), the zoo's MLP (`planner::zoo::MlpConfig`,
//! input 64, 10 classes) and the communication flags; gives loss and test
//! accuracy per epoch on stderr and a `--json` summary (`loss_per_epoch`,
//! `accuracy_per_epoch`, `test_accuracy`, `epochs_to_target`, …).
//!
//! The trainer is `train::ssp_mlp` (gradients from the runner's CPU
//! backend, pushed as increments, `--top-k` residuals); this file parses
//! the flags and prints.

use std::process::ExitCode;

use train::ssp_mlp::{EpochEnd, SspMlp, SspMlpOptions, SspMlpRun};

use super::lib_err;
use super::ssp::{comm_config, CommArgs};

/// Arguments of `tofu ssp mlp`.
#[derive(clap::Args, Debug)]
pub struct MlpArgs {
    #[command(flatten)]
    pub comm: CommArgs,
    /// Data set: `digits` (scikit-learn's 8×8 digits) or `fashion-mnist`.
    #[arg(long, default_value = "digits")]
    pub data: String,
    /// Hidden width.
    #[arg(long, default_value_t = 64)]
    pub hidden: usize,
    /// Dense layers.
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    /// Batch per step (one clock per batch).
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// SGD learning rate.
    #[arg(long, default_value_t = 0.1)]
    pub lr: f32,
    /// Send only this fraction of each tensor's entries per step (largest
    /// first), keeping the rest as a residual.
    #[arg(long)]
    pub top_k: Option<f32>,
    /// Test accuracy whose first reach is reported (`epochs_to_target`).
    #[arg(long, default_value_t = 0.95)]
    pub target_accuracy: f64,
}

/// What an MLP run measured.
#[derive(serde::Serialize)]
struct Report {
    loss_per_epoch: Vec<f64>,
    accuracy_per_epoch: Vec<f64>,
    test_accuracy: f64,
    epochs: u32,
    target_accuracy: f64,
    epochs_to_target: Option<u32>,
    seconds: f64,
    bytes_sent: u64,
    workers: usize,
    staleness: u32,
    top_k: Option<f32>,
}

/// Run `tofu ssp mlp`.
pub fn mlp(a: MlpArgs) -> miette::Result<ExitCode> {
    let c = &a.comm;
    let opts = SspMlpOptions {
        workers: c.workers,
        staleness: c.staleness,
        epochs: c.epochs,
        seed: c.seed,
        layers: a.layers,
        hidden: a.hidden,
        batch: a.batch,
        lr: a.lr,
        top_k: a.top_k,
        comm: comm_config(c),
    };
    opts.check().map_err(lib_err)?;
    let data = train::data::load(&a.data).map_err(lib_err)?;
    let run = SspMlp::new(&data, opts).map_err(lib_err)?;
    if !c.json {
        eprintln!(
            "ssp mlp: {} train / {} test images, {} workers × {} clocks of batch {} per epoch, s = {}{}",
            run.train_len(),
            run.test_len(),
            c.workers,
            run.clocks_per_epoch(),
            a.batch,
            c.staleness,
            a.top_k.map(|f| format!(", top-k {f}")).unwrap_or_default()
        );
    }
    let quiet = c.json;
    let result = run
        .run(&|e: EpochEnd| {
            if !quiet {
                eprintln!(
                    "epoch {}: worker 0 loss {:.4}, test accuracy {:.4} ({:.1} s)",
                    e.epoch, e.loss, e.accuracy, e.seconds
                );
            }
        })
        .map_err(lib_err)?;
    print(&a, result)
}

/// The run's report: one JSON object, or a line.
fn print(a: &MlpArgs, result: SspMlpRun) -> miette::Result<ExitCode> {
    let c = &a.comm;
    let accuracy_per_epoch = result.accuracy_per_epoch;
    let report = Report {
        loss_per_epoch: result.loss_per_epoch,
        test_accuracy: accuracy_per_epoch.last().copied().unwrap_or(0.0),
        epochs_to_target: accuracy_per_epoch
            .iter()
            .position(|&x| x >= a.target_accuracy)
            .map(|e| e as u32 + 1),
        accuracy_per_epoch,
        epochs: c.epochs,
        target_accuracy: a.target_accuracy,
        seconds: result.seconds,
        bytes_sent: result.bytes_sent,
        workers: c.workers,
        staleness: c.staleness,
        top_k: a.top_k,
    };
    if c.json {
        println!("{}", serde_json::to_string(&report).map_err(lib_err)?);
    } else {
        println!(
            "test accuracy {:.4} after {} epochs, {:.2} s, {} bytes of updates sent",
            report.test_accuracy, report.epochs, report.seconds, report.bytes_sent
        );
    }
    Ok(ExitCode::SUCCESS)
}
