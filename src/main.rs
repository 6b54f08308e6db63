//! `tofu`: automatic partitioning of deep-learning training graphs (Tofu).
//!
//! One file per subcommand under `src/cmd/`; this file only parses arguments
//! and dispatches. Every subcommand returns a [`miette::Result`]; errors are
//! printed with their diagnostics and the process exits 1.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(a) => cmd::check::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e:?}");
            ExitCode::FAILURE
        }
    }
}
