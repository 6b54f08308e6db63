//! Per-rank memory accounting shared by the backends: bytes in use, the
//! peak, live buffers and an optional capacity (see [`super::MemoryStats`]).

use std::sync::atomic::{AtomicU64, Ordering};

use super::{BackendError, MemoryStats};

/// Byte counters of one rank.
#[derive(Debug, Default)]
pub(crate) struct Counter {
    in_use: AtomicU64,
    peak: AtomicU64,
    buffers: AtomicU64,
    capacity: Option<u64>,
}

impl Counter {
    /// Counters with an allocation limit (bytes), if any.
    pub(crate) fn with_capacity(capacity: Option<u64>) -> Self {
        Counter {
            capacity,
            ..Default::default()
        }
    }

    /// Count `bytes` more in use.
    ///
    /// Errors: [`BackendError::OutOfMemory`] past the capacity (nothing counted).
    pub(crate) fn take(&self, bytes: u64) -> Result<(), BackendError> {
        let before = self.in_use.fetch_add(bytes, Ordering::SeqCst);
        if let Some(cap) = self.capacity {
            if before + bytes > cap {
                self.in_use.fetch_sub(bytes, Ordering::SeqCst);
                return Err(BackendError::OutOfMemory {
                    requested: bytes,
                    in_use: before,
                    capacity: cap,
                });
            }
        }
        self.peak.fetch_max(before + bytes, Ordering::SeqCst);
        self.buffers.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Count `bytes` fewer in use.
    pub(crate) fn give(&self, bytes: u64) {
        self.in_use.fetch_sub(bytes, Ordering::SeqCst);
        self.buffers.fetch_sub(1, Ordering::SeqCst);
    }

    /// The counters now.
    pub(crate) fn stats(&self) -> MemoryStats {
        MemoryStats {
            in_use: self.in_use.load(Ordering::SeqCst),
            peak: self.peak.load(Ordering::SeqCst),
            buffers: self.buffers.load(Ordering::SeqCst),
            capacity: self.capacity,
        }
    }

    /// Start a new peak from the bytes in use now.
    pub(crate) fn reset_peak(&self) {
        let now = self.in_use.load(Ordering::SeqCst);
        self.peak.store(now, Ordering::SeqCst);
    }
}
