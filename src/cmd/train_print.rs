//! What `tofu train` prints while it trains: the progress bar on a
//! terminal (indicatif), a line per evaluation and `--json` lines per step
//! (the lines themselves: [`train::report::step`]).

use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use train::report::step::{self, logged};
use train::StepLog;

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
    if logged(s, args.log_every, steps) || s.test.is_some() {
        println!("{}", step::json(s));
    }
}

/// The progress bar's step, and a line per evaluation (mean training loss
/// and samples per second since the last line, held-out loss and accuracy).
pub fn human_step(bar: &ProgressBar, s: &StepLog, since: &Mutex<step::Interval>, steps: usize) {
    bar.set_position(s.step as u64 + 1);
    bar.set_message(format!("{:.4}", s.loss));
    let mut interval = since.lock().expect("no poisoned interval");
    interval.add(s);
    if s.test.is_none() && s.step + 1 != steps {
        return;
    }
    let line = interval.line(s);
    if bar.is_hidden() {
        // No terminal: indicatif prints nothing, so the line goes to stderr.
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}
