//! The status codes the stand-in returns, with the values of `cuda.h`,
//! `nvrtc.h`, `cublas_api.h` and `nccl.h` (only values those headers
//! define: cudarc reads them into Rust enums).

/// A driver API result (`CUresult`).
pub type CuResult = u32;
/// `CUDA_SUCCESS`.
pub const CUDA_SUCCESS: CuResult = 0;
/// `CUDA_ERROR_INVALID_VALUE`: a null or out-of-range argument, or a copy
/// outside an allocation.
pub const CUDA_ERROR_INVALID_VALUE: CuResult = 1;
/// `CUDA_ERROR_OUT_OF_MEMORY`: the device's configured memory is used up.
pub const CUDA_ERROR_OUT_OF_MEMORY: CuResult = 2;
/// `CUDA_ERROR_INVALID_DEVICE`: no such device ordinal.
pub const CUDA_ERROR_INVALID_DEVICE: CuResult = 101;
/// `CUDA_ERROR_INVALID_IMAGE`: a module image the stand-in's NVRTC did not make.
pub const CUDA_ERROR_INVALID_IMAGE: CuResult = 200;
/// `CUDA_ERROR_INVALID_CONTEXT`: no context is current on the thread.
pub const CUDA_ERROR_INVALID_CONTEXT: CuResult = 201;
/// `CUDA_ERROR_INVALID_SOURCE`: the kernel source did not compile (g++).
pub const CUDA_ERROR_INVALID_SOURCE: CuResult = 300;
/// `CUDA_ERROR_INVALID_HANDLE`.
pub const CUDA_ERROR_INVALID_HANDLE: CuResult = 400;
/// `CUDA_ERROR_NOT_FOUND`: no such kernel in a module.
pub const CUDA_ERROR_NOT_FOUND: CuResult = 500;
/// `CUDA_ERROR_NOT_READY`: an event or stream has work left.
pub const CUDA_ERROR_NOT_READY: CuResult = 600;
/// `CUDA_ERROR_LAUNCH_FAILED`: a kernel failed (sticky, as on a GPU).
pub const CUDA_ERROR_LAUNCH_FAILED: CuResult = 719;
/// `CUDA_ERROR_NOT_SUPPORTED`: an entry point or argument the stand-in
/// does not model.
pub const CUDA_ERROR_NOT_SUPPORTED: CuResult = 801;

/// The name of a driver result, for `cuGetErrorName`.
pub fn cu_name(r: CuResult) -> &'static str {
    match r {
        CUDA_SUCCESS => "CUDA_SUCCESS\0",
        CUDA_ERROR_INVALID_VALUE => "CUDA_ERROR_INVALID_VALUE\0",
        CUDA_ERROR_OUT_OF_MEMORY => "CUDA_ERROR_OUT_OF_MEMORY\0",
        CUDA_ERROR_INVALID_DEVICE => "CUDA_ERROR_INVALID_DEVICE\0",
        CUDA_ERROR_INVALID_IMAGE => "CUDA_ERROR_INVALID_IMAGE\0",
        CUDA_ERROR_INVALID_CONTEXT => "CUDA_ERROR_INVALID_CONTEXT\0",
        CUDA_ERROR_INVALID_SOURCE => "CUDA_ERROR_INVALID_SOURCE\0",
        CUDA_ERROR_INVALID_HANDLE => "CUDA_ERROR_INVALID_HANDLE\0",
        CUDA_ERROR_NOT_FOUND => "CUDA_ERROR_NOT_FOUND\0",
        CUDA_ERROR_NOT_READY => "CUDA_ERROR_NOT_READY\0",
        CUDA_ERROR_LAUNCH_FAILED => "CUDA_ERROR_LAUNCH_FAILED\0",
        CUDA_ERROR_NOT_SUPPORTED => "CUDA_ERROR_NOT_SUPPORTED\0",
        _ => "CUDA_ERROR_UNKNOWN\0",
    }
}

/// The description of a driver result, for `cuGetErrorString`.
pub fn cu_string(r: CuResult) -> &'static str {
    match r {
        CUDA_SUCCESS => "no error\0",
        CUDA_ERROR_INVALID_VALUE => "invalid argument (tofu-cpu-cuda)\0",
        CUDA_ERROR_OUT_OF_MEMORY => {
            "out of memory (tofu-cpu-cuda: the device's TOFU_CPU_CUDA_MEMORY is used up)\0"
        }
        CUDA_ERROR_INVALID_DEVICE => "invalid device ordinal (tofu-cpu-cuda)\0",
        CUDA_ERROR_INVALID_IMAGE => "device kernel image is invalid (tofu-cpu-cuda)\0",
        CUDA_ERROR_INVALID_CONTEXT => "invalid device context (tofu-cpu-cuda)\0",
        CUDA_ERROR_INVALID_SOURCE => {
            "the kernel source did not compile with g++ (tofu-cpu-cuda; see stderr)\0"
        }
        CUDA_ERROR_INVALID_HANDLE => "invalid resource handle (tofu-cpu-cuda)\0",
        CUDA_ERROR_NOT_FOUND => "named symbol not found (tofu-cpu-cuda)\0",
        CUDA_ERROR_NOT_READY => "device not ready (tofu-cpu-cuda)\0",
        CUDA_ERROR_LAUNCH_FAILED => "unspecified launch failure (tofu-cpu-cuda)\0",
        CUDA_ERROR_NOT_SUPPORTED => "operation not supported by tofu-cpu-cuda\0",
        _ => "unknown error (tofu-cpu-cuda)\0",
    }
}
