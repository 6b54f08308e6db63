//! The runner: executes per-worker programs on CPU threads or CUDA GPUs,
//! through one executor generic over a [`Backend`] and a communicator.
//!
//! * [`comm`] (re-exported from the `tofu-comm` crate): the
//!   [`Communicator`] / [`Collectives`] traits with NCCL's semantics and
//!   [`LocalCommunicator`], ranks on threads of one process.
//! * [`backend`]: the [`Backend`] trait (buffers with per-rank memory
//!   accounting, region copies, kernels prepared once per op instance), the
//!   [`CpuBackend`] with its kernels ([`kernels`]: the `gemm` crate for the
//!   matmul family, im2col + gemm for convolutions, and for every other op an
//!   evaluator compiled from its TDL spec), and the CUDA backend (feature
//!   `cuda`; a stand-in that reports its absence otherwise).
//! * [`ops`]: what every backend shares about an op instance: kernel
//!   errors, shape recognisers, buffer layouts of a window, and the op
//!   table of library kernels both backends read.
//! * [`forward_outputs`]: one forward pass with the model's outputs
//!   written by name (`tofu run --save-outputs`).
//! * [`report`]: what `tofu run` reports of a run, a verification, a
//!   launched rank, saved outputs and a cost estimate, as text and JSON.
//! * [`exec`]: the executor, generic over backend × communicator, and
//!   [`RankRunner`], one rank's program driven step by step (`set`, `step`,
//!   `get`);
//!   ranks on threads ([`comm::on_threads`]); [`verify`]: comparison with the
//!   unpartitioned run.
//!
//! Takes self-contained programs (`program::Program`: specs, shapes and
//! fills inside; no graph) and, optionally, f32 data; gives computed tensors,
//! bytes moved per rank and peak memory per rank. The reference interpreter
//! `tdl::evaluate` is only the tests' oracle, never called here.
#![warn(missing_docs)]

pub mod backend;
pub mod choose;
pub mod exec;
pub mod forward_outputs;
pub mod ops;
pub mod region;
pub mod report;
pub mod verify;

pub use backend::cpu::kernels;
pub use comm;
pub use program::given;

pub use backend::{Backend, BackendError, CpuBackend, CpuBuffer, MemoryStats, Window};
pub use comm::{
    run_ranks, ByteCounters, Collectives, CommError, Communicator, LocalCommunicator, P2p, Rank,
    ReduceOp,
};
pub use exec::{
    run_programs, run_programs_fed, run_programs_given, run_programs_on, run_rank_fed, ExecError,
    NoFeed, RankReport, RankRunner, RunOptions, RunReport, StepFeed, StepStats,
};
pub use given::{from_safetensors, Given, GivenError};
pub use kernels::{OpKernel, Provider, Registry};
pub use ops::KernelError;
pub use verify::{judge, max_rel_error, perturbed_leaves, Verification};
