//! Communicators: collective and point-to-point communication between ranks,
//! with NCCL's semantics.
//!
//! Takes f32 buffers (host slices; element counts, not bytes, in every
//! argument) on each of `world_size` ranks; gives the collectives tofu's
//! programs use (all-reduce, reduce-scatter, all-gather, all-to-all,
//! broadcast), grouped send/recv, and per-rank byte counters.
//!
//! What every implementation keeps true:
//! * **Same calls, same order.** As in NCCL, every rank calls the same
//!   collectives in the same order with the same arguments (counts, root,
//!   reduction). Deviations are detected where the transport can see them
//!   (sizes, kind of call) and reported as a [`CommError`] naming the peer.
//! * **Uneven splits.** [`Communicator::reduce_scatter`] and
//!   [`Communicator::all_gather`] take per-rank counts (MPI's v-collectives),
//!   because tofu splits non-divisible dims unevenly.
//! * **Byte counters follow the algorithm**, see [`traffic`]: ring all-reduce
//!   sends 2(p−1)/p·N elements per rank, ring reduce-scatter and all-gather
//!   (p−1)/p·N, send/recv the message size; exact integer formulas for uneven
//!   chunks are the functions of [`traffic`], which the planner's cost model
//!   mirrors.
//! * **No deadlock forever.** A rank that panicked, dropped its communicator
//!   or stopped answering makes its peers fail with an error naming it
//!   ([`CommError::PeerGone`], [`CommError::Aborted`], [`CommError::Timeout`]);
//!   after such an error the communicator is poisoned (like `ncclCommAbort`).
//!
//! Implementations: [`local::LocalCommunicator`] (ranks on threads of one
//! process). The CUDA + NCCL one comes with the `cuda` backend.

pub mod local;
pub mod traffic;

use std::fmt;
use std::time::Duration;

pub use local::{run_ranks, LocalCommunicator};
pub use traffic::Traffic;

/// A rank (worker index) in a communicator: `0..world_size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Rank(pub usize);

impl Rank {
    /// The rank as an index into per-rank arrays.
    pub fn index(self) -> usize {
        self.0
    }
}

impl fmt::Display for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Element-wise reduction of a collective (NCCL's `ncclRedOp_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (`ncclSum`).
    Sum,
    /// Product (`ncclProd`).
    Prod,
    /// Maximum (`ncclMax`).
    Max,
    /// Minimum (`ncclMin`).
    Min,
}

impl ReduceOp {
    /// Combine two values.
    #[inline]
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            ReduceOp::Sum => a + b,
            ReduceOp::Prod => a * b,
            ReduceOp::Max => a.max(b),
            ReduceOp::Min => a.min(b),
        }
    }

    /// `acc[i] = op(acc[i], x[i])` for every element (`acc.len() == x.len()`).
    pub fn accumulate(self, acc: &mut [f32], x: &[f32]) {
        debug_assert_eq!(acc.len(), x.len());
        match self {
            ReduceOp::Sum => acc.iter_mut().zip(x).for_each(|(a, b)| *a += b),
            ReduceOp::Prod => acc.iter_mut().zip(x).for_each(|(a, b)| *a *= b),
            ReduceOp::Max => acc.iter_mut().zip(x).for_each(|(a, b)| *a = a.max(*b)),
            ReduceOp::Min => acc.iter_mut().zip(x).for_each(|(a, b)| *a = a.min(*b)),
        }
    }
}

impl From<tdl::Reducer> for ReduceOp {
    /// The collective that combines partial results of a TDL reduction
    /// (Tofu's partition-n-reduce, case 2).
    fn from(r: tdl::Reducer) -> Self {
        match r {
            tdl::Reducer::Sum => ReduceOp::Sum,
            tdl::Reducer::Prod => ReduceOp::Prod,
            tdl::Reducer::Max => ReduceOp::Max,
            tdl::Reducer::Min => ReduceOp::Min,
        }
    }
}

/// One operation of a grouped send/recv ([`Communicator::group`]), like a
/// `ncclSend`/`ncclRecv` between `ncclGroupStart` and `ncclGroupEnd`.
#[derive(Debug)]
pub enum P2p<'a> {
    /// Send all of `buf` to `peer`.
    Send {
        /// Destination rank.
        peer: Rank,
        /// The message (elements).
        buf: &'a [f32],
    },
    /// Receive exactly `buf.len()` elements from `peer` into `buf`.
    Recv {
        /// Source rank.
        peer: Rank,
        /// Where the message goes; its length must equal the message's.
        buf: &'a mut [f32],
    },
}

/// Bytes this rank moved since creation or the last
/// [`Communicator::reset_counters`], counted as the algorithm moves them
/// (see [`traffic`]). Messages to or from itself are local copies and not
/// counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ByteCounters {
    /// Bytes sent to other ranks.
    pub sent: u64,
    /// Bytes received from other ranks.
    pub received: u64,
    /// Bytes sent to each rank (indexed by rank; own entry is 0).
    pub sent_to: Vec<u64>,
    /// Bytes received from each rank (indexed by rank; own entry is 0).
    pub received_from: Vec<u64>,
    /// Number of messages sent to other ranks.
    pub messages_sent: u64,
}

impl ByteCounters {
    /// Zeroed counters for a communicator of `world_size` ranks.
    pub fn new(world_size: usize) -> Self {
        ByteCounters {
            sent_to: vec![0; world_size],
            received_from: vec![0; world_size],
            ..Default::default()
        }
    }
}

/// Why a communication call failed. Every variant names the rank that
/// reports it (`rank`) and the call (`op`, e.g. `"all_reduce"`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CommError {
    /// A per-rank counts array does not have one entry per rank.
    #[error("rank {rank}: {op}: {what} has {got} entries but the world size is {expected}")]
    CountsLength {
        /// Reporting rank.
        rank: Rank,
        /// The call.
        op: &'static str,
        /// Which argument.
        what: &'static str,
        /// World size.
        expected: usize,
        /// Entries given.
        got: usize,
    },
    /// A buffer's length does not fit the call's counts.
    #[error("rank {rank}: {op}: buffer `{buffer}` has {got} elements, expected {expected}")]
    BufferLength {
        /// Reporting rank.
        rank: Rank,
        /// The call.
        op: &'static str,
        /// Which buffer (`send`, `recv`, `buf`).
        buffer: &'static str,
        /// Elements expected from the counts.
        expected: usize,
        /// Elements given.
        got: usize,
    },
    /// A peer or root rank outside `0..world_size`.
    #[error("rank {rank}: {op}: peer rank {peer} is out of range (world size {world_size})")]
    PeerOutOfRange {
        /// Reporting rank.
        rank: Rank,
        /// The call.
        op: &'static str,
        /// The rank given.
        peer: usize,
        /// World size.
        world_size: usize,
    },
    /// A message from `peer` has a different size than this rank expects:
    /// the ranks passed different sizes or counts to the same call.
    #[error("rank {rank}: {op}: size mismatch with rank {peer}: expected {expected} elements, got {got} (every rank must pass the same sizes/counts)")]
    SizeMismatch {
        /// Reporting rank.
        rank: Rank,
        /// The call.
        op: &'static str,
        /// The rank whose message did not fit.
        peer: Rank,
        /// Elements this rank expected.
        expected: usize,
        /// Elements the peer sent (or, for a collective, the total it was called with).
        got: usize,
    },
    /// `peer` was in a different call (kind or sequence number) than this rank.
    #[error("rank {rank}: called {op} (collective #{seq}) but rank {peer} sent a message of {peer_op} (collective #{peer_seq}); every rank must call the same collectives in the same order")]
    CallMismatch {
        /// Reporting rank.
        rank: Rank,
        /// This rank's call.
        op: &'static str,
        /// This rank's collective sequence number.
        seq: u64,
        /// The peer.
        peer: Rank,
        /// The peer's call.
        peer_op: &'static str,
        /// The peer's collective sequence number.
        peer_seq: u64,
    },
    /// `peer` dropped its communicator (its thread returned or panicked) while
    /// this rank was exchanging data with it.
    #[error("rank {rank}: {op}: rank {peer} hung up (its communicator was dropped: the rank returned or panicked)")]
    PeerGone {
        /// Reporting rank.
        rank: Rank,
        /// The call.
        op: &'static str,
        /// The rank that is gone.
        peer: Rank,
    },
    /// No message from `peer` within the communicator's timeout.
    #[error("rank {rank}: {op}: no message from rank {peer} within {waited:?}; is it hung, or in a different call?")]
    Timeout {
        /// Reporting rank.
        rank: Rank,
        /// The call.
        op: &'static str,
        /// The rank waited for.
        peer: Rank,
        /// How long this rank waited.
        waited: Duration,
    },
    /// Another rank failed (or panicked) and aborted the communicator.
    #[error("rank {rank}: {op}: communicator aborted by rank {origin}: {reason}")]
    Aborted {
        /// Reporting rank.
        rank: Rank,
        /// The call.
        op: &'static str,
        /// The rank whose failure aborted the communicator.
        origin: Rank,
        /// Its error message.
        reason: String,
    },
}

impl CommError {
    /// The rank this error points at as the culprit: the peer of a mismatch,
    /// hang-up or timeout, the origin of an abort; `None` for argument errors.
    pub fn culprit(&self) -> Option<Rank> {
        match self {
            CommError::SizeMismatch { peer, .. }
            | CommError::CallMismatch { peer, .. }
            | CommError::PeerGone { peer, .. }
            | CommError::Timeout { peer, .. } => Some(*peer),
            CommError::Aborted { origin, .. } => Some(*origin),
            _ => None,
        }
    }
}

/// Collective and point-to-point communication among `world_size` ranks with
/// NCCL's semantics (see the module doc). One value per rank; all buffers are
/// f32 and all counts are in elements.
///
/// Every method blocks until this rank's part of the call is complete (its
/// output buffers hold the result). Errors: argument errors
/// ([`CommError::CountsLength`], [`CommError::BufferLength`],
/// [`CommError::PeerOutOfRange`]) are reported before anything is sent and
/// leave the communicator usable; any other error poisons it.
pub trait Communicator: Send {
    /// This rank, in `0..world_size()`.
    fn rank(&self) -> Rank;

    /// Number of ranks.
    fn world_size(&self) -> usize;

    /// In place: every rank's `buf` becomes the element-wise `op`-reduction of
    /// all ranks' `buf`s (`ncclAllReduce`). Every rank passes the same length N.
    ///
    /// Traffic: ring, [`traffic::all_reduce`] (≈ 2(p−1)/p·N elements sent).
    fn all_reduce(&mut self, buf: &mut [f32], op: ReduceOp) -> Result<(), CommError>;

    /// `send` has Σ counts elements on every rank, laid out as p consecutive
    /// blocks of `counts[0], counts[1], …` elements; rank r's `recv`
    /// (`counts[r]` elements) becomes the `op`-reduction over all ranks of
    /// block r (`ncclReduceScatter`, with uneven counts).
    ///
    /// Traffic: ring, [`traffic::reduce_scatter`] (≈ (p−1)/p·N).
    fn reduce_scatter(
        &mut self,
        send: &[f32],
        recv: &mut [f32],
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<(), CommError>;

    /// Rank r contributes `send` (`counts[r]` elements); every rank's `recv`
    /// (Σ counts elements) becomes the concatenation of all contributions in
    /// rank order (`ncclAllGather`, with uneven counts).
    ///
    /// Traffic: ring, [`traffic::all_gather`] (≈ (p−1)/p·N).
    fn all_gather(
        &mut self,
        send: &[f32],
        recv: &mut [f32],
        counts: &[usize],
    ) -> Result<(), CommError>;

    /// Personalised exchange: block j of `send` (`send_counts[j]` elements, in
    /// rank order) goes to rank j, and block j of `recv` (`recv_counts[j]`
    /// elements) comes from rank j. Rank j's `send_counts[r]` must equal rank
    /// r's `recv_counts[j]`.
    ///
    /// Traffic: [`traffic::all_to_all`] (every block except one's own).
    fn all_to_all(
        &mut self,
        send: &[f32],
        send_counts: &[usize],
        recv: &mut [f32],
        recv_counts: &[usize],
    ) -> Result<(), CommError>;

    /// In place: every rank's `buf` becomes `root`'s (`ncclBroadcast`).
    ///
    /// Traffic: chain from the root, [`traffic::broadcast`] (N for every rank
    /// but the last of the chain).
    fn broadcast(&mut self, buf: &mut [f32], root: Rank) -> Result<(), CommError>;

    /// Grouped point-to-point: post all sends and receives of `ops` together
    /// (`ncclGroupStart`; `ncclSend`/`ncclRecv`…; `ncclGroupEnd`), so that any
    /// pattern of pairwise exchanges completes without deadlock. Messages
    /// between two ranks are matched in order. Sending to oneself is allowed
    /// (a local copy, matched with a receive from oneself in the same group).
    ///
    /// Traffic: [`traffic::group`] (each message's size).
    fn group(&mut self, ops: &mut [P2p<'_>]) -> Result<(), CommError>;

    /// A single send (a group of one). On NCCL an ungrouped send blocks until
    /// the receive is posted: two ranks sending to each other first deadlock
    /// there; use [`Communicator::group`] for exchanges.
    fn send(&mut self, buf: &[f32], peer: Rank) -> Result<(), CommError> {
        self.group(&mut [P2p::Send { peer, buf }])
    }

    /// A single receive (a group of one); see [`Communicator::send`].
    fn recv(&mut self, buf: &mut [f32], peer: Rank) -> Result<(), CommError> {
        self.group(&mut [P2p::Recv { peer, buf }])
    }

    /// Bytes moved by this rank so far.
    fn counters(&self) -> ByteCounters;

    /// Zero the byte counters (e.g. at the start of a training step).
    fn reset_counters(&mut self);
}
