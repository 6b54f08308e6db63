//! A client process: its communication threads and their settings.
//!
//! Takes table configurations, links to every server shard and an inbox of
//! server messages; gives a [`Client`] with its [`Worker`]s. Two threads:
//! the *receiver* fills the row cache from `Row` and `ServerClock`
//! messages; the *sender* flushes the update buffer at clock end (every
//! update tagged `< t`, then `ClientClock(t)` to every shard, thesis
//! §3.1.1) and, under managed communication (§3.2), spends a bandwidth
//! budget on sending buffered updates early in priority order.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::client::{lock, Cache, ClientShared, ClientStats, Cmd, Outbox, Worker};
use crate::error::SspError;
use crate::link::Outbound;
use crate::managed::{rank, select, Candidate, LeakyBucket, Priority};
use crate::message::{ToClient, ToServer};
use crate::placement::Placement;
use crate::types::{ClientId, Clock, RowKey, RowValues, TableConfig, Version};

/// Communication settings of a client (thesis §3.2).
#[derive(Clone, Debug)]
pub struct CommConfig {
    /// The per-node bandwidth budget of managed communication (thesis
    /// §3.2), bytes per second: a leaky bucket meters every increment
    /// message this client sends ([`ToServer::wire_bytes`]), clock-end
    /// flushes (which wait for tokens) and early sends (which spend only
    /// tokens the bucket holds) alike. 0 = unmanaged: no bucket, updates go
    /// out only at clock end, unthrottled (plain bounded staleness).
    pub bandwidth: u64,
    /// Bucket capacity in bytes (the burst allowed); 0 = `bandwidth / 20`
    /// (50 ms worth), at least 4 KiB.
    pub bucket_bytes: u64,
    /// Most rows sent early per tick (the queue size).
    pub queue_rows: usize,
    /// Order of early sends.
    pub priority: Priority,
    /// How often the sender wakes to send early.
    pub tick: Duration,
    /// Seed of the random priority.
    pub seed: u64,
    /// Keep `(time, bytes)` of every increment sent in
    /// [`ClientStats::send_log`].
    pub record_sends: bool,
    /// Which shard holds each row (seed 004's placement policies): `None`
    /// routes by the fixed hash ([`RowKey::shard`]). Every client and
    /// every process of a run must use the same; its shard count must
    /// equal the number of shard links.
    pub placement: Option<Arc<Placement>>,
}

impl Default for CommConfig {
    fn default() -> CommConfig {
        CommConfig {
            bandwidth: 0,
            bucket_bytes: 0,
            queue_rows: 256,
            priority: Priority::Magnitude,
            tick: Duration::from_millis(2),
            seed: 0,
            record_sends: false,
            placement: None,
        }
    }
}

impl CommConfig {
    fn bucket(&self) -> u64 {
        if self.bucket_bytes > 0 {
            self.bucket_bytes
        } else {
            (self.bandwidth / 20).max(4096)
        }
    }
}

/// A client process: the row cache, the update buffer and the two
/// communication threads.
pub struct Client {
    shared: Arc<ClientShared>,
    sender: Option<JoinHandle<Result<(), SspError>>>,
    receiver: Option<JoinHandle<()>>,
}

impl Client {
    /// Starts client `id` with `workers` worker threads. `shards[i]` is the
    /// link to shard i; `inbox` receives every shard's messages to this
    /// client. Returns the client and its workers (one per thread; drop each
    /// when its thread is done).
    ///
    /// # Errors
    /// [`SspError::Config`] for zero workers or shards, or a placement
    /// over another number of shards than `shards.len()`.
    pub fn start(
        id: ClientId,
        tables: &[TableConfig],
        shards: Vec<Arc<dyn Outbound<ToServer>>>,
        inbox: Receiver<ToClient>,
        workers: usize,
        comm: CommConfig,
    ) -> Result<(Client, Vec<Worker>), SspError> {
        Client::start_at(id, tables, shards, inbox, workers, comm, 0)
    }

    /// As [`Client::start`], with every worker starting at clock `start`
    /// (a restart from a checkpoint at clock `start - 1`).
    ///
    /// # Errors
    /// As [`Client::start`].
    pub fn start_at(
        id: ClientId,
        tables: &[TableConfig],
        shards: Vec<Arc<dyn Outbound<ToServer>>>,
        inbox: Receiver<ToClient>,
        workers: usize,
        comm: CommConfig,
        start: Clock,
    ) -> Result<(Client, Vec<Worker>), SspError> {
        if workers == 0 || shards.is_empty() {
            return Err(SspError::Config(format!(
                "a client needs at least one worker and one shard (got {workers} workers, {} shards)",
                shards.len()
            )));
        }
        if let Some(p) = &comm.placement {
            if p.shards() != shards.len() {
                return Err(SspError::Config(format!(
                    "the placement is over {} shards but the client has links to {}",
                    p.shards(),
                    shards.len()
                )));
            }
        }
        let (cmd_tx, cmd_rx) = crossbeam_channel::unbounded();
        let shared = Arc::new(ClientShared {
            id,
            tables: tables.iter().map(|t| (t.id, *t)).collect(),
            cache: Mutex::new(Cache {
                shard_clock: vec![0; shards.len()],
                ..Cache::default()
            }),
            shards,
            cache_cv: Condvar::new(),
            outbox: Mutex::new(Outbox::default()),
            worker_clocks: Mutex::new(vec![start; workers]),
            cmd: cmd_tx,
            stats: ClientStats::default(),
            placement: comm.placement.clone(),
        });
        let s = Arc::clone(&shared);
        let receiver = std::thread::Builder::new()
            .name(format!("ssp-client{}-recv", id.0))
            .spawn(move || receive(&s, inbox))
            .map_err(|e| SspError::Io {
                what: "spawning the receiver thread".into(),
                source: e,
            })?;
        let s = Arc::clone(&shared);
        let sender = std::thread::Builder::new()
            .name(format!("ssp-client{}-send", id.0))
            .spawn(move || send_loop(&s, cmd_rx, comm))
            .map_err(|e| SspError::Io {
                what: "spawning the sender thread".into(),
                source: e,
            })?;
        let ws = (0..workers)
            .map(|index| Worker {
                shared: Arc::clone(&shared),
                index,
                clock: start,
                reads: Mutex::new(HashMap::new()),
            })
            .collect();
        Ok((
            Client {
                shared,
                sender: Some(sender),
                receiver: Some(receiver),
            },
            ws,
        ))
    }

    /// This client's counters.
    pub fn stats(&self) -> &ClientStats {
        &self.shared.stats
    }

    /// Waits for the communication threads to finish: they do once every
    /// worker has been dropped (the sender flushes and says `Bye`) and every
    /// shard has closed its link.
    ///
    /// # Errors
    /// The sender's error, if it failed.
    pub fn join(mut self) -> Result<(), SspError> {
        let sent = self.sender.take().map(|h| h.join());
        if let Some(h) = self.receiver.take() {
            let _ = h.join();
        }
        match sent {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(SspError::Config("the sender thread panicked".into())),
            None => Ok(()),
        }
    }
}

fn receive(shared: &ClientShared, inbox: Receiver<ToClient>) {
    while let Ok(msg) = inbox.recv() {
        let mut cache = lock(&shared.cache);
        match msg {
            ToClient::Row {
                key,
                stamp,
                version,
                values,
                ..
            } => {
                if shared
                    .tables
                    .get(&key.table)
                    .is_some_and(TableConfig::is_adarevision)
                {
                    cache.held.entry(key).or_default().insert(version);
                }
                let newer = cache.rows.get(&key).is_none_or_stale(stamp);
                if newer {
                    cache.rows.insert(
                        key,
                        crate::client::CachedRow {
                            values,
                            stamp,
                            version,
                        },
                    );
                }
                if matches!(cache.requested.get(&key), Some(&asked) if asked <= stamp) {
                    cache.requested.remove(&key);
                }
            }
            ToClient::ServerClock { shard, clock } => {
                if let Some(c) = cache.shard_clock.get_mut(shard.0 as usize) {
                    *c = (*c).max(clock);
                }
            }
            ToClient::LinkClosed { peer } => {
                cache
                    .closed
                    .get_or_insert_with(|| format!("the connection to server {peer} closed"));
            }
        }
        drop(cache);
        shared.cache_cv.notify_all();
    }
    lock(&shared.cache)
        .closed
        .get_or_insert_with(|| "every server link closed".into());
    shared.cache_cv.notify_all();
}

trait StaleCheck {
    fn is_none_or_stale(&self, stamp: Clock) -> bool;
}

impl StaleCheck for Option<&crate::client::CachedRow> {
    /// True when there is no cached copy or it is no newer than `stamp`
    /// (stamps never go back).
    fn is_none_or_stale(&self, stamp: Clock) -> bool {
        match self {
            None => true,
            Some(row) => row.stamp <= stamp,
        }
    }
}

struct Sender<'a> {
    shared: &'a ClientShared,
    bucket: Option<LeakyBucket>,
    comm: CommConfig,
    rng: StdRng,
    cursor: Option<RowKey>,
}

impl Sender<'_> {
    fn send_inc(
        &mut self,
        tag: Clock,
        (key, version): (RowKey, Version),
        delta: RowValues,
        early: bool,
    ) -> Result<(), SspError> {
        let msg = ToServer::Inc {
            client: self.shared.id,
            key,
            clock: tag,
            version,
            delta,
        };
        let bytes = msg.wire_bytes();
        if let Some(b) = &mut self.bucket {
            if !early {
                b.wait_spend(bytes);
            }
        }
        // Taken right after the bucket was spent: the send log's time.
        let at = Instant::now();
        let stats = &self.shared.stats;
        stats.bytes_sent.fetch_add(bytes, Ordering::Relaxed);
        stats.incs_sent.fetch_add(1, Ordering::Relaxed);
        if early {
            stats.early_sent.fetch_add(1, Ordering::Relaxed);
        }
        if self.comm.record_sends {
            lock(&stats.send_log).push((at, bytes));
        }
        let shard = self.shared.shard_of(key);
        self.shared.shards[shard].send(msg)
    }

    /// Sends every buffered update tagged `< upto`.
    fn flush(&mut self, upto: Clock) -> Result<(), SspError> {
        let taken: Vec<(Clock, crate::client::TagUpdates)> = {
            let mut out = lock(&self.shared.outbox);
            let later = out.by_clock.split_off(&upto);
            std::mem::replace(&mut out.by_clock, later)
                .into_iter()
                .collect()
        };
        for (tag, rows) in taken {
            let mut rows: Vec<_> = rows.into_iter().collect();
            rows.sort_by_key(|(k, _)| *k);
            for (slot, delta) in rows {
                self.send_inc(tag, slot, delta, false)?;
            }
        }
        Ok(())
    }

    /// Managed communication: spends what the bucket holds on buffered
    /// updates in priority order.
    fn send_early(&mut self) -> Result<(), SspError> {
        let Some(bucket) = &mut self.bucket else {
            return Ok(());
        };
        let tokens = bucket.available();
        if tokens == 0 {
            return Ok(());
        }
        let chosen: Vec<(Clock, (RowKey, Version), RowValues)> = {
            let mut out = lock(&self.shared.outbox);
            let mut slots = Vec::new();
            let mut cands = Vec::new();
            let cache = if self.comm.priority == Priority::RelativeMagnitude {
                Some(lock(&self.shared.cache))
            } else {
                None
            };
            for (&tag, rows) in &out.by_clock {
                for (slot, delta) in rows {
                    let key = &slot.0;
                    let current = cache.as_ref().and_then(|c| c.rows.get(key));
                    let (mut magnitude, mut relative) = (0.0f64, 0.0f64);
                    for (col, d) in delta.entries() {
                        let a = current.map_or(0.0, |r| r.values.get(col)).abs().max(1e-3);
                        magnitude += f64::from(d.abs());
                        relative += f64::from(d.abs() / a);
                    }
                    let bytes = 24 + delta.wire_bytes();
                    slots.push((tag, *slot));
                    cands.push(Candidate {
                        key: *key,
                        bytes,
                        magnitude,
                        relative,
                    });
                }
            }
            drop(cache);
            if cands.is_empty() {
                return Ok(());
            }
            let order = rank(&cands, self.comm.priority, self.cursor, &mut self.rng);
            let picked = select(&cands, &order, tokens, self.comm.queue_rows);
            let mut chosen = Vec::with_capacity(picked.len());
            for i in picked {
                let (tag, slot) = slots[i];
                if let Some(delta) = out.by_clock.get_mut(&tag).and_then(|m| m.remove(&slot)) {
                    chosen.push((tag, slot, delta));
                }
            }
            out.by_clock.retain(|_, m| !m.is_empty());
            chosen
        };
        for (tag, slot, delta) in chosen {
            let bytes = 24 + delta.wire_bytes();
            if let Some(b) = &mut self.bucket {
                b.spend(bytes);
            }
            self.cursor = Some(slot.0);
            self.send_inc(tag, slot, delta, true)?;
        }
        Ok(())
    }

    /// Releases every AdaRevision version this client holds that no cached
    /// copy, worker read (pin) or buffered update refers to. Updates of a
    /// version are always sent before its release, on the same link.
    fn release_unused(&self) -> Result<(), SspError> {
        let out = lock(&self.shared.outbox);
        let mut cache = lock(&self.shared.cache);
        if cache.held.is_empty() {
            return Ok(());
        }
        let buffered: HashSet<(RowKey, Version)> = out
            .by_clock
            .values()
            .flat_map(|m| m.keys().copied())
            .collect();
        let mut free = Vec::new();
        let cache = &mut *cache;
        for (key, versions) in cache.held.iter_mut() {
            let current = cache.rows.get(key).map(|r| r.version);
            versions.retain(|&v| {
                let used = Some(v) == current
                    || cache.pins.contains_key(&(*key, v))
                    || buffered.contains(&(*key, v));
                if !used {
                    free.push((*key, v));
                }
                used
            });
        }
        cache.held.retain(|_, v| !v.is_empty());
        drop(out);
        for (key, version) in free {
            let shard = self.shared.shard_of(key);
            self.shared.shards[shard].send(ToServer::Release {
                client: self.shared.id,
                key,
                version,
            })?;
        }
        Ok(())
    }

    fn clock_all(&self, clock: Clock) -> Result<(), SspError> {
        for link in &self.shared.shards {
            link.send(ToServer::ClientClock {
                client: self.shared.id,
                clock,
            })?;
        }
        Ok(())
    }

    fn bye_all(&self) -> Result<(), SspError> {
        for link in &self.shared.shards {
            link.send(ToServer::Bye {
                client: self.shared.id,
            })?;
        }
        Ok(())
    }
}

fn send_loop(shared: &ClientShared, cmds: Receiver<Cmd>, comm: CommConfig) -> Result<(), SspError> {
    let bucket = (comm.bandwidth > 0).then(|| LeakyBucket::new(comm.bandwidth, comm.bucket()));
    let mut s = Sender {
        shared,
        bucket,
        rng: StdRng::seed_from_u64(comm.seed),
        cursor: None,
        comm,
    };
    let tick = s.comm.tick;
    let result = loop {
        match cmds.recv_timeout(tick) {
            Ok(Cmd::Advance(c)) => {
                if let Err(e) = s
                    .flush(c)
                    .and_then(|()| s.clock_all(c))
                    .and_then(|()| s.release_unused())
                {
                    break Err(e);
                }
            }
            Ok(Cmd::Finish) | Err(RecvTimeoutError::Disconnected) => {
                break s.flush(Clock::MAX).and_then(|()| s.bye_all());
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Err(e) = s.send_early() {
                    break Err(e);
                }
            }
        }
    };
    if result.is_err() {
        let mut cache = lock(&shared.cache);
        cache
            .closed
            .get_or_insert_with(|| "the sender thread failed".into());
        drop(cache);
        shared.cache_cv.notify_all();
    }
    result
}
