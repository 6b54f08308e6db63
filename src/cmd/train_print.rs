//! What `tofu train` prints: the progress bar on a terminal (indicatif),
//! a line per evaluation, `--json` lines per step and the final summary.

use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use train::{Prepared, StepLog, TrainOptions, TrainReport};

use super::train::Args;

/// The terminal's progress bar (hidden when stderr is not a terminal).
pub fn progress_bar(start: usize, steps: usize) -> ProgressBar {
    let bar = ProgressBar::new(steps as u64);
    bar.set_position(start as u64);
    let style =
        ProgressStyle::with_template("{bar:30} step {pos}/{len}  loss {msg}  {per_sec}  ETA {eta}")
            .expect("a valid template");
    bar.set_style(style);
    bar
}

/// One `--json` line (every `--log-every` steps, after an evaluation, and
/// the last).
pub fn json_step(args: &Args, s: &StepLog, steps: usize) {
    if !(s.step.is_multiple_of(args.log_every) || s.step + 1 == steps || s.test.is_some()) {
        return;
    }
    let mut v = serde_json::json!({
        "step": s.step,
        "epoch": s.epoch,
        "loss": s.loss,
        "samples_per_second": s.samples_per_second,
    });
    if let Some(t) = s.test {
        v["test_loss"] = t.loss.into();
        v["test_accuracy"] = t.accuracy.into();
    }
    println!("{v}");
}

/// The progress bar's step, and a line per evaluation (mean training loss
/// since the last line, held-out loss and accuracy).
pub fn human_step(bar: &ProgressBar, s: &StepLog, losses: &Mutex<Vec<f32>>, steps: usize) {
    bar.set_position(s.step as u64 + 1);
    bar.set_message(format!("{:.4}", s.loss));
    let mut l = losses.lock().expect("no poisoned loss log");
    l.push(s.loss);
    if s.test.is_none() && s.step + 1 != steps {
        return;
    }
    let mean = l.iter().sum::<f32>() / l.len() as f32;
    let test = s.test.map_or(String::new(), |t| {
        format!("  held-out loss {:.4}  accuracy {:.4}", t.loss, t.accuracy)
    });
    let line = format!(
        "epoch {:>3}  step {:>6}  loss {mean:.4}{test}  {:.0} samples/s  {:.1} s",
        s.epoch + 1,
        s.step + 1,
        s.samples_per_second,
        s.elapsed
    );
    l.clear();
    if bar.is_hidden() {
        // No terminal: indicatif prints nothing, so the line goes to stderr.
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// The final JSON object, or the human summary line.
/// `unigram`: a corpus's unigram entropy (nats per byte), the loss to beat.
pub fn print_summary(
    args: &Args,
    prep: &Prepared,
    opts: &TrainOptions,
    report: &TrainReport,
    unigram: Option<f64>,
) {
    let test = report.test;
    if args.json {
        let checkpoints: Vec<String> = report
            .checkpoints
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "done": true,
                "workers": prep.world(),
                "steps": opts.steps,
                "start_step": opts.start,
                "checkpoints": checkpoints,
                "steps_per_epoch": report.steps_per_epoch,
                "seconds": report.seconds,
                "final_loss": report.losses.last(),
                "test_loss": test.map(|t| t.loss),
                "test_accuracy": test.map(|t| t.accuracy),
                "test_samples": test.map(|t| t.samples),
                "unigram_entropy": unigram,
            })
        );
    } else if let Some(t) = test {
        println!(
            "trained steps {}..{} in {:.2} s; held-out loss {:.4}, accuracy {:.4} ({} samples)",
            opts.start, opts.steps, report.seconds, t.loss, t.accuracy, t.samples
        );
        if let Some(h) = unigram {
            println!("the corpus's unigram entropy: {h:.4} nats per byte (a model of byte frequencies alone)");
        }
    }
}
