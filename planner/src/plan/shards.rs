//! A map from word lists to values shared by the threads of one planning
//! call, split into shards by the key's hash so that threads looking up
//! different keys rarely wait for one lock.
//!
//! Takes keys (`Vec<u32>`) and a function computing a key's value; gives the
//! value, computed once per key (twice at most when two threads miss the
//! same key together: both compute the same value). Used by
//! [`super::cost::CostMemo`], looked up millions of times per plan at
//! cluster scale (issue 44).

use std::hash::BuildHasher;
use std::sync::Mutex;

use rustc_hash::{FxBuildHasher, FxHashMap as HashMap};

/// Shards per map (a power of two).
const SHARDS: usize = 16;

/// Values by key, in [`SHARDS`] locked shards (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct Shards<V>([Mutex<HashMap<Vec<u32>, V>>; SHARDS]);

impl<V: Copy> Shards<V> {
    /// `self[key]`, or `f()` stored there (computed outside the lock; a
    /// poisoned lock only skips the cache).
    pub(crate) fn get_or(&self, key: Vec<u32>, f: impl FnOnce() -> V) -> V {
        let shard = &self.0[FxBuildHasher.hash_one(&key) as usize % SHARDS];
        if let Some(v) = shard.lock().ok().and_then(|m| m.get(&key).copied()) {
            return v;
        }
        let v = f();
        if let Ok(mut m) = shard.lock() {
            m.insert(key, v);
        }
        v
    }
}
