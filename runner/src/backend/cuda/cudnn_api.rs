//! cuDNN's C API (the legacy convolution functions of cuDNN 8 and 9),
//! opened by the backend itself as NCCL is ([`super::library`]): cudarc's
//! `cudnn` bindings panic where the library is missing and cannot be
//! pointed at another file, so the functions the backend calls are
//! resolved here, once per process, every one checked at open. Gives
//! [`cudnn`] (the API or why not), [`Handle`] (a cuDNN handle on a
//! stream), [`ConvDescs`] (the descriptors, algorithm and workspace of
//! one [`ConvShape`]) and [`PoolDescs`] (those of one [`PoolShape`]), each
//! destroyed on drop.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use libloading::Library;

use super::library::{
    c_api, cudnn_candidates, open_first, LibraryError, CUDNN, CUDNN_ENV, CUDNN_FIX,
};
use crate::ops::{ConvKind, ConvShape, PoolShape};

/// `cudnnStatus_t`: 0 is success.
type Status = c_int;
/// Any cuDNN handle or descriptor (opaque pointers).
type Ptr = *mut c_void;

/// `CUDNN_DATA_FLOAT`, `CUDNN_TENSOR_NCHW`.
const FLOAT: c_int = 0;
const NCHW: c_int = 0;
/// `cudnnConvolutionMode_t`.
const CONVOLUTION: c_int = 0;
const CROSS_CORRELATION: c_int = 1;
/// `CUDNN_FMA_MATH`: no TF32 (the CPU backend's FP32 results).
const FMA_MATH: c_int = 3;
/// `CUDNN_POOLING_MAX_DETERMINISTIC`, `CUDNN_PROPAGATE_NAN`.
const MAX_DETERMINISTIC: c_int = 3;
const PROPAGATE_NAN: c_int = 1;
/// `CUDNN_DETERMINISTIC`.
const DETERMINISTIC: c_int = 1;

/// `cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t` (one layout).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct AlgoPerf {
    algo: c_int,
    status: Status,
    time: f32,
    memory: usize,
    determinism: c_int,
    math_type: c_int,
    reserved: [c_int; 3],
}

c_api! {
    /// The cuDNN functions the backend calls.
    CudnnApi: Status, CUDNN, CUDNN_FIX, "cudnnGetErrorString";
    create = "cudnnCreate": fn(*mut Ptr);
    destroy = "cudnnDestroy": fn(Ptr);
    set_stream = "cudnnSetStream": fn(Ptr, Ptr);
    create_tensor = "cudnnCreateTensorDescriptor": fn(*mut Ptr);
    set_tensor = "cudnnSetTensor4dDescriptor": fn(Ptr, c_int, c_int, c_int, c_int, c_int, c_int);
    destroy_tensor = "cudnnDestroyTensorDescriptor": fn(Ptr);
    create_filter = "cudnnCreateFilterDescriptor": fn(*mut Ptr);
    set_filter = "cudnnSetFilter4dDescriptor": fn(Ptr, c_int, c_int, c_int, c_int, c_int, c_int);
    destroy_filter = "cudnnDestroyFilterDescriptor": fn(Ptr);
    create_conv = "cudnnCreateConvolutionDescriptor": fn(*mut Ptr);
    set_conv = "cudnnSetConvolution2dDescriptor":
        fn(Ptr, c_int, c_int, c_int, c_int, c_int, c_int, c_int, c_int);
    set_math = "cudnnSetConvolutionMathType": fn(Ptr, c_int);
    destroy_conv = "cudnnDestroyConvolutionDescriptor": fn(Ptr);
    fwd_algo = "cudnnGetConvolutionForwardAlgorithm_v7":
        fn(Ptr, Ptr, Ptr, Ptr, Ptr, c_int, *mut c_int, *mut AlgoPerf);
    bwd_data_algo = "cudnnGetConvolutionBackwardDataAlgorithm_v7":
        fn(Ptr, Ptr, Ptr, Ptr, Ptr, c_int, *mut c_int, *mut AlgoPerf);
    bwd_filter_algo = "cudnnGetConvolutionBackwardFilterAlgorithm_v7":
        fn(Ptr, Ptr, Ptr, Ptr, Ptr, c_int, *mut c_int, *mut AlgoPerf);
    fwd_ws = "cudnnGetConvolutionForwardWorkspaceSize":
        fn(Ptr, Ptr, Ptr, Ptr, Ptr, c_int, *mut usize);
    bwd_data_ws = "cudnnGetConvolutionBackwardDataWorkspaceSize":
        fn(Ptr, Ptr, Ptr, Ptr, Ptr, c_int, *mut usize);
    bwd_filter_ws = "cudnnGetConvolutionBackwardFilterWorkspaceSize":
        fn(Ptr, Ptr, Ptr, Ptr, Ptr, c_int, *mut usize);
    forward = "cudnnConvolutionForward": fn(
        Ptr, *const c_void, Ptr, u64, Ptr, u64, Ptr, c_int, u64, usize, *const c_void, Ptr, u64);
    backward_data = "cudnnConvolutionBackwardData": fn(
        Ptr, *const c_void, Ptr, u64, Ptr, u64, Ptr, c_int, u64, usize, *const c_void, Ptr, u64);
    create_pool = "cudnnCreatePoolingDescriptor": fn(*mut Ptr);
    set_pool = "cudnnSetPooling2dDescriptor":
        fn(Ptr, c_int, c_int, c_int, c_int, c_int, c_int, c_int, c_int);
    destroy_pool = "cudnnDestroyPoolingDescriptor": fn(Ptr);
    pool_forward = "cudnnPoolingForward":
        fn(Ptr, Ptr, *const c_void, Ptr, u64, *const c_void, Ptr, u64);
    pool_backward = "cudnnPoolingBackward": fn(
        Ptr, Ptr, *const c_void, Ptr, u64, Ptr, u64, Ptr, u64, *const c_void, Ptr, u64);
    backward_filter = "cudnnConvolutionBackwardFilter": fn(
        Ptr, *const c_void, Ptr, u64, Ptr, u64, Ptr, c_int, u64, usize, *const c_void, Ptr, u64);
}

impl CudnnApi {
    /// `Ok` for success, else cuDNN's words for `status` after `what`.
    fn check(&self, what: &str, status: Status) -> Result<(), String> {
        if status == 0 {
            return Ok(());
        }
        Err(format!(
            "{what}: {} (cudnnStatus_t {status})",
            self.words(status)
        ))
    }
}

/// cuDNN, opened once per process (from [`CUDNN_ENV`] or the usual names).
///
/// Errors: the [`LibraryError`] of the first attempt, every time.
pub(super) fn cudnn() -> Result<&'static CudnnApi, LibraryError> {
    static API: OnceLock<Result<CudnnApi, LibraryError>> = OnceLock::new();
    API.get_or_init(|| {
        let explicit = std::env::var(CUDNN_ENV).ok();
        let names = cudnn_candidates(explicit.as_deref());
        // SAFETY: opening cuDNN runs its initialisers, which have no
        // preconditions.
        let (lib, path) = open_first(CUDNN, CUDNN_FIX, &names, |n| unsafe { Library::new(n) })?;
        CudnnApi::resolve(lib, &path)
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// A cuDNN handle whose work goes to one stream; destroyed on drop.
pub(super) struct Handle {
    api: &'static CudnnApi,
    ptr: Ptr,
}

// SAFETY: a handle is used by one thread at a time (the backend keeps it
// behind a mutex); cuDNN handles may move between threads.
unsafe impl Send for Handle {}

impl Handle {
    /// A handle on `stream` (a `CUstream`), made on the calling thread's
    /// current context.
    ///
    /// Errors: cuDNN's.
    pub(super) fn new(api: &'static CudnnApi, stream: Ptr) -> Result<Self, String> {
        let mut ptr = std::ptr::null_mut();
        // SAFETY: an out-pointer to a handle.
        api.check("cudnnCreate", unsafe { (api.create)(&mut ptr) })?;
        let h = Handle { api, ptr };
        // SAFETY: a live handle and the backend's stream.
        api.check("cudnnSetStream", unsafe { (api.set_stream)(ptr, stream) })?;
        Ok(h)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: made by cudnnCreate, destroyed once.
        let s = unsafe { (self.api.destroy)(self.ptr) };
        if let Err(e) = self.api.check("cudnnDestroy", s) {
            eprintln!("tofu: {e}");
        }
    }
}

/// The descriptors of one convolution (x and y tensors, the filter, the
/// convolution), the algorithm cuDNN chose for its [`ConvKind`] and the
/// workspace it needs; destroyed on drop.
pub(super) struct ConvDescs {
    api: &'static CudnnApi,
    x: Ptr,
    w: Ptr,
    y: Ptr,
    conv: Ptr,
    kind: ConvKind,
    algo: c_int,
    /// Bytes of workspace the algorithm needs.
    pub(super) workspace: usize,
}

// SAFETY: descriptors are plain host structures, only read after set-up.
unsafe impl Send for ConvDescs {}
unsafe impl Sync for ConvDescs {}

/// A [`ConvShape`]'s extent as a C int (the shape recogniser checked that
/// every tensor's element count fits).
fn int(v: usize) -> c_int {
    c_int::try_from(v).expect("convolution extents fit an int (checked by conv_shape)")
}

impl ConvDescs {
    /// The descriptors of `s`, the first deterministic algorithm cuDNN's
    /// heuristics offer for it, and its workspace; `flip` (the injected
    /// fault `cudnn-convolution-mode`) asks for a true convolution
    /// (flipped filter) instead of the spec's cross-correlation.
    ///
    /// Errors: cuDNN's, or no deterministic algorithm.
    pub(super) fn new(h: &Handle, s: &ConvShape, flip: bool) -> Result<Self, String> {
        let api = h.api;
        let mut d = ConvDescs {
            api,
            x: std::ptr::null_mut(),
            w: std::ptr::null_mut(),
            y: std::ptr::null_mut(),
            conv: std::ptr::null_mut(),
            kind: s.kind,
            algo: 0,
            workspace: 0,
        };
        let (sh, ph, dh) = s.along_h;
        let (sw, pw, dw) = s.along_w;
        let mode = if flip { CONVOLUTION } else { CROSS_CORRELATION };
        // SAFETY: out-pointers to descriptors, then live descriptors with
        // in-range arguments; a failure leaves the made ones to drop.
        unsafe {
            api.check("cudnnCreateTensorDescriptor", (api.create_tensor)(&mut d.x))?;
            api.check("cudnnCreateTensorDescriptor", (api.create_tensor)(&mut d.y))?;
            api.check("cudnnCreateFilterDescriptor", (api.create_filter)(&mut d.w))?;
            api.check(
                "cudnnCreateConvolutionDescriptor",
                (api.create_conv)(&mut d.conv),
            )?;
            let t = |p, n, c, hh, ww| (api.set_tensor)(p, NCHW, FLOAT, n, c, hh, ww);
            api.check(
                "cudnnSetTensor4dDescriptor (x)",
                t(d.x, int(s.b), int(s.ci), int(s.h), int(s.w)),
            )?;
            api.check(
                "cudnnSetTensor4dDescriptor (y)",
                t(d.y, int(s.b), int(s.co), int(s.oh), int(s.ow)),
            )?;
            let f = (api.set_filter)(d.w, FLOAT, NCHW, int(s.co), int(s.ci), int(s.kh), int(s.kw));
            api.check("cudnnSetFilter4dDescriptor", f)?;
            let c = (api.set_conv)(
                d.conv,
                int(ph),
                int(pw),
                int(sh),
                int(sw),
                int(dh),
                int(dw),
                mode,
                FLOAT,
            );
            api.check("cudnnSetConvolution2dDescriptor", c)?;
            api.check(
                "cudnnSetConvolutionMathType",
                (api.set_math)(d.conv, FMA_MATH),
            )?;
        }
        d.algo = d.choose(h)?;
        d.workspace = d.workspace_of(h)?;
        Ok(d)
    }

    /// The first deterministic algorithm of cuDNN's heuristics that is
    /// usable (status success).
    fn choose(&self, h: &Handle) -> Result<c_int, String> {
        let api = self.api;
        let mut perf = [AlgoPerf::default(); 16];
        let mut n: c_int = 0;
        let (f, what) = match self.kind {
            ConvKind::Forward => (api.fwd_algo, "cudnnGetConvolutionForwardAlgorithm_v7"),
            ConvKind::GradX => (
                api.bwd_data_algo,
                "cudnnGetConvolutionBackwardDataAlgorithm_v7",
            ),
            ConvKind::GradW => (
                api.bwd_filter_algo,
                "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
            ),
        };
        let [a, b, out] = self.operands();
        // SAFETY: live descriptors; `perf` holds the requested count.
        let st = unsafe { f(h.ptr, a, b, self.conv, out, 16, &mut n, perf.as_mut_ptr()) };
        api.check(what, st)?;
        perf[..n.clamp(0, 16) as usize]
            .iter()
            .find(|p| p.status == 0 && p.determinism == DETERMINISTIC)
            .map(|p| p.algo)
            .ok_or_else(|| format!("{what}: no deterministic algorithm for this convolution"))
    }

    /// The descriptors in the order the kind's queries take them, around
    /// the convolution's (forward: x, w, y; grad x: w, dy, dx; grad w: x,
    /// dy, dw).
    fn operands(&self) -> [Ptr; 3] {
        match self.kind {
            ConvKind::Forward => [self.x, self.w, self.y],
            ConvKind::GradX => [self.w, self.y, self.x],
            ConvKind::GradW => [self.x, self.y, self.w],
        }
    }

    fn workspace_of(&self, h: &Handle) -> Result<usize, String> {
        let api = self.api;
        let f = match self.kind {
            ConvKind::Forward => api.fwd_ws,
            ConvKind::GradX => api.bwd_data_ws,
            ConvKind::GradW => api.bwd_filter_ws,
        };
        let [a, b, out] = self.operands();
        let mut bytes = 0usize;
        // SAFETY: live descriptors and an algorithm cuDNN offered.
        let st = unsafe { f(h.ptr, a, b, self.conv, out, self.algo, &mut bytes) };
        api.check("cudnnGetConvolution*WorkspaceSize", st)?;
        Ok(bytes)
    }

    /// Queue the convolution on `h`'s stream: `out = op(in0, in1)` with the
    /// op's operands in its order (forward: x, w → y; grad x: dy, w → dx;
    /// grad w: x, dy → dw), device pointers; `ws` has [`Self::workspace`]
    /// bytes.
    ///
    /// # Safety
    /// The pointers are device buffers of the shape's sizes, `ws` of the
    /// workspace's, all alive until the stream has run the call.
    pub(super) unsafe fn run(
        &self,
        h: &Handle,
        ins: [u64; 2],
        out: u64,
        ws: u64,
    ) -> Result<(), String> {
        let (one, zero) = (1.0f32, 0.0f32);
        let alpha = &one as *const f32 as *const c_void;
        let beta = &zero as *const f32 as *const c_void;
        let api = self.api;
        // The three functions take (descriptor, pointer) pairs in the order
        // of `operands`: grad x takes w before dy, the op dy before w.
        let (f, what, (a, b)) = match self.kind {
            ConvKind::Forward => (api.forward, "cudnnConvolutionForward", (ins[0], ins[1])),
            ConvKind::GradX => (
                api.backward_data,
                "cudnnConvolutionBackwardData",
                (ins[1], ins[0]),
            ),
            ConvKind::GradW => (
                api.backward_filter,
                "cudnnConvolutionBackwardFilter",
                (ins[0], ins[1]),
            ),
        };
        let [da, db, dout] = self.operands();
        let (algo, bytes) = (self.algo, self.workspace);
        let st = f(
            h.ptr, alpha, da, a, db, b, self.conv, algo, ws, bytes, beta, dout, out,
        );
        api.check(what, st)
    }
}

impl Drop for ConvDescs {
    fn drop(&mut self) {
        let api = self.api;
        let (t, f, c) = (api.destroy_tensor, api.destroy_filter, api.destroy_conv);
        // SAFETY: each made by its create function (or null), destroyed once.
        unsafe { destroy(&[(self.x, t), (self.y, t), (self.w, f), (self.conv, c)]) }
    }
}

/// The descriptors of one max pooling (x and y tensors, the pooling);
/// destroyed on drop.
pub(super) struct PoolDescs {
    api: &'static CudnnApi,
    x: Ptr,
    y: Ptr,
    pool: Ptr,
    grad: bool,
}

// SAFETY: descriptors are plain host structures, only read after set-up.
unsafe impl Send for PoolDescs {}
unsafe impl Sync for PoolDescs {}

impl PoolDescs {
    /// The descriptors of `s` (deterministic max pooling, NaN propagated).
    ///
    /// Errors: cuDNN's.
    pub(super) fn new(api: &'static CudnnApi, s: &PoolShape) -> Result<Self, String> {
        let mut d = PoolDescs {
            api,
            x: std::ptr::null_mut(),
            y: std::ptr::null_mut(),
            pool: std::ptr::null_mut(),
            grad: s.grad,
        };
        let ((sh, ph), (sw, pw)) = (s.along_h, s.along_w);
        // SAFETY: out-pointers to descriptors, then live descriptors with
        // in-range arguments; a failure leaves the made ones to drop.
        unsafe {
            api.check("cudnnCreateTensorDescriptor", (api.create_tensor)(&mut d.x))?;
            api.check("cudnnCreateTensorDescriptor", (api.create_tensor)(&mut d.y))?;
            api.check(
                "cudnnCreatePoolingDescriptor",
                (api.create_pool)(&mut d.pool),
            )?;
            let t = |p, hh, ww| (api.set_tensor)(p, NCHW, FLOAT, int(s.b), int(s.c), hh, ww);
            api.check("cudnnSetTensor4dDescriptor (x)", t(d.x, int(s.h), int(s.w)))?;
            api.check(
                "cudnnSetTensor4dDescriptor (y)",
                t(d.y, int(s.oh), int(s.ow)),
            )?;
            let (k, p, st) = (
                (int(s.kh), int(s.kw)),
                (int(ph), int(pw)),
                (int(sh), int(sw)),
            );
            let set = (api.set_pool)(
                d.pool,
                MAX_DETERMINISTIC,
                PROPAGATE_NAN,
                k.0,
                k.1,
                p.0,
                p.1,
                st.0,
                st.1,
            );
            api.check("cudnnSetPooling2dDescriptor", set)?;
        }
        Ok(d)
    }

    /// Queue the pooling (`ins` = [x]) or its gradient (`ins` = [x, y,
    /// dy]) on `h`'s stream into `out` (y, or dx).
    ///
    /// # Safety
    /// The pointers are device buffers of the shape's sizes, alive until
    /// the stream has run the call.
    pub(super) unsafe fn run(&self, h: &Handle, ins: &[u64], out: u64) -> Result<(), String> {
        let (one, zero) = (1.0f32, 0.0f32);
        let alpha = &one as *const f32 as *const c_void;
        let beta = &zero as *const f32 as *const c_void;
        let api = self.api;
        let (x, y, pool) = (self.x, self.y, self.pool);
        if self.grad {
            let st = (api.pool_backward)(
                h.ptr, pool, alpha, y, ins[1], y, ins[2], x, ins[0], beta, x, out,
            );
            api.check("cudnnPoolingBackward", st)
        } else {
            let st = (api.pool_forward)(h.ptr, pool, alpha, x, ins[0], beta, y, out);
            api.check("cudnnPoolingForward", st)
        }
    }
}

impl Drop for PoolDescs {
    fn drop(&mut self) {
        let (t, p) = (self.api.destroy_tensor, self.api.destroy_pool);
        // SAFETY: each made by its create function (or null), destroyed once.
        unsafe { destroy(&[(self.x, t), (self.y, t), (self.pool, p)]) }
    }
}

/// Destroy each non-null descriptor with its destroy function (a failure
/// to destroy is not actionable).
///
/// # Safety
/// Each pointer is null or a live descriptor of its function's kind, not
/// used afterwards.
unsafe fn destroy(descs: &[(Ptr, unsafe extern "C" fn(Ptr) -> Status)]) {
    for &(p, f) in descs {
        if !p.is_null() {
            f(p);
        }
    }
}
