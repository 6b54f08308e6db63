//! The CUDA backend (feature `cuda`): device memory, cuBLAS for the matmul
//! family, every other operator as CUDA C generated from its TDL spec and
//! compiled with NVRTC; communicators on device buffers: NCCL (one GPU per
//! rank) and host-staged (ranks sharing a GPU). Without the feature, a
//! stand-in whose constructor says how to get the real one (STYLE item 10:
//! the API compiles either way). The kernel generator and the static cost
//! model ([`estimate`]) need no CUDA and are in every build.

#[cfg(not(feature = "cuda"))]
mod stand_in;
#[cfg(not(feature = "cuda"))]
pub use stand_in::*;

#[cfg(feature = "cuda")]
mod buffer;
pub mod codegen;
#[cfg(feature = "cuda")]
mod device;
pub mod estimate;
#[cfg(feature = "cuda")]
mod kernel;
#[cfg(feature = "cuda")]
pub mod library;
#[cfg(feature = "cuda")]
mod nccl;
#[cfg(feature = "cuda")]
mod nccl_api;
#[cfg(feature = "cuda")]
mod nvrtc;
#[cfg(feature = "cuda")]
pub mod scatter;
#[cfg(feature = "cuda")]
mod staged;
#[cfg(feature = "cuda")]
pub use buffer::CudaBuffer;
#[cfg(feature = "cuda")]
pub use device::{check_libraries, device_count, CudaBackend, RegionArgs, COPY_SRC, MAX_RANK};
#[cfg(feature = "cuda")]
pub use kernel::CudaKernel;
#[cfg(feature = "cuda")]
pub use library::LibraryError;
#[cfg(feature = "cuda")]
pub use nccl::NcclCommunicator;
#[cfg(feature = "cuda")]
pub use nvrtc::{nvrtc_target, NvrtcTarget};
#[cfg(feature = "cuda")]
pub use staged::HostStaged;
