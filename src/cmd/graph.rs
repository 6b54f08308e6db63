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
    /// ONNX: the output the loss is taken on (default: the first graph output;
    /// a non-scalar output gets a softmax cross-entropy loss).
    #[arg(long, value_name = "NAME", requires = "training")]
    loss: Option<String>,
    /// ONNX: value of a named dynamic dim, e.g. `--dim seq_len=512` (repeatable).
    /// Defaults: batch dim (axis 0) → --batch or 1; sequence-like names → 128;
    /// height/width → 224.
    #[arg(long = "dim", value_name = "NAME=VALUE", requires = "file")]
    dims: Vec<String>,
    /// ONNX: the whole shape of a graph input, e.g. `--input-shape images=1,3,320,320`
    /// (repeatable; as onnxruntime's and trtexec's shape options). Gives every
    /// dynamic dim of that input, named or `?`; static dims must match.
    #[arg(long = "input-shape", value_name = "NAME=D0,D1,...", requires = "file")]
    input_shapes: Vec<String>,
    /// ONNX: fix a graph input to a value at import, e.g. `--input-value sample_rate=16000`
    /// (repeatable; values row-major): folded like a constant, so `If`
    /// conditions, `Range` limits and shape chains that read it resolve.
    #[arg(long = "input-value", value_name = "NAME=V[,V...]", requires = "file")]
    input_values: Vec<String>,
    /// ONNX: import nodes without a spec mapping as opaque operators
    /// (replicated or split along their batch dim only) instead of failing.
    #[arg(long, requires = "file")]
    opaque_unsupported: bool,
    /// ONNX: map custom nodes to a spec, `DOMAIN::OP=SPEC` (repeatable).
    #[arg(long, value_name = "DOMAIN::OP=SPEC", requires = "file")]
    op_map: Vec<String>,
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

impl Args {
    /// The ONNX import options of the flags.
    fn import_options(&self) -> onnx::ImportOptions {
        onnx::ImportOptions {
            batch: self.batch,
            dims: self.dims.clone(),
            input_shapes: self.input_shapes.clone(),
            input_values: self.input_values.clone(),
            training: self.training,
            loss: self.loss.clone(),
            optimizer: self.optimizer.clone(),
            opaque_unsupported: self.opaque_unsupported,
            op_map: self.op_map.clone(),
        }
    }
}

/// Run `tofu graph`.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    let lib = args.specs.library()?;
    if let Some(file) = &args.file {
        let opts = args.import_options();
        return super::graph_onnx::run((file, &lib), &opts, args.output.as_ref(), args.json);
    }
    let name = args.model.as_deref().unwrap_or_default();
    let (model, graph) =
        Model::named_training(name, args.batch, &args.optimizer, &lib).map_err(lib_err)?;
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
