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

use std::sync::Arc;

use comm::{HostMemory, ReduceOp};
use tdl::{Attrs, OpSpec};

use super::accounting::Counter;
use super::{Backend, BackendError, Bounds, MemoryStats, Window};
mod cache;
pub mod kernels;

use cache::BufferCache;

use kernels::{OpKernel, Registry};

/// A buffer of f32 elements in host memory, counted by the backend that
/// allocated it until it is dropped.
#[derive(Debug)]
pub struct CpuBuffer {
    data: Vec<f32>,
    counter: Arc<Counter>,
    /// Whether `counter` still counts it (until dropped or freed).
    counted: bool,
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

impl HostMemory for CpuBuffer {
    fn host(&self) -> &[f32] {
        &self.data
    }
    fn host_mut(&mut self) -> &mut [f32] {
        &mut self.data
    }
}

impl CpuBuffer {
    /// The elements, no longer counted as in use.
    fn into_data(mut self) -> Vec<f32> {
        self.counter.give(self.bytes());
        self.counted = false;
        std::mem::take(&mut self.data)
    }
}

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        if self.counted {
            self.counter.give(self.bytes());
        }
    }
}

/// One rank's CPU backend (see the module doc).
#[derive(Clone)]
pub struct CpuBackend {
    registry: Registry,
    counter: Arc<Counter>,
    /// Counts work buffers apart from the accounted memory.
    workspace: Arc<Counter>,
    /// Freed buffers kept for reuse.
    cache: Arc<BufferCache>,
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
            workspace: Arc::new(Counter::default()),
            cache: Arc::default(),
        }
    }

    /// A backend that refuses allocations past `bytes` in use (to emulate a
    /// device's memory).
    pub fn with_capacity(bytes: u64) -> Self {
        CpuBackend {
            registry: Registry::default(),
            counter: Arc::new(Counter::with_capacity(Some(bytes))),
            workspace: Arc::new(Counter::default()),
            cache: Arc::default(),
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
            counted: true,
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
        let data = match self.cache.take(elems) {
            Some(mut v) => {
                v.fill(0.0);
                v
            }
            None => vec![0.0; elems],
        };
        self.buffer(data)
    }

    fn alloc_for_output(&self, elems: usize) -> Result<CpuBuffer, BackendError> {
        // Every CPU kernel writes every output element (`kernels` module doc).
        match self.cache.take(elems) {
            Some(v) => self.buffer(v),
            None => self.alloc(elems),
        }
    }

    fn upload(&self, host: &[f32]) -> Result<CpuBuffer, BackendError> {
        self.counter.take(host.len() as u64 * 4)?;
        self.counter.give(host.len() as u64 * 4);
        let data = match self.cache.take(host.len()) {
            Some(mut v) => {
                v.copy_from_slice(host);
                v
            }
            None => host.to_vec(),
        };
        self.buffer(data)
    }

    fn upload_owned(&self, host: Vec<f32>) -> Result<CpuBuffer, BackendError> {
        self.buffer(host)
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

    fn alloc_workspace(&self, elems: usize) -> Result<CpuBuffer, BackendError> {
        self.workspace.take(elems as u64 * 4)?;
        Ok(CpuBuffer {
            data: vec![0.0; elems],
            counter: self.workspace.clone(),
            counted: true,
        })
    }

    fn upload_workspace(&self, host: &[f32]) -> Result<CpuBuffer, BackendError> {
        self.workspace.take(host.len() as u64 * 4)?;
        Ok(CpuBuffer {
            data: host.to_vec(),
            counter: self.workspace.clone(),
            counted: true,
        })
    }

    fn copy_region(
        &self,
        src: &CpuBuffer,
        src_r: &Bounds,
        dst: &mut CpuBuffer,
        dst_r: &Bounds,
        region: &Bounds,
        op: Option<ReduceOp>,
    ) -> Result<(), BackendError> {
        crate::region::copy_region(&src.data, src_r, &mut dst.data, dst_r, region, op)
    }

    fn free(&self, buf: CpuBuffer) {
        let data = buf.into_data();
        self.cache.put(data, self.counter.stats().peak);
    }

    fn buffer_len(&self, buf: &CpuBuffer) -> usize {
        buf.len()
    }

    fn memory(&self) -> MemoryStats {
        self.counter.stats()
    }

    fn reset_peak(&self) {
        self.counter.reset_peak();
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
        window: &Window,
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
