//! One module per `tofu` subcommand: each has an `Args` (clap) and a `run`.

pub mod check;
pub mod graph;
pub mod graph_onnx;
pub mod import_args;
pub mod launch;
pub mod loops;
pub mod plan;
pub mod plan_memory;
pub mod plan_topology;
pub mod run;
pub mod run_estimate;
pub mod run_launched;
pub mod run_outputs;
pub mod run_print;
pub mod run_verify;
pub mod specs_args;
pub mod ssp;
pub mod ssp_bench;
pub mod ssp_mf;
pub mod ssp_mlp;
pub mod ssp_processes;
pub mod ssp_processes_args;
pub mod strategies;
pub mod train;
pub mod train_args;
pub mod train_launched;
pub mod train_onnx;
pub mod train_print;

/// An error of a library crate as a report with its message (the one
/// conversion the commands use; errors that need a help line build their
/// report where they arise).
pub(crate) fn lib_err(e: impl std::fmt::Display) -> miette::Report {
    miette::miette!("{e}")
}
