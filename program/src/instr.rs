//! The instructions of a per-worker program ([`Instr`]) and the messages
//! of an exchange ([`Msg`]): what a rank executes, in order, during one
//! step. Part of the program format (`crate::program`, format
//! `tofu-program` version 5); re-exported there.

use comm::traffic;
use graph::{DType, OpId, Region};
use serde::{Deserialize, Serialize};
use tdl::{Attrs, Reducer};

use crate::phase::Phase;
use crate::program::{BufId, Init};
use crate::wire;

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
        /// Its spec: index into [`Program::specs`].
        spec: u32,
        /// Its attribute values (missing ones take the spec's defaults).
        attrs: Attrs,
        /// The global shape of every input tensor (for a windowed kernel).
        shapes: Vec<Vec<usize>>,
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
    /// An exchange of an operator's phase in which every ordered pair of
    /// ranks moves exactly one message, as one all-to-all
    /// (`Collectives::all_to_all`; on NCCL grouped send/recv in one group,
    /// as PyTorch's `all_to_all_single`): the sends' regions are packed in
    /// rank order into one buffer, the receives unpacked from one. Sends and
    /// receives hold one message per other rank, in rank order.
    AllToAll {
        /// The operator.
        op: OpId,
        /// Which of its phases.
        phase: Phase,
        /// One message to each other rank, in rank order.
        sends: Vec<Msg>,
        /// One message from each other rank, in rank order.
        recvs: Vec<Msg>,
    },
    /// An exchange of an operator's phase in which `root` sends the same
    /// `region` to every other rank, as one flat (star) broadcast
    /// (`Collectives::flat_broadcast`: the root sends to each rank itself,
    /// which is what the planner's transfers charge; NCCL's ring broadcast
    /// would move the same total bytes but spread over the ranks). On the
    /// root `buf` is the source; on every other rank the destination.
    Broadcast {
        /// The operator.
        op: OpId,
        /// Which of its phases.
        phase: Phase,
        /// The sending rank.
        root: usize,
        /// Source buffer on the root, destination buffer elsewhere.
        buf: BufId,
        /// The region moved (global coordinates, inside `buf`'s region).
        region: Region,
        /// On a receiving rank: combine into `buf` with this reducer (else copy).
        reduce: Option<Reducer>,
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
            Instr::AllGather { buf, .. } | Instr::Broadcast { buf, .. } => vec![*buf],
            Instr::AllToAll { sends, recvs, .. } => {
                sends.iter().chain(recvs).map(|m| m.buf).collect()
            }
        }
    }

    /// The point-to-point view of an exchange-like instruction on `rank` of
    /// `world` (an exchange, an all-to-all or a broadcast): its operator,
    /// phase, and the messages it sends and receives (a broadcast's root
    /// sends one message to each other rank). `None` for the others.
    pub fn messages(&self, rank: usize, world: usize) -> Option<(OpId, Phase, Vec<Msg>, Vec<Msg>)> {
        match self {
            Instr::Exchange {
                op,
                phase,
                sends,
                recvs,
            }
            | Instr::AllToAll {
                op,
                phase,
                sends,
                recvs,
            } => Some((*op, *phase, sends.clone(), recvs.clone())),
            Instr::Broadcast {
                op,
                phase,
                root,
                buf,
                region,
                reduce,
            } => {
                let msg = |peer: usize, reduce: Option<Reducer>| Msg {
                    peer,
                    buf: *buf,
                    region: region.clone(),
                    reduce,
                };
                if rank == *root {
                    let sends = (0..world).filter(|&j| j != rank).map(|j| msg(j, None));
                    Some((*op, *phase, sends.collect(), Vec::new()))
                } else {
                    Some((*op, *phase, Vec::new(), vec![msg(*root, *reduce)]))
                }
            }
            _ => None,
        }
    }

    /// Bytes `rank` of `world` sends in this instruction, as the
    /// communicator counts them ([`comm::traffic`]: message sizes for an
    /// exchange, the ring formulas for collectives), each message in the
    /// 4-byte words of its buffer's element type (`dtype`, see
    /// [`crate::wire::words`]).
    pub fn bytes_sent(&self, rank: usize, world: usize, dtype: impl Fn(BufId) -> DType) -> u64 {
        let words = |buf: BufId, r: &Region| wire::words(r.volume(), dtype(buf)) as usize;
        let counts = |buf: BufId, blocks: &[Region]| -> Vec<usize> {
            blocks.iter().map(|b| words(buf, b)).collect()
        };
        match self {
            Instr::Exchange { sends, .. } => {
                let ops: Vec<(usize, usize, bool)> = sends
                    .iter()
                    .map(|m| (m.peer, words(m.buf, &m.region), true))
                    .collect();
                traffic::group(&ops, rank).sent
            }
            Instr::AllReduce { dst, region, .. } => {
                traffic::all_reduce(words(*dst, region), world, rank).sent
            }
            Instr::ReduceScatter { src, blocks, .. } => {
                traffic::reduce_scatter(&counts(*src, blocks), rank).sent
            }
            Instr::AllGather { buf, blocks, .. } => {
                traffic::all_gather(&counts(*buf, blocks), rank).sent
            }
            Instr::AllToAll { sends, recvs, .. } => {
                let per_rank = |msgs: &[Msg]| {
                    let mut c = vec![0usize; world];
                    for m in msgs {
                        if let Some(x) = c.get_mut(m.peer) {
                            *x += words(m.buf, &m.region);
                        }
                    }
                    c
                };
                traffic::all_to_all(&per_rank(sends), &per_rank(recvs), rank).sent
            }
            Instr::Broadcast {
                root, buf, region, ..
            } => traffic::flat_broadcast(words(*buf, region), world, *root, rank).sent,
            _ => 0,
        }
    }

    /// Whether it is a collective (all-reduce, reduce-scatter, all-gather,
    /// all-to-all, broadcast).
    pub fn is_collective(&self) -> bool {
        matches!(
            self,
            Instr::AllReduce { .. }
                | Instr::ReduceScatter { .. }
                | Instr::AllGather { .. }
                | Instr::AllToAll { .. }
                | Instr::Broadcast { .. }
        )
    }
}
