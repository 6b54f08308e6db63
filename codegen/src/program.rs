//! The per-worker program: plain serde data (format `tofu-program`, version 1).
//!
//! A [`Program`] lists the buffers one rank holds during one training step
//! (each a region of one tensor in global coordinates, f32 elements) and the
//! [`Instr`]uctions it executes in order. Buffers come to life at their
//! [`Instr::Alloc`] and die at their [`Instr::Free`]; buffers named in
//! [`Program::keep`] outlive the step (the loss, updated weights and
//! optimizer state, which [`Program::carries`] feeds to the next step).

use planner::graph::{OpId, TensorId};
use planner::plan::tile::Region;
use planner::plan::Phase;
use serde::{Deserialize, Serialize};
use tdl::Reducer;

/// Index into [`Program::buffers`].
pub type BufId = u32;

/// The program file format name.
pub const FORMAT: &str = "tofu-program";
/// The program file format version.
pub const VERSION: u32 = 1;

/// One buffer: a region of a tensor in global coordinates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Buffer {
    /// The tensor.
    pub tensor: TensorId,
    /// The region it holds (`[lo, hi)` per dim, global coordinates).
    pub region: Region,
    /// Elements (= `region.volume()`); the runner stores f32, 4 bytes each.
    pub elems: u64,
    /// Whether it is the tensor's tile on this worker (else a work buffer:
    /// an assembled input, a computed share, or a staging copy).
    pub tile: bool,
}

/// How a buffer's elements start out.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Init {
    /// Zeros (every element is overwritten before it is read).
    Zero,
    /// The identity of a reducer (the tile partial results reduce into).
    Identity(Reducer),
    /// The tensor's synthetic [`planner::graph::Fill`] on its region (or,
    /// after the first step, the carried value, see [`Program::carries`]).
    Fill,
}

/// One message of an exchange.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Msg {
    /// The other rank.
    pub peer: usize,
    /// The buffer sent from or received into.
    pub buf: BufId,
    /// The region moved (global coordinates, inside the buffer's region).
    pub region: Region,
    /// For a receive: combine into the buffer with this reducer (else copy).
    pub reduce: Option<Reducer>,
}

/// How a share's kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelMode {
    /// The op on local shapes (the buffers' extents), library kernels
    /// included; valid when [`crate::local::runs_locally`] says so.
    Local,
    /// The compiled evaluator over the share's global index box.
    Window,
}

/// One instruction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Instr {
    /// Bring a buffer to life.
    Alloc {
        /// The buffer.
        buf: BufId,
        /// Its initial contents.
        init: Init,
    },
    /// One grouped send/recv (NCCL group) of an operator's phase.
    Exchange {
        /// The operator.
        op: OpId,
        /// Which of its phases.
        phase: Phase,
        /// Messages sent, in transfer order.
        sends: Vec<Msg>,
        /// Messages received, in transfer order.
        recvs: Vec<Msg>,
    },
    /// Copy (or, with `reduce`, combine) a region from one buffer into another.
    Copy {
        /// Source buffer.
        src: BufId,
        /// Destination buffer.
        dst: BufId,
        /// The region (inside both buffers' regions).
        region: Region,
        /// Combine with this reducer instead of overwriting.
        reduce: Option<Reducer>,
    },
    /// Compute this worker's share of an operator.
    Compute {
        /// The operator.
        op: OpId,
        /// The share: global `[lo, hi)` of every index variable of the
        /// expanded spec.
        var_box: Vec<(i64, i64)>,
        /// One buffer per input (holding the region the share reads).
        inputs: Vec<BufId>,
        /// One buffer per output (holding the box the share writes).
        outputs: Vec<BufId>,
        /// Local kernel or windowed evaluator.
        mode: KernelMode,
    },
    /// Release a buffer.
    Free {
        /// The buffer.
        buf: BufId,
    },
}

impl Instr {
    /// Every buffer the instruction touches.
    pub fn buffers(&self) -> Vec<BufId> {
        match self {
            Instr::Alloc { buf, .. } | Instr::Free { buf } => vec![*buf],
            Instr::Exchange { sends, recvs, .. } => {
                sends.iter().chain(recvs).map(|m| m.buf).collect()
            }
            Instr::Copy { src, dst, .. } => vec![*src, *dst],
            Instr::Compute {
                inputs, outputs, ..
            } => inputs.iter().chain(outputs).copied().collect(),
        }
    }
}

/// A value that crosses from one step to the next: the kept buffer of an
/// updated tensor (`from`, e.g. `w'`) becomes the tile of the tensor it
/// replaces (`to`, e.g. `w`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Carry {
    /// The updated tensor.
    pub from: TensorId,
    /// Its kept buffer on this rank (`None` if this rank holds none).
    pub from_buf: Option<BufId>,
    /// The tensor it replaces.
    pub to: TensorId,
    /// The buffer of `to` this rank allocates with [`Init::Fill`] (`None` if none).
    pub to_buf: Option<BufId>,
}

/// One rank's program for one training step (see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// This rank.
    pub rank: usize,
    /// Number of ranks.
    pub world: usize,
    /// Every buffer (index = [`BufId`]).
    pub buffers: Vec<Buffer>,
    /// The instructions, in order.
    pub instrs: Vec<Instr>,
    /// Buffers alive after the step: tiles of tensors nothing consumes
    /// (the loss, updated weights and state).
    pub keep: Vec<BufId>,
    /// Values carried to the next step.
    pub carries: Vec<Carry>,
}

impl Program {
    /// Bytes this program sends per step (f32 elements × 4).
    pub fn bytes_sent(&self) -> u64 {
        self.instrs
            .iter()
            .map(|i| match i {
                Instr::Exchange { sends, .. } => sends
                    .iter()
                    .filter(|m| m.peer != self.rank)
                    .map(|m| m.region.volume() * 4)
                    .sum(),
                _ => 0,
            })
            .sum()
    }

    /// JSON text of the program.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("programs serialize")
    }
}
