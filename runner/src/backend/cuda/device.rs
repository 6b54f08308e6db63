//! [`CudaBackend`]: one rank's device memory, kernels and region copies on
//! one CUDA device, through cudarc (driver API, cuBLAS, NVRTC; all loaded at
//! run time).
//!
//! Takes a device ordinal; gives [`CudaBuffer`]s (device memory counted by
//! the same accounting as the CPU backend, plus the device's own measured
//! use), kernels prepared once per op instance ([`CudaKernel`]: cuBLAS for
//! the matmul family, cuDNN for 2-D convolutions where it is present, CUDA
//! C generated from the TDL spec for everything
//! else, the CPU kernel through host copies for opaque functions), and
//! region copies as one generated kernel. All work of a backend is ordered
//! on its device's default stream; [`Backend::synchronize`] waits for it and
//! reports a device-side failure (an out-of-range read, an integer division
//! by zero) naming the operator.
//!
//! NVRTC compilations are cached per process by source text and target
//! (the device's own architecture, [`super::nvrtc`]): the generated source
//! of an op depends only on its spec's structure (see [`super::codegen`]),
//! so a model compiles each spec once whatever its shapes, ranks and
//! windows, and ranks compiling different sources do not wait for one
//! another.

use std::sync::{Arc, Mutex, OnceLock};

use comm::ReduceOp;
use cudarc::cublas::{sys as blas_sys, CudaBlas};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, LaunchConfig,
    PushKernelArg,
};
use tdl::{Attrs, OpSpec};

use super::codegen::{Launch, ReduceOptions, ERR_DIV_BY_ZERO, ERR_OUT_OF_BOUNDS};
use super::library::catching;
use super::library_form::{library_form, LibraryForm};
use super::nvrtc::{compile, supported_archs, Image, PerKey};
use super::region_copy::{RegionArgs, COPY_SRC};
use super::target::{nvrtc_target, NvrtcTarget};
use super::{CudaBuffer, CudaKernel};
use crate::backend::accounting::Counter;
use crate::backend::CpuBackend;
use crate::backend::{Backend, BackendError, Bounds, MemoryStats, Window};
use crate::ops::KernelError;
use crate::region::volume;

pub(super) fn device_err(message: impl std::fmt::Display) -> BackendError {
    BackendError::Device {
        backend: "cuda",
        message: message.to_string(),
    }
}

/// Check that the CUDA libraries this backend loads are present, so a
/// missing one is an error naming it, never a panic inside cudarc.
///
/// Errors: [`BackendError::Device`] naming the missing library.
pub fn check_libraries() -> Result<(), BackendError> {
    // SAFETY: these only try to open the shared libraries.
    let present = unsafe {
        [
            (
                cudarc::driver::sys::is_culib_present(),
                "libcuda (the NVIDIA driver)",
            ),
            (cudarc::nvrtc::sys::is_culib_present(), "libnvrtc (NVRTC)"),
            (
                cudarc::cublas::sys::is_culib_present(),
                "libcublas (cuBLAS)",
            ),
        ]
    };
    for (ok, what) in present {
        if !ok {
            return Err(device_err(format!(
                "{what} could not be loaded: install the NVIDIA driver and CUDA 13 libraries, \
                 or run with `--backend cpu`"
            )));
        }
    }
    Ok(())
}

/// Number of CUDA devices this process can use.
///
/// Errors: a missing driver or library ([`check_libraries`]), a driver
/// failure.
pub fn device_count() -> Result<usize, BackendError> {
    check_libraries()?;
    catching("cuDeviceGetCount", || {
        CudaContext::device_count()
            .map(|n| n.max(0) as usize)
            .map_err(|e| device_err(format!("cuDeviceGetCount: {e}")))
    })
}

/// NVRTC-compiled images of this process, by (target, source).
fn images() -> &'static PerKey<(NvrtcTarget, String), Arc<Image>> {
    static CACHE: OnceLock<PerKey<(NvrtcTarget, String), Arc<Image>>> = OnceLock::new();
    CACHE.get_or_init(PerKey::default)
}

/// Modules loaded in this process, by (device, source).
fn modules() -> &'static PerKey<(usize, String), Arc<CudaModule>> {
    static CACHE: OnceLock<PerKey<(usize, String), Arc<CudaModule>>> = OnceLock::new();
    CACHE.get_or_init(PerKey::default)
}

// SAFETY: plain old data with the C layout the kernel declares.
unsafe impl DeviceRepr for RegionArgs {}

/// One rank's CUDA backend (see the module doc).
pub struct CudaBackend {
    /// The cuDNN handle, made on first use; `None` inside where cuDNN is
    /// absent (first, so it is destroyed while the context lives).
    pub(super) cudnn: OnceLock<Option<Mutex<super::cudnn_api::Handle>>>,
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
    pub(super) blas: CudaBlas,
    pub(super) counter: Arc<Counter>,
    pub(super) workspace: Arc<Counter>,
    /// Device error word: [code, kernel id].
    pub(super) err: Mutex<CudaSlice<i32>>,
    pub(super) copy: CudaFunction,
    /// Op names by kernel id, for device-side errors.
    pub(super) names: Mutex<Vec<String>>,
    /// The CPU backend, for ops with no CUDA form (opaque functions): its
    /// kernels run on host copies of the buffers.
    pub(super) host: CpuBackend,
    /// When reductions take a block or several (see [`ReduceOptions`]).
    pub(super) reduce_opts: Mutex<ReduceOptions>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("device", &self.ctx.ordinal())
            .field("memory", &self.memory())
            .finish_non_exhaustive()
    }
}

impl CudaBackend {
    /// A backend on device `ordinal` (its primary context and default
    /// stream), FP32 math in cuBLAS.
    ///
    /// Errors: a missing driver or library (or one too old, where cudarc
    /// panics: [`catching`]), no such device, a driver or NVRTC failure.
    pub fn new(ordinal: usize) -> Result<Self, BackendError> {
        let n = device_count()?;
        catching(&format!("opening CUDA device {ordinal}"), || {
            Self::open(ordinal, n)
        })
    }

    fn open(ordinal: usize, n: usize) -> Result<Self, BackendError> {
        if ordinal >= n {
            return Err(device_err(format!(
                "device {ordinal} does not exist: this machine has {n} CUDA device(s)"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| device_err(format!("cuCtx: {e}")))?;
        // SAFETY: every backend on this context (ranks sharing the device
        // included) and its NCCL communicator order all work on the one
        // default stream, so cudarc's cross-stream events are not needed.
        unsafe { ctx.disable_event_tracking() };
        keep_pool_memory(&ctx)?;
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).map_err(|e| device_err(format!("cuBLAS: {e}")))?;
        let err = stream
            .alloc_zeros::<i32>(2)
            .map_err(|e| device_err(format!("alloc: {e}")))?;
        let module = load(&ctx, COPY_SRC)?;
        let copy = module
            .load_function("copy_region")
            .map_err(|e| device_err(format!("copy_region: {e}")))?;
        Ok(CudaBackend {
            cudnn: OnceLock::new(),
            ctx,
            stream,
            blas,
            counter: Arc::new(Counter::default()),
            workspace: Arc::new(Counter::default()),
            err: Mutex::new(err),
            copy,
            names: Mutex::new(Vec::new()),
            host: CpuBackend::new(),
            reduce_opts: Mutex::new(ReduceOptions::default()),
        })
    }

    /// Bind the device's context to the calling thread (before cuBLAS
    /// and NCCL calls: a rank's thread may not have bound it yet).
    ///
    /// Errors: the driver's.
    pub(super) fn bind(&self) -> Result<(), BackendError> {
        self.ctx.bind_to_thread().map_err(|e| {
            device_err(format!(
                "binding device {}'s context to this thread: {e}",
                self.ctx.ordinal()
            ))
        })
    }

    /// Use TF32 tensor cores in cuBLAS (faster, ~1e-3 relative error).
    ///
    /// Errors: cuBLAS refuses the math mode, or the context does not bind.
    pub fn set_tf32(&self, on: bool) -> Result<(), BackendError> {
        self.bind()?;
        let mode = if on {
            blas_sys::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH
        } else {
            blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH
        };
        // SAFETY: a valid handle owned by this backend.
        let status = unsafe { blas_sys::cublasSetMathMode(*self.blas.handle(), mode) };
        if status != blas_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(device_err(format!("cublasSetMathMode: {status:?}")));
        }
        Ok(())
    }

    /// When reductions take a block or several per element (defaults:
    /// [`codegen::BLOCK_REDUCE_MIN`], [`codegen::SPLIT_MIN`]; 1 forces a
    /// mode everywhere, e.g. to test it on small shapes). Affects kernels
    /// prepared afterwards.
    pub fn set_reduce_options(&self, opts: ReduceOptions) {
        *self.reduce_opts.lock().expect("reduce options") = opts;
    }

    /// The options [`CudaBackend::set_reduce_options`] set last.
    pub fn reduce_options(&self) -> ReduceOptions {
        *self.reduce_opts.lock().expect("reduce options")
    }

    /// The stream all of this backend's work is ordered on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// Bytes of device memory in use on the whole device (all processes), as
    /// the driver reports it.
    ///
    /// Errors: the driver's.
    pub fn device_used_bytes(&self) -> Result<u64, BackendError> {
        let (free, total) = self
            .ctx
            .mem_get_info()
            .map_err(|e| device_err(format!("cuMemGetInfo: {e}")))?;
        Ok((total - free) as u64)
    }

    /// A buffer of `elems` counted in `counter`; zero-filled where `zeroed`,
    /// else unset (the caller overwrites every element before a read).
    fn buffer(
        &self,
        elems: usize,
        counter: &Arc<Counter>,
        zeroed: bool,
    ) -> Result<CudaBuffer, BackendError> {
        counter.take(elems as u64 * 4)?;
        let data = if zeroed {
            self.stream.alloc_zeros::<f32>(elems.max(1))
        } else {
            // SAFETY: unset f32s are plain bits; the caller's contract
            // (`Backend::alloc_for_output`, an upload) writes them all.
            unsafe { self.stream.alloc::<f32>(elems.max(1)) }
        };
        let data = data.map_err(|e| {
            counter.give(elems as u64 * 4);
            device_err(format!("allocating {} bytes: {e}", elems * 4))
        });
        Ok(CudaBuffer {
            data: data?,
            len: elems,
            stream: self.stream.clone(),
            counter: counter.clone(),
        })
    }
}

/// Keep freed memory in the device's default pool (stream-ordered
/// allocation, `cuMemAllocAsync`) instead of returning it to the driver at
/// every synchronisation: the pool's release threshold, 0 by default, is
/// raised to "never". Without it every training step maps its activations
/// and gradients afresh (milliseconds per step on an H200 for mlp-4-4096).
/// Nothing to do where the device has no stream-ordered allocator.
///
/// Errors: the driver's.
fn keep_pool_memory(ctx: &CudaContext) -> Result<(), BackendError> {
    if !ctx.has_async_alloc() {
        return Ok(());
    }
    let mut threshold = u64::MAX;
    // SAFETY: the device is the context's own; the release threshold is a
    // `cuuint64_t`, the type `threshold` has.
    unsafe {
        let pool = cudarc::driver::result::device::get_default_mem_pool(ctx.cu_device())
            .map_err(|e| device_err(format!("cuDeviceGetDefaultMemPool: {e}")))?;
        cudarc::driver::result::mem_pool::set_attribute(
            pool,
            cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
        .map_err(|e| device_err(format!("cuMemPoolSetAttribute: {e}")))
    }
}

/// What NVRTC compiles for on `ctx`'s device ([`nvrtc_target`] of its
/// compute capability).
///
/// Errors: the driver's, or a device NVRTC no longer supports.
pub(super) fn target(ctx: &CudaContext) -> Result<NvrtcTarget, BackendError> {
    let cc = ctx
        .compute_capability()
        .map_err(|e| device_err(format!("device {}: compute capability: {e}", ctx.ordinal())))?;
    nvrtc_target(cc, supported_archs())
        .map_err(|e| device_err(format!("device {}: {e}", ctx.ordinal())))
}

/// Compile (or fetch from the caches) a module on `ctx`'s device. Only
/// callers of the same source wait for one another ([`PerKey`]).
pub(super) fn load(ctx: &Arc<CudaContext>, src: &str) -> Result<Arc<CudaModule>, BackendError> {
    modules().get_or_try_make((ctx.ordinal(), src.to_string()), || {
        let t = target(ctx)?;
        let image = images().get_or_try_make((t, src.to_string()), || {
            catching("NVRTC", || compile(src, t).map(Arc::new))
        })?;
        ctx.load_module(image.to_ptx())
            .map_err(|e| device_err(format!("cuModuleLoad ({}): {e}", t.option())))
    })
}

impl Backend for CudaBackend {
    type Buffer = CudaBuffer;
    type Kernel = CudaKernel;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn alloc(&self, elems: usize) -> Result<CudaBuffer, BackendError> {
        self.buffer(elems, &self.counter, true)
    }

    /// Not zeroed: every CUDA kernel writes every element of its outputs
    /// (a generated statement each element of its box, cuBLAS with β = 0
    /// or a memset for an empty sum, the scatter-add after its memset, a
    /// host kernel by a whole copy).
    fn alloc_for_output(&self, elems: usize) -> Result<CudaBuffer, BackendError> {
        self.buffer(elems, &self.counter, false)
    }

    fn upload(&self, host: &[f32]) -> Result<CudaBuffer, BackendError> {
        let mut b = self.buffer(host.len(), &self.counter, false)?;
        b.copy_from_host(host).map_err(device_err)?;
        Ok(b)
    }

    fn download(&self, buf: &CudaBuffer, host: &mut [f32]) -> Result<(), BackendError> {
        if buf.len != host.len() {
            return Err(BackendError::CopyLength {
                expected: buf.len,
                got: host.len(),
            });
        }
        host.copy_from_slice(&buf.to_host().map_err(device_err)?);
        Ok(())
    }

    fn alloc_workspace(&self, elems: usize) -> Result<CudaBuffer, BackendError> {
        self.buffer(elems, &self.workspace, true)
    }

    fn copy_region(
        &self,
        src: &CudaBuffer,
        src_r: &Bounds,
        dst: &mut CudaBuffer,
        dst_r: &Bounds,
        region: &Bounds,
        op: Option<ReduceOp>,
    ) -> Result<(), BackendError> {
        let n = volume(region);
        if n == 0 {
            return Ok(());
        }
        let args = RegionArgs::new(src_r, dst_r, region, op)
            .filter(|_| (src.len as u64) >= volume(src_r) && (dst.len as u64) >= volume(dst_r));
        let Some((a, launch)) = args else {
            return Err(BackendError::Region {
                region: region.to_vec(),
                src: src_r.to_vec(),
                dst: dst_r.to_vec(),
            });
        };
        let whole = src.len as u64 == n && dst.len as u64 == n;
        if op.is_none() && src_r == region && dst_r == region && whole {
            // The whole buffer: a device-to-device copy, no index decode.
            return self
                .stream
                .memcpy_dtod(&src.data, &mut dst.data)
                .map_err(|e| device_err(format!("cuMemcpyDtoD: {e}")));
        }
        let (s, d) = (src.ptr(), dst.ptr_mut());
        let mut lb = self.stream.launch_builder(&self.copy);
        lb.arg(&s).arg(&d).arg(&a);
        // SAFETY: the region lies inside both buffers (checked above).
        unsafe { lb.launch(config(&launch)) }
            .map(|_| ())
            .map_err(|e| device_err(format!("copy_region: {e}")))
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        self.stream
            .synchronize()
            .map_err(|e| device_err(format!("cuStreamSynchronize: {e}")))?;
        let mut err = self.err.lock().expect("error word");
        let word = self.stream.clone_dtoh(&*err).map_err(device_err)?;
        if word[0] == 0 {
            return Ok(());
        }
        let op = self
            .names
            .lock()
            .expect("names")
            .get(word[1] as usize)
            .cloned()
            .unwrap_or_else(|| "?".into());
        self.stream
            .memcpy_htod(&[0i32, 0][..], &mut *err)
            .map_err(device_err)?;
        Err(match word[0] {
            ERR_DIV_BY_ZERO => KernelError::DivByZero { op }.into(),
            ERR_OUT_OF_BOUNDS => device_err(format!(
                "`{op}`: a read outside a tensor's shape or buffer on the device \
                 (run with `--backend cpu` to see the index)"
            )),
            c => device_err(format!("`{op}`: device error code {c}")),
        })
    }

    fn free(&self, buf: CudaBuffer) {
        drop(buf);
    }

    fn buffer_len(&self, buf: &CudaBuffer) -> usize {
        buf.len
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
    ) -> Result<CudaKernel, BackendError> {
        let b = spec.bind(input_shapes, attrs).map_err(KernelError::from)?;
        match library_form(&b) {
            LibraryForm::Cublas(shape) => {
                return Ok(CudaKernel::Gemm {
                    op: spec.name.clone(),
                    shape,
                })
            }
            LibraryForm::ScatterAdd(shape) => return self.scatter_rows(&spec.name, shape),
            LibraryForm::Cudnn(shape) => {
                if let Some(k) = self.cudnn_conv(&spec.name, shape)? {
                    return Ok(k);
                }
            }
            LibraryForm::CudnnPool(shape) => {
                if let Some(k) = self.cudnn_pool(&spec.name, shape)? {
                    return Ok(k);
                }
            }
            LibraryForm::Generated => {}
        }
        let w = Window::whole(&b).map_err(|what| KernelError::Unsupported {
            op: spec.name.clone(),
            what,
        })?;
        self.generated(&b, &w)
    }

    fn prepare_window(
        &self,
        spec: &OpSpec,
        input_shapes: &[Vec<usize>],
        attrs: &Attrs,
        window: &Window,
    ) -> Result<CudaKernel, BackendError> {
        let b = spec.bind(input_shapes, attrs).map_err(KernelError::from)?;
        self.generated(&b, window)
    }

    fn launch(
        &self,
        kernel: &CudaKernel,
        inputs: &[&CudaBuffer],
        outputs: &mut [&mut CudaBuffer],
    ) -> Result<(), BackendError> {
        self.run_kernel(kernel, inputs, outputs)
    }
}

/// A launch's configuration.
pub(super) fn config(l: &Launch) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (l.blocks, 1, 1),
        block_dim: (l.threads, 1, 1),
        shared_mem_bytes: 0,
    }
}
