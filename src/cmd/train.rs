//! `tofu train (PLAN.json | --model NAME) [--workers K] --data digits
//! [--steps N | --epochs E] [--batch B] [--lr LR] [--optimizer O] [--seed S]
//! [--json [--log-every N]] [--plot loss.svg] [--checkpoint-dir D
//! [--checkpoint-every S] [--resume]] [--weights F] [--save-weights F]`:
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

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use planner::graph::Optimizer;
use planner::plan::SearchKind;
use train::data::Data;
use train::samples::Samples;
use train::{
    checkpoint, data, prepare, trainer, weights, Prepared, StepLog, TrainError, TrainOptions,
};

use super::train_print::{human_step, json_step, print_summary, progress_bar};

/// Arguments of `tofu train`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A plan file (`tofu plan ... -o plan.json`) to train.
    #[arg(
        value_name = "PLAN.json",
        required_unless_present = "model",
        conflicts_with = "model"
    )]
    pub plan: Option<PathBuf>,
    /// A zoo model to plan and train, sized to the data set (e.g. mlp-3-256).
    #[arg(long)]
    pub model: Option<String>,
    /// Workers (ranks) to plan a zoo model for.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Data set: digits (scikit-learn's 8×8 digits; `bash scripts/fetch-digits.sh`;
    /// 20% held out), fashion-mnist (`bash scripts/fetch-fashion-mnist.sh`;
    /// its own 10,000 test images held out) or kjv (the King James Bible as
    /// bytes for a language model; `bash scripts/fetch-kjv.sh`; the last
    /// tenth held out).
    #[arg(long)]
    pub data: String,
    /// Window length (bytes) of a text corpus: the GPT's sequence.
    #[arg(long, default_value_t = 64)]
    pub seq: usize,
    /// Training steps (one batch each).
    #[arg(long, conflicts_with = "epochs")]
    pub steps: Option<usize>,
    /// Epochs over the training split (default 1).
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Batch of a zoo model.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Optimizer of a zoo model: sgd, momentum or adam.
    #[arg(long, default_value = "sgd")]
    pub optimizer: String,
    /// Learning rate of a zoo model's optimizer (default: the optimizer's, 0.1 for SGD).
    #[arg(long)]
    pub lr: Option<f64>,
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
    /// Log every N-th step (and the last).
    #[arg(long, default_value_t = 1)]
    pub log_every: usize,
    /// Start from these weights (safetensors named by graph names, e.g. a
    /// `--save-weights` file) instead of the synthetic initial fill.
    #[arg(long, value_name = "FILE.safetensors")]
    pub weights: Option<PathBuf>,
    /// Write the trained weights (whole tensors, by graph names) as
    /// safetensors; with `--steps 0`, the initial weights.
    #[arg(long, value_name = "FILE.safetensors")]
    pub save_weights: Option<PathBuf>,
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
    /// process over TCP).
    #[arg(long, default_value = "cpu")]
    pub backend: String,
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
}

/// The zoo model's optimizer with `--lr`.
fn optimizer(args: &Args) -> miette::Result<Optimizer> {
    let mut o = Optimizer::from_name(&args.optimizer).ok_or_else(|| {
        miette::miette!(
            "--optimizer {}: expected sgd, momentum or adam",
            args.optimizer
        )
    })?;
    if let Some(v) = args.lr {
        if !(v.is_finite() && v > 0.0) {
            return Err(miette::miette!("--lr {v}: must be a positive number"));
        }
        match &mut o {
            Optimizer::Sgd { lr } | Optimizer::Momentum { lr, .. } | Optimizer::Adam { lr, .. } => {
                *lr = v
            }
        }
    }
    Ok(o)
}

fn err(e: TrainError) -> miette::Report {
    miette::miette!("{e}")
}

/// The plan file, or the zoo model sized to the data and planned.
fn prepared(args: &Args, train_set: &Data) -> miette::Result<Prepared> {
    if let Some(path) = &args.plan {
        if args.lr.is_some() || args.optimizer != "sgd" {
            return Err(miette::miette!(
                "{}: a plan file trains with its own optimizer; plan again with `tofu plan --optimizer` or train `--model NAME --optimizer O --lr LR`",
                path.display()
            ));
        }
        return prepare::from_plan_file(path, train_set.samples()).map_err(err);
    }
    let name = args
        .model
        .as_deref()
        .expect("clap requires a plan or --model");
    let search: SearchKind = args
        .search
        .parse()
        .map_err(|e: String| miette::miette!("{e}"))?;
    let model = prepare::sized_zoo(name, train_set, args.batch).map_err(err)?;
    prepare::from_zoo(
        &model,
        &optimizer(args)?,
        args.workers,
        search,
        train_set.samples(),
    )
    .map_err(err)
}

/// The run's options: steps, checkpoints, evaluation, and the state it
/// starts from (`--weights`, or the latest checkpoint with `--resume`).
fn options(args: &Args, prep: &Prepared, train_set: &dyn Samples) -> miette::Result<TrainOptions> {
    let per_epoch = trainer::steps_for_epochs(prep, train_set, 1).map_err(err)?;
    let mut opts = TrainOptions {
        steps: args.steps.unwrap_or(per_epoch * args.epochs.unwrap_or(1)),
        seed: args.seed,
        checkpoint: args
            .checkpoint_dir
            .clone()
            .map(|d| (d, args.checkpoint_every.max(1))),
        eval_every: args.eval_every.unwrap_or(per_epoch),
        eval_samples: args.eval_samples,
        ..TrainOptions::default()
    };
    if let Some(w) = &args.weights {
        opts.given = weights::load(w, &prep.graph).map_err(err)?;
    }
    if let Some(dir) = args.checkpoint_dir.as_deref().filter(|_| args.resume) {
        let latest = checkpoint::latest(dir).map_err(err)?.ok_or_else(|| {
            miette::miette!(
                "--resume: no checkpoint in {} (a run writes them with --checkpoint-dir)",
                dir.display()
            )
        })?;
        let (start, state) =
            checkpoint::load(&latest, &prep.graph, &prep.programs, args.seed).map_err(err)?;
        opts.start = start;
        opts.given = state;
        if !args.json {
            eprintln!("resuming from {} (step {start})", latest.display());
        }
    }
    Ok(opts)
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
    weights::save(out, &prep.graph, &w).map_err(err)?;
    eprintln!("wrote the initial weights to {}", out.display());
    Ok(ExitCode::SUCCESS)
}

/// Run `tofu train`.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    if args.workers == 0 || args.log_every == 0 {
        return Err(miette::miette!(
            "--workers and --log-every must be at least 1"
        ));
    }
    let (train_set, test_set) =
        data::load_splits(&args.data, args.held_out, args.seed, args.seq).map_err(err)?;
    let prep = prepared(&args, &train_set)?;
    let opts = options(&args, &prep, train_set.samples())?;
    let steps = opts.steps;
    if let Some(out) = &args.export_batches {
        let order = trainer::batches(&prep, train_set.samples(), args.seed).map_err(err)?;
        weights::export_batches(out, train_set.samples(), &order, steps).map_err(err)?;
    }
    if steps == 0 {
        return save_initial(&args, &prep, opts);
    }
    if args.backend != "cpu" {
        return Err(miette::miette!(
            "--backend {}: tofu train runs on cpu only for now (`tofu run --backend cuda` runs plans on GPUs)",
            args.backend
        ));
    }
    if let Some(env) = rendezvous::Env::from_env().map_err(|e| miette::miette!("{e}"))? {
        return super::train_launched::run(&args, env, &prep, (&train_set, &test_set), &opts);
    }
    if !args.json {
        eprintln!(
            "{} on {} worker(s) (factors {:?}), batch {}, {} plan bytes per step; {} training / {} held-out samples, steps {}..{steps}",
            prep.graph.name(),
            prep.world(),
            prep.factors,
            prep.batch,
            prep.comm_bytes,
            train_set.samples().len(),
            test_set.samples().len(),
            opts.start
        );
    }
    let bar = (!args.json).then(|| progress_bar(opts.start, steps));
    let epoch_losses = Mutex::new(Vec::<f32>::new());
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
    .map_err(err)?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(out) = &args.save_weights {
        weights::save(out, &prep.graph, &report.weights).map_err(err)?;
    }
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
        super::train_plot::loss_svg(svg, &title, opts.start, &report.losses, &test)?;
    }
    let unigram = match &train_set {
        Data::Text(t) => Some(t.unigram_entropy()),
        Data::Classes(_) => None,
    };
    print_summary(&args, &prep, &opts, &report, unigram);
    Ok(ExitCode::SUCCESS)
}
