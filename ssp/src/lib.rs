//! Stale Synchronous Parallel (SSP) parameter server, Bösen-style
//! (thesis ch. 3, shared/seeds/000), with managed communication.
//!
//! Takes tables of f32 rows and worker threads that read, increment and
//! clock; gives reads that obey the SSP guarantee: a worker at clock `c`
//! reading a table of staleness `s` sees every update of every worker from
//! clocks `<= c - s - 1` (s = 0 is BSP), and maybe newer ones.
//!
//! * [`types`]: ids, table configuration, row values;
//! * [`message`]: what clients and shards say to each other;
//! * [`server`]: a shard, a pure state machine plus its loop;
//! * [`client`] and [`comm`]: the process-wide row cache, the update
//!   buffer, [`Worker`] handles, and the communication threads;
//! * [`managed`]: bandwidth budget and priorities (thesis §3.2);
//! * [`link`]: how messages leave (channels in one process, [`tcp`] across
//!   processes);
//! * [`cluster`]: a whole run in one process; [`processes`]: a run as
//!   server and worker processes over TCP ([`served_summary`]: what a
//!   server process reports at the end);
//! * [`mf`]: the matrix-factorisation application (SGD on MovieLens);
//! * [`adarevision`]: AdaRevision rows (§3.2.3); [`topk`]: top-k
//!   sparsification with residuals; [`placement`]: tables over servers
//!   (seed 004).

#![warn(missing_docs)]

pub mod adarevision;
pub mod checkpoint;
pub mod client;
pub mod cluster;
pub mod comm;
pub mod counter;
pub mod error;
pub mod link;
pub mod managed;
pub mod message;
pub mod mf;
pub mod placement;
pub mod process_run;
pub mod processes;
pub mod served_summary;
pub mod server;
pub mod tcp;
pub mod topk;
pub mod types;

pub use client::{ClientStats, Worker};
pub use cluster::{ClusterConfig, LocalCluster, RunReport};
pub use comm::{Client, CommConfig};
pub use error::SspError;
pub use managed::Priority;
pub use types::{
    ClientId, Clock, RowId, RowKey, RowKind, RowValues, ShardId, TableConfig, TableId, UpdateRule,
    Version,
};
