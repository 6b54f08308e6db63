//! The CPU backend: host memory with per-rank accounting, kernels from
//! [`crate::kernels`].
//!
//! Takes allocation requests and op instances of one rank; gives
//! [`CpuBuffer`]s (plain `Vec<f32>` storage that the communicator can use
//! directly as slices) and [`OpKernel`]s from the [`Registry`] (library
//! kernels, else the compiled evaluator). Each `CpuBackend` is one rank's
//! memory: its counters are shared by its buffers, which give their bytes
//! back when freed or dropped. Kernels may use the rayon pool shared by all
//! ranks of the process.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tdl::{Attrs, OpSpec};

use super::{Backend, BackendError, MemoryStats};
use crate::kernels::{OpKernel, Registry};

/// Byte counters of one rank.
#[derive(Debug, Default)]
struct Counter {
    in_use: AtomicU64,
    peak: AtomicU64,
    buffers: AtomicU64,
    capacity: Option<u64>,
}

impl Counter {
    fn take(&self, bytes: u64) -> Result<(), BackendError> {
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

    fn give(&self, bytes: u64) {
        self.in_use.fetch_sub(bytes, Ordering::SeqCst);
        self.buffers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A buffer of f32 elements in host memory, counted by the backend that
/// allocated it until it is dropped.
#[derive(Debug)]
pub struct CpuBuffer {
    data: Vec<f32>,
    counter: Arc<Counter>,
}

impl CpuBuffer {
    /// The elements.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    /// The elements, mutable (e.g. for a collective).
    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.data
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Size in bytes.
    pub fn bytes(&self) -> u64 {
        self.data.len() as u64 * 4
    }
}

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        self.counter.give(self.bytes());
    }
}

/// One rank's CPU backend (see the module doc).
#[derive(Clone)]
pub struct CpuBackend {
    registry: Registry,
    counter: Arc<Counter>,
}

impl Default for CpuBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("memory", &self.memory())
            .finish_non_exhaustive()
    }
}

impl CpuBackend {
    /// A backend with the default kernel registry and no memory limit.
    pub fn new() -> Self {
        Self::with_registry(Registry::default())
    }

    /// A backend with a given kernel registry (e.g. [`Registry::empty`] to
    /// run everything through the compiled evaluator).
    pub fn with_registry(registry: Registry) -> Self {
        CpuBackend {
            registry,
            counter: Arc::new(Counter::default()),
        }
    }

    /// A backend that refuses allocations past `bytes` in use (to emulate a
    /// device's memory).
    pub fn with_capacity(bytes: u64) -> Self {
        CpuBackend {
            registry: Registry::default(),
            counter: Arc::new(Counter {
                capacity: Some(bytes),
                ..Default::default()
            }),
        }
    }

    /// The kernel registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    fn buffer(&self, data: Vec<f32>) -> Result<CpuBuffer, BackendError> {
        self.counter.take(data.len() as u64 * 4)?;
        Ok(CpuBuffer {
            data,
            counter: self.counter.clone(),
        })
    }
}

impl Backend for CpuBackend {
    type Buffer = CpuBuffer;
    type Kernel = OpKernel;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn alloc(&self, elems: usize) -> Result<CpuBuffer, BackendError> {
        // Check the capacity before touching the memory.
        self.counter.take(elems as u64 * 4)?;
        self.counter.give(elems as u64 * 4);
        self.buffer(vec![0.0; elems])
    }

    fn upload(&self, host: &[f32]) -> Result<CpuBuffer, BackendError> {
        self.counter.take(host.len() as u64 * 4)?;
        self.counter.give(host.len() as u64 * 4);
        self.buffer(host.to_vec())
    }

    fn download(&self, buf: &CpuBuffer, host: &mut [f32]) -> Result<(), BackendError> {
        if buf.len() != host.len() {
            return Err(BackendError::CopyLength {
                expected: buf.len(),
                got: host.len(),
            });
        }
        host.copy_from_slice(&buf.data);
        Ok(())
    }

    fn free(&self, buf: CpuBuffer) {
        drop(buf);
    }

    fn buffer_len(&self, buf: &CpuBuffer) -> usize {
        buf.len()
    }

    fn memory(&self) -> MemoryStats {
        MemoryStats {
            in_use: self.counter.in_use.load(Ordering::SeqCst),
            peak: self.counter.peak.load(Ordering::SeqCst),
            buffers: self.counter.buffers.load(Ordering::SeqCst),
            capacity: self.counter.capacity,
        }
    }

    fn reset_peak(&self) {
        let now = self.counter.in_use.load(Ordering::SeqCst);
        self.counter.peak.store(now, Ordering::SeqCst);
    }

    fn prepare(
        &self,
        spec: &OpSpec,
        input_shapes: &[Vec<usize>],
        attrs: &Attrs,
    ) -> Result<OpKernel, BackendError> {
        Ok(self.registry.prepare(spec, input_shapes, attrs)?)
    }

    fn prepare_window(
        &self,
        spec: &OpSpec,
        input_shapes: &[Vec<usize>],
        attrs: &Attrs,
        window: &crate::kernels::compiled::Window,
    ) -> Result<OpKernel, BackendError> {
        Ok(self
            .registry
            .prepare_window(spec, input_shapes, attrs, window)?)
    }

    fn launch(
        &self,
        kernel: &OpKernel,
        inputs: &[&CpuBuffer],
        outputs: &mut [&mut CpuBuffer],
    ) -> Result<(), BackendError> {
        let ins: Vec<&[f32]> = inputs.iter().map(|b| b.as_slice()).collect();
        let mut outs: Vec<&mut [f32]> = outputs.iter_mut().map(|b| b.as_mut_slice()).collect();
        Ok(kernel.run(&ins, &mut outs)?)
    }
}
