//! The driver API's devices, contexts, streams and events (`cu*`), with
//! the C signatures of `cuda.h` (CUDA 13). Memory, modules and launches
//! are in [`crate::driver_mem`].

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::Arc;

use crate::device::{
    context_device, context_handle, current, devices, set_current, stream_of, synchronize_device,
};
use crate::memory::capacity;
use crate::status::*;
use crate::stream::{Event, Stream};

/// Run `f` with the device current on this thread.
pub(crate) fn with_current(f: impl FnOnce(usize) -> CuResult) -> CuResult {
    match current() {
        Some(d) => f(d),
        None => CUDA_ERROR_INVALID_CONTEXT,
    }
}

/// Write `v` through `p` unless it is null.
pub(crate) fn put<T>(p: *mut T, v: T) -> CuResult {
    if p.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: a caller's non-null out-pointer to a `T`.
    unsafe { p.write(v) };
    CUDA_SUCCESS
}

fn device(ordinal: c_int) -> Option<usize> {
    let d = usize::try_from(ordinal).ok()?;
    (d < devices().len()).then_some(d)
}

#[no_mangle]
pub extern "C" fn cuInit(_flags: c_uint) -> CuResult {
    devices();
    CUDA_SUCCESS
}

#[no_mangle]
pub extern "C" fn cuDriverGetVersion(v: *mut c_int) -> CuResult {
    put(v, 13000)
}

#[no_mangle]
pub extern "C" fn cuDeviceGetCount(n: *mut c_int) -> CuResult {
    put(n, devices().len() as c_int)
}

#[no_mangle]
pub extern "C" fn cuDeviceGet(dev: *mut c_int, ordinal: c_int) -> CuResult {
    match device(ordinal) {
        Some(_) => put(dev, ordinal),
        None => CUDA_ERROR_INVALID_DEVICE,
    }
}

#[no_mangle]
pub extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: c_int) -> CuResult {
    if device(dev).is_none() {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    let text = b"tofu-cpu-cuda stand-in (not a GPU)\0";
    let n = text.len().min(len.max(0) as usize);
    if name.is_null() || n == 0 {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's buffer of `len` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr().cast(), name, n);
        *name.add(n - 1) = 0;
    }
    CUDA_SUCCESS
}

#[no_mangle]
pub extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: c_int) -> CuResult {
    match device(dev) {
        Some(_) => put(bytes, capacity() as usize),
        None => CUDA_ERROR_INVALID_DEVICE,
    }
}

#[no_mangle]
pub extern "C" fn cuDeviceGetAttribute(v: *mut c_int, attrib: c_uint, dev: c_int) -> CuResult {
    if device(dev).is_none() {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    put(
        v,
        match attrib {
            1 | 2 => 1024, // max threads per block, block dim x
            5 => i32::MAX, // max grid dim x
            8 => 48 << 10, // shared memory per block
            10 => 32,      // warp size
            16 => 1,       // multiprocessors
            75 => 8,       // compute capability 8.0
            76 => 0,
            115 => 1, // memory pools (stream-ordered allocation)
            _ => 0,
        },
    )
}

#[no_mangle]
pub extern "C" fn cuDevicePrimaryCtxRetain(ctx: *mut *mut c_void, dev: c_int) -> CuResult {
    match device(dev) {
        Some(d) => put(ctx, context_handle(d)),
        None => CUDA_ERROR_INVALID_DEVICE,
    }
}

#[no_mangle]
pub extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: c_int) -> CuResult {
    match device(dev) {
        Some(_) => CUDA_SUCCESS,
        None => CUDA_ERROR_INVALID_DEVICE,
    }
}

#[no_mangle]
pub extern "C" fn cuCtxSetCurrent(ctx: *mut c_void) -> CuResult {
    if ctx.is_null() {
        set_current(None);
        return CUDA_SUCCESS;
    }
    match context_device(ctx) {
        Some(d) => {
            set_current(Some(d));
            CUDA_SUCCESS
        }
        None => CUDA_ERROR_INVALID_CONTEXT,
    }
}

#[no_mangle]
pub extern "C" fn cuCtxGetCurrent(ctx: *mut *mut c_void) -> CuResult {
    put(ctx, current().map_or(std::ptr::null_mut(), context_handle))
}

#[no_mangle]
pub extern "C" fn cuCtxGetDevice(dev: *mut c_int) -> CuResult {
    with_current(|d| put(dev, d as c_int))
}

#[no_mangle]
pub extern "C" fn cuCtxSynchronize() -> CuResult {
    with_current(synchronize_device)
}

#[no_mangle]
pub extern "C" fn cuGetErrorName(r: CuResult, s: *mut *const c_char) -> CuResult {
    put(s, cu_name(r).as_ptr().cast())
}

#[no_mangle]
pub extern "C" fn cuGetErrorString(r: CuResult, s: *mut *const c_char) -> CuResult {
    put(s, cu_string(r).as_ptr().cast())
}

#[no_mangle]
pub extern "C" fn cuStreamCreate(stream: *mut *mut c_void, _flags: c_uint) -> CuResult {
    with_current(|d| {
        let s = Stream::start(d);
        devices()[d]
            .streams
            .lock()
            .expect("streams")
            .push(s.clone());
        put(stream, Arc::into_raw(s) as *mut c_void)
    })
}

#[no_mangle]
pub extern "C" fn cuStreamDestroy_v2(stream: *mut c_void) -> CuResult {
    if (stream as usize) <= 2 {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    // SAFETY: a handle made by `cuStreamCreate` (`Arc::into_raw`),
    // destroyed once.
    let s = unsafe { Arc::from_raw(stream as *const Stream) };
    devices()[s.device]
        .streams
        .lock()
        .expect("streams")
        .retain(|o| !Arc::ptr_eq(o, &s));
    s.close();
    CUDA_SUCCESS
}

#[no_mangle]
pub extern "C" fn cuStreamSynchronize(stream: *mut c_void) -> CuResult {
    match stream_of(stream) {
        Some(s) => s.synchronize(),
        None => CUDA_ERROR_INVALID_CONTEXT,
    }
}

#[no_mangle]
pub extern "C" fn cuStreamQuery(stream: *mut c_void) -> CuResult {
    match stream_of(stream) {
        Some(s) if s.idle() => CUDA_SUCCESS,
        Some(_) => CUDA_ERROR_NOT_READY,
        None => CUDA_ERROR_INVALID_CONTEXT,
    }
}

/// The event behind a handle made by `cuEventCreate`.
fn event_of(e: *mut c_void) -> Option<Arc<Event>> {
    if e.is_null() {
        return None;
    }
    let p = e as *const Event;
    // SAFETY: made by `cuEventCreate` from `Arc::into_raw`, alive until
    // `cuEventDestroy`.
    unsafe {
        Arc::increment_strong_count(p);
        Some(Arc::from_raw(p))
    }
}

#[no_mangle]
pub extern "C" fn cuEventCreate(e: *mut *mut c_void, _flags: c_uint) -> CuResult {
    put(e, Arc::into_raw(Arc::new(Event::default())) as *mut c_void)
}

#[no_mangle]
pub extern "C" fn cuEventDestroy_v2(e: *mut c_void) -> CuResult {
    if e.is_null() {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    // SAFETY: as `event_of`; destroyed once (queued waits hold their own
    // references).
    drop(unsafe { Arc::from_raw(e as *const Event) });
    CUDA_SUCCESS
}

#[no_mangle]
pub extern "C" fn cuEventRecord(e: *mut c_void, stream: *mut c_void) -> CuResult {
    match (event_of(e), stream_of(stream)) {
        (Some(e), Some(s)) => {
            e.record(&s);
            CUDA_SUCCESS
        }
        _ => CUDA_ERROR_INVALID_HANDLE,
    }
}

#[no_mangle]
pub extern "C" fn cuStreamWaitEvent(stream: *mut c_void, e: *mut c_void, _f: c_uint) -> CuResult {
    match (event_of(e), stream_of(stream)) {
        (Some(e), Some(s)) => {
            e.wait_on(&s);
            CUDA_SUCCESS
        }
        _ => CUDA_ERROR_INVALID_HANDLE,
    }
}

#[no_mangle]
pub extern "C" fn cuEventSynchronize(e: *mut c_void) -> CuResult {
    match event_of(e) {
        Some(e) => {
            e.synchronize();
            CUDA_SUCCESS
        }
        None => CUDA_ERROR_INVALID_HANDLE,
    }
}

#[no_mangle]
pub extern "C" fn cuEventQuery(e: *mut c_void) -> CuResult {
    match event_of(e) {
        Some(e) if e.reached() => CUDA_SUCCESS,
        Some(_) => CUDA_ERROR_NOT_READY,
        None => CUDA_ERROR_INVALID_HANDLE,
    }
}

/// Event timing is not modelled (the stand-in has no GPU clock).
#[no_mangle]
pub extern "C" fn cuEventElapsedTime_v2(
    _ms: *mut f32,
    _a: *mut c_void,
    _b: *mut c_void,
) -> CuResult {
    CUDA_ERROR_NOT_SUPPORTED
}
