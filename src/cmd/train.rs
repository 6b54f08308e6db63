//! `tofu train (PLAN.json | --model NAME) [--workers K] --data digits
//! [--steps N | --epochs E] [--batch B] [--lr LR] [--optimizer O] [--seed S]
//! [--json [--log-every N]] [--plot loss.svg] [--checkpoint-dir D
//! [--checkpoint-every S] [--resume]] [--weights F] [--save-weights F]
//! [--backend cpu|cuda [--devices 0,1,… --ranks-per-device R]]`:
//! train a model with a partition plan on a real data set (issue 27; the
//! `train` crate does the work, this file parses and prints).
//!
//! Given a zoo model it plans first, as `tofu plan --model` would, with the
//! model's input and output sized to the data set; given a plan file it
//! trains that plan (its optimizer, batch and worker count). Each rank reads
//! only its own tile of every batch. Prints the plan's world size and
//! bytes per step, a progress bar on a terminal (step, loss, samples per
//! second, ETA), one line per epoch (mean training loss, held-out loss and
//! accuracy) and the final held-out loss and accuracy; `--json` prints one
//! JSON object per step (`step`, `epoch`, `loss`, `samples_per_second`,
//! and `test_loss`/`test_accuracy` after an evaluation; every `--log-every`
//! steps and the last) and a final one with `test_loss`, `test_accuracy`.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Mutex;

use planner::graph::{checked_lr, checked_weight_decay, Optimizer};
use planner::plan::SearchKind;
use runner::choose::ExecChoice;
use train::data::Data;
use train::report::header::Header;
use train::report::summary::TrainSummary;
use train::samples::Samples;
use train::{checkpoint, data, prepare, trainer, weights, Prepared, StepLog, TrainOptions};

use super::lib_err;
pub use super::train_args::Args;
use super::train_print::{human_step, json_step, progress_bar};

/// The zoo model's optimizer with `--lr`.
fn optimizer(args: &Args) -> miette::Result<Optimizer> {
    Optimizer::from_flags(&args.optimizer, args.lr).map_err(|e| miette::miette!("{e}"))
}

/// The plan file, or the zoo model sized to the data and planned.
fn prepared(args: &Args, train_set: &Data) -> miette::Result<Prepared> {
    let search: SearchKind = args
        .search
        .parse()
        .map_err(|e: String| miette::miette!("{e}"))?;
    if let Some(path) = args.plan.as_deref().filter(|p| is_onnx(p)) {
        return from_onnx(args, path, search, train_set);
    }
    if let Some(path) = &args.plan {
        if args.optimizer != "sgd" {
            return Err(miette::miette!(
                "{}: a plan file trains with its own optimizer (--lr sets its learning rate); plan again with `tofu plan --optimizer` or train `--model NAME --optimizer O`",
                path.display()
            ));
        }
        let lr = checked_lr(args.lr).map_err(|e| miette::miette!("{e}"))?;
        let specs = args.specs.sources()?;
        let wd = args.weight_decay.map(checked_weight_decay).transpose();
        let hyper = (lr, wd.map_err(|e| miette::miette!("{e}"))?);
        return prepare::from_plan_file(path, &specs, train_set.samples(), hyper).map_err(lib_err);
    }
    let name = args
        .model
        .as_deref()
        .expect("clap requires a plan or --model");
    let data = (train_set, args.batch.unwrap_or(64));
    let wd = checked_weight_decay(args.weight_decay.unwrap_or(0.0))
        .map_err(|e| miette::miette!("{e}"))?;
    prepare::from_zoo(name, data, (&optimizer(args)?, wd), args.workers, search).map_err(lib_err)
}

/// The run's options: steps, checkpoints, evaluation, and the state it
/// starts from (`--weights`, or the latest checkpoint with `--resume`).
fn options(args: &Args, prep: &Prepared, train_set: &dyn Samples) -> miette::Result<TrainOptions> {
    let per_epoch = trainer::steps_for_epochs(prep, train_set, 1).map_err(lib_err)?;
    let mut opts = TrainOptions {
        steps: args.steps.unwrap_or(per_epoch * args.epochs.unwrap_or(1)),
        seed: args.seed,
        checkpoint: args
            .checkpoint_dir
            .clone()
            .map(|d| (d, args.checkpoint_every.max(1))),
        eval_every: args.eval_every.unwrap_or(per_epoch),
        eval_samples: args.eval_samples,
        exec: ExecChoice::from_flags(&args.backend, args.devices.clone(), args.ranks_per_device),
        ..TrainOptions::default()
    };
    if let Some(w) = &args.weights {
        opts.given = initial_weights(args, prep, w)?;
    }
    let resumes = |d: &&std::path::Path| checkpoint::resumes(d, args.resume);
    if let Some(dir) = args.checkpoint_dir.as_deref().filter(resumes) {
        let (latest, start, state) =
            checkpoint::resume(dir, &prep.graph, &prep.programs, args.seed).map_err(lib_err)?;
        opts.start = start;
        opts.given = state;
        if !args.json {
            eprintln!("resuming from {} (step {start})", latest.display());
        }
    }
    Ok(opts)
}

/// Whether `path` names an ONNX model (`.onnx`).
pub(super) fn is_onnx(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// `tofu train MODEL.onnx`: import the model's training graph with the
/// import flags and `--optimizer` (its learning rate `--lr`), plan it for
/// `--workers` with `--search`, as `tofu plan MODEL.onnx` would.
fn from_onnx(
    args: &Args,
    path: &Path,
    search: SearchKind,
    train_set: &Data,
) -> miette::Result<Prepared> {
    let mut opts = args.import.options(args.batch, &args.optimizer, true);
    opts.weight_decay = checked_weight_decay(args.weight_decay.unwrap_or(0.0))
        .map_err(|e| miette::miette!("{e}"))?;
    let lib = args.specs.library()?;
    let imported =
        onnx::load_graph_with(path, &lib, &opts.options().map_err(lib_err)?).map_err(lib_err)?;
    let mut graph = imported.graph;
    if let Some(lr) = checked_lr(args.lr).map_err(|e| miette::miette!("{e}"))? {
        graph.set_learning_rate(lr);
    }
    let graph = (graph, &imported.library, Some(opts.record()));
    prepare::from_graph(graph, args.workers, search, train_set.samples()).map_err(lib_err)
}

/// `--weights FILE`: safetensors by graph names, or the ONNX model a plan
/// file was made from (every value its import took from it).
fn initial_weights(args: &Args, prep: &Prepared, w: &Path) -> miette::Result<runner::Given> {
    if !is_onnx(w) {
        return weights::load(w, &prep.graph).map_err(lib_err);
    }
    let Some(plan) = args.plan.as_deref().filter(|_| prep.import.is_some()) else {
        return Err(miette::miette!(
            "--weights {}: an ONNX model's weights start a plan made from it (`tofu plan MODEL.onnx -o plan.json`, then `tofu train plan.json --weights MODEL.onnx`)",
            w.display()
        ));
    };
    let graph = (&prep.graph, prep.import.as_ref());
    super::run::onnx_values(graph, &prep.library, plan, w)
}

/// `--steps 0 --save-weights F`: write the initial weights.
fn save_initial(args: &Args, prep: &Prepared, opts: TrainOptions) -> miette::Result<ExitCode> {
    let Some(out) = &args.save_weights else {
        return Err(miette::miette!(
            "nothing to train: 0 steps (with --save-weights, 0 steps writes the initial weights)"
        ));
    };
    let mut w = weights::initial(&prep.graph, args.seed);
    w.extend(opts.given);
    weights::save(out, &prep.graph, &w).map_err(lib_err)?;
    eprintln!("wrote the initial weights to {}", out.display());
    Ok(ExitCode::SUCCESS)
}

/// `--held-out`, `--seed`, `--seq` and the `--input NAME=TENSOR` mapping.
fn data_options(args: &Args) -> miette::Result<data::DataOptions> {
    Ok(data::DataOptions {
        held_out: args.held_out,
        seed: args.seed,
        seq: args.seq,
        inputs: data::DataOptions::parse_inputs(&args.input).map_err(lib_err)?,
    })
}

/// Run `tofu train`.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    if args.workers == 0 || args.log_every == 0 || args.batch == Some(0) {
        return Err(miette::miette!(
            "--workers, --batch and --log-every must be at least 1"
        ));
    }
    let (train_set, test_set) =
        data::load_splits(&args.data, &data_options(&args)?).map_err(lib_err)?;
    let prep = prepared(&args, &train_set)?;
    let opts = options(&args, &prep, train_set.samples())?;
    let steps = opts.steps;
    if let Some(out) = &args.export_batches {
        let order = trainer::batches(&prep, train_set.samples(), args.seed).map_err(lib_err)?;
        weights::export_batches(out, train_set.samples(), &order, steps).map_err(lib_err)?;
    }
    if steps == 0 {
        return save_initial(&args, &prep, opts);
    }
    if let Some(env) = rendezvous::Env::from_env().map_err(lib_err)? {
        return super::train_launched::run(&args, env, &prep, (&train_set, &test_set), &opts);
    }
    if !args.json {
        let header = Header {
            prep: &prep,
            train_samples: train_set.samples().len(),
            test_samples: test_set.samples().len(),
            start: opts.start,
            steps,
        };
        eprint!("{header}");
    }
    let bar = (!args.json).then(|| progress_bar(opts.start, steps));
    let epoch_losses = Mutex::new(train::report::step::Interval::default());
    let on_step = |s: &StepLog| {
        if args.json {
            json_step(&args, s, steps);
        } else if let Some(b) = &bar {
            human_step(b, s, &epoch_losses, steps);
        }
    };
    let report = trainer::train(
        &prep,
        train_set.samples(),
        Some(test_set.samples()),
        opts.clone(),
        &on_step,
    )
    .map_err(lib_err)?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    finish(&args, &prep, &opts, &report, &train_set)
}

/// After training: `--save-weights`, `--plot` and the summary.
fn finish(
    args: &Args,
    prep: &Prepared,
    opts: &TrainOptions,
    report: &trainer::TrainReport,
    train_set: &Data,
) -> miette::Result<ExitCode> {
    if let Some(out) = &args.save_weights {
        weights::save(out, &prep.graph, &report.weights).map_err(lib_err)?;
    }
    super::train_onnx::save_onnx(args, &prep.graph, &report.weights)?;
    if let Some(svg) = &args.plot {
        let test: Vec<(usize, f64)> = report
            .evaluations
            .iter()
            .map(|&(s, e)| (s, e.loss))
            .collect();
        let title = format!(
            "{} on {} worker(s), {}",
            prep.graph.name(),
            prep.world(),
            args.data
        );
        train::plot::loss_svg(svg, &title, opts.start, &report.losses, &test).map_err(lib_err)?;
    }
    let unigram = match train_set {
        Data::Text(t) => Some(t.unigram_entropy()),
        _ => None,
    };
    let summary = TrainSummary {
        workers: prep.world(),
        start: opts.start,
        steps: opts.steps,
        report,
        unigram,
    };
    if args.json {
        println!("{}", summary.json());
    } else {
        print!("{summary}");
    }
    Ok(ExitCode::SUCCESS)
}
