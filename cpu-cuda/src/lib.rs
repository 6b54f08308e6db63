//! tofu-cpu-cuda: a CPU stand-in of the CUDA driver, NVRTC, cuBLAS, cuDNN
//! and NCCL, test equipment for CI on machines without a GPU. One shared
//! library exports the entry points tofu's CUDA backend calls (through
//! cudarc and its own NCCL loader) with their C signatures;
//! `scripts/cpu-cuda.sh` links it under the real libraries' names
//! (`libcuda.so`, `libnvrtc.so`, `libcublas.so`, `libcudnn.so.9`,
//! `libnccl.so.2`) in a
//! directory of its own and puts that on the library path of one command.
//!
//! What it models (see README.md for what it does not): devices
//! ([`device`]), device memory as host allocations counted per device with
//! out-of-memory at a configured size ([`memory`]), streams as ordered
//! queues on their own threads with seeded random delays and events that
//! really wait ([`stream`]), kernels compiled from the generated CUDA C
//! with g++ after the C++ shim of CUDA's execution model ([`module`],
//! [`nvrtc`]), GEMM by the `gemm` crate ([`cublas`]), 2-D convolutions
//! as im2col + GEMM and max pooling ([`cudnn`], [`cudnn_conv`],
//! [`cudnn_pool`]), NCCL between the
//! threads of one process and between processes ([`nccl`],
//! [`nccl_net`]). Results under it are never GPU
//! results.
//!
//! Unimplemented entry points are absent: cudarc resolves each symbol on
//! its first call and panics on a missing one, which the backend turns
//! into an error naming it (`library::catching`).
// C entry points: pointer arguments are the C API's contract, their
// names are the C API's.
#![allow(
    non_snake_case,
    clippy::not_unsafe_ptr_arg_deref,
    clippy::missing_safety_doc
)]

#[cfg(test)]
mod api_tests;
pub mod cublas;
pub mod cudnn;
pub mod cudnn_conv;
pub mod cudnn_pool;
pub mod device;
pub mod driver;
pub mod driver_mem;
pub mod memory;
pub mod module;
pub mod nccl;
pub mod nccl_clique;
pub mod nccl_net;
pub mod nvrtc;
pub mod status;
pub mod stream;
