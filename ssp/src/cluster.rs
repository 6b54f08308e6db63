//! A whole run in one process: server shards and clients on threads,
//! joined by in-process channels (the same code as over TCP).
//!
//! Takes the tables, the number of shards, clients and workers per client
//! and the communication settings; gives the [`Worker`]s to run on threads
//! and, once they are dropped, a [`RunReport`] with the final server state.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::checkpoint::ShardCheckpoint;
use crate::client::Worker;
use crate::comm::{Client, CommConfig};
use crate::error::SspError;
use crate::link::{ChannelLink, Outbound};
use crate::message::{ToClient, ToServer};
use crate::server::{run_shard, ShardState};
use crate::types::{ClientId, RowKey, RowValues, ShardId, TableConfig};

/// The shape of an in-process run.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// The tables.
    pub tables: Vec<TableConfig>,
    /// Server shards (rows are hash-partitioned over them, or placed by
    /// [`CommConfig::placement`]).
    pub shards: usize,
    /// Client processes (each with its own row cache).
    pub clients: usize,
    /// Worker threads per client.
    pub workers_per_client: usize,
    /// Communication settings of every client.
    pub comm: CommConfig,
    /// Consistent checkpoint after every this many clocks (0 = none); they
    /// come back in [`RunReport::checkpoints`].
    pub checkpoint_every: u32,
}

/// What a finished run leaves.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Every row's final value on the servers.
    pub rows: BTreeMap<RowKey, RowValues>,
    /// Increments applied by the servers (after coalescing).
    pub applied: u64,
    /// Bytes of increments the clients sent.
    pub bytes_sent: u64,
    /// Increment messages sent before their clock ended.
    pub early_sent: u64,
    /// Every shard's checkpoints, in order of shard then clock.
    pub checkpoints: Vec<ShardCheckpoint>,
    /// The shard that held each row (where the clients' routing sent it).
    pub holder: BTreeMap<RowKey, ShardId>,
}

/// A running in-process cluster.
pub struct LocalCluster {
    shards: Vec<JoinHandle<Result<ShardState, SspError>>>,
    clients: Vec<Client>,
}

impl LocalCluster {
    /// Starts the shards and clients; returns the cluster and, per client,
    /// its workers (index `[client][worker]`).
    ///
    /// # Errors
    /// [`SspError::Config`] for zero shards, clients or workers.
    pub fn start(cfg: &ClusterConfig) -> Result<(LocalCluster, Vec<Vec<Worker>>), SspError> {
        if cfg.shards == 0 || cfg.clients == 0 || cfg.workers_per_client == 0 {
            return Err(SspError::Config(format!(
                "need at least one shard, client and worker (got {} shards, {} clients, {} workers per client)",
                cfg.shards, cfg.clients, cfg.workers_per_client
            )));
        }
        let (shard_tx, shard_rx): (Vec<_>, Vec<_>) = (0..cfg.shards)
            .map(|_| crossbeam_channel::unbounded::<ToServer>())
            .unzip();
        let (client_tx, client_rx): (Vec<_>, Vec<_>) = (0..cfg.clients)
            .map(|_| crossbeam_channel::unbounded::<ToClient>())
            .unzip();
        let mut shards = Vec::new();
        for (i, inbox) in shard_rx.into_iter().enumerate() {
            let links: Vec<Arc<dyn Outbound<ToClient>>> = client_tx
                .iter()
                .enumerate()
                .map(|(c, tx)| {
                    Arc::new(ChannelLink {
                        tx: tx.clone(),
                        peer: format!("client {c}"),
                    }) as _
                })
                .collect();
            let state = ShardState::new(ShardId(i as u32), &cfg.tables, cfg.clients)
                .with_checkpoints(cfg.checkpoint_every);
            let h = std::thread::Builder::new()
                .name(format!("ssp-shard{i}"))
                .spawn(move || run_shard(state, inbox, &links, None))
                .map_err(|e| SspError::Io {
                    what: "spawning a shard thread".into(),
                    source: e,
                })?;
            shards.push(h);
        }
        drop(client_tx);
        let mut clients = Vec::new();
        let mut workers = Vec::new();
        for (c, inbox) in client_rx.into_iter().enumerate() {
            let links: Vec<Arc<dyn Outbound<ToServer>>> = shard_tx
                .iter()
                .enumerate()
                .map(|(s, tx)| {
                    Arc::new(ChannelLink {
                        tx: tx.clone(),
                        peer: format!("shard {s}"),
                    }) as _
                })
                .collect();
            let comm = CommConfig {
                seed: cfg.comm.seed.wrapping_add(c as u64),
                ..cfg.comm.clone()
            };
            let (client, ws) = Client::start(
                ClientId(c as u32),
                &cfg.tables,
                links,
                inbox,
                cfg.workers_per_client,
                comm,
            )?;
            clients.push(client);
            workers.push(ws);
        }
        Ok((LocalCluster { shards, clients }, workers))
    }

    /// Bytes of increments sent so far by every client.
    pub fn bytes_sent(&self) -> u64 {
        self.clients
            .iter()
            .map(|c| c.stats().bytes_sent.load(Ordering::Relaxed))
            .sum()
    }

    /// Every client's `(time, bytes)` send log (with `record_sends`).
    pub fn send_logs(&self) -> Vec<Vec<(std::time::Instant, u64)>> {
        self.clients
            .iter()
            .map(|c| crate::client::lock(&c.stats().send_log).clone())
            .collect()
    }

    /// Waits for the run to end (every worker must have been dropped) and
    /// returns the servers' final state.
    ///
    /// # Errors
    /// The first client or shard error.
    pub fn finish(self) -> Result<RunReport, SspError> {
        let bytes_sent = self.bytes_sent();
        let early_sent = self
            .clients
            .iter()
            .map(|c| c.stats().early_sent.load(Ordering::Relaxed))
            .sum();
        let mut first_err = None;
        for c in self.clients {
            if let Err(e) = c.join() {
                first_err.get_or_insert(e);
            }
        }
        let mut rows = BTreeMap::new();
        let mut applied = 0;
        let mut checkpoints = Vec::new();
        let mut holder = BTreeMap::new();
        for h in self.shards {
            match h.join() {
                Ok(Ok(mut state)) => {
                    checkpoints.extend(state.take_checkpoints());
                    applied += state.applied();
                    let held = state.rows();
                    holder.extend(held.keys().map(|&k| (k, state.id())));
                    rows.extend(held);
                }
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(SspError::Config("a shard thread panicked".into()));
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(RunReport {
                rows,
                applied,
                bytes_sent,
                early_sent,
                checkpoints,
                holder,
            }),
        }
    }
}
