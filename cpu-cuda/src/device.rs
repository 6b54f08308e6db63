//! The stand-in's devices: how many (`TOFU_CPU_CUDA_DEVICES`, default 2),
//! each one's default stream and the streams made on it, and the context
//! current on each host thread (a context is its device: the primary one).

use std::cell::Cell;
use std::sync::{Arc, Mutex, OnceLock};

use crate::status::{CuResult, CUDA_SUCCESS};
use crate::stream::Stream;

/// One device: its default stream and every stream made on it.
pub struct Device {
    /// The default (null) stream.
    pub default: Arc<Stream>,
    /// Streams made with `cuStreamCreate`, alive until destroyed.
    pub streams: Mutex<Vec<Arc<Stream>>>,
}

/// The devices of this process.
pub fn devices() -> &'static [Device] {
    static DEVICES: OnceLock<Vec<Device>> = OnceLock::new();
    DEVICES.get_or_init(|| {
        let n = std::env::var("TOFU_CPU_CUDA_DEVICES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2usize);
        (0..n)
            .map(|d| Device {
                default: Stream::start(d),
                streams: Mutex::new(Vec::new()),
            })
            .collect()
    })
}

thread_local! {
    /// The device of the context current on this thread (+1; 0: none).
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// A context handle for device `d` (never null).
pub fn context_handle(d: usize) -> *mut std::ffi::c_void {
    (d + 1) as *mut std::ffi::c_void
}

/// The device of a context handle, if it is one.
pub fn context_device(ctx: *mut std::ffi::c_void) -> Option<usize> {
    let d = (ctx as usize).checked_sub(1)?;
    (d < devices().len()).then_some(d)
}

/// Make `d` (or none) current on this thread.
pub fn set_current(d: Option<usize>) {
    CURRENT.with(|c| c.set(d.map_or(0, |d| d + 1)));
}

/// The device current on this thread.
pub fn current() -> Option<usize> {
    CURRENT.with(|c| c.get().checked_sub(1))
}

/// Wait for all work on device `d`: its default stream and its streams.
/// Gives the first sticky error.
pub fn synchronize_device(d: usize) -> CuResult {
    let dev = &devices()[d];
    let mut r = dev.default.synchronize();
    let streams: Vec<_> = dev.streams.lock().expect("streams").clone();
    for s in streams {
        let e = s.synchronize();
        if r == CUDA_SUCCESS {
            r = e;
        }
    }
    r
}

/// A stream handle as the driver API passes it: null (and the legacy and
/// per-thread handles 1 and 2) is the current device's default stream,
/// anything else a stream made by `cuStreamCreate` (an `Arc<Stream>`'s
/// raw pointer).
pub fn stream_of(handle: *mut std::ffi::c_void) -> Option<Arc<Stream>> {
    match handle as usize {
        0..=2 => current().map(|d| devices()[d].default.clone()),
        _ => {
            let p = handle as *const Stream;
            // SAFETY: a handle made by `cuStreamCreate` from
            // `Arc::into_raw`, alive until `cuStreamDestroy`.
            unsafe {
                Arc::increment_strong_count(p);
                Some(Arc::from_raw(p))
            }
        }
    }
}
