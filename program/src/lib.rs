//! Programs: what codegen gives and the runner executes, as plain serde data
//! (format `tofu-program`, version [`program::VERSION`]).
//!
//! Takes nothing from the planner: a [`Program`] is self-contained (its
//! tensors, operator specs, shapes and fills inside), so the runner depends
//! on this crate, `graph` (element types, ids, [`Region`]) and `tdl` only,
//! never on the interval analysis or the planner (ARCHITECTURE.md).
//!
//! * [`program`]: the program data types and the file format.
//! * [`phase`]: when a transfer happens relative to its operator's compute.
//! * [`wire`]: element types — values a tensor of each type holds, and its
//!   messages at the type's own size.
//! * [`given`]: real leaf values read from safetensors by tensor name.
//! * [`given_save`]: named tensors written as safetensors (the one writer).
//! * [`rank_files`]: every rank's program written as its own file.
//! * [`error`]: a program file that cannot be read.
#![warn(missing_docs)]

pub mod error;
pub mod given;
pub mod given_save;
pub mod instr;
pub mod phase;
pub mod program;
pub mod rank_files;
pub mod wire;

pub use error::ProgramError;
pub use phase::Phase;
pub use program::{
    BufId, Buffer, Carry, DType, Fill, Init, Instr, KernelMode, Msg, OpId, Program, Region,
    Synthetic, TensorId, TensorInfo, FORMAT, OLDEST_READ, REGENERATE, VERSION,
};
