//! A server shard (thesis §3.1.1, server side).
//!
//! Takes [`ToServer`] messages from every client; gives [`ToClient`] replies
//! and pushes. [`ShardState`] is a pure state machine (`handle` returns the
//! messages to send), and [`run_shard`] drives it from an inbox. Keeps true:
//! * increments are applied on receipt, each exactly once;
//! * the shard clock is the least client clock it has seen and never goes
//!   back; a row sent with stamp `t` holds every update tagged `< t`;
//! * a read that needs a stamp the shard has not reached waits as a read
//!   callback and is answered when the shard clock gets there;
//! * at every clock advance the shard pushes each changed row to the clients
//!   caching it (eager push), *then* sends `ServerClock` (so a client may
//!   treat every cached row of this shard as fresh to that clock).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crossbeam_channel::Receiver;

use crate::checkpoint::{Checkpointer, ShardCheckpoint};
use crate::error::SspError;
use crate::message::{ToClient, ToServer};
use crate::types::{ClientId, Clock, RowKey, RowValues, ShardId, TableConfig, TableId};

/// Where a shard's messages to clients go.
pub trait ClientLinks: Send + Sync {
    /// Queues `msg` for client `client`.
    ///
    /// # Errors
    /// [`SspError::Disconnected`] when that client's link is closed.
    fn send(&self, client: ClientId, msg: ToClient) -> Result<(), SspError>;
}

impl ClientLinks for Vec<std::sync::Arc<dyn crate::link::Outbound<ToClient>>> {
    fn send(&self, client: ClientId, msg: ToClient) -> Result<(), SspError> {
        match self.get(client.0 as usize) {
            Some(link) => link.send(msg),
            None => Err(SspError::Disconnected {
                peer: format!("client {}", client.0),
                why: "no link".into(),
            }),
        }
    }
}

#[derive(Clone, Debug)]
struct ServerRow {
    values: RowValues,
    subscribers: BTreeSet<ClientId>,
}

/// The state of one server shard: its rows, the client clocks it has seen,
/// pending read callbacks.
#[derive(Clone, Debug)]
pub struct ShardState {
    id: ShardId,
    tables: HashMap<TableId, TableConfig>,
    rows: HashMap<RowKey, ServerRow>,
    client_clocks: Vec<Clock>,
    done: Vec<bool>,
    clock: Clock,
    pending: BTreeMap<Clock, Vec<(ClientId, RowKey)>>,
    dirty: HashSet<RowKey>,
    applied: u64,
    ckpt: Checkpointer,
}

impl ShardState {
    /// An empty shard `id` serving `clients` clients with tables `tables`.
    pub fn new(id: ShardId, tables: &[TableConfig], clients: usize) -> ShardState {
        ShardState {
            id,
            tables: tables.iter().map(|t| (t.id, *t)).collect(),
            rows: HashMap::new(),
            client_clocks: vec![0; clients],
            done: vec![false; clients],
            clock: 0,
            pending: BTreeMap::new(),
            dirty: HashSet::new(),
            applied: 0,
            ckpt: Checkpointer::default(),
        }
    }

    /// Takes a consistent checkpoint after every `every` clocks (at clocks
    /// t with `(t + 1) % every == 0`; 0 = never). See [`crate::checkpoint`].
    pub fn with_checkpoints(mut self, every: u32) -> ShardState {
        self.ckpt.every = every;
        self
    }

    /// A shard restarted from its checkpoint: the rows as of clock
    /// `ckpt.clock`, every client counted as done with it (clients restart
    /// their workers at clock `ckpt.clock + 1`).
    pub fn restore(ckpt: ShardCheckpoint, tables: &[TableConfig], clients: usize) -> ShardState {
        let mut s = ShardState::new(ckpt.shard, tables, clients);
        let start = ckpt.clock.saturating_add(1);
        s.clock = start;
        s.client_clocks = vec![start; clients];
        s.rows = ckpt
            .rows
            .into_iter()
            .map(|(k, values)| {
                (
                    k,
                    ServerRow {
                        values,
                        subscribers: BTreeSet::new(),
                    },
                )
            })
            .collect();
        s
    }

    /// Checkpoints completed since the last call, oldest first.
    pub fn take_checkpoints(&mut self) -> Vec<ShardCheckpoint> {
        std::mem::take(&mut self.ckpt.completed)
    }

    /// This shard's id.
    pub fn id(&self) -> ShardId {
        self.id
    }

    /// The shard clock: every client's updates tagged `< clock` are applied.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Increments applied so far.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// True once every client has said `Bye`.
    pub fn finished(&self) -> bool {
        self.done.iter().all(|&d| d)
    }

    /// The current value of every row this shard holds.
    pub fn rows(&self) -> BTreeMap<RowKey, RowValues> {
        self.rows
            .iter()
            .map(|(k, r)| (*k, r.values.clone()))
            .collect()
    }

    fn client_index(&self, client: ClientId) -> Result<usize, SspError> {
        let i = client.0 as usize;
        if i < self.client_clocks.len() {
            Ok(i)
        } else {
            Err(SspError::UnknownClient {
                client,
                shard: self.id,
                clients: self.client_clocks.len(),
            })
        }
    }

    fn row_reply(&mut self, client: ClientId, key: RowKey) -> Result<ToClient, SspError> {
        let table = *self
            .tables
            .get(&key.table)
            .ok_or(SspError::UnknownTable(key.table))?;
        let row = self.rows.entry(key).or_insert_with(|| ServerRow {
            values: RowValues::zeros(&table),
            subscribers: BTreeSet::new(),
        });
        row.subscribers.insert(client);
        Ok(ToClient::Row {
            shard: self.id,
            key,
            stamp: self.clock,
            values: row.values.clone(),
        })
    }

    /// Applies one message; returns the messages to send, in order.
    ///
    /// # Errors
    /// [`SspError::UnknownTable`], [`SspError::Column`] for a bad increment
    /// or read, [`SspError::UnknownClient`] for a stray sender.
    pub fn handle(&mut self, msg: ToServer) -> Result<Vec<(ClientId, ToClient)>, SspError> {
        let mut out = Vec::new();
        match msg {
            ToServer::Inc {
                client,
                key,
                delta,
                clock: tag,
            } => {
                self.client_index(client)?;
                let table = *self
                    .tables
                    .get(&key.table)
                    .ok_or(SspError::UnknownTable(key.table))?;
                let live = self.rows.get(&key).map(|r| &r.values);
                self.ckpt.before_inc(self.clock, tag, key, live, &table);
                let row = self.rows.entry(key).or_insert_with(|| ServerRow {
                    values: RowValues::zeros(&table),
                    subscribers: BTreeSet::new(),
                });
                row.values.add(&table, &delta)?;
                self.ckpt.after_inc(tag, key, &delta, &table)?;
                self.applied += 1;
                self.dirty.insert(key);
            }
            ToServer::Read {
                client,
                key,
                min_stamp,
            } => {
                self.client_index(client)?;
                if self.clock >= min_stamp {
                    out.push((client, self.row_reply(client, key)?));
                } else {
                    self.tables
                        .get(&key.table)
                        .ok_or(SspError::UnknownTable(key.table))?;
                    self.pending
                        .entry(min_stamp)
                        .or_default()
                        .push((client, key));
                }
            }
            ToServer::ClientClock { client, clock } => {
                let i = self.client_index(client)?;
                self.client_clocks[i] = self.client_clocks[i].max(clock);
                self.advance(&mut out)?;
            }
            ToServer::Bye { client } => {
                let i = self.client_index(client)?;
                self.done[i] = true;
                self.advance(&mut out)?;
            }
        }
        Ok(out)
    }

    fn advance(&mut self, out: &mut Vec<(ClientId, ToClient)>) -> Result<(), SspError> {
        let new = (0..self.client_clocks.len())
            .map(|i| {
                if self.done[i] {
                    Clock::MAX
                } else {
                    self.client_clocks[i]
                }
            })
            .min()
            .unwrap_or(Clock::MAX);
        if new <= self.clock {
            return Ok(());
        }
        let rows = &self.rows;
        self.ckpt.advance(self.id, self.clock, new, || {
            rows.iter().map(|(k, r)| (*k, &r.values)).collect()
        });
        self.clock = new;
        // Eager push of changed rows to the clients caching them.
        let mut dirty: Vec<RowKey> = self.dirty.drain().collect();
        dirty.sort();
        for key in dirty {
            if let Some(row) = self.rows.get(&key) {
                for &c in &row.subscribers {
                    if !self.done[c.0 as usize] {
                        out.push((
                            c,
                            ToClient::Row {
                                shard: self.id,
                                key,
                                stamp: new,
                                values: row.values.clone(),
                            },
                        ));
                    }
                }
            }
        }
        // Read callbacks now satisfied.
        let later = self.pending.split_off(&new.saturating_add(1));
        let ready = std::mem::replace(&mut self.pending, later);
        for (_, reads) in ready {
            for (client, key) in reads {
                if !self.done[client.0 as usize] {
                    out.push((client, self.row_reply(client, key)?));
                }
            }
        }
        for (i, &d) in self.done.iter().enumerate() {
            if !d {
                out.push((
                    ClientId(i as u32),
                    ToClient::ServerClock {
                        shard: self.id,
                        clock: new,
                    },
                ));
            }
        }
        Ok(())
    }
}

/// Runs a shard until every client has said `Bye`; returns its final state.
/// With `checkpoint_dir`, completed checkpoints are written there as they
/// complete; without, they stay in the state ([`ShardState::take_checkpoints`]).
///
/// # Errors
/// The first error of [`ShardState::handle`], a checkpoint write error, or
/// [`SspError::Disconnected`] when the inbox closes before every client is
/// done.
pub fn run_shard(
    mut state: ShardState,
    inbox: Receiver<ToServer>,
    links: &dyn ClientLinks,
    checkpoint_dir: Option<&std::path::Path>,
) -> Result<ShardState, SspError> {
    while !state.finished() {
        if let Some(dir) = checkpoint_dir {
            for c in state.take_checkpoints() {
                c.write(dir)?;
            }
        }
        let msg = inbox.recv().map_err(|_| SspError::Disconnected {
            peer: format!("shard {}", state.id.0),
            why: "inbox closed before every client said Bye".into(),
        })?;
        for (client, reply) in state.handle(msg)? {
            // A client that has gone away only loses pushes it no longer needs.
            let _ = links.send(client, reply);
        }
    }
    if let Some(dir) = checkpoint_dir {
        for c in state.take_checkpoints() {
            c.write(dir)?;
        }
    }
    Ok(state)
}
