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
        self.stream
            .memcpy_dtoh(&self.data, &mut v)
            .map_err(|e| e.to_string())?;
        v.truncate(self.len);
        Ok(v)
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
