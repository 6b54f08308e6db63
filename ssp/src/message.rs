//! The messages between clients and server shards (thesis §3.1.1).
//!
//! Takes nothing; gives [`ToServer`] and [`ToClient`], plain serde data that
//! travels over in-process channels or TCP frames unchanged. Keeps true: a
//! client sends `ClientClock { clock: t }` to a shard only after every
//! update it tagged `< t` for that shard; a shard sends `ServerClock` only
//! after pushing every changed row its subscribers cache.

use serde::{Deserialize, Serialize};

use crate::types::{ClientId, Clock, RowKey, RowValues, ShardId, Version};

/// Client → server shard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ToServer {
    /// Add `delta` to a row. `clock` is the tag of the oldest update
    /// coalesced into it (for checks and logs; applied on receipt).
    Inc {
        /// Sender.
        client: ClientId,
        /// The row.
        key: RowKey,
        /// Clock tag of the oldest coalesced update.
        clock: Clock,
        /// The row version the increment was computed from (AdaRevision
        /// tables; increments of different versions are never coalesced).
        version: Version,
        /// The increment.
        delta: RowValues,
    },
    /// The client no longer refers to `version` of an AdaRevision row (no
    /// cached copy, worker read or buffered update of it is left): the
    /// shard may drop that version's snapshot.
    Release {
        /// Sender.
        client: ClientId,
        /// The row.
        key: RowKey,
        /// The version let go.
        version: Version,
    },
    /// Ask for a row holding every update tagged `< min_stamp`; answered at
    /// once or by a read callback when the shard clock reaches `min_stamp`.
    Read {
        /// Sender.
        client: ClientId,
        /// The row.
        key: RowKey,
        /// The least acceptable stamp.
        min_stamp: Clock,
    },
    /// Every update this client tagged `< clock` has been sent.
    ClientClock {
        /// Sender.
        client: ClientId,
        /// The client's clock (the least of its worker threads').
        clock: Clock,
    },
    /// The client has finished: count it as done with every clock.
    Bye {
        /// Sender.
        client: ClientId,
    },
    /// Said by the server's own transport, never by a client: the client's
    /// connection closed before it said `Bye` to this shard. The shard
    /// stops with an error instead of waiting for it forever (the run
    /// restarts from the last consistent checkpoint).
    LinkLost {
        /// The client whose connection closed.
        client: ClientId,
    },
}

/// Server shard → client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ToClient {
    /// A row's value, holding every update tagged `< stamp` (and maybe newer
    /// ones, which SSP allows).
    Row {
        /// The shard that owns the row.
        shard: ShardId,
        /// The row.
        key: RowKey,
        /// Every update tagged `< stamp` is in `values`.
        stamp: Clock,
        /// The row's version (AdaRevision tables; 0 otherwise). The client
        /// holds it until it sends [`ToServer::Release`].
        version: Version,
        /// The row's value.
        values: RowValues,
    },
    /// The shard holds every client's updates tagged `< clock`, and every
    /// row this client caches from it that changed has been pushed before.
    ServerClock {
        /// The shard.
        shard: ShardId,
        /// The shard clock (least client clock it has seen).
        clock: Clock,
    },
    /// Said by a client's own transport, never by a shard: the connection
    /// to a server closed. Reads still waiting fail instead of hanging.
    LinkClosed {
        /// The server's address.
        peer: String,
    },
}

impl ToServer {
    /// Bytes of this message on the wire as budgeted by managed
    /// communication: 24 bytes of header plus the payload.
    pub fn wire_bytes(&self) -> u64 {
        match self {
            ToServer::Inc { delta, .. } => 24 + delta.wire_bytes(),
            _ => 24,
        }
    }
}
