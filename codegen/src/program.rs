//! The per-worker program: plain serde data (format `tofu-program`, version 2).
//!
//! A [`Program`] lists the buffers one rank holds during one training step
//! (each a region of one tensor in global coordinates, f32 elements) and the
//! [`Instr`]uctions it executes in order. Buffers come to life at their
//! [`Instr::Alloc`] and die at their [`Instr::Free`]; buffers named in
//! [`Program::keep`] outlive the step (the loss, updated weights and
//! optimizer state, which [`Program::carries`] feeds to the next step).
//!
//! Communication is grouped send/recv ([`Instr::Exchange`]) or, where the
//! pattern is one, a collective over every rank ([`Instr::AllReduce`],
//! [`Instr::ReduceScatter`], [`Instr::AllGather`]; see
//! `crate::collectives`). Version 2 added the collectives; version 1 files
//! hold none and read the same.

use comm::traffic;
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
pub const VERSION: u32 = 2;

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
    /// Every rank: `dst`'s `region` becomes the `reduce`-combination over
    /// all ranks of `src`'s `region` (ring all-reduce, `ncclAllReduce`).
    /// `dst` holds exactly `region`; `src` may be `dst`.
    AllReduce {
        /// The operator whose partial results these are.
        op: OpId,
        /// Buffer holding this rank's partial result (a region ⊇ `region`).
        src: BufId,
        /// Buffer receiving the combined result.
        dst: BufId,
        /// The region (global coordinates).
        region: Region,
        /// How partial results combine.
        reduce: Reducer,
    },
    /// Every rank: block `blocks[rank]` of `dst` becomes the
    /// `reduce`-combination over all ranks of that block of `src` (ring
    /// reduce-scatter with per-rank counts, `ncclReduceScatter`). `src`
    /// holds every block; `src` may be `dst`.
    ReduceScatter {
        /// The operator whose partial results these are.
        op: OpId,
        /// Buffer holding this rank's partial result of every block.
        src: BufId,
        /// Buffer receiving this rank's combined block.
        dst: BufId,
        /// One region per rank, in rank order (disjoint; possibly empty).
        blocks: Vec<Region>,
        /// How partial results combine.
        reduce: Reducer,
    },
    /// Every rank: `buf` receives every other rank's block (ring all-gather,
    /// `ncclAllGather`); `buf` holds every block and this rank's block is
    /// already in it.
    AllGather {
        /// The operator whose output this is.
        op: OpId,
        /// The buffer.
        buf: BufId,
        /// One region per rank, in rank order (disjoint; possibly empty).
        blocks: Vec<Region>,
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
            Instr::AllReduce { src, dst, .. } | Instr::ReduceScatter { src, dst, .. } => {
                vec![*src, *dst]
            }
            Instr::AllGather { buf, .. } => vec![*buf],
        }
    }

    /// Bytes `rank` of `world` sends in this instruction, as the
    /// communicator counts them ([`comm::traffic`]: message sizes for an
    /// exchange, the ring formulas for collectives).
    pub fn bytes_sent(&self, rank: usize, world: usize) -> u64 {
        let counts = |blocks: &[Region]| -> Vec<usize> {
            blocks.iter().map(|b| b.volume() as usize).collect()
        };
        match self {
            Instr::Exchange { sends, .. } => {
                let ops: Vec<(usize, usize, bool)> = sends
                    .iter()
                    .map(|m| (m.peer, m.region.volume() as usize, true))
                    .collect();
                traffic::group(&ops, rank).sent
            }
            Instr::AllReduce { region, .. } => {
                traffic::all_reduce(region.volume() as usize, world, rank).sent
            }
            Instr::ReduceScatter { blocks, .. } => {
                traffic::reduce_scatter(&counts(blocks), rank).sent
            }
            Instr::AllGather { blocks, .. } => traffic::all_gather(&counts(blocks), rank).sent,
            _ => 0,
        }
    }

    /// Whether it is a collective (all-reduce, reduce-scatter, all-gather).
    pub fn is_collective(&self) -> bool {
        matches!(
            self,
            Instr::AllReduce { .. } | Instr::ReduceScatter { .. } | Instr::AllGather { .. }
        )
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
    /// Bytes this program sends per step (f32 elements × 4), counted as the
    /// communicator counts them ([`Instr::bytes_sent`]).
    pub fn bytes_sent(&self) -> u64 {
        self.instrs
            .iter()
            .map(|i| i.bytes_sent(self.rank, self.world))
            .sum()
    }

    /// Bytes this program sends per step through collectives.
    pub fn collective_bytes_sent(&self) -> u64 {
        self.instrs
            .iter()
            .filter(|i| i.is_collective())
            .map(|i| i.bytes_sent(self.rank, self.world))
            .sum()
    }

    /// JSON text of the program.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("programs serialize")
    }
}
