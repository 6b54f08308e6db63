//! [`CudaBuffer`]: f32 elements in device memory, counted by the backend
//! that allocated them until dropped.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use crate::backend::accounting::Counter;

/// A buffer of f32 elements in device memory, counted by the backend that
/// allocated it until it is dropped.
pub struct CudaBuffer {
    pub(super) data: CudaSlice<f32>,
    pub(super) len: usize,
    pub(super) stream: Arc<CudaStream>,
    pub(super) counter: Arc<Counter>,
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBuffer")
            .field("len", &self.len)
            .finish()
    }
}

impl CudaBuffer {
    /// Number of f32 elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A host copy of the elements (waits for queued work on the buffer).
    ///
    /// Errors: the driver's, as text.
    pub fn to_host(&self) -> Result<Vec<f32>, String> {
        let mut v = vec![0.0f32; self.data.len()];
        if skip_sync_fault() {
            self.to_host_unordered(&mut v)?;
        } else {
            self.stream
                .memcpy_dtoh(&self.data, &mut v)
                .map_err(|e| e.to_string())?;
        }
        v.truncate(self.len);
        Ok(v)
    }

    /// The injected fault `TOFU_CUDA_FAULT=skip-sync` (the negative control
    /// of `tests/cpu_cuda.rs`): the copy runs on a second stream without
    /// waiting for an event of the buffer's stream, so it may read the
    /// buffer before the work queued on it has written it — a missing
    /// synchronisation, wrong on a GPU and under the CPU stand-in's delays.
    fn to_host_unordered(&self, v: &mut [f32]) -> Result<(), String> {
        let side = self
            .stream
            .context()
            .new_stream()
            .map_err(|e| e.to_string())?;
        // SAFETY: `v` holds the buffer's elements; the call returns once
        // the copy (to pageable memory) is done.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(v, self.ptr(), side.cu_stream()) }
            .map_err(|e| e.to_string())
    }

    /// Overwrite the elements from the host (`host.len() == self.len()`).
    ///
    /// Errors: a length mismatch or the driver's error, as text.
    pub fn copy_from_host(&mut self, host: &[f32]) -> Result<(), String> {
        if host.len() != self.len {
            return Err(format!(
                "copy of {} elements into a device buffer of {}",
                host.len(),
                self.len
            ));
        }
        if host.is_empty() {
            return Ok(());
        }
        self.stream
            .memcpy_htod(host, &mut self.data)
            .map_err(|e| e.to_string())
    }

    /// The raw device pointer (for kernel arguments).
    pub(crate) fn ptr(&self) -> u64 {
        let (p, _sync) = self.data.device_ptr(&self.stream);
        p
    }

    /// The raw device pointer, for writing.
    pub(crate) fn ptr_mut(&mut self) -> u64 {
        let (p, _sync) = self.data.device_ptr_mut(&self.stream);
        p
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        self.counter.give(self.len as u64 * 4);
    }
}

/// Whether `TOFU_CUDA_FAULT=skip-sync` is set (read once).
fn skip_sync_fault() -> bool {
    static FAULT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FAULT.get_or_init(|| std::env::var("TOFU_CUDA_FAULT").is_ok_and(|v| v == "skip-sync"))
}
