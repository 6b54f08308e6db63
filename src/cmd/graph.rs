//! `tofu graph --model NAME [--batch N] [--optimizer O] [-o graph.json] [--json]`:
//! build a zoo model's training graph and summarise it.
//!
//! `tofu graph FILE.onnx [--training [--loss NAME]] [--batch N] [--dim name=value]...
//! [--input-shape NAME=D0,D1,...]... [--input-value NAME=V[,V...]]...
//! [--opaque-unsupported]`: import an ONNX model (see the `onnx` crate) as its
//! inference graph, or with `--training` its training graph; the summary also
//! lists the opsets, the nodes folded at import, every dynamic dim that took
//! a default and every node imported as an opaque operator.
//!
//! Prints operators, tensors, parameter count, bytes of parameters +
//! gradients + optimizer state and the peak activation bytes (liveness
//! estimate, see `planner::graph::memory`); with `--json`, one JSON object
//! with the fields `model`, `batch`, `optimizer`, `ops`, `tensors`,
//! `parameters`, `parameter_bytes`, `gradient_bytes`,
//! `optimizer_state_bytes`, `training_state_bytes`, `input_bytes`,
//! `peak_activation_bytes`, `peak_bytes` (all sizes in bytes). `-o` writes
//! the graph file (planner's versioned JSON format) atomically.

use std::path::PathBuf;
use std::process::ExitCode;

use miette::IntoDiagnostic;
use planner::graph::{format, MemoryReport};
use planner::zoo::Model;

use planner::graph::summary::{GraphSummary, ZooSummary};

use super::lib_err;

/// Arguments of `tofu graph`.
#[derive(clap::Args)]
pub struct Args {
    /// Zoo model: mlp-<layers>-<hidden>, wresnet-<50|101|152>-<widen>,
    /// rnn-<layers>-<hidden>, gpt-<layers>-<d_model>,
    /// bert-<layers>-<d_model> (sizes may end in k).
    #[arg(long, conflicts_with = "file")]
    model: Option<String>,
    /// An ONNX model file to import instead of a zoo model.
    #[arg(value_name = "FILE.onnx", required_unless_present = "model")]
    file: Option<PathBuf>,
    /// ONNX: build the training graph (backward + optimizer) instead of the inference graph.
    #[arg(long, requires = "file")]
    training: bool,
    #[command(flatten)]
    import: super::import_args::ImportArgs,
    /// Batch size (default: the model family's).
    #[arg(long)]
    batch: Option<usize>,
    /// Optimizer: sgd, momentum or adam.
    #[arg(long, default_value = "momentum")]
    optimizer: String,
    /// Write the training graph to this JSON file.
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    specs: super::specs_args::SpecsArgs,
}

/// Run `tofu graph`.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    let lib = args.specs.library()?;
    if let Some(file) = &args.file {
        let opts = args
            .import
            .options(args.batch, &args.optimizer, args.training);
        return super::graph_onnx::run((file, &lib), &opts, args.output.as_ref(), args.json);
    }
    let name = args.model.as_deref().unwrap_or_default();
    let (model, graph) =
        Model::named_training(name, args.batch, (&args.optimizer, 0.0), &lib).map_err(lib_err)?;
    if let Some(path) = &args.output {
        format::save(&graph, path).into_diagnostic()?;
    }
    let mem = MemoryReport::of(&graph);
    let summary = ZooSummary {
        model: &model,
        optimizer: &args.optimizer,
        graph: GraphSummary {
            graph: &graph,
            memory: &mem,
        },
    };
    if args.json {
        println!("{}", summary.json());
    } else {
        print!("{summary}");
        if let Some(p) = &args.output {
            println!("wrote        {}", p.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
