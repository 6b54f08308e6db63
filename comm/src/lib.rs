//! Communicators: collective and point-to-point communication between ranks,
//! with NCCL's semantics, over the buffers of whatever backend holds them.
//!
//! Takes buffers of f32 elements of a backend (any type `B`; host slices and
//! vectors here, device buffers in a backend crate) on each of `world_size`
//! ranks, element counts (not bytes) in every argument; gives the
//! collectives tofu's programs use (all-reduce, reduce-scatter, all-gather,
//! all-to-all, broadcast), grouped send/recv, and per-rank byte counters.
//! This crate depends on no other tofu crate: the runner, a parameter server
//! or a loop scheduler can all use it as their transport.
//!
//! Two traits: [`Communicator`] (who am I, how many, what moved, wait for
//! completion) and [`Collectives<B>`] (the data movement on buffers of type
//! `B`). A communicator may implement [`Collectives`] for several buffer
//! types: [`LocalCommunicator`] does for every [`HostMemory`] type.
//!
//! What every implementation keeps true:
//! * **Same calls, same order.** As in NCCL, every rank calls the same
//!   collectives in the same order with the same arguments (counts, root,
//!   reduction). Deviations are detected where the transport can see them
//!   (sizes, kind of call) and reported as a [`CommError`] naming the peer.
//! * **Stream order.** A call may return before its data has moved (NCCL
//!   enqueues on a stream); its buffers may be reused by work ordered after
//!   it on the same backend, and [`Communicator::synchronize`] waits until
//!   every call so far is complete. Host implementations complete each call
//!   before returning.
//! * **Uneven splits.** [`Collectives::reduce_scatter`] and
//!   [`Collectives::all_gather`] take per-rank counts (MPI's v-collectives),
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
//! process, host memory). The NCCL one and a host-staged one for ranks that
//! share a GPU live with the CUDA backend (`runner`, feature `cuda`).
#![warn(missing_docs)]

mod error;
pub mod local;
pub mod ranks;
pub mod traffic;

use std::fmt;

pub use local::tcp::TcpCommunicator;
pub use local::{run_ranks, LocalCommunicator, DEFAULT_TIMEOUT};
pub use ranks::on_threads;
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

/// One operation of a grouped send/recv ([`Communicator::group`]), like a
/// `ncclSend`/`ncclRecv` between `ncclGroupStart` and `ncclGroupEnd`.
#[derive(Debug)]
pub enum P2p<'a, B: ?Sized = [f32]> {
    /// Send all of `buf` to `peer`.
    Send {
        /// Destination rank.
        peer: Rank,
        /// The message (elements).
        buf: &'a B,
    },
    /// Receive exactly `buf`'s length in elements from `peer` into `buf`.
    Recv {
        /// Source rank.
        peer: Rank,
        /// Where the message goes; its length must equal the message's.
        buf: &'a mut B,
    },
}

/// Buffers a host communicator can read and write directly: f32 elements in
/// host memory (slices, vectors, a CPU backend's buffers).
pub trait HostMemory {
    /// The elements.
    fn host(&self) -> &[f32];
    /// The elements, mutable.
    fn host_mut(&mut self) -> &mut [f32];
}

impl HostMemory for [f32] {
    fn host(&self) -> &[f32] {
        self
    }
    fn host_mut(&mut self) -> &mut [f32] {
        self
    }
}

impl<const N: usize> HostMemory for [f32; N] {
    fn host(&self) -> &[f32] {
        self
    }
    fn host_mut(&mut self) -> &mut [f32] {
        self
    }
}

impl HostMemory for Vec<f32> {
    fn host(&self) -> &[f32] {
        self
    }
    fn host_mut(&mut self) -> &mut [f32] {
        self
    }
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

pub use error::CommError;

/// One rank's membership in a clique of `world_size` ranks (see the module
/// doc): identity, completion and byte counters. The data movement is
/// [`Collectives`], per buffer type.
pub trait Communicator: Send {
    /// This rank, in `0..world_size()`.
    fn rank(&self) -> Rank;

    /// Number of ranks.
    fn world_size(&self) -> usize;

    /// Bytes moved by this rank so far.
    fn counters(&self) -> ByteCounters;

    /// Zero the byte counters (e.g. at the start of a training step).
    fn reset_counters(&mut self);

    /// Wait until every call issued so far is complete (its output buffers
    /// hold the result). Host implementations complete each call before it
    /// returns, so this does nothing there.
    ///
    /// Errors: an asynchronous failure of an earlier call.
    fn synchronize(&mut self) -> Result<(), CommError> {
        Ok(())
    }
}

/// Collective and point-to-point communication among `world_size` ranks with
/// NCCL's semantics (see the module doc), on buffers of type `B`: all counts
/// are in f32 elements; a buffer's length is its element count.
///
/// Errors: argument errors ([`CommError::CountsLength`],
/// [`CommError::BufferLength`], [`CommError::PeerOutOfRange`]) are reported
/// before anything is sent and leave the communicator usable; any other
/// error poisons it.
pub trait Collectives<B: ?Sized>: Communicator {
    /// In place: every rank's `buf` becomes the element-wise `op`-reduction of
    /// all ranks' `buf`s (`ncclAllReduce`). Every rank passes the same length N.
    ///
    /// Traffic: ring, [`traffic::all_reduce`] (≈ 2(p−1)/p·N elements sent).
    fn all_reduce(&mut self, buf: &mut B, op: ReduceOp) -> Result<(), CommError>;

    /// `send` has Σ counts elements on every rank, laid out as p consecutive
    /// blocks of `counts[0], counts[1], …` elements; rank r's `recv`
    /// (`counts[r]` elements) becomes the `op`-reduction over all ranks of
    /// block r (`ncclReduceScatter`, with uneven counts).
    ///
    /// Traffic: ring, [`traffic::reduce_scatter`] (≈ (p−1)/p·N).
    fn reduce_scatter(
        &mut self,
        send: &B,
        recv: &mut B,
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<(), CommError>;

    /// Rank r contributes `send` (`counts[r]` elements); every rank's `recv`
    /// (Σ counts elements) becomes the concatenation of all contributions in
    /// rank order (`ncclAllGather`, with uneven counts).
    ///
    /// Traffic: ring, [`traffic::all_gather`] (≈ (p−1)/p·N).
    fn all_gather(&mut self, send: &B, recv: &mut B, counts: &[usize]) -> Result<(), CommError>;

    /// Personalised exchange: block j of `send` (`send_counts[j]` elements, in
    /// rank order) goes to rank j, and block j of `recv` (`recv_counts[j]`
    /// elements) comes from rank j. Rank j's `send_counts[r]` must equal rank
    /// r's `recv_counts[j]`.
    ///
    /// Traffic: [`traffic::all_to_all`] (every block except one's own).
    fn all_to_all(
        &mut self,
        send: &B,
        send_counts: &[usize],
        recv: &mut B,
        recv_counts: &[usize],
    ) -> Result<(), CommError>;

    /// In place: every rank's `buf` becomes `root`'s (`ncclBroadcast`).
    ///
    /// Traffic: chain from the root, [`traffic::broadcast`] (N for every rank
    /// but the last of the chain).
    fn broadcast(&mut self, buf: &mut B, root: Rank) -> Result<(), CommError>;

    /// In place: every rank's `buf` becomes `root`'s, the root sending it to
    /// every other rank itself (flat or star broadcast: one grouped
    /// send/recv, the root's sends to each rank in rank order). Every rank
    /// passes the same length N. This is the algorithm the planner's
    /// transfers charge for one source feeding every rank; NCCL's ring/chain
    /// broadcast ([`Collectives::broadcast`]) moves the same total bytes but
    /// spreads the sending over the ranks.
    ///
    /// Traffic: [`traffic::flat_broadcast`] ((p−1)·N sent by the root, N
    /// received by every other rank).
    ///
    /// Errors: [`CommError::PeerOutOfRange`] for a root outside the world,
    /// and whatever [`Collectives::group`] returns.
    fn flat_broadcast(&mut self, buf: &mut B, root: Rank) -> Result<(), CommError> {
        let (me, p) = (self.rank(), self.world_size());
        if root.0 >= p {
            return Err(CommError::PeerOutOfRange {
                rank: me,
                op: "flat_broadcast",
                peer: root.0,
                world_size: p,
            });
        }
        if me == root {
            let buf: &B = buf;
            let mut ops: Vec<P2p<'_, B>> = (0..p)
                .filter(|&j| j != root.0)
                .map(|j| P2p::Send { peer: Rank(j), buf })
                .collect();
            self.group(&mut ops)
        } else {
            self.group(&mut [P2p::Recv { peer: root, buf }])
        }
    }

    /// Grouped point-to-point: post all sends and receives of `ops` together
    /// (`ncclGroupStart`; `ncclSend`/`ncclRecv`…; `ncclGroupEnd`), so that any
    /// pattern of pairwise exchanges completes without deadlock. Messages
    /// between two ranks are matched in order. Sending to oneself is allowed
    /// (a local copy, matched with a receive from oneself in the same group).
    ///
    /// Traffic: [`traffic::group`] (each message's size).
    fn group(&mut self, ops: &mut [P2p<'_, B>]) -> Result<(), CommError>;

    /// A single send (a group of one). On NCCL an ungrouped send blocks until
    /// the receive is posted: two ranks sending to each other first deadlock
    /// there; use [`Collectives::group`] for exchanges.
    fn send(&mut self, buf: &B, peer: Rank) -> Result<(), CommError> {
        self.group(&mut [P2p::Send { peer, buf }])
    }

    /// A single receive (a group of one); see [`Collectives::send`].
    fn recv(&mut self, buf: &mut B, peer: Rank) -> Result<(), CommError> {
        self.group(&mut [P2p::Recv { peer, buf }])
    }
}
