//! `tofu plan (--model NAME | FILE.json | FILE.onnx) --workers K [--batch N] [--search S]
//! [--tensor-parallel T]
//! [--device-memory BYTES] [--pareto [--pareto-point I]] [--topology NODESxGPUS
//! [--link-bandwidth intra=BW,inter=BW]] [-o plan.json] [--dot plan.dot] [--json]`:
//! find a partition plan (Tofu §4) and explain it.
//!
//! Takes a zoo model or a graph file; prints workers, per-worker memory
//! against the device memory, communication bytes per training step, the ten
//! operators that communicate most (operators that differ only in time step
//! or layer index, or an export's numbered nodes at one place of a repeated
//! block, folded into one line, [`planner::plan::op_groups`]), the same
//! figures for data parallelism,
//! why the search stopped and which candidate plan it kept; with a topology,
//! bytes and estimated seconds per link level ([`super::plan_topology`]).
//! `--json` prints one object with `workers`,
//! `search`, `comm_bytes_per_step`, `max_worker_memory_bytes`,
//! `plan_seconds`, `stop_reason`, `budget` (what `--device-memory` traded),
//! `top_ops` (per operator) and `top_op_groups` (folded: `pattern`, `spec`,
//! `ops`, `comm_bytes`)
//! and, with `--pareto`, `pareto` (the frontier of bytes per step against
//! memory per worker, [`super::plan_memory`]). `-o` writes the plan file
//! atomically; `--dot` a Graphviz picture of the coarsened graph. Any error
//! exits non-zero before anything is written.

use std::path::PathBuf;
use std::process::ExitCode;

use interval::cache::StrategyCache;
use miette::IntoDiagnostic;
use planner::graph::{checked_lr, checked_weight_decay, format, Graph};
use planner::plan::options::parse_bytes;
use planner::plan::report::Report;
use planner::plan::request::PlanRequest;
use planner::plan::specs::SpecFile;
use planner::plan::{dot, PlanFile, PlanOptions, SearchKind};
use tdl::Library;

use super::import_args::ImportArgs;
use super::lib_err;
use super::plan_memory;

/// Arguments of `tofu plan`.
#[derive(clap::Args)]
pub struct Args {
    /// A graph file (`tofu graph -o`) or an ONNX model (trained with a loss
    /// on `--loss`), instead of --model.
    file: Option<PathBuf>,
    /// Zoo model: mlp-<layers>-<hidden>, wresnet-<50|101|152>-<widen>,
    /// rnn-<layers>-<hidden>, gpt-<layers>-<d_model>, bert-<layers>-<d_model>.
    #[arg(long, conflicts_with = "file")]
    model: Option<String>,
    /// Number of workers k (any k ≥ 1).
    #[arg(long, short = 'k')]
    workers: usize,
    /// Batch size: a zoo model's (default: the family's), or every input's batch dim of an ONNX model (default: the export's; 1 where dynamic).
    #[arg(long)]
    batch: Option<usize>,
    /// Optimizer of a zoo model: sgd, momentum or adam.
    #[arg(long, default_value = "momentum")]
    optimizer: String,
    /// Learning rate of the optimizer (default: the optimizer's); recorded in the plan.
    #[arg(long)]
    lr: Option<f64>,
    /// L2 weight decay λ of every weight (PyTorch SGD's and Adam's `weight_decay`); recorded in the plan.
    #[arg(long, default_value_t = 0.0)]
    weight_decay: f64,
    /// critical-dp, ilp, data-parallel, allrow-greedy, spartan, equal-chop or
    /// megatron (the list `planner::plan::searches::SEARCHES`).
    #[arg(long, default_value = "critical-dp")]
    search: String,
    /// megatron: tensor-parallel group size t (a divisor of k; data
    /// parallelism across k/t groups). Default: the t with the fewest bytes.
    #[arg(long)]
    tensor_parallel: Option<usize>,
    /// Memory of one device in bytes (suffixes K, M, G, T = powers of 1024).
    /// The search prices memory until every worker's peak fits and says what
    /// that traded; when no plan fits, the smallest peak found is reported
    /// (exit 2).
    #[arg(long, value_parser = parse_bytes)]
    device_memory: Option<u64>,
    /// Let the search keep gradients and activations as per-worker partial
    /// sums, reduced once (issue 41). Experimental: `tofu run` refuses such plans.
    #[arg(long)]
    partial_sums: bool,
    /// Print the frontier of communication per step against memory per
    /// worker (JSON field `pareto`); the plan summarised and written with
    /// -o is point --pareto-point (default 0, the fewest bytes).
    #[arg(long)]
    pareto: bool,
    /// With --pareto: the index of the frontier point to summarise and write.
    #[arg(long, requires = "pareto")]
    pareto_point: Option<usize>,
    /// The cluster, NODESxGPUS (e.g. 2x8; NODES·GPUS = --workers): the
    /// outer recursion levels split between nodes, and the search minimises
    /// the estimated communication time (NVLink 4 inside a node, 450 GB/s
    /// per GPU; 400 Gb/s NDR InfiniBand per GPU across nodes) instead of bytes.
    #[arg(long)]
    topology: Option<String>,
    /// With --topology: link bandwidths per GPU and direction, e.g.
    /// `intra=450G,inter=50G` (bytes/s; K, M, G, T = 10^3…10^12; `400Gb` = bits).
    #[arg(long, value_name = "intra=BW,inter=BW")]
    link_bandwidth: Option<String>,
    /// Write the plan file (JSON, `tofu-plan` v1) here.
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// Write a Graphviz picture of the coarsened graph here.
    #[arg(long)]
    dot: Option<PathBuf>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    import: ImportArgs,
    #[command(flatten)]
    specs: super::specs_args::SpecsArgs,
    /// ONNX: plan the forward (inference) graph only: no loss, no backward,
    /// no optimizer; batch normalization on the model's running statistics.
    /// `tofu run --weights MODEL.onnx --save-outputs OUT` then runs the model
    /// as onnxruntime does.
    #[arg(long)]
    inference: bool,
}

/// What [`load_graph`] gives.
type Loaded = (String, Graph, Library, Option<serde_json::Value>);

impl Args {
    /// The ONNX import options of the flags.
    fn import_options(&self) -> onnx::ImportOptions {
        let mut o = (self.import).options(self.batch, &self.optimizer, !self.inference);
        o.weight_decay = self.weight_decay;
        o
    }
}

/// Build the graph the arguments name, with the operator library to plan it
/// with (an ONNX import adds generated specs for opaque nodes).
/// Gives the name, the graph, the library and, for an ONNX import, the
/// plan file's `import` record ([`onnx::ImportOptions::record`]).
fn load_graph(args: &Args, lib: Library) -> miette::Result<Loaded> {
    match (&args.file, &args.model) {
        (Some(path), _) => {
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if ext.eq_ignore_ascii_case("onnx") {
                let opts = args.import_options();
                let imported = onnx::load_graph_with(path, &lib, &opts.options().map_err(lib_err)?)
                    .map_err(lib_err)?;
                let name = path.display().to_string();
                return Ok((name, imported.graph, imported.library, Some(opts.record())));
            }
            if args.inference {
                return Err(miette::miette!(
                    help = "a graph file is planned as it is: write the inference graph with `tofu graph MODEL.onnx -o graph.json` (no --training) and plan that",
                    "{}: --inference applies to an ONNX model, not to a graph file",
                    path.display()
                ));
            }
            let g = format::load(path).map_err(|e| miette::miette!("{}: {e}", path.display()))?;
            g.check_shapes(&lib).map_err(|e| miette::miette!("{}: {e}", path.display()))?;
            Ok((path.display().to_string(), g, lib, None))
        }
        (None, Some(name)) => {
            if args.inference {
                return Err(miette::miette!(
                    help = "plan an ONNX model with --inference (`tofu plan MODEL.onnx --inference -k K`); zoo models are training graphs",
                    "--inference applies to an ONNX model, not to the zoo model `{name}`"
                ));
            }
            let opt = (args.optimizer.as_str(), args.weight_decay);
            let (m, g) =
                planner::zoo::Model::named_training(name, args.batch, opt, &lib).map_err(lib_err)?;
            Ok((m.name(), g, lib, None))
        }
        (None, None) => Err(miette::miette!(
            "say what to plan: `--model NAME` (e.g. --model mlp-8-8192), a graph file `tofu plan graph.json` or an ONNX model `tofu plan model.onnx`"
        )),
    }
}

/// The search request of the flags, checked (workers, tensor-parallel
/// size, topology).
fn request(args: &Args) -> miette::Result<PlanRequest> {
    let search: SearchKind = args
        .search
        .parse()
        .map_err(|e: String| miette::miette!("{e}"))?;
    if args.workers == 0 {
        return Err(miette::miette!("--workers must be at least 1"));
    }
    Ok(PlanRequest {
        workers: args.workers,
        search,
        opts: PlanOptions::default(),
        pareto: args.pareto,
    })
}

/// The search options of the flags: memory, tensor parallelism, topology.
fn options(args: &Args) -> miette::Result<PlanOptions> {
    if let Some(t) = args.tensor_parallel {
        if t == 0 || !args.workers.is_multiple_of(t) {
            return Err(miette::miette!(
                "--tensor-parallel {t} must divide --workers {}; e.g. --tensor-parallel 2 with -k 8",
                args.workers
            ));
        }
    }
    let topology = super::plan_topology::parse(
        args.topology.as_deref(),
        args.link_bandwidth.as_deref(),
        args.workers,
    )?;
    Ok(PlanOptions {
        device_memory: args.device_memory,
        tensor_parallel: args.tensor_parallel,
        topology,
        partial_sums: args.partial_sums,
        ..PlanOptions::default()
    })
}

/// Run `tofu plan`.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    let mut request = request(&args)?;
    checked_weight_decay(args.weight_decay).map_err(|e| miette::miette!("{e}"))?;
    let (name, mut graph, lib, import) = load_graph(&args, args.specs.library()?)?;
    if let Some(lr) = checked_lr(args.lr).map_err(|e| miette::miette!("{e}"))? {
        graph.set_learning_rate(lr);
    }
    request.opts = options(&args)?;
    let results = request
        .run(&graph, &lib, &StrategyCache::new())
        .into_diagnostic()?;
    let (planned, front) = plan_memory::chosen(args.pareto_point, results.plans)?;
    let mut file = PlanFile::new(&graph, &results.model, &planned);
    file.import = import;
    file.specs = SpecFile::of(&args.specs.sources()?);
    if let Some(path) = &args.output {
        file.save(path).into_diagnostic()?;
    }
    let search = request.search;
    if let Some(path) = &args.dot {
        let title = format!("{name}: {} on {} workers", search.name(), args.workers);
        planner::graph::format::write_atomic(path, dot::to_dot(&planned.coarse, &title).as_bytes())
            .into_diagnostic()?;
    }
    let report = Report {
        name: &name,
        workers: args.workers,
        search,
        graph: &graph,
        planned: &planned,
        max_worker_memory_bytes: file.max_worker_memory_bytes,
        data_parallel: results.data_parallel.as_ref(),
        device_memory: args.device_memory,
        front: front.as_ref().map(|(f, i)| (&f[..], *i)),
    };
    if args.json {
        println!("{}", report.json());
    } else {
        print!("{report}");
        print_written(args.output.as_deref(), args.dot.as_deref());
    }
    Ok(if report.over().is_some() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// The lines naming the files written (`-o`, `--dot`).
fn print_written(output: Option<&std::path::Path>, dot: Option<&std::path::Path>) {
    if let Some(p) = output {
        println!("plan written to {}", p.display());
    }
    if let Some(p) = dot {
        println!(
            "picture written to {} (render with `dot -Tsvg`)",
            p.display()
        );
    }
}
