//! cuDNN (`cudnn*`, the C signatures of cuDNN 9's `cudnn_graph.h` and
//! `cudnn_cnn.h`): the legacy 2-D convolution API tofu's CUDA backend
//! calls — handles on a stream, 4-D NCHW f32 tensor and filter
//! descriptors, convolution descriptors (pads, strides, dilations,
//! cross-correlation or convolution, any math type: always FP32), the
//! `_v7` algorithm queries (one deterministic algorithm per direction),
//! workspace sizes, and the forward, backward-data and backward-filter
//! convolutions, queued on the handle's stream and computed there by
//! [`crate::cudnn_conv`] (im2col into the caller's workspace, GEMMs by
//! the `gemm` crate). Descriptors are checked against one another and
//! every operand and the workspace against its device allocation, as
//! cuDNN's `CUDNN_STATUS_BAD_PARAM`; β must be 0. Max pooling:
//! [`crate::cudnn_pool`].

use std::ffi::{c_char, c_int, c_void};

use crate::cudnn_conv::Conv;
use crate::device::stream_of;
use crate::driver::put;
use crate::memory::check;
use crate::status::CUDA_SUCCESS;
use crate::stream::Delay;

/// `cudnnStatus_t` (cuDNN 9's values).
pub(crate) type Status = c_int;
pub(crate) const SUCCESS: Status = 0;
pub(crate) const NOT_INITIALIZED: Status = 1001;
pub(crate) const BAD_PARAM: Status = 2000;
pub(crate) const NOT_SUPPORTED: Status = 3000;

/// The algorithm each direction offers: `CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM`,
/// `CUDNN_CONVOLUTION_BWD_DATA_ALGO_1`, `CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1`.
const ALGO: [c_int; 3] = [0, 1, 1];

/// Which convolution.
#[derive(Clone, Copy)]
enum Dir {
    Forward = 0,
    Data = 1,
    Filter = 2,
}

/// `cudnnConvolution*AlgoPerf_t`.
#[repr(C)]
pub struct AlgoPerf {
    algo: c_int,
    status: Status,
    time: f32,
    memory: usize,
    determinism: c_int,
    math_type: c_int,
    reserved: [c_int; 3],
}

/// A handle: the stream its work goes to.
#[derive(Default)]
pub(crate) struct Handle {
    pub(crate) stream: usize,
}

/// A tensor or filter descriptor: NCHW (KCRS) dims once set.
#[derive(Default)]
pub(crate) struct Dims(pub(crate) Option<[usize; 4]>);

/// A convolution descriptor's settings: pads, strides, dilations
/// (height, width), whether the filter is flipped.
type ConvSettings = ([usize; 2], [usize; 2], [usize; 2], bool);

/// A convolution descriptor once set.
#[derive(Default)]
struct ConvDesc(Option<ConvSettings>);

pub(crate) fn make<T: Default>(out: *mut *mut c_void) -> Status {
    match put(out, Box::into_raw(Box::<T>::default()) as *mut c_void) {
        CUDA_SUCCESS => SUCCESS,
        _ => BAD_PARAM,
    }
}

pub(crate) fn get<'a, T>(p: *mut c_void) -> Option<&'a mut T> {
    // SAFETY: a descriptor or handle made by `make::<T>`, alive until
    // destroyed (the C API's contract).
    (!p.is_null()).then(|| unsafe { &mut *(p as *mut T) })
}

pub(crate) fn free<T>(p: *mut c_void) -> Status {
    if p.is_null() {
        return BAD_PARAM;
    }
    // SAFETY: made by `make::<T>`, destroyed once.
    drop(unsafe { Box::from_raw(p as *mut T) });
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cudnnGetErrorString(s: Status) -> *const c_char {
    let text: &'static [u8] = match s {
        SUCCESS => b"CUDNN_STATUS_SUCCESS\0",
        NOT_INITIALIZED => b"CUDNN_STATUS_NOT_INITIALIZED\0",
        BAD_PARAM => b"CUDNN_STATUS_BAD_PARAM\0",
        NOT_SUPPORTED => b"CUDNN_STATUS_NOT_SUPPORTED\0",
        _ => b"CUDNN_STATUS_UNKNOWN\0",
    };
    text.as_ptr() as *const c_char
}

/// Export the create and destroy functions of each descriptor (or handle)
/// type: `create(out)` boxes a default one, `destroy(p)` frees it.
macro_rules! descriptors {
    ($($create:ident, $destroy:ident, $t:ty;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $create(d: *mut *mut c_void) -> Status {
            $crate::cudnn::make::<$t>(d)
        }

        #[no_mangle]
        pub extern "C" fn $destroy(d: *mut c_void) -> Status {
            $crate::cudnn::free::<$t>(d)
        }
    )*};
}
pub(crate) use descriptors;

descriptors! {
    cudnnCreate, cudnnDestroy, Handle;
    cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor, Dims;
    cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor, Dims;
    cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor, ConvDesc;
}

#[no_mangle]
pub extern "C" fn cudnnSetStream(h: *mut c_void, stream: *mut c_void) -> Status {
    match get::<Handle>(h) {
        Some(h) => {
            h.stream = stream as usize;
            SUCCESS
        }
        None => NOT_INITIALIZED,
    }
}

/// Set 4-D dims: NCHW layout (format 0) and f32 (type 0) only.
fn set_dims(d: *mut c_void, format: c_int, dtype: c_int, dims: [c_int; 4]) -> Status {
    let Some(d) = get::<Dims>(d) else {
        return BAD_PARAM;
    };
    if format != 0 || dtype != 0 {
        return NOT_SUPPORTED;
    }
    let dims = dims.map(|v| usize::try_from(v).unwrap_or(0));
    if dims.contains(&0) {
        return BAD_PARAM;
    }
    d.0 = Some(dims);
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cudnnSetTensor4dDescriptor(
    d: *mut c_void,
    format: c_int,
    dtype: c_int,
    n: c_int,
    c: c_int,
    h: c_int,
    w: c_int,
) -> Status {
    set_dims(d, format, dtype, [n, c, h, w])
}

#[no_mangle]
pub extern "C" fn cudnnSetFilter4dDescriptor(
    d: *mut c_void,
    dtype: c_int,
    format: c_int,
    k: c_int,
    c: c_int,
    h: c_int,
    w: c_int,
) -> Status {
    set_dims(d, format, dtype, [k, c, h, w])
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn cudnnSetConvolution2dDescriptor(
    d: *mut c_void,
    pad_h: c_int,
    pad_w: c_int,
    u: c_int,
    v: c_int,
    dil_h: c_int,
    dil_w: c_int,
    mode: c_int,
    compute: c_int,
) -> Status {
    let Some(d) = get::<ConvDesc>(d) else {
        return BAD_PARAM;
    };
    let n = |x: c_int| usize::try_from(x).ok();
    let (Some(ph), Some(pw), Some(sh), Some(sw), Some(dh), Some(dw)) =
        (n(pad_h), n(pad_w), n(u), n(v), n(dil_h), n(dil_w))
    else {
        return BAD_PARAM;
    };
    if sh == 0 || sw == 0 || dh == 0 || dw == 0 || !(0..=1).contains(&mode) {
        return BAD_PARAM;
    }
    if compute != 0 {
        return NOT_SUPPORTED;
    }
    d.0 = Some(([ph, pw], [sh, sw], [dh, dw], mode == 0));
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cudnnSetConvolutionMathType(d: *mut c_void, math: c_int) -> Status {
    match get::<ConvDesc>(d) {
        Some(_) if (0..=3).contains(&math) => SUCCESS,
        _ => BAD_PARAM,
    }
}

/// The convolution the descriptors describe, if set and consistent.
fn conv_of(x: *mut c_void, w: *mut c_void, y: *mut c_void, c: *mut c_void) -> Option<Conv> {
    let [n, ch, h, wd] = get::<Dims>(x)?.0?;
    let [k, c2, r, s] = get::<Dims>(w)?.0?;
    let [n2, k2, p, q] = get::<Dims>(y)?.0?;
    let (pad, stride, dilation, flip) = get::<ConvDesc>(c)?.0?;
    let conv = Conv {
        n,
        c: ch,
        h,
        w: wd,
        k,
        r,
        s,
        p,
        q,
        pad,
        stride,
        dilation,
        flip,
    };
    (c2 == ch && n2 == n && k2 == k && conv.consistent()).then_some(conv)
}

/// The descriptors of direction `dir` in the order its functions take
/// them (forward: x, w, y; data: w, dy, dx; filter: x, dy, dw) as
/// (x, w, y).
fn xwy(dir: Dir, a: *mut c_void, b: *mut c_void, out: *mut c_void) -> [*mut c_void; 3] {
    match dir {
        Dir::Forward => [a, b, out],
        Dir::Data => [out, a, b],
        Dir::Filter => [a, out, b],
    }
}

/// The `_v7` query: one deterministic algorithm and its workspace.
fn algorithms(dir: Dir, d: [*mut c_void; 4], n: *mut c_int, perf: *mut AlgoPerf) -> Status {
    let [x, w, y] = xwy(dir, d[0], d[1], d[3]);
    let Some(conv) = conv_of(x, w, y, d[2]) else {
        return BAD_PARAM;
    };
    let one = AlgoPerf {
        algo: ALGO[dir as usize],
        status: SUCCESS,
        time: 0.0,
        memory: conv.workspace(),
        determinism: 1,
        math_type: 0,
        reserved: [0; 3],
    };
    if put(perf, one) != CUDA_SUCCESS || put(n, 1) != CUDA_SUCCESS {
        return BAD_PARAM;
    }
    SUCCESS
}

/// The workspace of `algo` in direction `dir`.
fn workspace(dir: Dir, d: [*mut c_void; 4], algo: c_int, bytes: *mut usize) -> Status {
    let [x, w, y] = xwy(dir, d[0], d[1], d[3]);
    match conv_of(x, w, y, d[2]) {
        Some(_) if algo != ALGO[dir as usize] => NOT_SUPPORTED,
        Some(c) if put(bytes, c.workspace()) == CUDA_SUCCESS => SUCCESS,
        _ => BAD_PARAM,
    }
}

macro_rules! queries {
    ($($algo:ident, $ws:ident, $dir:expr;)*) => {$(
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub extern "C" fn $algo(
            _h: *mut c_void, a: *mut c_void, b: *mut c_void, conv: *mut c_void,
            out: *mut c_void, requested: c_int, n: *mut c_int, perf: *mut AlgoPerf,
        ) -> Status {
            if requested < 1 {
                return BAD_PARAM;
            }
            algorithms($dir, [a, b, conv, out], n, perf)
        }

        #[no_mangle]
        pub extern "C" fn $ws(
            _h: *mut c_void, a: *mut c_void, b: *mut c_void, conv: *mut c_void,
            out: *mut c_void, algo: c_int, bytes: *mut usize,
        ) -> Status {
            workspace($dir, [a, b, conv, out], algo, bytes)
        }
    )*};
}

queries! {
    cudnnGetConvolutionForwardAlgorithm_v7, cudnnGetConvolutionForwardWorkspaceSize, Dir::Forward;
    cudnnGetConvolutionBackwardDataAlgorithm_v7, cudnnGetConvolutionBackwardDataWorkspaceSize, Dir::Data;
    cudnnGetConvolutionBackwardFilterAlgorithm_v7, cudnnGetConvolutionBackwardFilterWorkspaceSize, Dir::Filter;
}

/// One convolution call's arguments: descriptors (a, b, conv, out in the
/// function's order), device pointers (a, b, out), algorithm, workspace.
struct Call {
    dir: Dir,
    descs: [*mut c_void; 4],
    ptrs: [u64; 3],
    algo: c_int,
    ws: (u64, usize),
}

/// Check `call` and queue it on the handle's stream.
fn queue(h_ptr: *mut c_void, alpha: *const c_void, beta: *const c_void, call: Call) -> Status {
    if get::<Handle>(h_ptr).is_none() {
        return NOT_INITIALIZED;
    }
    if alpha.is_null() || beta.is_null() {
        return BAD_PARAM;
    }
    // SAFETY: host pointers to floats (f32 data), non-null.
    let (alpha, beta) = unsafe { (*(alpha as *const f32), *(beta as *const f32)) };
    if beta != 0.0 {
        return NOT_SUPPORTED;
    }
    let [dx, dw, dy] = xwy(call.dir, call.descs[0], call.descs[1], call.descs[3]);
    let Some(conv) = conv_of(dx, dw, dy, call.descs[2]) else {
        return BAD_PARAM;
    };
    if call.algo != ALGO[call.dir as usize] {
        return NOT_SUPPORTED;
    }
    // (x, w, y) pointers and sizes, then the workspace.
    let [pa, pb, po] = call.ptrs;
    let [px, pw, py] = match call.dir {
        Dir::Forward => [pa, pb, po],
        Dir::Data => [po, pa, pb],
        Dir::Filter => [pa, po, pb],
    };
    let ws_bytes = conv.workspace();
    let [nx, nw, ny] = conv.elems();
    let spans = [
        (px, nx * 4),
        (pw, nw * 4),
        (py, ny * 4),
        (call.ws.0, ws_bytes),
    ];
    if call.ws.1 < ws_bytes {
        return BAD_PARAM;
    }
    let (dir, ws) = (call.dir, call.ws.0);
    let what = [
        "cudnnConvolutionForward",
        "cudnnConvolutionBackwardData",
        "cudnnConvolutionBackwardFilter",
    ][dir as usize];
    launch(h_ptr, what, &spans, move |m| {
        let col = m.rw(ws, ws_bytes / 4);
        match dir {
            Dir::Forward => conv.forward(alpha, m.ro(px, nx), m.ro(pw, nw), col, m.rw(py, ny)),
            Dir::Data => conv.backward_data(alpha, m.ro(py, ny), m.ro(pw, nw), col, m.rw(px, nx)),
            Dir::Filter => {
                conv.backward_filter(alpha, m.ro(px, nx), m.ro(py, ny), col, m.rw(pw, nw))
            }
        }
    })
}

/// Device memory as f32 slices, handed to the work of a queued cuDNN call
/// ([`launch`]) whose operands were checked to lie inside allocations.
pub(crate) struct Mem(());

impl Mem {
    /// `n` elements at `p`, read.
    pub(crate) fn ro<'a>(&self, p: u64, n: usize) -> &'a [f32] {
        // SAFETY: a checked operand of the call (see `launch`).
        unsafe { std::slice::from_raw_parts(p as *const f32, n) }
    }

    /// `n` elements at `p`, written (a call's outputs and workspace do not
    /// overlap its inputs).
    #[allow(clippy::mut_from_ref)]
    pub(crate) fn rw<'a>(&self, p: u64, n: usize) -> &'a mut [f32] {
        // SAFETY: a checked operand of the call (see `launch`).
        unsafe { std::slice::from_raw_parts_mut(p as *mut f32, n) }
    }
}

/// Check that each (pointer, bytes) of `spans` lies inside one device
/// allocation (`BAD_PARAM` otherwise) and queue `work` on handle `h`'s
/// stream, with its random delay. `what` names the call: with
/// `TOFU_CPU_CUDA_TRACE_CUDNN` set, each queued call says
/// `cpu-cuda: cudnn WHAT` on stderr (how tests see which ops reached cuDNN).
pub(crate) fn launch(
    h: *mut c_void,
    what: &str,
    spans: &[(u64, usize)],
    work: impl FnOnce(Mem) + Send + 'static,
) -> Status {
    let Some(h) = get::<Handle>(h) else {
        return NOT_INITIALIZED;
    };
    if spans.iter().any(|&(p, b)| check(p, b) != CUDA_SUCCESS) {
        return BAD_PARAM;
    }
    let Some(stream) = stream_of(h.stream as *mut c_void) else {
        return NOT_INITIALIZED;
    };
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *TRACE.get_or_init(|| std::env::var_os("TOFU_CPU_CUDA_TRACE_CUDNN").is_some()) {
        eprintln!("cpu-cuda: cudnn {what}");
    }
    stream.enqueue(
        Delay::Random,
        Box::new(move || {
            work(Mem(()));
            CUDA_SUCCESS
        }),
    );
    SUCCESS
}

macro_rules! convolutions {
    ($($name:ident, $dir:expr;)*) => {$(
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub extern "C" fn $name(
            h: *mut c_void, alpha: *const c_void, ad: *mut c_void, a: u64, bd: *mut c_void,
            b: u64, conv: *mut c_void, algo: c_int, ws: u64, ws_bytes: usize,
            beta: *const c_void, od: *mut c_void, out: u64,
        ) -> Status {
            let call = Call {
                dir: $dir,
                descs: [ad, bd, conv, od],
                ptrs: [a, b, out],
                algo,
                ws: (ws, ws_bytes),
            };
            queue(h, alpha, beta, call)
        }
    )*};
}

convolutions! {
    cudnnConvolutionForward, Dir::Forward;
    cudnnConvolutionBackwardData, Dir::Data;
    cudnnConvolutionBackwardFilter, Dir::Filter;
}
