//! The protocol between the ranks and rank 0's rendezvous: serde messages,
//! one JSON value per message (written with `serde_json::to_vec` plus a
//! newline, read back with serde_json's `StreamDeserializer`, which delimits
//! the values, so no byte is parsed by hand).
//!
//! A rank sends `Hello`, then waits for `Welcome` (rank 0's payload); then
//! per collective it sends `Barrier`/`Gather` and waits for
//! `Released`/`Gathered`; at the end it sends `Close`. The host may send
//! `Abort` at any time; it ends the session on every rank.

use std::fmt;
use std::io::{BufReader, Write};
use std::net::TcpStream;

use serde::{Deserialize, Serialize};

use crate::Failure;

/// Version of this protocol; a process of another tofu build is refused.
pub(crate) const PROTOCOL: u32 = 1;

/// A collective: its kind and its number in the session (from 1; barriers
/// and all-gathers share the counter), so ranks out of step are caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Collective {
    /// `Session::barrier`.
    Barrier(u64),
    /// `Session::all_gather_bytes`.
    Gather(u64),
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Collective::Barrier(n) => write!(f, "barrier #{n}"),
            Collective::Gather(n) => write!(f, "all-gather #{n}"),
        }
    }
}

/// Rank → host.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ToHost {
    /// Register as `rank` of a run of `world_size` processes.
    Hello {
        protocol: u32,
        rank: usize,
        world_size: usize,
    },
    /// Enter a collective (`data`: this rank's bytes for an all-gather,
    /// empty for a barrier).
    Enter { op: Collective, data: Vec<u8> },
    /// Leave the session cleanly.
    Close,
}

/// Host → rank.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ToRank {
    /// Every rank registered; rank 0's payload.
    Welcome { payload: Vec<u8> },
    /// Every rank entered `op`; for an all-gather, every rank's bytes in
    /// rank order (empty for a barrier).
    Done { op: Collective, data: Vec<Vec<u8>> },
    /// The session failed.
    Abort(Failure),
}

/// Write one message as a JSON line.
pub(crate) fn send<T: Serialize>(stream: &mut TcpStream, msg: &T) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    stream.write_all(&bytes)?;
    stream.flush()
}

/// Messages read from a connection, one JSON value each.
pub(crate) type Incoming<T> =
    serde_json::StreamDeserializer<'static, serde_json::de::IoRead<BufReader<TcpStream>>, T>;

/// A reader of `T` messages from `stream`.
pub(crate) fn incoming<T: for<'de> Deserialize<'de>>(stream: TcpStream) -> Incoming<T> {
    serde_json::Deserializer::from_reader(BufReader::new(stream)).into_iter()
}
