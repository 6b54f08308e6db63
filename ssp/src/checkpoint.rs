//! Consistent checkpoints of a shard (thesis §3.1, p. 28): the state
//! strictly after clock t — every update tagged `<= t`, none after — taken
//! while the workers go on.
//!
//! Takes the shard's increments as they arrive (tagged with their clock)
//! and its clock advances; gives a [`ShardCheckpoint`] for every scheduled
//! clock t (`(t + 1) % every == 0`) once the shard holds every update
//! `<= t`. Copy-on-write: a row is copied only when the first update tagged
//! `> t` reaches it before the checkpoint is complete; later updates tagged
//! `<= t` go to both copies. So a checkpoint equals replaying exactly the
//! updates `<= t`, although the live rows may already hold newer ones.
//! Files: `shard-<id>-clock-<t>.ckpt` (postcard), written to a temporary
//! name, synced and renamed (and the directory synced), so a file that
//! exists is whole, also after a crash.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::SspError;
use crate::types::{Clock, RowKey, RowValues, ShardId, TableConfig};

/// A shard's state strictly after clock `clock`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardCheckpoint {
    /// The shard.
    pub shard: ShardId,
    /// Every update tagged `<= clock` is in `rows`, none tagged later.
    pub clock: Clock,
    /// Every row the shard held, in key order.
    pub rows: Vec<(RowKey, RowValues)>,
}

impl ShardCheckpoint {
    /// The file name of shard `shard`'s checkpoint at `clock`.
    pub fn file_name(shard: ShardId, clock: Clock) -> String {
        format!("shard-{}-clock-{clock}.ckpt", shard.0)
    }

    /// Writes this checkpoint into `dir`, whole or not at all
    /// (`durable::write_atomic`: a temporary file in `dir`, synced, renamed
    /// into place, and `dir` synced).
    ///
    /// # Errors
    /// [`SspError::Io`] naming the file.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, SspError> {
        let path = dir.join(Self::file_name(self.shard, self.clock));
        let bytes = postcard::to_stdvec(self).map_err(|e| SspError::Codec {
            peer: path.display().to_string(),
            why: e.to_string(),
        })?;
        durable::write_atomic(&path, &bytes).map_err(|e| SspError::Io {
            what: format!("writing {}", path.display()),
            source: e,
        })?;
        Ok(path)
    }

    /// Reads shard `shard`'s checkpoint at `clock` from `dir`.
    ///
    /// # Errors
    /// [`SspError::Io`] when the file is missing, [`SspError::Codec`] when
    /// it does not decode.
    pub fn read(dir: &Path, shard: ShardId, clock: Clock) -> Result<ShardCheckpoint, SspError> {
        let path = dir.join(Self::file_name(shard, clock));
        let bytes = std::fs::read(&path).map_err(|e| SspError::Io {
            what: format!("reading {}", path.display()),
            source: e,
        })?;
        postcard::from_bytes(&bytes).map_err(|e| SspError::Codec {
            peer: path.display().to_string(),
            why: e.to_string(),
        })
    }

    /// The latest clock at which every shard in `shards` has a checkpoint
    /// file in `dir` (the clock to restart from), if any.
    pub fn latest_common(dir: &Path, shards: &[ShardId]) -> Option<Clock> {
        let mut per_shard: HashMap<u32, Vec<Clock>> = HashMap::new();
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            let Some(rest) = name
                .strip_prefix("shard-")
                .and_then(|r| r.strip_suffix(".ckpt"))
            else {
                continue;
            };
            let Some((s, c)) = rest.split_once("-clock-") else {
                continue;
            };
            if let (Ok(s), Ok(c)) = (s.parse::<u32>(), c.parse::<Clock>()) {
                per_shard.entry(s).or_default().push(c);
            }
        }
        let first = per_shard.get(&shards.first()?.0)?;
        first
            .iter()
            .copied()
            .filter(|c| {
                shards
                    .iter()
                    .all(|s| per_shard.get(&s.0).is_some_and(|v| v.contains(c)))
            })
            .max()
    }
}

/// The copy-on-write bookkeeping of a shard's pending checkpoints.
#[derive(Clone, Debug, Default)]
pub(crate) struct Checkpointer {
    /// Checkpoint after every `every` clocks; 0 = never.
    pub(crate) every: u32,
    /// Incomplete checkpoint clock → rows frozen at their value before the
    /// first update tagged later than it.
    pending: BTreeMap<Clock, HashMap<RowKey, RowValues>>,
    /// Completed checkpoints not yet taken by the shard loop.
    pub(crate) completed: Vec<ShardCheckpoint>,
}

impl Checkpointer {
    fn scheduled(&self, from: Clock, below: Clock) -> Vec<Clock> {
        if self.every == 0 {
            return Vec::new();
        }
        let e = self.every;
        // First t >= from with (t + 1) % e == 0.
        let first = from + (e - (from + 1) % e) % e;
        (first..below).step_by(e as usize).collect()
    }

    /// Before applying an increment tagged `tag` to `key` (whose value now
    /// is `live`, or absent) while the shard clock is `clock`.
    pub(crate) fn before_inc(
        &mut self,
        clock: Clock,
        tag: Clock,
        key: RowKey,
        live: Option<&RowValues>,
        table: &TableConfig,
    ) {
        for t in self.scheduled(clock, tag) {
            self.pending
                .entry(t)
                .or_default()
                .entry(key)
                .or_insert_with(|| live.cloned().unwrap_or_else(|| RowValues::zeros(table)));
        }
    }

    /// After applying `delta` (tagged `tag`) to the live row: frozen copies
    /// of checkpoints `>= tag` get it too.
    pub(crate) fn after_inc(
        &mut self,
        tag: Clock,
        key: RowKey,
        delta: &RowValues,
        table: &TableConfig,
    ) -> Result<(), SspError> {
        for (_, frozen) in self.pending.range_mut(tag..) {
            if let Some(row) = frozen.get_mut(&key) {
                row.add(table, delta)?;
            }
        }
        Ok(())
    }

    /// The shard clock went from `old` to `new`: every scheduled checkpoint
    /// in `[old, new)` is complete; `live` gives the live rows.
    pub(crate) fn advance<'a>(
        &mut self,
        shard: ShardId,
        old: Clock,
        new: Clock,
        live: impl Fn() -> Vec<(RowKey, &'a RowValues)>,
    ) {
        if new == Clock::MAX {
            self.pending.clear();
            return;
        }
        for t in self.scheduled(old, new) {
            // A frozen row is always live too: it was frozen just before an
            // increment created or changed it.
            let frozen = self.pending.remove(&t).unwrap_or_default();
            let mut rows: Vec<(RowKey, RowValues)> = live()
                .into_iter()
                .map(|(k, v)| (k, frozen.get(&k).cloned().unwrap_or_else(|| v.clone())))
                .collect();
            rows.sort_by_key(|(k, _)| *k);
            self.completed.push(ShardCheckpoint {
                shard,
                clock: t,
                rows,
            });
        }
    }
}
