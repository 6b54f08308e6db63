//! Codegen: from a graph and a partition plan to one [`Program`] per worker
//! (Tofu §4.3, §5).
//!
//! Takes a training [`planner::graph::Graph`], its [`planner::plan::model::Model`],
//! the level factors and the plan's [`planner::plan::Decisions`]; gives, per
//! rank, plain serde data: the buffers it holds (a tensor's region in global
//! coordinates) and the instructions of one training step in program order —
//! allocation (synthetic fill of leaf tiles, reducer identities), one grouped
//! send/recv per (operator, phase) carrying exactly the planner's
//! [`planner::plan::transfers`], the local compute of the worker's share,
//! copies and reductions of partial results into tiles, and frees after last
//! use.
//!
//! * [`program`]: the program data types (re-exported from the `program`
//!   crate, with [`wire`], [`given`] and [`given_save`]).
//! * [`compile()`]: a [`planner::plan::BoundPlan`] to verified programs in
//!   one call (what `tofu run`, `tofu train` and the SSP path use).
//! * [`generate`](mod@generate): building the programs.
//! * [`collectives`]: where the transfers of an output are a collective's
//!   pattern (all-reduce, reduce-scatter + all-gather), lowered to it.
//! * [`local`]: when a share may run a kernel on local shapes.
//! * [`given`]: real leaf values (safetensors) by graph tensor name, for a
//!   run that should not use the synthetic fills.
//! * [`wire`]: element types — values a tensor of each type holds, and its
//!   messages at the type's own size.
//! * [`verify`]: the checks run before anything executes (programs, one
//!   function per check family, and a plan file's recorded costs against its
//!   decisions).
//! * [`error`]: what goes wrong, named.
//!
//! Keeps true: programs are deterministic for a given plan; the bytes a
//! program sends are the planner's predicted bytes exactly (every message is
//! one transfer, every collective moves what its transfers would); [`verify::validate`] accepts every program
//! [`generate::generate`] builds from a consistent plan.
#![warn(missing_docs)]

pub mod collectives;
pub mod compile;
mod emit;
pub mod error;
mod exchange;
pub mod generate;
pub mod local;
pub mod verify;

pub use ::program;
pub use ::program::{given, given_save, wire};

pub use ::program::{
    BufId, Buffer, Fill, Init, Instr, KernelMode, Msg, OpId, Program, Region, Synthetic, TensorId,
    TensorInfo,
};
pub use ::program::{DType, Phase, ProgramError};
pub use compile::{compile, compile_unpartitioned};
pub use error::CodegenError;
pub use generate::{generate, generate_in, generate_unpartitioned, Programs};
pub use verify::{check_recorded, validate, validate_in};
