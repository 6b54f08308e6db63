//! The CUDA backend (feature `cuda`): device memory, cuBLAS for the matmul
//! family, cuDNN for 2-D convolutions where it is installed, every other
//! operator as CUDA C generated from its TDL spec and
//! compiled with NVRTC; communicators on device buffers: NCCL (one GPU per
//! rank) and host-staged (ranks sharing a GPU).
//!
//! Without the feature, a dummy backend ([`stand_in`], candle's
//! `dummy_cuda_backend`) with the same public types and functions, whose
//! constructors fail with [`BackendError::NotBuilt`](crate::BackendError::NotBuilt)
//! (STYLE item 10: the API compiles either way, callers need no `cfg`).
//! What needs no CUDA is in every build: the kernel generator
//! ([`codegen`]), the static cost model ([`estimate`]), the scatter-add and
//! region-copy kernels' sources and arguments ([`scatter`], [`COPY_SRC`],
//! [`RegionArgs`]), the NVRTC target choice ([`nvrtc_target`]) and the
//! host-staged communicator ([`HostStaged`]).

pub mod codegen;
pub mod estimate;
mod library_form;
mod region_copy;
pub mod scatter;
mod staged;
mod target;

pub use region_copy::{RegionArgs, COPY_SRC, MAX_RANK};
pub use staged::HostStaged;
pub use target::{nvrtc_target, NvrtcTarget};

#[cfg(not(feature = "cuda"))]
pub mod stand_in;
#[cfg(not(feature = "cuda"))]
pub use stand_in::{
    check_libraries, device_count, CudaBackend, CudaBuffer, CudaKernel, NcclCommunicator,
};

#[cfg(feature = "cuda")]
mod buffer;
#[cfg(feature = "cuda")]
mod cudnn;
#[cfg(feature = "cuda")]
mod cudnn_api;
#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
mod kernel;
#[cfg(feature = "cuda")]
pub mod library;
#[cfg(feature = "cuda")]
mod nccl;
#[cfg(feature = "cuda")]
mod nccl_api;
#[cfg(feature = "cuda")]
mod nccl_watchdog;
#[cfg(feature = "cuda")]
mod nvrtc;
#[cfg(feature = "cuda")]
pub use buffer::CudaBuffer;
#[cfg(feature = "cuda")]
pub use device::{check_libraries, device_count, CudaBackend};
#[cfg(feature = "cuda")]
pub use kernel::CudaKernel;
#[cfg(feature = "cuda")]
pub use library::LibraryError;
#[cfg(feature = "cuda")]
pub use nccl::NcclCommunicator;
