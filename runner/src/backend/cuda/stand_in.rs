//! The CUDA backend of a build without the `cuda` feature (candle's
//! `dummy_cuda_backend`): the real backend's public types and functions
//! with the same signatures, so callers (`choose.rs`, the CLI) compile
//! unchanged in both builds.
//!
//! Every constructor ([`device_count`], [`check_libraries`],
//! [`CudaBackend::new`], [`NcclCommunicator::unique_id`], …) fails with
//! [`BackendError::NotBuilt`], which says how to rebuild with CUDA. The
//! types hold an uninhabited field, so no value of them exists and no
//! method body can run: there is nothing to fake.

use std::convert::Infallible;

use comm::{ByteCounters, Collectives, CommError, Communicator, P2p, Rank, ReduceOp};
use tdl::{Attrs, OpSpec};

use super::codegen::ReduceOptions;
use crate::backend::{Backend, BackendError, Bounds, MemoryStats, Window};

/// Why this build cannot use CUDA.
fn not_built() -> BackendError {
    BackendError::NotBuilt {
        backend: "cuda",
        feature: "cuda",
    }
}

/// Check that the CUDA libraries are present.
///
/// Errors: always [`BackendError::NotBuilt`].
pub fn check_libraries() -> Result<(), BackendError> {
    Err(not_built())
}

/// Number of CUDA devices this process can use.
///
/// Errors: always [`BackendError::NotBuilt`].
pub fn device_count() -> Result<usize, BackendError> {
    Err(not_built())
}

/// A buffer of f32 elements in device memory (none exists in this build).
#[derive(Debug)]
pub struct CudaBuffer {
    never: Infallible,
}

impl CudaBuffer {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self.never {}
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        match self.never {}
    }

    /// The elements, copied to the host.
    ///
    /// Errors: the driver's.
    pub fn to_host(&self) -> Result<Vec<f32>, String> {
        match self.never {}
    }

    /// Overwrite the elements with `host` (same length).
    ///
    /// Errors: a length mismatch, the driver's.
    pub fn copy_from_host(&mut self, _host: &[f32]) -> Result<(), String> {
        match self.never {}
    }
}

/// A kernel prepared on a [`CudaBackend`] (none exists in this build).
pub struct CudaKernel {
    never: Infallible,
}

impl CudaKernel {
    /// How it runs: `"cublas"`, `"scatter-add"`, `"nvrtc"` or `"host"`.
    pub fn provider(&self) -> &'static str {
        match self.never {}
    }
}

/// One rank's CUDA backend (none exists in this build: [`CudaBackend::new`]
/// fails).
#[derive(Debug)]
pub struct CudaBackend {
    never: Infallible,
}

impl CudaBackend {
    /// A backend on device `ordinal`.
    ///
    /// Errors: always [`BackendError::NotBuilt`].
    pub fn new(_ordinal: usize) -> Result<Self, BackendError> {
        Err(not_built())
    }

    /// Use TF32 tensor cores in cuBLAS.
    ///
    /// Errors: cuBLAS's.
    pub fn set_tf32(&self, _on: bool) -> Result<(), BackendError> {
        match self.never {}
    }

    /// When reductions take a block or several per element.
    pub fn set_reduce_options(&self, _opts: ReduceOptions) {
        match self.never {}
    }

    /// The options [`CudaBackend::set_reduce_options`] set last.
    pub fn reduce_options(&self) -> ReduceOptions {
        match self.never {}
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        match self.never {}
    }

    /// Bytes of device memory in use on the whole device.
    ///
    /// Errors: the driver's.
    pub fn device_used_bytes(&self) -> Result<u64, BackendError> {
        match self.never {}
    }
}

impl Backend for CudaBackend {
    type Buffer = CudaBuffer;
    type Kernel = CudaKernel;

    fn name(&self) -> &'static str {
        match self.never {}
    }

    fn alloc(&self, _elems: usize) -> Result<CudaBuffer, BackendError> {
        match self.never {}
    }

    fn upload(&self, _host: &[f32]) -> Result<CudaBuffer, BackendError> {
        match self.never {}
    }

    fn download(&self, _buf: &CudaBuffer, _host: &mut [f32]) -> Result<(), BackendError> {
        match self.never {}
    }

    fn alloc_workspace(&self, _elems: usize) -> Result<CudaBuffer, BackendError> {
        match self.never {}
    }

    fn copy_region(
        &self,
        _src: &CudaBuffer,
        _src_r: &Bounds,
        _dst: &mut CudaBuffer,
        _dst_r: &Bounds,
        _region: &Bounds,
        _op: Option<ReduceOp>,
    ) -> Result<(), BackendError> {
        match self.never {}
    }

    fn free(&self, _buf: CudaBuffer) {
        match self.never {}
    }

    fn buffer_len(&self, _buf: &CudaBuffer) -> usize {
        match self.never {}
    }

    fn memory(&self) -> MemoryStats {
        match self.never {}
    }

    fn reset_peak(&self) {
        match self.never {}
    }

    fn prepare(
        &self,
        _spec: &OpSpec,
        _input_shapes: &[Vec<usize>],
        _attrs: &Attrs,
    ) -> Result<CudaKernel, BackendError> {
        match self.never {}
    }

    fn prepare_window(
        &self,
        _spec: &OpSpec,
        _input_shapes: &[Vec<usize>],
        _attrs: &Attrs,
        _window: &Window,
    ) -> Result<CudaKernel, BackendError> {
        match self.never {}
    }

    fn launch(
        &self,
        _kernel: &CudaKernel,
        _inputs: &[&CudaBuffer],
        _outputs: &mut [&mut CudaBuffer],
    ) -> Result<(), BackendError> {
        match self.never {}
    }
}

/// An NCCL communicator on device buffers (none exists in this build).
#[derive(Debug)]
pub struct NcclCommunicator {
    never: Infallible,
}

impl NcclCommunicator {
    /// One communicator per backend.
    ///
    /// Errors: always [`BackendError::NotBuilt`].
    pub fn for_backends(_backends: &[CudaBackend]) -> Result<Vec<Self>, BackendError> {
        Err(not_built())
    }

    /// A fresh NCCL unique id (128 bytes).
    ///
    /// Errors: always [`BackendError::NotBuilt`].
    pub fn unique_id() -> Result<Vec<u8>, BackendError> {
        Err(not_built())
    }

    /// This process's rank of a clique sharing the unique id `id`.
    ///
    /// Errors: always [`BackendError::NotBuilt`].
    pub fn from_unique_id(
        _backend: &CudaBackend,
        _rank: usize,
        _world: usize,
        _id: &[u8],
    ) -> Result<Self, BackendError> {
        Err(not_built())
    }
}

impl Communicator for NcclCommunicator {
    fn rank(&self) -> Rank {
        match self.never {}
    }

    fn world_size(&self) -> usize {
        match self.never {}
    }

    fn counters(&self) -> ByteCounters {
        match self.never {}
    }

    fn reset_counters(&mut self) {
        match self.never {}
    }
}

impl Collectives<CudaBuffer> for NcclCommunicator {
    fn all_reduce(&mut self, _buf: &mut CudaBuffer, _op: ReduceOp) -> Result<(), CommError> {
        match self.never {}
    }

    fn reduce_scatter(
        &mut self,
        _send: &CudaBuffer,
        _recv: &mut CudaBuffer,
        _counts: &[usize],
        _op: ReduceOp,
    ) -> Result<(), CommError> {
        match self.never {}
    }

    fn all_gather(
        &mut self,
        _send: &CudaBuffer,
        _recv: &mut CudaBuffer,
        _counts: &[usize],
    ) -> Result<(), CommError> {
        match self.never {}
    }

    fn all_to_all(
        &mut self,
        _send: &CudaBuffer,
        _send_counts: &[usize],
        _recv: &mut CudaBuffer,
        _recv_counts: &[usize],
    ) -> Result<(), CommError> {
        match self.never {}
    }

    fn broadcast(&mut self, _buf: &mut CudaBuffer, _root: Rank) -> Result<(), CommError> {
        match self.never {}
    }

    fn group(&mut self, _ops: &mut [P2p<'_, CudaBuffer>]) -> Result<(), CommError> {
        match self.never {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Negative check: the dummy never pretends to have a device; every
    /// constructor is the error that says how to rebuild.
    #[test]
    fn every_constructor_says_the_build_has_no_cuda() {
        let is_not_built = |e: BackendError| {
            let text = e.to_string();
            assert!(
                text.contains("built without the `cuda` feature")
                    && text.contains("cargo build --release --features cuda"),
                "{text}"
            );
            matches!(e, BackendError::NotBuilt { .. })
        };
        assert!(is_not_built(device_count().expect_err("no devices")));
        assert!(is_not_built(check_libraries().expect_err("no libraries")));
        assert!(is_not_built(CudaBackend::new(0).expect_err("no backend")));
        assert!(is_not_built(
            NcclCommunicator::for_backends(&[]).expect_err("no NCCL")
        ));
        assert!(is_not_built(
            NcclCommunicator::unique_id().expect_err("no NCCL")
        ));
        let chosen = crate::choose::ChooseError::from(device_count().expect_err("no devices"));
        assert!(
            matches!(chosen, crate::choose::ChooseError::Unavailable(_)),
            "`--backend cuda` says CUDA is unavailable: {chosen:?}"
        );
    }
}
