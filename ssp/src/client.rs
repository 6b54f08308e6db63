//! The client side (thesis §3.1.1): a process-wide row cache shared by the
//! worker threads, an update buffer that coalesces increments, and the
//! [`Worker`] handle through which one thread reads, increments and clocks.
//!
//! Takes table configurations and links to every server shard; gives
//! [`Worker`]s. Keeps true (the SSP guarantee): a worker at clock `c` gets a
//! row of a table with staleness `s` only when the cached copy holds every
//! update tagged `<= c - s - 1` (its stamp is `>= c - s`); otherwise the
//! read blocks until the server sends one. Cached stamps never go back.
//! Updates are buffered per clock tag, so the clock-end flush of tag `t`
//! never carries a later update (s = 0 with one client is exactly BSP).
//!
//! AdaRevision tables (thesis §3.2.3): a read returns the row's version as
//! well, and the worker's increments to that row until its next `clock()`
//! carry that version (buffered apart from other versions, never merged).
//! A version the client holds is released once no cached copy, worker read
//! or buffered update refers to it (see `comm`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use crate::error::SspError;
use crate::link::Outbound;
use crate::message::ToServer;
use crate::placement::Placement;
use crate::types::{ClientId, Clock, RowKey, RowValues, TableConfig, TableId, Version};

/// A cached row and the stamp it came with.
#[derive(Clone, Debug)]
pub(crate) struct CachedRow {
    pub(crate) values: RowValues,
    pub(crate) stamp: Clock,
    pub(crate) version: Version,
}

/// The process-wide row cache.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    pub(crate) rows: HashMap<RowKey, CachedRow>,
    /// Latest `ServerClock` per shard: every cached row of that shard is
    /// fresh to it (the shard pushed changed rows first).
    pub(crate) shard_clock: Vec<Clock>,
    /// Reads in flight: row → least stamp asked for.
    pub(crate) requested: HashMap<RowKey, Clock>,
    /// Why the cache stopped being served, once it has.
    pub(crate) closed: Option<String>,
    /// AdaRevision rows: versions received from the shard and not yet
    /// released.
    pub(crate) held: HashMap<RowKey, BTreeSet<Version>>,
    /// AdaRevision rows: (row, version) → workers that read it this clock.
    pub(crate) pins: HashMap<(RowKey, Version), u32>,
}

/// The increments of one clock tag, coalesced per (row, version).
pub(crate) type TagUpdates = HashMap<(RowKey, Version), RowValues>;

/// Buffered increments, coalesced per (clock tag, row, version).
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    pub(crate) by_clock: BTreeMap<Clock, TagUpdates>,
}

/// Commands from the workers to the communication thread.
#[derive(Debug)]
pub(crate) enum Cmd {
    /// The client clock (least worker clock) reached this value.
    Advance(Clock),
    /// Every worker has finished.
    Finish,
}

/// Counters of a client, readable while it runs.
#[derive(Debug, Default)]
pub struct ClientStats {
    /// Bytes of increments sent to the servers (as budgeted, see
    /// [`ToServer::wire_bytes`]).
    pub bytes_sent: AtomicU64,
    /// Increment messages sent.
    pub incs_sent: AtomicU64,
    /// Increment messages sent before their clock ended (managed
    /// communication).
    pub early_sent: AtomicU64,
    /// Reads that had to ask a server.
    pub reads_sent: AtomicU64,
    /// `(time, bytes)` of every increment sent, when recording is on.
    pub send_log: Mutex<Vec<(Instant, u64)>>,
}

pub(crate) struct ClientShared {
    pub(crate) id: ClientId,
    pub(crate) tables: HashMap<TableId, TableConfig>,
    pub(crate) shards: Vec<Arc<dyn Outbound<ToServer>>>,
    pub(crate) cache: Mutex<Cache>,
    pub(crate) cache_cv: Condvar,
    pub(crate) outbox: Mutex<Outbox>,
    pub(crate) worker_clocks: Mutex<Vec<Clock>>,
    pub(crate) cmd: Sender<Cmd>,
    pub(crate) stats: ClientStats,
    /// Where rows live: a placement, or the fixed hash when `None`.
    pub(crate) placement: Option<Arc<Placement>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A worker thread that panicked leaves the data consistent (every
    // critical section is a few map operations), so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ClientShared {
    pub(crate) fn table(&self, id: TableId) -> Result<&TableConfig, SspError> {
        self.tables.get(&id).ok_or(SspError::UnknownTable(id))
    }

    /// The index of the shard (and link) that holds `key`: the placement's
    /// choice, or the fixed hash ([`RowKey::shard`]) without one.
    pub(crate) fn shard_of(&self, key: RowKey) -> usize {
        match &self.placement {
            Some(p) => p.shard_of(key).0 as usize,
            None => key.shard(self.shards.len()).0 as usize,
        }
    }
}

/// One worker thread's handle: reads, increments and clocks under SSP.
/// Dropping it tells the client this worker is done.
pub struct Worker {
    pub(crate) shared: Arc<ClientShared>,
    pub(crate) index: usize,
    pub(crate) clock: Clock,
    /// AdaRevision rows read this clock: row → versions (last = newest).
    pub(crate) reads: Mutex<HashMap<RowKey, Vec<Version>>>,
}

impl Worker {
    /// This worker's clock (the number of `clock()` calls so far).
    pub fn clock_value(&self) -> Clock {
        self.clock
    }

    /// The client this worker belongs to.
    pub fn client(&self) -> ClientId {
        self.shared.id
    }

    /// A row and its stamp (the row holds every update tagged `< stamp`,
    /// and `stamp >= clock - s`). Blocks until such a copy is cached.
    ///
    /// # Errors
    /// [`SspError::UnknownTable`]; [`SspError::Disconnected`] when the
    /// servers went away while waiting.
    pub fn get_row_stamped(&self, key: RowKey) -> Result<(RowValues, Clock), SspError> {
        let (values, stamp, _) = self.get_row_versioned(key)?;
        Ok((values, stamp))
    }

    /// A row, its stamp and its version (see [`Worker::get_row_stamped`]).
    /// For an AdaRevision table, this worker's increments to the row until
    /// its next `clock()` are tagged with the newest version it read.
    ///
    /// # Errors
    /// As [`Worker::get_row_stamped`].
    pub fn get_row_versioned(&self, key: RowKey) -> Result<(RowValues, Clock, Version), SspError> {
        let table = *self.shared.table(key.table)?;
        let need = table.min_stamp(self.clock);
        let shard = self.shared.shard_of(key);
        let mut cache = lock(&self.shared.cache);
        loop {
            let fresh = cache.shard_clock[shard];
            if let Some(row) = cache.rows.get(&key) {
                let stamp = row.stamp.max(fresh);
                if stamp >= need {
                    let (values, version) = (row.values.clone(), row.version);
                    if table.is_adarevision() {
                        let mut reads = lock(&self.reads);
                        let mine = reads.entry(key).or_default();
                        if !mine.contains(&version) {
                            *cache.pins.entry((key, version)).or_insert(0) += 1;
                        }
                        mine.retain(|&v| v != version);
                        mine.push(version);
                    }
                    return Ok((values, stamp, version));
                }
            }
            if let Some(why) = &cache.closed {
                return Err(SspError::Disconnected {
                    peer: format!("shard {shard}"),
                    why: why.clone(),
                });
            }
            if !matches!(cache.requested.get(&key), Some(&asked) if asked >= need) {
                cache.requested.insert(key, need);
                self.shared.stats.reads_sent.fetch_add(1, Ordering::Relaxed);
                self.shared.shards[shard].send(ToServer::Read {
                    client: self.shared.id,
                    key,
                    min_stamp: need,
                })?;
            }
            cache = self
                .shared
                .cache_cv
                .wait_timeout(cache, Duration::from_millis(200))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A row's values under the SSP guarantee (see [`Worker::get_row_stamped`]).
    ///
    /// # Errors
    /// As [`Worker::get_row_stamped`].
    pub fn get_row(&self, key: RowKey) -> Result<RowValues, SspError> {
        Ok(self.get_row_stamped(key)?.0)
    }

    /// One value of a row under the SSP guarantee.
    ///
    /// # Errors
    /// As [`Worker::get_row_stamped`].
    pub fn get(&self, key: RowKey, col: u32) -> Result<f32, SspError> {
        Ok(self.get_row(key)?.get(col))
    }

    /// Adds `delta` to column `col` of a row (buffered, tagged with this
    /// worker's clock, coalesced with other increments of the same tag).
    ///
    /// # Errors
    /// [`SspError::UnknownTable`], [`SspError::Column`].
    pub fn inc(&self, key: RowKey, col: u32, delta: f32) -> Result<(), SspError> {
        self.batch_inc(&[(key, col, delta)])
    }

    /// Adds a whole row of increments (dense or sparse) to a row.
    ///
    /// # Errors
    /// [`SspError::UnknownTable`], [`SspError::Column`].
    /// For an AdaRevision table `delta` is a gradient, tagged with the
    /// version this worker last read of the row this clock.
    ///
    /// # Errors
    /// [`SspError::UnknownTable`], [`SspError::Column`];
    /// [`SspError::Config`] for an AdaRevision row not read this clock.
    pub fn inc_row(&self, key: RowKey, delta: &RowValues) -> Result<(), SspError> {
        let table = *self.shared.table(key.table)?;
        let version = self.version_read(&table, key)?;
        let mut out = lock(&self.shared.outbox);
        let slot = out
            .by_clock
            .entry(self.clock)
            .or_default()
            .entry((key, version))
            .or_insert_with(|| RowValues::zeros(&table));
        slot.add(&table, delta)
    }

    /// The version increments to `key` carry: 0, or for an AdaRevision
    /// table the newest version read this clock.
    fn version_read(&self, table: &TableConfig, key: RowKey) -> Result<Version, SspError> {
        if !table.is_adarevision() {
            return Ok(0);
        }
        lock(&self.reads)
            .get(&key)
            .and_then(|v| v.last().copied())
            .ok_or_else(|| {
                SspError::Config(format!(
                    "AdaRevision increment to row {:?} of table {:?} that this worker has not read this clock (read it first: the update needs the version it was computed from)",
                    key.row, key.table
                ))
            })
    }

    /// Adds many `(row, column, delta)` increments at once.
    ///
    /// # Errors
    /// [`SspError::UnknownTable`], [`SspError::Column`] (increments before
    /// the bad one are kept).
    pub fn batch_inc(&self, incs: &[(RowKey, u32, f32)]) -> Result<(), SspError> {
        let versions = incs
            .iter()
            .map(|&(key, _, _)| self.version_read(self.shared.table(key.table)?, key))
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = lock(&self.shared.outbox);
        let tag = out.by_clock.entry(self.clock).or_default();
        for (&(key, col, delta), version) in incs.iter().zip(versions) {
            let table = self.shared.table(key.table)?;
            tag.entry((key, version))
                .or_insert_with(|| RowValues::zeros(table))
                .add_at(table, col, delta)?;
        }
        Ok(())
    }

    /// Ends this worker's clock. When it was the slowest worker of the
    /// client, the communication thread flushes every update of the ended
    /// clock and then sends the client clock to every shard.
    ///
    /// # Errors
    /// [`SspError::Disconnected`] when the communication thread is gone.
    pub fn clock(&mut self) -> Result<(), SspError> {
        self.unpin();
        self.clock += 1;
        self.set_clock(self.clock)
    }

    /// Forgets this clock's AdaRevision reads (their versions may be
    /// released once nothing else refers to them).
    fn unpin(&self) {
        let reads = std::mem::take(&mut *lock(&self.reads));
        if reads.is_empty() {
            return;
        }
        let mut cache = lock(&self.shared.cache);
        for (key, versions) in reads {
            for v in versions {
                if let Some(n) = cache.pins.get_mut(&(key, v)) {
                    *n -= 1;
                    if *n == 0 {
                        cache.pins.remove(&(key, v));
                    }
                }
            }
        }
    }

    fn set_clock(&self, value: Clock) -> Result<(), SspError> {
        let mut clocks = lock(&self.shared.worker_clocks);
        let old = clocks.iter().copied().min().unwrap_or(Clock::MAX);
        clocks[self.index] = value;
        let new = clocks.iter().copied().min().unwrap_or(Clock::MAX);
        let cmd = if new == Clock::MAX {
            Some(Cmd::Finish)
        } else if new > old {
            Some(Cmd::Advance(new))
        } else {
            None
        };
        if let Some(cmd) = cmd {
            self.shared
                .cmd
                .send(cmd)
                .map_err(|_| SspError::Disconnected {
                    peer: format!("client {} communication thread", self.shared.id.0),
                    why: "it has stopped".into(),
                })?;
        }
        Ok(())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.unpin();
        let _ = self.set_clock(Clock::MAX);
    }
}
