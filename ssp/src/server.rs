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
//!   treat every cached row of this shard as fresh to that clock);
//! * rows of an AdaRevision table ([`crate::types::UpdateRule`]) are
//!   versioned: every row sent to a client carries its version and makes
//!   the client a holder of that version's snapshot until it sends
//!   `Release` (or `Bye`); increments are gradients applied by
//!   [`AdaRevisionRow::update`] against the version they name.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crossbeam_channel::Receiver;

use crate::adarevision::AdaRevisionRow;
use crate::checkpoint::{Checkpointer, ShardCheckpoint};
use crate::error::SspError;
use crate::message::{ToClient, ToServer};
use crate::types::{
    ClientId, Clock, RowKey, RowValues, ShardId, TableConfig, TableId, UpdateRule, Version,
};

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
    /// AdaRevision state, for rows of an AdaRevision table.
    ada: Option<AdaRevisionRow>,
    /// AdaRevision: version → clients holding it.
    holders: BTreeMap<Version, BTreeSet<ClientId>>,
}

impl ServerRow {
    fn new(table: &TableConfig, values: Option<RowValues>) -> ServerRow {
        let values = values.unwrap_or_else(|| RowValues::zeros(table));
        let ada = match table.rule {
            UpdateRule::Add => None,
            UpdateRule::AdaRevision { alpha, cap } => Some(AdaRevisionRow::with_values(
                values.to_dense(table.row_len as usize),
                alpha,
                cap as usize,
            )),
        };
        ServerRow {
            values,
            subscribers: BTreeSet::new(),
            ada,
            holders: BTreeMap::new(),
        }
    }

    /// The version to send to `client`, which becomes a holder of it.
    fn hand_out(&mut self, client: ClientId) -> Result<Version, SspError> {
        let Some(ada) = &mut self.ada else {
            return Ok(0);
        };
        let v = ada.version();
        if !self.holders.get(&v).is_some_and(|h| h.contains(&client)) {
            ada.acquire()?;
            self.holders.entry(v).or_default().insert(client);
        }
        Ok(v)
    }

    /// `client` no longer holds `version` (every version, for `None`).
    fn release(&mut self, client: ClientId, version: Option<Version>) {
        let Some(ada) = &mut self.ada else {
            return;
        };
        let versions: Vec<Version> = match version {
            Some(v) => vec![v],
            None => self.holders.keys().copied().collect(),
        };
        for v in versions {
            if let Some(h) = self.holders.get_mut(&v) {
                if h.remove(&client) {
                    ada.release(v);
                }
                if h.is_empty() {
                    self.holders.remove(&v);
                }
            }
        }
    }

    /// Applies an increment; returns the change it made to the values
    /// (the increment itself, or AdaRevision's step).
    fn apply(
        &mut self,
        table: &TableConfig,
        delta: RowValues,
        version: Version,
    ) -> Result<RowValues, SspError> {
        match &mut self.ada {
            None => {
                self.values.add(table, &delta)?;
                Ok(delta)
            }
            Some(ada) => {
                let old = ada.values().to_vec();
                ada.update(&delta.to_dense(table.row_len as usize), version)?;
                let new = ada.values().to_vec();
                let change = new.iter().zip(&old).map(|(a, b)| a - b).collect();
                self.values = RowValues::Dense(new);
                Ok(RowValues::Dense(change))
            }
        }
    }
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
        let mut rows = HashMap::new();
        for (k, values) in ckpt.rows {
            if let Some(table) = s.tables.get(&k.table) {
                rows.insert(k, ServerRow::new(table, Some(values)));
            }
        }
        s.rows = rows;
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

    /// AdaRevision snapshots alive over every row (0 once every client has
    /// released what it read).
    pub fn live_snapshots(&self) -> usize {
        self.rows
            .values()
            .filter_map(|r| r.ada.as_ref())
            .map(AdaRevisionRow::live_snapshots)
            .sum()
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
        let row = self
            .rows
            .entry(key)
            .or_insert_with(|| ServerRow::new(&table, None));
        row.subscribers.insert(client);
        let version = row.hand_out(client)?;
        Ok(ToClient::Row {
            shard: self.id,
            key,
            stamp: self.clock,
            version,
            values: row.values.clone(),
        })
    }

    /// Applies one message; returns the messages to send, in order.
    ///
    /// # Errors
    /// [`SspError::UnknownTable`], [`SspError::Column`] for a bad increment
    /// or read, [`SspError::UnknownClient`] for a stray sender,
    /// [`SspError::Disconnected`] for a client whose link was lost before
    /// its `Bye`.
    pub fn handle(&mut self, msg: ToServer) -> Result<Vec<(ClientId, ToClient)>, SspError> {
        let mut out = Vec::new();
        match msg {
            ToServer::Inc {
                client,
                key,
                delta,
                clock: tag,
                version,
            } => {
                self.client_index(client)?;
                let table = *self
                    .tables
                    .get(&key.table)
                    .ok_or(SspError::UnknownTable(key.table))?;
                let live = self.rows.get(&key).map(|r| &r.values);
                self.ckpt.before_inc(self.clock, tag, key, live, &table);
                let row = self
                    .rows
                    .entry(key)
                    .or_insert_with(|| ServerRow::new(&table, None));
                let change = row.apply(&table, delta, version)?;
                self.ckpt.after_inc(tag, key, &change, &table)?;
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
            ToServer::Release {
                client,
                key,
                version,
            } => {
                self.client_index(client)?;
                if let Some(row) = self.rows.get_mut(&key) {
                    row.release(client, Some(version));
                }
            }
            ToServer::LinkLost { client } => {
                let i = self.client_index(client)?;
                if !self.done[i] {
                    return Err(SspError::Disconnected {
                        peer: format!("client {}", client.0),
                        why: format!(
                            "its connection to shard {} closed before it said Bye (restart the run from the last checkpoint)",
                            self.id.0
                        ),
                    });
                }
            }
            ToServer::Bye { client } => {
                let i = self.client_index(client)?;
                self.done[i] = true;
                for row in self.rows.values_mut() {
                    row.release(client, None);
                }
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
            if let Some(row) = self.rows.get_mut(&key) {
                let subscribers: Vec<ClientId> = row.subscribers.iter().copied().collect();
                for c in subscribers {
                    if !self.done[c.0 as usize] {
                        let version = row.hand_out(c)?;
                        out.push((
                            c,
                            ToClient::Row {
                                shard: self.id,
                                key,
                                stamp: new,
                                version,
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
