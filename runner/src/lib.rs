//! The runner: executes per-worker programs on CPU threads (and, later, on
//! CUDA + NCCL), with the two pieces every execution needs.
//!
//! * [`comm`]: the [`Communicator`] trait with NCCL's semantics (rank, world
//!   size, all-reduce / reduce-scatter / all-gather with uneven counts,
//!   all-to-all, broadcast, grouped send/recv, byte counters) and
//!   [`LocalCommunicator`], ranks on threads of one process.
//! * [`backend`]: the [`Backend`] trait (buffers with per-rank memory
//!   accounting, kernels prepared once per op instance) and [`CpuBackend`].
//! * [`kernels`]: the CPU kernels: the `gemm` crate for the matmul family,
//!   im2col + gemm for convolutions, and for every other op an evaluator
//!   compiled from its TDL spec ([`kernels::compiled`]), chosen by the
//!   data-driven [`kernels::Registry`].
//!
//! Takes TDL specs (`tdl::OpSpec`) and f32 data; gives computed tensors,
//! bytes moved per rank and peak memory per rank. The reference interpreter
//! `tdl::evaluate` is only the tests' oracle, never called here.
#![warn(missing_docs)]

pub mod backend;
pub mod comm;
pub mod exec;
pub mod kernels;
pub mod verify;

pub use backend::{Backend, BackendError, CpuBackend, CpuBuffer, MemoryStats};
pub use comm::{
    run_ranks, ByteCounters, CommError, Communicator, LocalCommunicator, P2p, Rank, ReduceOp,
};
pub use exec::{run_programs, ExecError, RunOptions, RunReport};
pub use kernels::{KernelError, OpKernel, Provider, Registry};
pub use verify::max_rel_error;
