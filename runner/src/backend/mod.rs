//! Backends: where a worker's buffers live and how its kernels run.
//!
//! Takes op instances (a TDL spec, input shapes, attributes) and buffer
//! requests from a worker's program; gives allocated buffers, prepared
//! kernels that run on them, and per-rank memory accounting (bytes in use and
//! the peak). One trait, several backends (STYLE item 10): [`cpu::CpuBackend`]
//! and [`cuda`] (cuBLAS/NVRTC; a dummy with the same API without the
//! `cuda` feature), both reading the op layer ([`crate::ops`]).
//!
//! Keeps true: [`MemoryStats::in_use`] is the sum of the sizes of the live
//! buffers allocated through the backend (a buffer counts until it is freed
//! or dropped), and [`MemoryStats::peak`] is the largest value `in_use` has
//! had since creation or [`Backend::reset_peak`]. Kernel workspace (im2col
//! columns, `let` temporaries of compiled kernels) is not counted.

mod accounting;
pub mod cpu;
pub mod cuda;
mod window;

use comm::ReduceOp;
use tdl::{Attrs, OpSpec};

use crate::ops::KernelError;

pub use cpu::{CpuBackend, CpuBuffer};
pub use window::Window;

/// A region of a tensor in global coordinates: `[lo, hi)` per dim.
pub type Bounds = [(i64, i64)];

/// Bytes of device memory of one rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes held by live buffers now.
    pub in_use: u64,
    /// Highest `in_use` so far (bytes).
    pub peak: u64,
    /// Number of live buffers.
    pub buffers: u64,
    /// The allocation limit (bytes), if any.
    pub capacity: Option<u64>,
}

/// Why a backend call failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BackendError {
    /// An allocation would exceed the backend's capacity.
    #[error(
        "out of memory: allocating {requested} bytes with {in_use} of {capacity} bytes in use"
    )]
    OutOfMemory {
        /// Bytes asked for.
        requested: u64,
        /// Bytes in use before the request.
        in_use: u64,
        /// The capacity (bytes).
        capacity: u64,
    },
    /// A host copy whose length differs from the buffer's.
    #[error("copy of {got} elements into or out of a buffer of {expected} elements")]
    CopyLength {
        /// The buffer's elements.
        expected: usize,
        /// The host slice's elements.
        got: usize,
    },
    /// Preparing or running a kernel failed.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A region copy whose region is not inside both buffers' regions.
    #[error("region copy of {region:?} between buffers holding {src:?} and {dst:?}")]
    Region {
        /// The region copied.
        region: Vec<(i64, i64)>,
        /// The source buffer's region.
        src: Vec<(i64, i64)>,
        /// The destination buffer's region.
        dst: Vec<(i64, i64)>,
    },
    /// The backend is not in this build (the CUDA backend of a build
    /// without the `cuda` feature): says what to rebuild with.
    #[error(
        "{backend}: this tofu was built without the `{feature}` feature; rebuild with \
         `cargo build --release --features {feature}`"
    )]
    NotBuilt {
        /// The backend (`"cuda"`).
        backend: &'static str,
        /// The cargo feature that builds it.
        feature: &'static str,
    },
    /// The device or its driver failed (CUDA error text, missing library).
    #[error("{backend}: {message}")]
    Device {
        /// The backend (`"cuda"`).
        backend: &'static str,
        /// What failed, with the driver's words.
        message: String,
    },
}

/// Memory and kernels of one rank (see the module doc).
pub trait Backend: Send {
    /// A buffer of f32 elements owned by this backend.
    type Buffer: Send;
    /// A kernel prepared for one op instance.
    type Kernel: Send + Sync;

    /// Short name (`"cpu"`, `"cuda"`).
    fn name(&self) -> &'static str;

    /// A zero-filled buffer of `elems` f32 elements; counts `4 · elems` bytes.
    ///
    /// Errors: [`BackendError::OutOfMemory`] past the capacity.
    fn alloc(&self, elems: usize) -> Result<Self::Buffer, BackendError>;

    /// A buffer of `elems` f32 elements that a kernel will overwrite whole
    /// before anything reads it, so its contents may be anything (a
    /// reused buffer is not zeroed). The default zero-fills ([`Backend::alloc`]),
    /// for backends whose kernels do not overwrite every output element.
    ///
    /// Errors: as [`Backend::alloc`].
    fn alloc_for_output(&self, elems: usize) -> Result<Self::Buffer, BackendError> {
        self.alloc(elems)
    }

    /// A buffer holding a copy of `host`.
    ///
    /// Errors: as [`Backend::alloc`].
    fn upload(&self, host: &[f32]) -> Result<Self::Buffer, BackendError>;

    /// [`Backend::upload`] of values the caller no longer needs: a host
    /// backend keeps the vector itself instead of copying it.
    ///
    /// Errors: as [`Backend::alloc`].
    fn upload_owned(&self, host: Vec<f32>) -> Result<Self::Buffer, BackendError> {
        self.upload(&host)
    }

    /// Copy a buffer to `host` (same number of elements).
    ///
    /// Errors: [`BackendError::CopyLength`].
    fn download(&self, buf: &Self::Buffer, host: &mut [f32]) -> Result<(), BackendError>;

    /// A zero-filled work buffer of `elems` elements that the memory
    /// accounting does not count (message staging for an exchange).
    ///
    /// Errors: the device is out of memory.
    fn alloc_workspace(&self, elems: usize) -> Result<Self::Buffer, BackendError>;

    /// A work buffer holding a copy of `host` that the memory accounting
    /// does not count (a message in wire form, see `program::wire`). The
    /// default uploads a counted buffer, for backends without uncounted
    /// uploads.
    ///
    /// Errors: as [`Backend::alloc_workspace`].
    fn upload_workspace(&self, host: &[f32]) -> Result<Self::Buffer, BackendError> {
        self.upload(host)
    }

    /// Copy (or, with `op`, combine: `dst = op(dst, src)`) the elements of
    /// `region` from `src`, which holds the region `src_r` of a row-major
    /// tensor, into `dst`, which holds `dst_r` (all in global coordinates,
    /// `[lo, hi)` per dim). Ordered after earlier work on this backend.
    ///
    /// Errors: [`BackendError::Region`] when `region` is not inside both.
    fn copy_region(
        &self,
        src: &Self::Buffer,
        src_r: &Bounds,
        dst: &mut Self::Buffer,
        dst_r: &Bounds,
        region: &Bounds,
        op: Option<ReduceOp>,
    ) -> Result<(), BackendError>;

    /// Wait until every queued copy and kernel is complete; asynchronous
    /// failures (e.g. an out-of-range read in a device kernel) surface here.
    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }

    /// Release a buffer (dropping it does the same).
    fn free(&self, buf: Self::Buffer);

    /// Number of f32 elements of a buffer.
    fn buffer_len(&self, buf: &Self::Buffer) -> usize;

    /// Bytes in use and the peak.
    fn memory(&self) -> MemoryStats;

    /// Start a new peak measurement from the bytes in use now.
    fn reset_peak(&self);

    /// Prepare an op instance once: shape inference, then the library kernel
    /// or the compiled evaluator (see [`crate::kernels`]). The kernel's output
    /// shapes are those of the spec's shape inference.
    ///
    /// Errors: shapes or attributes that do not fit the spec; a spec the
    /// evaluator cannot compile.
    fn prepare(
        &self,
        spec: &OpSpec,
        input_shapes: &[Vec<usize>],
        attrs: &Attrs,
    ) -> Result<Self::Kernel, BackendError>;

    /// Prepare one worker's share of an op instance in global coordinates
    /// (codegen's local compute, Tofu §5): `input_shapes` are the whole
    /// tensors' shapes, `window` the share's index box and the regions its
    /// input buffers hold (see [`Window`]).
    ///
    /// Errors: as [`Backend::prepare`]; a window that does not fit the spec.
    fn prepare_window(
        &self,
        spec: &OpSpec,
        input_shapes: &[Vec<usize>],
        attrs: &Attrs,
        window: &Window,
    ) -> Result<Self::Kernel, BackendError>;

    /// Run a prepared kernel: one buffer per input and per output, each of
    /// its tensor's element count; every output element is overwritten.
    ///
    /// Errors: wrong buffer count or length, run-time failures of the op.
    fn launch(
        &self,
        kernel: &Self::Kernel,
        inputs: &[&Self::Buffer],
        outputs: &mut [&mut Self::Buffer],
    ) -> Result<(), BackendError>;
}
