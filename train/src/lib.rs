//! Training with a tofu plan (issue 27): a model planned for k workers,
//! trained on a real data set batch by batch, each rank fed only its own
//! tile of every batch, with the loss of every step and a held-out
//! evaluation at the end.
//!
//! Data flow: [`data`] (a cached data set, split) → [`prepare`] (a zoo
//! model sized to the data and planned, or a plan file → validated
//! per-rank programs) → [`trainer`] (the runner's ranks stepped with a
//! [`feed`] over the [`batches`]) → [`evaluate`] (held-out loss and
//! accuracy of the trained weights), with [`checkpoint`]s to resume from
//! and [`weights`] in and out as safetensors; [`report`] is what
//! `tofu train` prints of it and [`plot`] its loss curve. Beside that pipeline,
//! [`ssp_mlp`] trains the zoo's MLP data-parallel through the SSP parameter
//! server (`tofu ssp mlp`). The binary's `tofu train` parses
//! arguments and prints; everything else is here.
#![warn(missing_docs)]

pub mod batches;
pub mod checkpoint;
pub mod data;
pub mod evaluate;
pub mod feed;
pub mod launched;
pub mod plot;
pub mod prepare;
pub mod rank_trainer;
pub mod report;
pub mod samples;
pub mod ssp_mlp;
pub mod tensors;
pub mod text;
pub mod trainer;
pub mod weights;

pub use data::DataSet;
pub use evaluate::Evaluation;
pub use prepare::Prepared;
pub use trainer::{train, StepLog, TrainOptions, TrainReport};

/// Why training could not run.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The data set is missing, malformed or too small.
    #[error("{0}")]
    Data(String),
    /// The model cannot be built, planned or turned into programs.
    #[error("{0}")]
    Model(String),
    /// The graph's inputs do not fit the data set.
    #[error("{0}")]
    Input(String),
    /// A rank failed.
    #[error(transparent)]
    Run(runner::ExecError),
    /// The chosen backend cannot run (no CUDA in this build, no device,
    /// too few devices; never a silent fallback to the CPU).
    #[error("{}", with_help(.0))]
    Backend(runner::choose::ChooseError),
}

impl From<runner::choose::ChooseError> for TrainError {
    /// A rank's failure stays [`TrainError::Run`]; anything else about the
    /// backend is [`TrainError::Backend`].
    fn from(e: runner::choose::ChooseError) -> Self {
        match e {
            runner::choose::ChooseError::Exec(e) => TrainError::Run(e),
            e => TrainError::Backend(e),
        }
    }
}

/// A backend error's message and, where there is one, what to do instead.
fn with_help(e: &runner::choose::ChooseError) -> String {
    match e.help() {
        Some(h) => format!("{e} ({h})"),
        None => e.to_string(),
    }
}
