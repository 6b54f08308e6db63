//! [`CommError`]: why a communication call failed, naming the rank that
//! reports it, the call and (where there is one) the culprit peer.

use std::time::Duration;

use crate::Rank;

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
    /// `peer` dropped its communicator (its thread returned or panicked, or
    /// its process exited and closed the connection) while this rank was
    /// exchanging data with it.
    #[error("rank {rank}: {op}: rank {peer} hung up (its communicator was dropped or its process exited: the rank returned, failed or was killed)")]
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
    /// Work queued on a device communicator (NCCL) did not finish within
    /// its timeout: a peer is hung, dead, or in another collective. The
    /// communicator was aborted (`ncclCommAbort`, as PyTorch's NCCL watchdog
    /// does) so that no rank hangs; NCCL does not say which peer is missing.
    #[error("rank {rank}: {op}: NCCL work did not finish within {waited:?}: another rank is hung, dead or in a different collective; this rank aborted its communicator (ncclCommAbort). Set {setting} to wait longer")]
    CollectiveTimeout {
        /// Reporting rank.
        rank: Rank,
        /// The call.
        op: &'static str,
        /// How long this rank waited.
        waited: Duration,
        /// The setting of the limit (an environment variable).
        setting: &'static str,
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
    /// Connecting to the other processes' ranks failed ([`crate::TcpCommunicator`]):
    /// an address that does not answer within the timeout, a handshake from
    /// a process of another run.
    #[error("rank {rank}: connecting to rank {peer}: {message}")]
    Connect {
        /// Reporting rank.
        rank: Rank,
        /// The rank it could not connect to (or accept from).
        peer: Rank,
        /// What failed.
        message: String,
    },
    /// A peer in another process at `host` hung up or stayed silent past the
    /// timeout ([`crate::TcpCommunicator`]): `cause` is the
    /// [`CommError::PeerGone`] or [`CommError::Timeout`]. This rank closed
    /// every connection of the communicator, so none of its threads stays
    /// blocked on the lost link.
    #[error("{cause} (rank {peer} is at {host}; this rank closed its connections to every rank)")]
    Remote {
        /// The rank that was lost.
        peer: Rank,
        /// Its address (`ip:port`).
        host: String,
        /// What this rank saw.
        cause: Box<CommError>,
    },
    /// The device or its library failed (a copy to or from the device, an
    /// NCCL call): the driver's or library's words.
    #[error("rank {rank}: {op}: {message}")]
    Device {
        /// Reporting rank.
        rank: Rank,
        /// The call.
        op: &'static str,
        /// What failed.
        message: String,
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
            | CommError::Timeout { peer, .. }
            | CommError::Connect { peer, .. }
            | CommError::Remote { peer, .. } => Some(*peer),
            CommError::Aborted { origin, .. } => Some(*origin),
            _ => None,
        }
    }

    /// The error itself, or for [`CommError::Remote`] what the rank saw
    /// (its `cause`).
    pub fn root(&self) -> &CommError {
        match self {
            CommError::Remote { cause, .. } => cause.root(),
            e => e,
        }
    }
}
