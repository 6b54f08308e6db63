//! `tofu train (PLAN.json | --model NAME) [--workers K] --data digits
//! [--steps N | --epochs E] [--batch B] [--lr LR] [--optimizer O] [--seed S]
//! [--json [--log-every N]]`: train a model with a partition plan on a real
//! data set (issue 27; the `train` crate does the work).
//!
//! Given a zoo model it plans first, as `tofu plan --model` would, with the
//! model's input and output sized to the data set; given a plan file it
//! trains that plan (its optimizer, batch and worker count). Each rank reads
//! only its own tile of every batch. Prints the plan's world size and
//! bytes per step, one line per epoch (mean training loss, samples per
//! second) and the held-out loss and accuracy; `--json` prints one JSON
//! object per step (`step`, `epoch`, `loss`, `samples_per_second`; every
//! `--log-every` steps and the last) and a final one with `test_loss`,
//! `test_accuracy`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use planner::graph::Optimizer;
use planner::plan::SearchKind;
use train::{checkpoint, data, prepare, trainer, weights, StepLog, TrainOptions};

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
    /// Data set: digits (scikit-learn's 8×8 digits; `bash scripts/fetch-digits.sh`).
    #[arg(long)]
    pub data: String,
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

/// Run `tofu train`.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    let e = |e: train::TrainError| miette::miette!("{e}");
    if args.workers == 0 || args.log_every == 0 {
        return Err(miette::miette!(
            "--workers and --log-every must be at least 1"
        ));
    }
    let all = data::load(&args.data).map_err(e)?;
    let (train_set, test_set) = all.split(args.held_out, args.seed);
    let prep = match (&args.plan, &args.model) {
        (Some(path), _) => {
            if args.lr.is_some() || args.optimizer != "sgd" {
                return Err(miette::miette!(
                    "{}: a plan file trains with its own optimizer; plan again with `tofu plan --optimizer` or train `--model NAME --optimizer O --lr LR`",
                    path.display()
                ));
            }
            prepare::from_plan_file(path, &train_set).map_err(e)?
        }
        (None, Some(name)) => {
            let search: SearchKind = args
                .search
                .parse()
                .map_err(|e: String| miette::miette!("{e}"))?;
            let model = prepare::sized_zoo(name, &all, args.batch).map_err(e)?;
            prepare::from_zoo(&model, &optimizer(&args)?, args.workers, search, &train_set)
                .map_err(e)?
        }
        (None, None) => unreachable!("clap requires a plan or --model"),
    };
    let steps = match args.steps {
        Some(s) => s,
        None => {
            trainer::steps_for_epochs(&prep, &train_set, args.epochs.unwrap_or(1)).map_err(e)?
        }
    };
    let mut opts = TrainOptions {
        steps,
        seed: args.seed,
        checkpoint: args
            .checkpoint_dir
            .clone()
            .map(|d| (d, args.checkpoint_every.max(1))),
        ..TrainOptions::default()
    };
    if let Some(out) = &args.export_batches {
        let order = trainer::batches(&prep, &train_set, args.seed).map_err(e)?;
        weights::export_batches(out, &train_set, &order, steps).map_err(e)?;
    }
    if let Some(w) = &args.weights {
        opts.given = weights::load(w, &prep.graph).map_err(e)?;
    }
    if steps == 0 {
        return match &args.save_weights {
            Some(out) => {
                let mut w = weights::initial(&prep.graph, args.seed);
                w.extend(opts.given);
                weights::save(out, &prep.graph, &w).map_err(e)?;
                eprintln!("wrote the initial weights to {}", out.display());
                Ok(ExitCode::SUCCESS)
            }
            None => Err(miette::miette!(
                "nothing to train: 0 steps (with --save-weights, 0 steps writes the initial weights)"
            )),
        };
    }
    if args.resume {
        let dir = args
            .checkpoint_dir
            .as_deref()
            .expect("clap: --resume requires it");
        let latest = checkpoint::latest(dir).map_err(e)?.ok_or_else(|| {
            miette::miette!(
                "--resume: no checkpoint in {} (a run writes them with --checkpoint-dir)",
                dir.display()
            )
        })?;
        let (start, state) =
            checkpoint::load(&latest, &prep.graph, &prep.programs, args.seed).map_err(e)?;
        opts.start = start;
        opts.given = state;
        if !args.json {
            eprintln!("resuming from {} (step {start})", latest.display());
        }
    }
    if !args.json {
        eprintln!(
            "{} on {} worker(s) (factors {:?}), batch {}, {} plan bytes per step; {} training / {} held-out samples, {steps} steps",
            prep.graph.name(),
            prep.world(),
            prep.factors,
            prep.batch,
            prep.comm_bytes,
            train_set.len(),
            test_set.len()
        );
    }
    let epoch_losses = Mutex::new(Vec::<f32>::new());
    let report_epoch = (train_set.len() / prep.batch).max(1);
    let on_step = |s: &StepLog| {
        let last = s.step + 1 == steps;
        if args.json {
            if s.step.is_multiple_of(args.log_every) || last {
                println!(
                    "{}",
                    serde_json::json!({
                        "step": s.step,
                        "epoch": s.epoch,
                        "loss": s.loss,
                        "samples_per_second": s.samples_per_second,
                    })
                );
            }
            return;
        }
        let mut l = epoch_losses.lock().expect("no poisoned loss log");
        l.push(s.loss);
        let epoch_end = (s.step + 1).is_multiple_of(report_epoch);
        if epoch_end || last {
            let mean = l.iter().sum::<f32>() / l.len() as f32;
            eprintln!(
                "epoch {:>3}  step {:>6}  loss {mean:.4}  {:.0} samples/s  {:.1} s",
                s.epoch, s.step, s.samples_per_second, s.elapsed
            );
            l.clear();
        }
    };
    let report =
        trainer::train(&prep, &train_set, Some(&test_set), opts.clone(), &on_step).map_err(e)?;
    let test = report.test;
    if let Some(out) = &args.save_weights {
        weights::save(out, &prep.graph, &report.weights).map_err(e)?;
    }
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "done": true,
                "workers": prep.world(),
                "steps": steps,
                "start_step": opts.start,
                "checkpoints": report.checkpoints.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                "steps_per_epoch": report.steps_per_epoch,
                "seconds": report.seconds,
                "final_loss": report.losses.last(),
                "test_loss": test.map(|t| t.loss),
                "test_accuracy": test.map(|t| t.accuracy),
                "test_samples": test.map(|t| t.samples),
            })
        );
    } else if let Some(t) = test {
        println!(
            "trained {steps} steps in {:.2} s; held-out loss {:.4}, accuracy {:.4} ({} samples)",
            report.seconds, t.loss, t.accuracy, t.samples
        );
    }
    Ok(ExitCode::SUCCESS)
}
