//! Why codegen or validation rejected a plan.
//!
//! Every variant says which rank, operator or tensor is at fault, so a
//! tampered or mismatched plan is reported before anything runs.

/// A plan that cannot be turned into consistent programs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CodegenError {
    /// The plan's decisions do not fit the graph (counts, levels, dims).
    #[error("plan does not fit the graph: {0}")]
    Mismatch(String),
    /// An operator output that is not f32: computation runs in f32, so only
    /// leaves (inputs, constants) hold other element types.
    #[error("tensor `{tensor}` is computed by an operator but has element type {dtype}; operator outputs are f32 (only inputs and constants may be {dtype}): change its dtype to f32 in the graph file")]
    DType {
        /// Tensor name.
        tensor: String,
        /// Its dtype.
        dtype: String,
    },
    /// The programs are inconsistent (found by [`crate::validate`]).
    #[error("invalid program for rank {rank}: {message}")]
    Invalid {
        /// The rank whose program is wrong.
        rank: usize,
        /// What is wrong.
        message: String,
    },
    /// A plan file's recorded costs (per-operator bytes, per-worker memory)
    /// differ from what its decisions imply: the file was edited (e.g. a
    /// tile changed) or written by another planner (found by
    /// [`crate::check_recorded`]).
    #[error("{0}; the plan file was edited or comes from another planner: make it again with `tofu plan`")]
    Tampered(String),
    /// A spec is missing or does not bind.
    #[error("operator `{op}`: {message}")]
    Spec {
        /// Operator name.
        op: String,
        /// What is wrong.
        message: String,
    },
    /// A plan holding a tensor as per-worker partial sums, or running an
    /// operator on them (`tofu plan --partial-sums`, issue 41): the
    /// planner can cost such plans, codegen cannot emit them yet.
    #[error("{what} `{name}` uses partial sums at level {level} (a plan made with `tofu plan --partial-sums`); partial layouts are not executable yet (issue 41): plan again without --partial-sums")]
    PartialSums {
        /// "tensor" or "operator".
        what: &'static str,
        /// Its name.
        name: String,
        /// The recursion level (outermost 0).
        level: usize,
    },
    /// A program file that cannot be read ([`program::ProgramError`]).
    #[error(transparent)]
    Program(#[from] program::ProgramError),
}
