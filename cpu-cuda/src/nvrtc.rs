//! NVRTC (`nvrtc*`, the C signatures of `nvrtc.h`): a program keeps its
//! CUDA C source; compiling checks it compiles with g++ after the shim
//! (cached, so loading it later is free); the PTX or cubin it gives is the
//! source behind [`IMAGE_MAGIC`], NUL-terminated, which only the
//! stand-in's `cuModuleLoadData` accepts. It claims no architectures
//! (`nvrtcGetNumSupportedArchs` gives 0), so the backend compiles for the
//! device's own (sm_80).

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::driver::put;
use crate::module::{load, IMAGE_MAGIC};

/// `nvrtcResult`.
type NvrtcResult = u32;
const NVRTC_SUCCESS: NvrtcResult = 0;
const NVRTC_ERROR_INVALID_INPUT: NvrtcResult = 3;
const NVRTC_ERROR_INVALID_PROGRAM: NvrtcResult = 4;
const NVRTC_ERROR_COMPILATION: NvrtcResult = 6;

/// A program: its image (magic + source + NUL) and log.
struct Program {
    image: Vec<u8>,
    log: Vec<u8>,
}

fn program<'a>(p: *mut c_void) -> Option<&'a mut Program> {
    // SAFETY: a handle from `nvrtcCreateProgram`, alive until destroyed;
    // NVRTC programs are not shared between threads by the backend.
    (!p.is_null()).then(|| unsafe { &mut *(p as *mut Program) })
}

#[no_mangle]
pub extern "C" fn nvrtcGetErrorString(r: NvrtcResult) -> *const c_char {
    match r {
        NVRTC_SUCCESS => c"NVRTC_SUCCESS".as_ptr(),
        NVRTC_ERROR_COMPILATION => c"NVRTC_ERROR_COMPILATION (tofu-cpu-cuda: g++ failed)".as_ptr(),
        _ => c"NVRTC_ERROR (tofu-cpu-cuda)".as_ptr(),
    }
}

#[no_mangle]
pub extern "C" fn nvrtcVersion(major: *mut c_int, minor: *mut c_int) -> NvrtcResult {
    put(major, 13);
    put(minor, 0);
    NVRTC_SUCCESS
}

#[no_mangle]
pub extern "C" fn nvrtcGetNumSupportedArchs(n: *mut c_int) -> NvrtcResult {
    put(n, 0);
    NVRTC_SUCCESS
}

#[no_mangle]
pub extern "C" fn nvrtcGetSupportedArchs(_archs: *mut c_int) -> NvrtcResult {
    NVRTC_SUCCESS
}

#[no_mangle]
pub extern "C" fn nvrtcCreateProgram(
    prog: *mut *mut c_void,
    src: *const c_char,
    _name: *const c_char,
    _num_headers: c_int,
    _headers: *const *const c_char,
    _include_names: *const *const c_char,
) -> NvrtcResult {
    if src.is_null() || prog.is_null() {
        return NVRTC_ERROR_INVALID_INPUT;
    }
    // SAFETY: the caller's C string.
    let src = unsafe { CStr::from_ptr(src) }.to_bytes();
    let mut image = IMAGE_MAGIC.as_bytes().to_vec();
    image.extend_from_slice(src);
    image.push(0);
    let p = Box::new(Program {
        image,
        log: vec![0],
    });
    put(prog, Box::into_raw(p) as *mut c_void);
    NVRTC_SUCCESS
}

#[no_mangle]
pub extern "C" fn nvrtcDestroyProgram(prog: *mut *mut c_void) -> NvrtcResult {
    if prog.is_null() {
        return NVRTC_ERROR_INVALID_PROGRAM;
    }
    // SAFETY: the caller's handle from `nvrtcCreateProgram`, destroyed once.
    unsafe {
        let p = *prog;
        if p.is_null() {
            return NVRTC_ERROR_INVALID_PROGRAM;
        }
        drop(Box::from_raw(p as *mut Program));
        *prog = std::ptr::null_mut();
    }
    NVRTC_SUCCESS
}

#[no_mangle]
pub extern "C" fn nvrtcCompileProgram(
    prog: *mut c_void,
    _n: c_int,
    _opts: *const *const c_char,
) -> NvrtcResult {
    let Some(p) = program(prog) else {
        return NVRTC_ERROR_INVALID_PROGRAM;
    };
    let n = p.image.len() - 1;
    let src = String::from_utf8_lossy(&p.image[IMAGE_MAGIC.len()..n]).into_owned();
    match load(&src) {
        Ok(_) => NVRTC_SUCCESS,
        Err(_) => {
            p.log =
                b"tofu-cpu-cuda: g++ failed on the source (its messages are on stderr)\0".to_vec();
            NVRTC_ERROR_COMPILATION
        }
    }
}

fn size_of_image(prog: *mut c_void, size: *mut usize) -> NvrtcResult {
    match program(prog) {
        Some(p) => {
            put(size, p.image.len());
            NVRTC_SUCCESS
        }
        None => NVRTC_ERROR_INVALID_PROGRAM,
    }
}

fn copy_image(prog: *mut c_void, out: *mut c_char) -> NvrtcResult {
    match program(prog) {
        Some(p) if !out.is_null() => {
            // SAFETY: the caller's buffer of the size `size_of_image` gave.
            unsafe { std::ptr::copy_nonoverlapping(p.image.as_ptr().cast(), out, p.image.len()) };
            NVRTC_SUCCESS
        }
        _ => NVRTC_ERROR_INVALID_PROGRAM,
    }
}

#[no_mangle]
pub extern "C" fn nvrtcGetPTXSize(prog: *mut c_void, size: *mut usize) -> NvrtcResult {
    size_of_image(prog, size)
}

#[no_mangle]
pub extern "C" fn nvrtcGetPTX(prog: *mut c_void, out: *mut c_char) -> NvrtcResult {
    copy_image(prog, out)
}

#[no_mangle]
pub extern "C" fn nvrtcGetCUBINSize(prog: *mut c_void, size: *mut usize) -> NvrtcResult {
    size_of_image(prog, size)
}

#[no_mangle]
pub extern "C" fn nvrtcGetCUBIN(prog: *mut c_void, out: *mut c_char) -> NvrtcResult {
    copy_image(prog, out)
}

#[no_mangle]
pub extern "C" fn nvrtcGetProgramLogSize(prog: *mut c_void, size: *mut usize) -> NvrtcResult {
    match program(prog) {
        Some(p) => {
            put(size, p.log.len());
            NVRTC_SUCCESS
        }
        None => NVRTC_ERROR_INVALID_PROGRAM,
    }
}

#[no_mangle]
pub extern "C" fn nvrtcGetProgramLog(prog: *mut c_void, out: *mut c_char) -> NvrtcResult {
    match program(prog) {
        Some(p) if !out.is_null() => {
            // SAFETY: the caller's buffer of the log's size.
            unsafe { std::ptr::copy_nonoverlapping(p.log.as_ptr().cast(), out, p.log.len()) };
            NVRTC_SUCCESS
        }
        _ => NVRTC_ERROR_INVALID_PROGRAM,
    }
}
