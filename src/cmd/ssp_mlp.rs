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
//! the flags and prints ([`train::report::ssp_mlp`]).

use std::process::ExitCode;

use train::report::ssp_mlp::{self, SspMlpSummary};
use train::ssp_mlp::{EpochEnd, SspMlp, SspMlpOptions};

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
    let run = SspMlp::new(&data, opts.clone()).map_err(lib_err)?;
    if !c.json {
        eprintln!("{}", ssp_mlp::header(&run, &opts));
    }
    let quiet = c.json;
    let result = run
        .run(&|e: EpochEnd| {
            if !quiet {
                eprintln!("{e}");
            }
        })
        .map_err(lib_err)?;
    let summary = SspMlpSummary::new(result, &opts, a.target_accuracy);
    if c.json {
        println!("{}", serde_json::to_string(&summary).map_err(lib_err)?);
    } else {
        print!("{summary}");
    }
    Ok(ExitCode::SUCCESS)
}
