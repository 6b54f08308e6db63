//! The arguments of `tofu train` (clap); the command is `train.rs`.

use std::path::PathBuf;

/// Arguments of `tofu train`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A plan file (`tofu plan ... -o plan.json`) to train, or an ONNX
    /// model to plan for `--workers` (with its import flags) and train.
    #[arg(
        value_name = "PLAN.json|MODEL.onnx",
        required_unless_present = "model",
        conflicts_with = "model"
    )]
    pub plan: Option<PathBuf>,
    /// A zoo model to plan and train, sized to the data set (e.g. mlp-3-256).
    #[arg(long)]
    pub model: Option<String>,
    /// Workers (ranks) to plan a zoo model or an ONNX model for.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Data set: digits (scikit-learn's 8×8 digits; `bash scripts/fetch-digits.sh`;
    /// 20% held out), fashion-mnist (`bash scripts/fetch-fashion-mnist.sh`;
    /// its own 10,000 test images held out) or kjv (the King James Bible as
    /// bytes for a language model; `bash scripts/fetch-kjv.sh`; the last
    /// tenth held out), or a .safetensors file or directory of them.
    #[arg(long)]
    pub data: String,
    /// For a safetensors data set: feed graph input NAME from tensor TENSOR
    /// (repeatable; default `x` and `labels`, or `ids` and `labels`, by name).
    #[arg(long, value_name = "NAME=TENSOR")]
    pub input: Vec<String>,
    /// Window length (bytes) of a text corpus: the GPT's sequence.
    #[arg(long, default_value_t = 64)]
    pub seq: usize,
    /// Training steps (one batch each).
    #[arg(long, conflicts_with = "epochs")]
    pub steps: Option<usize>,
    /// Epochs over the training split (default 1).
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Batch size: a zoo model's (default 64), or every input's batch dim of an ONNX model (default: the export's; 1 where dynamic).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Optimizer of a zoo model: sgd, momentum or adam.
    #[arg(long, default_value = "sgd")]
    pub optimizer: String,
    /// Learning rate of the optimizer: a zoo model's (default: the optimizer's, 0.1 for SGD), or the one a plan file was planned with, overridden.
    #[arg(long)]
    pub lr: Option<f64>,
    /// L2 weight decay λ of every weight (PyTorch SGD's and Adam's `weight_decay`; default 0), or the one a plan file was planned with, overridden.
    #[arg(long)]
    pub weight_decay: Option<f64>,
    /// Search of a zoo model's plan (as `tofu plan --search`).
    #[arg(long, default_value = "critical-dp")]
    pub search: String,
    /// Seed of the initial weights, the batch order and the held-out split.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Fraction of the data set held out for the test loss and accuracy.
    #[arg(long, default_value_t = 0.2)]
    pub held_out: f64,
    /// One JSON object per logged step and a final one, on stdout.
    #[arg(long)]
    pub json: bool,
    /// Under a launcher: seconds to wait for a rank to join, and per message.
    #[arg(long, value_name = "SECONDS", default_value = "600", value_parser = rendezvous::seconds)]
    pub comm_timeout: std::time::Duration,
    /// Log every N-th step (and the last).
    #[arg(long, default_value_t = 1)]
    pub log_every: usize,
    /// Start from these weights instead of the synthetic initial fill:
    /// safetensors named by graph names (e.g. a `--save-weights` file), or
    /// the ONNX model a plan file was made from (its own values).
    #[arg(long, value_name = "FILE.safetensors|MODEL.onnx")]
    pub weights: Option<PathBuf>,
    /// Write the trained weights (whole tensors, by graph names) as
    /// safetensors; with `--steps 0`, the initial weights.
    #[arg(long, value_name = "FILE.safetensors")]
    pub save_weights: Option<PathBuf>,
    /// Write the ONNX model trained (MODEL.onnx, or a plan file's
    /// `--onnx-model`) with its initializers replaced by the trained
    /// weights, the graph unchanged, written whole or not at all: a model
    /// onnxruntime runs.
    #[arg(long, value_name = "OUT.onnx")]
    pub save_onnx: Option<PathBuf>,
    /// The ONNX model a plan file was made from (`tofu plan MODEL.onnx`),
    /// for `--save-onnx`.
    #[arg(long, value_name = "MODEL.onnx")]
    pub onnx_model: Option<PathBuf>,
    /// Write the features and labels of every step's batch (`x[steps,
    /// batch, features]`, `y[steps, batch]`) as safetensors, for a
    /// reference implementation (`scripts/compare-torch.py`).
    #[arg(long, value_name = "FILE.safetensors")]
    pub export_batches: Option<PathBuf>,
    /// Write a checkpoint (every rank's shards of weights and optimizer
    /// state, a manifest) into DIR/step-<S>/ every `--checkpoint-every` steps.
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Steps between checkpoints.
    #[arg(long, default_value_t = 100, requires = "checkpoint_dir")]
    pub checkpoint_every: usize,
    /// Continue from the latest checkpoint in `--checkpoint-dir` (same
    /// model, workers and seed): later losses equal the uninterrupted run's.
    #[arg(long, requires = "checkpoint_dir")]
    pub resume: bool,
    /// Backend: cpu (one thread per rank; under `tofu launch`, one rank per
    /// process over TCP) or cuda (one thread per rank, rank r on device
    /// `devices[r / ranks-per-device]`, NCCL between devices or host-staged
    /// between ranks sharing one; under `tofu launch`, one rank per process
    /// on device `devices[local rank]` over NCCL; needs a build with
    /// `--features cuda`).
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda"])]
    pub backend: String,
    /// CUDA devices to use, e.g. `0,1,2,3` (default: every visible device).
    #[arg(long, value_delimiter = ',')]
    pub devices: Option<Vec<usize>>,
    /// Ranks sharing one GPU (host-staged communication between them).
    #[arg(long, default_value_t = 1)]
    pub ranks_per_device: usize,
    /// Evaluate the held-out set every N steps (default: once per epoch;
    /// 0: only at the end).
    #[arg(long, value_name = "N")]
    pub eval_every: Option<usize>,
    /// Evaluate only the first N held-out samples (default: all).
    #[arg(long, value_name = "N")]
    pub eval_samples: Option<usize>,
    /// Draw the training loss per step and the held-out loss per
    /// evaluation into an SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// ONNX import flags, for MODEL.onnx.
    #[command(flatten)]
    pub import: super::import_args::ImportArgs,
    #[command(flatten)]
    pub specs: super::specs_args::SpecsArgs,
}
