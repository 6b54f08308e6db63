//! Errors of the rendezvous: [`RendezvousError`] for everything a rank can
//! see, and [`Failure`], the part that the host (rank 0's server) decides and
//! sends to every rank, so all ranks report the same cause and name the same
//! rank(s).
//!
//! Keeps true: every failure that is caused by a peer names that peer's rank
//! ([`RendezvousError::blamed_ranks`]); every wait is bounded by the session's
//! timeout, so a missing or dead peer is an error, never a hang.

use serde::{Deserialize, Serialize};

/// A failure of the whole session, decided by the rendezvous host (rank 0)
/// and sent to every connected rank. `during` names the step that failed:
/// `"join"`, `"barrier #3"`, `"all-gather #4"`, … (collectives are numbered
/// from 1, barriers and all-gathers sharing one counter).
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum Failure {
    /// A rank's connection dropped without a goodbye: its process exited or
    /// was killed.
    #[error("rank {rank} lost its connection to the rendezvous during {during} (its process exited or was killed)")]
    PeerLost {
        /// The rank whose connection dropped.
        rank: usize,
        /// The step the session was in.
        during: String,
    },
    /// A rank closed its session while the others still needed it (it
    /// skipped a collective the others entered).
    #[error("rank {rank} closed its session while the others wait in {during}")]
    PeerLeft {
        /// The rank that closed.
        rank: usize,
        /// The step the others wait in.
        during: String,
    },
    /// Ranks did not arrive within the timeout: at join, ranks that never
    /// connected; in a collective, ranks that did not enter it.
    #[error("rank(s) {} did not reach {during} within {timeout_s} s", list(.ranks))]
    Missing {
        /// The ranks that did not arrive, ascending.
        ranks: Vec<usize>,
        /// The step they did not reach.
        during: String,
        /// The timeout, in seconds.
        timeout_s: f64,
    },
    /// Two processes registered as the same rank.
    #[error("two processes registered as rank {rank}")]
    DuplicateRank {
        /// The rank registered twice.
        rank: usize,
    },
    /// A process registered with a rank outside `0..world_size`.
    #[error("a process registered as rank {rank}, outside 0..{world_size}")]
    RankOutOfRange {
        /// The rank it gave.
        rank: usize,
        /// The host's world size.
        world_size: usize,
    },
    /// A process gave another world size than rank 0's.
    #[error("rank {rank} has WORLD_SIZE={theirs} but rank 0 has WORLD_SIZE={ours}")]
    WorldSizeMismatch {
        /// The rank with the other world size.
        rank: usize,
        /// Its world size.
        theirs: usize,
        /// Rank 0's world size.
        ours: usize,
    },
    /// A rank entered another collective than the others (the ranks call
    /// barriers and all-gathers in different orders).
    #[error("rank {rank} entered {got} while the others are in {expected}")]
    OutOfStep {
        /// The rank out of step.
        rank: usize,
        /// The collective the others are in.
        expected: String,
        /// The collective it entered.
        got: String,
    },
    /// A process speaks another version of the protocol (another tofu build).
    #[error("rank {rank} speaks rendezvous protocol {theirs}, rank 0 speaks {ours} (different tofu builds)")]
    Protocol {
        /// The rank with the other protocol.
        rank: usize,
        /// Its protocol version.
        theirs: u32,
        /// Rank 0's protocol version.
        ours: u32,
    },
}

impl Failure {
    /// The ranks this failure blames.
    pub fn blamed_ranks(&self) -> Vec<usize> {
        match self {
            Failure::PeerLost { rank, .. }
            | Failure::PeerLeft { rank, .. }
            | Failure::DuplicateRank { rank }
            | Failure::RankOutOfRange { rank, .. }
            | Failure::WorldSizeMismatch { rank, .. }
            | Failure::OutOfStep { rank, .. }
            | Failure::Protocol { rank, .. } => vec![*rank],
            Failure::Missing { ranks, .. } => ranks.clone(),
        }
    }
}

/// `[2]` → `"2"`, `[1, 3]` → `"1, 3"`.
fn list(ranks: &[usize]) -> String {
    ranks
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Everything that can go wrong for one rank: a bad environment, rank 0's
/// address unusable or unreachable, or a [`Failure`] of the session.
#[derive(Debug, thiserror::Error)]
pub enum RendezvousError {
    /// An environment variable has a value that cannot be used.
    #[error("environment variable {var}={value:?} is invalid: {reason}")]
    BadVar {
        /// The variable, e.g. `WORLD_SIZE`.
        var: &'static str,
        /// Its value.
        value: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A required environment variable is not set.
    #[error("environment variable {var} is not set ({reason})")]
    MissingVar {
        /// The variable, e.g. `MASTER_PORT`.
        var: &'static str,
        /// Why it is required.
        reason: String,
    },
    /// Rank 0 could not listen on `MASTER_ADDR:MASTER_PORT`.
    #[error("rank 0 cannot listen on {addr} (MASTER_ADDR:MASTER_PORT): {source}")]
    Bind {
        /// The address, `host:port`.
        addr: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// `MASTER_ADDR:MASTER_PORT` does not resolve to an address.
    #[error("cannot resolve {addr} (MASTER_ADDR:MASTER_PORT): {reason}")]
    Resolve {
        /// The address, `host:port`.
        addr: String,
        /// The resolver's error.
        reason: String,
    },
    /// Rank 0's rendezvous did not accept a connection within the timeout.
    #[error("rank {rank} could not reach rank 0's rendezvous at {addr} within {timeout_s} s (is rank 0 running? last error: {last_error})")]
    Unreachable {
        /// The rank that tried.
        rank: usize,
        /// The address, `host:port`.
        addr: String,
        /// The timeout, in seconds.
        timeout_s: f64,
        /// The last connection error.
        last_error: String,
    },
    /// The connection to rank 0's rendezvous dropped: rank 0 exited or was
    /// killed.
    #[error("rank {rank} lost its connection to rank 0's rendezvous at {addr} during {during} (rank 0 exited or was killed)")]
    HostLost {
        /// The rank that lost it.
        rank: usize,
        /// The address, `host:port`.
        addr: String,
        /// The step it was in.
        during: String,
    },
    /// Rank 0's rendezvous sent nothing within the timeout (plus a margin
    /// that lets the host's own, more precise timeout arrive first).
    #[error("rank {rank} got no answer from rank 0's rendezvous at {addr} during {during} within {waited_s:.1} s")]
    NoReply {
        /// The rank that waited.
        rank: usize,
        /// The address, `host:port`.
        addr: String,
        /// The step it was in.
        during: String,
        /// How long it waited, in seconds.
        waited_s: f64,
    },
    /// The session failed; the host's verdict, the same on every rank.
    #[error(transparent)]
    Session(#[from] Failure),
    /// An `Env` that cannot describe a session (built by hand, not by
    /// [`crate::Env::from_env`]).
    #[error("invalid rendezvous environment: {0}")]
    InvalidEnv(String),
    /// The session failed before or was closed; no further collective runs.
    #[error("rank {rank}: the session already failed or was closed ({first})")]
    Closed {
        /// This rank.
        rank: usize,
        /// The first error, as text.
        first: String,
    },
    /// Any other I/O or protocol error on the connection to rank 0.
    #[error("rank {rank}: {during}: {reason}")]
    Io {
        /// The rank that saw it.
        rank: usize,
        /// The step it was in.
        during: String,
        /// What went wrong.
        reason: String,
    },
}

impl RendezvousError {
    /// The ranks this error blames: the missing, dead, duplicate or
    /// out-of-step rank(s), rank 0 when its rendezvous is gone or silent;
    /// empty for a bad environment or a local I/O error.
    pub fn blamed_ranks(&self) -> Vec<usize> {
        match self {
            RendezvousError::Session(f) => f.blamed_ranks(),
            RendezvousError::Unreachable { .. }
            | RendezvousError::HostLost { .. }
            | RendezvousError::NoReply { .. } => vec![0],
            _ => Vec::new(),
        }
    }
}
