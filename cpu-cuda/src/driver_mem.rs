//! The driver API's memory, modules and kernel launches (`cu*`, the C
//! signatures of `cuda.h`, CUDA 13). Asynchronous calls queue their work on
//! the stream ([`crate::stream`]). All host memory is pageable (the
//! stand-in has no `cuMemHostAlloc`), with CUDA's semantics for it: a copy
//! from the host takes the host data when called and lands when the stream
//! reaches it; a copy to the host returns once it has run (after the work
//! queued before it on its stream, and nothing else).

use std::ffi::{c_char, c_uint, c_void, CStr};

use crate::device::{stream_of, synchronize_device};
use crate::driver::{put, with_current};
use crate::memory::{alloc, capacity, check, free, used};
use crate::module::{load, Function, Module, IMAGE_MAGIC};
use crate::status::*;
use crate::stream::Delay;

/// Queue `work` on `stream`'s stream (null: the current device's default).
fn queue(
    stream: *mut c_void,
    delay: Delay,
    work: impl FnOnce() -> CuResult + Send + 'static,
) -> CuResult {
    match stream_of(stream) {
        Some(s) => {
            s.enqueue(delay, Box::new(work));
            CUDA_SUCCESS
        }
        None => CUDA_ERROR_INVALID_CONTEXT,
    }
}

/// Queue `work` on the current device's default stream and wait for it
/// and everything else on the device (a synchronous call).
fn now(work: impl FnOnce() -> CuResult + Send + 'static) -> CuResult {
    with_current(|d| {
        let r = queue(std::ptr::null_mut(), Delay::Random, work);
        if r != CUDA_SUCCESS {
            return r;
        }
        synchronize_device(d)
    })
}

#[no_mangle]
pub extern "C" fn cuMemGetInfo_v2(free_b: *mut usize, total: *mut usize) -> CuResult {
    with_current(|d| {
        let r = put(total, capacity() as usize);
        if r != CUDA_SUCCESS {
            return r;
        }
        put(free_b, capacity().saturating_sub(used(d)) as usize)
    })
}

#[no_mangle]
pub extern "C" fn cuMemAlloc_v2(p: *mut u64, bytes: usize) -> CuResult {
    with_current(|d| match alloc(d, bytes) {
        Ok(a) => put(p, a),
        Err(e) => e,
    })
}

#[no_mangle]
pub extern "C" fn cuMemFree_v2(p: u64) -> CuResult {
    with_current(|d| {
        let r = synchronize_device(d);
        let f = free(p);
        if r != CUDA_SUCCESS {
            r
        } else {
            f
        }
    })
}

/// Stream-ordered allocation: the memory is taken (and counted) when
/// called, as the pool would hand it out.
#[no_mangle]
pub extern "C" fn cuMemAllocAsync(p: *mut u64, bytes: usize, _stream: *mut c_void) -> CuResult {
    cuMemAlloc_v2(p, bytes)
}

/// Stream-ordered free: the memory is released when the stream reaches it.
#[no_mangle]
pub extern "C" fn cuMemFreeAsync(p: u64, stream: *mut c_void) -> CuResult {
    queue(stream, Delay::No, move || free(p))
}

#[no_mangle]
pub extern "C" fn cuDeviceGetDefaultMemPool(pool: *mut *mut c_void, dev: i32) -> CuResult {
    put(pool, (dev as usize + 1) as *mut c_void)
}

/// Pool attributes are accepted and ignored (freed memory always returns
/// to the host).
#[no_mangle]
pub extern "C" fn cuMemPoolSetAttribute(
    _pool: *mut c_void,
    _a: c_uint,
    _v: *mut c_void,
) -> CuResult {
    CUDA_SUCCESS
}

fn copy(dst: usize, src: usize, bytes: usize) -> CuResult {
    // SAFETY: both ranges were checked (device side) or given by the
    // caller (host side); device allocations never overlap host memory.
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes) };
    CUDA_SUCCESS
}

#[no_mangle]
pub extern "C" fn cuMemcpyHtoDAsync_v2(
    dst: u64,
    src: *const c_void,
    bytes: usize,
    stream: *mut c_void,
) -> CuResult {
    let r = check(dst, bytes);
    if r != CUDA_SUCCESS || bytes == 0 {
        return r;
    }
    // SAFETY: the caller's `bytes` bytes at `src`, taken now.
    let data = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), bytes) }.to_vec();
    queue(stream, Delay::Random, move || {
        copy(dst as usize, data.as_ptr() as usize, bytes)
    })
}

#[no_mangle]
pub extern "C" fn cuMemcpyDtoHAsync_v2(
    dst: *mut c_void,
    src: u64,
    bytes: usize,
    stream: *mut c_void,
) -> CuResult {
    let r = check(src, bytes);
    if r != CUDA_SUCCESS || bytes == 0 {
        return r;
    }
    let dst = dst as usize;
    match stream_of(stream) {
        Some(s) => {
            s.enqueue(
                Delay::Random,
                Box::new(move || copy(dst, src as usize, bytes)),
            );
            // To pageable memory (all host memory here) the call returns
            // once the copy is done, as CUDA's does.
            s.synchronize()
        }
        None => CUDA_ERROR_INVALID_CONTEXT,
    }
}

#[no_mangle]
pub extern "C" fn cuMemcpyDtoDAsync_v2(
    dst: u64,
    src: u64,
    bytes: usize,
    stream: *mut c_void,
) -> CuResult {
    let r = check(src, bytes).max(check(dst, bytes));
    if r != CUDA_SUCCESS || bytes == 0 {
        return r;
    }
    queue(stream, Delay::Random, move || {
        copy(dst as usize, src as usize, bytes)
    })
}

#[no_mangle]
pub extern "C" fn cuMemcpyHtoD_v2(dst: u64, src: *const c_void, bytes: usize) -> CuResult {
    let r = cuMemcpyHtoDAsync_v2(dst, src, bytes, std::ptr::null_mut());
    if r != CUDA_SUCCESS {
        return r;
    }
    with_current(synchronize_device)
}

#[no_mangle]
pub extern "C" fn cuMemcpyDtoH_v2(dst: *mut c_void, src: u64, bytes: usize) -> CuResult {
    let r = check(src, bytes);
    if r != CUDA_SUCCESS {
        return r;
    }
    let dst = dst as usize;
    now(move || copy(dst, src as usize, bytes))
}

#[no_mangle]
pub extern "C" fn cuMemcpyDtoD_v2(dst: u64, src: u64, bytes: usize) -> CuResult {
    let r = check(src, bytes).max(check(dst, bytes));
    if r != CUDA_SUCCESS {
        return r;
    }
    now(move || copy(dst as usize, src as usize, bytes))
}

#[no_mangle]
pub extern "C" fn cuMemsetD8Async(dst: u64, value: u8, n: usize, stream: *mut c_void) -> CuResult {
    let r = check(dst, n);
    if r != CUDA_SUCCESS || n == 0 {
        return r;
    }
    queue(stream, Delay::Random, move || {
        // SAFETY: checked to lie inside an allocation.
        unsafe { std::ptr::write_bytes(dst as *mut u8, value, n) };
        CUDA_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cuMemsetD8_v2(dst: u64, value: u8, n: usize) -> CuResult {
    let r = cuMemsetD8Async(dst, value, n, std::ptr::null_mut());
    if r != CUDA_SUCCESS {
        return r;
    }
    with_current(synchronize_device)
}

/// Load an image made by the stand-in's NVRTC (the source behind
/// [`IMAGE_MAGIC`], NUL-terminated): compile it with g++ (cached).
#[no_mangle]
pub extern "C" fn cuModuleLoadData(module: *mut *mut c_void, image: *const c_void) -> CuResult {
    if image.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: the stand-in's images are NUL-terminated text.
    let text = unsafe { CStr::from_ptr(image.cast::<c_char>()) }.to_string_lossy();
    let Some(src) = text.strip_prefix(IMAGE_MAGIC) else {
        eprintln!("tofu-cpu-cuda: cuModuleLoadData: not an image of the stand-in's NVRTC");
        return CUDA_ERROR_INVALID_IMAGE;
    };
    match load(src) {
        Ok(m) => put(module, Box::into_raw(Box::new(m)) as *mut c_void),
        Err(e) => e,
    }
}

/// Modules stay loaded (queued launches may still run their kernels).
#[no_mangle]
pub extern "C" fn cuModuleUnload(_module: *mut c_void) -> CuResult {
    CUDA_SUCCESS
}

#[no_mangle]
pub extern "C" fn cuModuleGetFunction(
    f: *mut *mut c_void,
    module: *mut c_void,
    name: *const c_char,
) -> CuResult {
    if module.is_null() || name.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: a module handle from `cuModuleLoadData` (never freed) and
    // the caller's C string.
    let (m, name) = unsafe { (&*(module as *const Module), CStr::from_ptr(name)) };
    match m.function(&name.to_string_lossy()) {
        Some(func) => put(f, Box::into_raw(Box::new(func)) as *mut c_void),
        None => CUDA_ERROR_NOT_FOUND,
    }
}

/// Launch a 1-D grid (the backend's launches; y and z extents must be 1):
/// the arguments are copied now, the grid runs on the stream's thread
/// through the shim. A shim failure (a divergent barrier, a configuration
/// CUDA refuses) is a sticky `CUDA_ERROR_LAUNCH_FAILED`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn cuLaunchKernel(
    f: *mut c_void,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    _shared: c_uint,
    stream: *mut c_void,
    params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> CuResult {
    if f.is_null() {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if gy != 1 || gz != 1 || by != 1 || bz != 1 {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    // SAFETY: a function handle from `cuModuleGetFunction` (never freed).
    let func = unsafe { &*(f as *const Function) };
    if !func.sizes.is_empty() && params.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let args: Vec<Vec<u64>> = func
        .sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let mut v = vec![0u64; n.div_ceil(8).max(1)];
            // SAFETY: the caller's pointer to parameter `i`, of `n` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(*params.add(i) as *const u8, v.as_mut_ptr().cast(), n)
            };
            v
        })
        .collect();
    let (launch, name) = (func.launch, func.name.clone());
    queue(stream, Delay::Random, move || {
        let mut args = args;
        let mut ptrs: Vec<*mut c_void> = args.iter_mut().map(|a| a.as_mut_ptr().cast()).collect();
        // SAFETY: the module's wrapper, with a pointer per parameter to a
        // copy of its bytes.
        let status = unsafe { launch(gx, bx, ptrs.as_mut_ptr()) };
        if status != 0 {
            eprintln!("tofu-cpu-cuda: kernel `{name}` (grid {gx}, block {bx}) failed in the shim: status {status}");
            return CUDA_ERROR_LAUNCH_FAILED;
        }
        CUDA_SUCCESS
    })
}
