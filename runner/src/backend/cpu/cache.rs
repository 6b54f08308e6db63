//! A per-rank cache of freed host buffers, reused by later allocations of
//! the same length (what PyTorch's caching allocator does for the same
//! reason): a training step frees and allocates the same sizes every step,
//! and fresh pages cost a page fault each on first touch.
//!
//! Takes freed `Vec<f32>`s; gives one of the asked length back, or `None`.
//! Keeps true: the cached bytes never exceed the peak bytes the rank has had
//! in use (a buffer that would exceed it is dropped), so the rank's memory
//! stays within twice its accounted peak. Cached buffers are not counted as
//! in use.

use std::collections::HashMap;
use std::sync::Mutex;

/// Freed buffers by length (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct BufferCache {
    inner: Mutex<Cached>,
}

#[derive(Debug, Default)]
struct Cached {
    by_len: HashMap<usize, Vec<Vec<f32>>>,
    bytes: u64,
}

impl BufferCache {
    /// A cached buffer of exactly `elems` elements (its contents are stale).
    pub(crate) fn take(&self, elems: usize) -> Option<Vec<f32>> {
        if elems == 0 {
            return None;
        }
        let mut c = self.inner.lock().ok()?;
        let v = c.by_len.get_mut(&elems)?.pop()?;
        c.bytes -= elems as u64 * 4;
        Some(v)
    }

    /// Keep `data` for reuse unless the cache would then hold more than
    /// `limit` bytes.
    pub(crate) fn put(&self, data: Vec<f32>, limit: u64) {
        let bytes = data.len() as u64 * 4;
        if bytes == 0 {
            return;
        }
        if let Ok(mut c) = self.inner.lock() {
            if c.bytes + bytes <= limit {
                c.bytes += bytes;
                c.by_len.entry(data.len()).or_default().push(data);
            }
        }
    }
}
