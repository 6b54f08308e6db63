//! What `tofu ssp server --json` prints when its shards are done: the
//! increments applied, the clock it restored from, the rows held per shard
//! and table and, for the tagged counter, the final rows.
//!
//! Takes a [`Served`]; gives a `Serialize` value whose fields are in sorted
//! order (printed through `serde_json::Value`, which sorts the keys of
//! every level, the maps' numeric keys as strings).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::process_run::Served;
use crate::types::Clock;

/// A server process's shards at the end of a run.
#[derive(Clone, Debug, Serialize)]
pub struct ServedSummary<'a> {
    /// Increments applied, all shards together.
    pub applied: u64,
    /// The clock it restored from, if it did.
    pub restored_from: Option<Clock>,
    /// The counter's final rows by row id (`None`: not shown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<&'a BTreeMap<u64, Vec<f32>>>,
    /// Per shard: rows held per table id.
    pub shards: Vec<ShardRows<'a>>,
}

/// The rows one shard holds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ShardRows<'a> {
    /// Rows held per table id.
    pub rows_per_table: &'a BTreeMap<u32, u64>,
    /// The shard.
    pub shard: u32,
}

impl<'a> ServedSummary<'a> {
    /// The summary of `served`, with the final rows when `rows` (the
    /// counter's).
    pub fn new(served: &'a Served, rows: bool) -> Self {
        let summary = &served.summary;
        ServedSummary {
            applied: summary.applied,
            restored_from: served.restored_from,
            rows: rows.then_some(&summary.rows),
            shards: summary
                .rows_per_table
                .iter()
                .map(|(id, per_table)| ShardRows {
                    rows_per_table: per_table,
                    shard: id.0,
                })
                .collect(),
        }
    }
}
