//! `tofu`: automatic partitioning of deep-learning training graphs (Tofu).
//!
//! One file per subcommand under `src/cmd/`; this file only parses arguments
//! and dispatches. Every subcommand returns a [`miette::Result`]; errors are
//! printed with their diagnostics and the process exits 1.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[cfg(test)]
mod cli_reference;
mod cmd;

/// Automatic dataflow-graph partitioning for training very large models.
#[derive(Parser)]
#[command(name = "tofu", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate TDL operator specs (default: the shipped `specs/`).
    Check(cmd::check::Args),
    /// Build a zoo model's training graph, or import an ONNX file, and summarise it (operators, parameters, memory).
    Graph(cmd::graph::Args),
    /// Partition strategies of an operator, from interval analysis of its spec.
    Strategies(cmd::strategies::Args),
    /// Find a partition plan for k workers (Tofu §4) and explain it.
    Plan(cmd::plan::Args),
    /// Run a plan's training steps on k CPU threads; `--verify` compares with the unpartitioned graph.
    Run(cmd::run::Args),
    /// Train a model (zoo name, ONNX model or plan file) with its partition plan on a real data set; loss per step, held-out accuracy.
    Train(Box<cmd::train::Args>),
    /// Dependence-aware parallel loops (Orion): SGD MF, sparse logistic regression, benchmark.
    Loops(cmd::loops::Args),
    /// Data-parallel training through the Stale Synchronous Parallel parameter server (Bösen).
    Ssp(cmd::ssp::Args),
    /// Start one process per local GPU running a tofu subcommand, with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, …).
    Launch(cmd::launch::Args),
    /// Join the rendezvous of `tofu launch`, pass barriers, print one JSON line (the launcher's tests).
    #[command(hide = true)]
    RendezvousCheck(cmd::launch::CheckArgs),
}

fn main() -> ExitCode {
    // Errors wrap at 80 columns on a terminal; into a pipe or a log they
    // stay one line per sentence, so a path or a flag is never split.
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        let _ = miette::set_hook(Box::new(|_| {
            Box::new(
                miette::MietteHandlerOpts::new()
                    .width(usize::MAX / 2)
                    .build(),
            )
        }));
    }
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Check(_) | Command::Graph(_) | Command::Strategies(_) | Command::Plan(_)
    ) {
        print_only_dies_on_closed_pipe();
    }
    let result = match cli.command {
        Command::Check(a) => cmd::check::run(a),
        Command::Graph(a) => cmd::graph::run(a),
        Command::Strategies(a) => cmd::strategies::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Train(a) => cmd::train::run(*a),
        Command::Loops(a) => cmd::loops::run(a),
        Command::Ssp(a) => cmd::ssp::run(a),
        Command::Launch(a) => cmd::launch::run(a),
        Command::RendezvousCheck(a) => cmd::launch::run_check(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e:?}");
            ExitCode::FAILURE
        }
    }
}

/// Restore the default action of SIGPIPE (terminate quietly) for the
/// subcommands that only print (`check`, `graph`, `strategies`, `plan`), as
/// every Unix filter does: `tofu plan … | head` then stops when `head`
/// closes the pipe instead of panicking on the failed write (Rust ignores
/// SIGPIPE, so `println!` sees `EPIPE` and panics). The subcommands that
/// talk to sockets or child processes keep Rust's default, so a peer that
/// goes away is an error they report, not a silent death.
fn print_only_dies_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: called once on the main thread before any other thread is
    // started; `signal` with `SIG_DFL` only changes this process's
    // disposition of SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
