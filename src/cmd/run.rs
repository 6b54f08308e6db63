//! `tofu run PLAN.json`: execute a plan's training steps on CPU threads or
//! CUDA GPUs (one rank per worker) and report step time, bytes sent and peak
//! memory per worker; `--verify` also runs the unpartitioned graph on the
//! same data and backend and compares the loss and every updated weight and
//! optimizer state.
//!
//! `--backend cuda` (a build with the `cuda` feature) puts rank r on device
//! `devices[r / ranks_per_device]`; ranks that share a device communicate
//! through the host (NCCL refuses two ranks on one GPU).
//!
//! Before anything runs, the plan file is checked ([`PlanFile::load`]:
//! format, graph hash, decisions fit the graph) and compiled
//! ([`codegen::compile`]: its recorded per-operator bytes and per-worker
//! memory equal what its decisions imply, which catches tampered tiles; the
//! generated programs pass the verifier: every tile produced exactly once,
//! every receive matched by a send). Exit code: 0, or 1 when a check fails or
//! the verification fails (`run_verify.rs`).
//!
//! `--estimate GPU` prints the static cost model of a CUDA step instead of
//! running (`run_estimate.rs`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use codegen::Programs;
use interval::cache::StrategyCache;
use onnx::{ImportOptions, ModelValues, ValuesError};
use planner::plan::{BoundPlan, PlanFile};
use runner::choose::{ChooseError, CudaComm, ExecChoice};
use runner::given::{from_named, from_safetensors, Kind};
use runner::{Given, RunOptions, RunReport};
use tdl::Library;

use super::lib_err;

/// Arguments of `tofu run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The plan file (`tofu plan … -o PLAN.json`).
    pub plan: PathBuf,
    /// Execution backend: `cpu` (threads) or `cuda` (needs a build with
    /// `--features cuda`).
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda"])]
    pub backend: String,
    /// CUDA devices to use, e.g. `0,1,2,3` (default: every visible device).
    #[arg(long, value_delimiter = ',')]
    pub devices: Option<Vec<usize>>,
    /// Ranks sharing one GPU (host-staged communication between them).
    #[arg(long, default_value_t = 1)]
    pub ranks_per_device: usize,
    /// Communication between CUDA ranks: `nccl` (one GPU per rank; the
    /// default when ranks do not share devices) or `host` (staged through
    /// the CPU; the default with --ranks-per-device > 1, and for a 1-rank
    /// run, which communicates with no one and so needs no NCCL).
    #[arg(long, value_parser = ["nccl", "host"])]
    pub comm: Option<String>,
    /// Let cuBLAS use TF32 tensor cores (faster, ~1e-3 relative error; the
    /// `--verify` tolerance then does not hold).
    #[arg(long)]
    pub tf32: bool,
    /// Training steps to run.
    #[arg(long, default_value_t = 1)]
    pub steps: usize,
    /// Seed of the synthetic data.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Also run the unpartitioned graph and compare results.
    #[arg(long)]
    pub verify: bool,
    /// Initial weights (and optimizer state) by tensor name: a
    /// `.safetensors` file, or the `.onnx` model the plan was imported from
    /// (its initializers and `Constant` values, float and integer, as the
    /// import read them). Shapes are checked.
    #[arg(long)]
    pub weights: Option<PathBuf>,
    /// The graph inputs (data, labels, ids) by tensor name, a
    /// `.safetensors` file; the same values every step.
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Under a launcher: seconds to wait for a rank to join, and per message.
    #[arg(long, value_name = "SECONDS", default_value = "600", value_parser = rendezvous::seconds)]
    pub comm_timeout: std::time::Duration,
    /// Also write every rank's program (format `tofu-program`, version 5:
    /// self-contained, with its specs, shapes and fills) to
    /// `DIR/rank-<r>.json`.
    #[arg(long, value_name = "DIR")]
    pub save_programs: Option<PathBuf>,
    /// Run the forward pass once and write the model's outputs (by their
    /// ONNX names, gathered from the ranks), and the synthetic inputs and
    /// weights it ran on, to this `.safetensors` file (`run_outputs.rs`).
    #[arg(long, value_name = "FILE")]
    pub save_outputs: Option<PathBuf>,
    /// Print the static cost model of one step on the CUDA backend for
    /// this GPU (`h100`, `h200`) instead of running: per operator the
    /// kernels, bytes, FLOPs and roofline time. Needs no GPU.
    #[arg(long, value_name = "GPU")]
    pub estimate: Option<String>,
    #[command(flatten)]
    pub specs: super::specs_args::SpecsArgs,
}

/// Run the subcommand.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    if args.steps == 0 {
        return Err(miette::miette!("--steps must be at least 1"));
    }
    let specs = args.specs.sources()?;
    let (plan, lib) =
        PlanFile::load_with_specs(&args.plan, &specs, &StrategyCache::new()).map_err(lib_err)?;
    // Recorded costs vs decisions (catches an edited tile or strategy that
    // still passes the loader's structural checks), generation, verifier.
    let progs = codegen::compile(&plan, &lib)
        .map_err(|e| miette::miette!("{}: {e}", args.plan.display()))?;
    if let Some(dir) = &args.save_programs {
        program::rank_files::write_ranks(dir, &progs.programs).map_err(lib_err)?;
    }
    if let Some(name) = &args.estimate {
        let gpu = super::run_estimate::roofline(name)?;
        super::run_estimate::print(plan.graph.name(), &progs, gpu, args.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let opts = RunOptions {
        steps: args.steps,
        seed: args.seed,
    };
    let mut given = Given::new();
    for (path, kind) in [(&args.weights, Kind::Weights), (&args.inputs, Kind::Inputs)] {
        if let Some(p) = path {
            given.extend(read_given((&plan, &lib), &args.plan, p, kind)?);
        }
    }
    runner::given::check_synthetic_ids(&plan.graph, &lib, &given)
        .map_err(|e| miette::miette!(help = "pass its values with --inputs FILE", "{e}"))?;
    if let Some(path) = &args.save_outputs {
        return super::run_outputs::run(&args, &plan, &progs, &given, path);
    }
    if args.backend == "cpu" {
        if let Some(env) = rendezvous::Env::from_env().map_err(lib_err)? {
            return super::run_launched::run(&args, &progs, opts, &given, env);
        }
    }
    run_and_print(&args, (&plan, &lib), &progs, opts, &given)
}

/// Run the steps (and `--verify`), print the report; exit 1 when the
/// verification fails.
fn run_and_print(
    args: &Args,
    (plan, lib): (&BoundPlan, &Library),
    progs: &Programs,
    opts: RunOptions,
    given: &Given,
) -> miette::Result<ExitCode> {
    let start = Instant::now();
    let quiet = args.json;
    let steps = args.steps;
    let progress = move |s: usize| {
        if !quiet && start.elapsed().as_secs_f64() > 3.0 {
            eprintln!("step {s}/{steps} ({:.1} s)", start.elapsed().as_secs_f64());
        }
    };
    let report = execute(args, progs, opts, Some(&progress), given)?;
    let verification = if args.verify {
        Some(super::run_verify::verify(
            args,
            (plan, lib),
            opts,
            given,
            &report,
        )?)
    } else {
        None
    };
    let verified = verification.as_ref().map(|(v, _)| v.passed());
    super::run_print::print(args, plan, progs, &report, verification.as_ref());
    Ok(if verified == Some(false) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Leaf values from `path`: safetensors, or for `--weights` an ONNX model
/// (every value its import took from it, [`onnx::values`]).
fn read_given(
    (plan, lib): (&BoundPlan, &Library),
    plan_file: &std::path::Path,
    path: &std::path::Path,
    kind: Kind,
) -> miette::Result<Given> {
    let name = path.display().to_string();
    if kind == Kind::Weights && path.extension().is_some_and(|e| e == "onnx") {
        return read_onnx((plan, lib), plan_file, path);
    }
    let bytes = std::fs::read(path).map_err(|e| miette::miette!("{name}: {e}"))?;
    from_safetensors(&plan.graph, &name, &bytes, kind).map_err(|e| match &e {
        runner::GivenError::Shape { name, want, .. } => miette::miette!(
            help = format!(
                "write `{name}` at shape {want:?}, or plan the model for this shape (`tofu plan MODEL.onnx --input-shape {name}=…`)"
            ),
            "{e}"
        ),
        _ => lib_err(e),
    })
}

/// `--weights MODEL.onnx`: the values the model gives the plan's graph,
/// imported again with the plan's `import` record ([`onnx::values`]).
fn read_onnx(
    (plan, lib): (&BoundPlan, &Library),
    plan_file: &std::path::Path,
    model: &std::path::Path,
) -> miette::Result<Given> {
    let graph = (&plan.graph, plan.import.as_ref());
    onnx_values(graph, lib, plan_file, model)
}

/// The values the ONNX model `model` gives `graph`, planned in
/// `plan_file` and imported as its `import` record says
/// ([`onnx::values`]; `tofu run` and `tofu train` `--weights MODEL.onnx`).
pub(super) fn onnx_values(
    (graph, import): (&planner::graph::Graph, Option<&serde_json::Value>),
    lib: &Library,
    plan_file: &std::path::Path,
    model: &std::path::Path,
) -> miette::Result<Given> {
    let import = import.map(ImportOptions::from_record).transpose();
    let import = import.map(Option::flatten).map_err(|e| {
        miette::miette!(
            help = "plan the model again with this tofu (`tofu plan MODEL.onnx …`)",
            "{}: {e}",
            plan_file.display()
        )
    })?;
    match onnx::values(graph, model, lib, import.as_ref()) {
        Ok(ModelValues::ByTensor(v)) => Ok(v.into_iter().collect()),
        Ok(ModelValues::Initializers(named)) => {
            let name = model.display().to_string();
            from_named(graph, &name, named, Kind::Weights, true).map_err(lib_err)
        }
        Err(e @ ValuesError::Import(_)) => Err(miette::miette!(
            help = "pass the model the plan was made from (`tofu plan MODEL.onnx …`)",
            "{e}"
        )),
        Err(e @ ValuesError::NotLeaf { .. }) => Err(miette::miette!(
            help = "pass the model the plan was made from, or plan this model again",
            "{e}"
        )),
        Err(e) => Err(lib_err(e)),
    }
}

/// The backend × communicator of the flags.
pub(super) fn choice(args: &Args) -> ExecChoice {
    ExecChoice {
        comm: args.comm.as_deref().map(|c| match c {
            "nccl" => CudaComm::Nccl,
            _ => CudaComm::Host,
        }),
        tf32: args.tf32,
        ..ExecChoice::from_flags(&args.backend, args.devices.clone(), args.ranks_per_device)
    }
}

/// A backend error with its help line.
pub(super) fn choose_error(e: ChooseError) -> miette::Report {
    match e.help() {
        Some(help) => miette::miette!(help = help, "{e}"),
        None => lib_err(e),
    }
}

/// Run the programs on the chosen backend.
pub(super) fn execute(
    args: &Args,
    progs: &Programs,
    opts: RunOptions,
    progress: Option<&(dyn Fn(usize) + Sync)>,
    given: &Given,
) -> miette::Result<RunReport> {
    choice(args)
        .execute(&progs.programs, opts, progress, given)
        .map_err(choose_error)
}
