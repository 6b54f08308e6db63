//! Placement of tables over server shards (seed 004, the modular
//! parameter server's placement policies).
//!
//! Takes each table's size (rows × columns, in elements) and the number of
//! shards; gives a [`Placement`]: for every table, the shards its rows
//! live on, and [`Placement::shard_of`] for one row. Policies:
//! * [`Policy::GreedyLargestFirst`]: whole tables, largest first, each to
//!   the least-loaded shard so far (ties: lowest shard) — Graham's LPT rule,
//!   within 4/3 of the best makespan;
//! * [`Policy::UniformSplit`]: every table cut into `shards` contiguous row
//!   ranges whose lengths differ by at most one row;
//! * [`Policy::RoundRobin`]: whole tables, table i (in the order given) to
//!   shard `i mod shards`.
//!
//! Keeps true: every row of every table has exactly one shard, `< shards`.

use std::collections::BTreeMap;

use crate::error::SspError;
use crate::types::{RowKey, ShardId, TableId};

/// How tables are spread over shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Whole tables, largest first, to the least-loaded shard.
    GreedyLargestFirst,
    /// Every table split evenly over every shard.
    UniformSplit,
    /// Whole tables in turn.
    RoundRobin,
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        match s {
            "greedy" => Ok(Policy::GreedyLargestFirst),
            "uniform" => Ok(Policy::UniformSplit),
            "round-robin" => Ok(Policy::RoundRobin),
            _ => Err(format!(
                "unknown placement `{s}`: use greedy, uniform or round-robin"
            )),
        }
    }
}

/// A table to place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableSize {
    /// The table.
    pub table: TableId,
    /// Its rows.
    pub rows: u64,
    /// Columns per row.
    pub cols: u64,
}

/// Where each table's rows live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    shards: usize,
    /// Table → `(first row, shard)` ranges in row order: rows from a
    /// range's first row up to the next range's first row go to its shard.
    ranges: BTreeMap<TableId, Vec<(u64, ShardId)>>,
}

impl Placement {
    /// Places `tables` over `shards` shards by `policy`.
    ///
    /// # Errors
    /// [`SspError::Config`] for zero shards or a table listed twice.
    pub fn new(tables: &[TableSize], shards: usize, policy: Policy) -> Result<Placement, SspError> {
        if shards == 0 {
            return Err(SspError::Config("placement over zero shards".into()));
        }
        let mut ranges = BTreeMap::new();
        let mut put = |t: TableId, r: Vec<(u64, ShardId)>| {
            if ranges.insert(t, r).is_some() {
                Err(SspError::Config(format!("table {t:?} listed twice")))
            } else {
                Ok(())
            }
        };
        match policy {
            Policy::RoundRobin => {
                for (i, t) in tables.iter().enumerate() {
                    put(t.table, vec![(0, ShardId((i % shards) as u32))])?;
                }
            }
            Policy::UniformSplit => {
                for t in tables {
                    let n = shards as u64;
                    let (q, r) = (t.rows / n, t.rows % n);
                    // Shard s gets q rows, plus one for the first r shards.
                    let mut start = 0;
                    let mut v = Vec::new();
                    for s in 0..n {
                        let len = q + u64::from(s < r);
                        if len > 0 {
                            v.push((start, ShardId(s as u32)));
                        }
                        start += len;
                    }
                    if v.is_empty() {
                        v.push((0, ShardId(0)));
                    }
                    put(t.table, v)?;
                }
            }
            Policy::GreedyLargestFirst => {
                let mut order: Vec<&TableSize> = tables.iter().collect();
                order.sort_by(|a, b| {
                    (b.rows * b.cols)
                        .cmp(&(a.rows * a.cols))
                        .then(a.table.cmp(&b.table))
                });
                let mut load = vec![0u64; shards];
                for t in order {
                    let s = (0..shards).min_by_key(|&s| (load[s], s)).unwrap_or(0);
                    load[s] += t.rows * t.cols;
                    put(t.table, vec![(0, ShardId(s as u32))])?;
                }
            }
        }
        Ok(Placement { shards, ranges })
    }

    /// The number of shards placed over.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// The shard that holds `key`; a table not placed falls back to the
    /// hash partition ([`RowKey::shard`]).
    pub fn shard_of(&self, key: RowKey) -> ShardId {
        match self.ranges.get(&key.table) {
            Some(r) => {
                let i = r.partition_point(|&(first, _)| first <= key.row.0);
                r[i.saturating_sub(1)].1
            }
            None => key.shard(self.shards),
        }
    }

    /// Elements each shard holds.
    pub fn load(&self, tables: &[TableSize]) -> Vec<u64> {
        let mut load = vec![0u64; self.shards];
        for t in tables {
            if let Some(r) = self.ranges.get(&t.table) {
                for (i, &(first, s)) in r.iter().enumerate() {
                    let end = r.get(i + 1).map_or(t.rows, |&(next, _)| next);
                    load[s.0 as usize] += (end - first) * t.cols;
                }
            }
        }
        load
    }
}
