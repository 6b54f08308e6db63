//! The parameter server's error type.
//!
//! Takes failures from every module; gives [`SspError`], one variant per
//! thing that can go wrong, each naming what and where.

use crate::types::{ClientId, ShardId, TableId};

/// What can go wrong in the parameter server.
#[derive(Debug, thiserror::Error)]
pub enum SspError {
    /// A table id that no [`crate::TableConfig`] of the run declares.
    #[error("table {0:?} is not configured (declare it in the run's tables)")]
    UnknownTable(TableId),
    /// An increment to a column past the end of the row.
    #[error("column {col} is out of range for table {table:?} (rows have {row_len} columns)")]
    Column {
        /// The table.
        table: TableId,
        /// The offending column.
        col: u32,
        /// Columns per row.
        row_len: u32,
    },
    /// A peer went away (its channel or socket closed) before the run ended.
    #[error("link to {peer} closed: {why}")]
    Disconnected {
        /// Who: "shard N", "client N", an address.
        peer: String,
        /// What was being done.
        why: String,
    },
    /// A message from a client id the server was not told about.
    #[error(
        "client {client:?} is not part of this run (shard {shard:?} expects {clients} clients)"
    )]
    UnknownClient {
        /// The stray client.
        client: ClientId,
        /// The shard that got it.
        shard: ShardId,
        /// How many clients the shard expects.
        clients: usize,
    },
    /// A bad configuration value.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A socket or file failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done (address, file).
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A frame that does not decode as a message.
    #[error("bad frame from {peer}: {why}")]
    Codec {
        /// Who sent it.
        peer: String,
        /// The decoder's complaint.
        why: String,
    },
}
