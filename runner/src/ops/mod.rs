//! The backend-neutral op layer: what every backend shares about an op
//! instance, apart from how it computes it.
//!
//! * [`KernelError`]: why preparing or running a kernel failed;
//! * shape recognisers: [`gemm_shape`] (the matmul family as a
//!   [`GemmShape`]), [`scatter_rows_shape`] (a scatter-add of rows as a
//!   [`ScatterRows`]), [`conv_shape`] (a 2-D convolution or one of its
//!   gradients as a [`ConvShape`]) and [`pool_shape`] (a 2-D max pooling
//!   or its gradient as a [`PoolShape`]), which a backend's library kernel
//!   runs;
//! * [`Layouts`] and [`window_layouts`]: where every buffer of one
//!   worker's share of an op lies;
//! * attribute helpers (`int_attr`, `only_attrs`, …) a kernel uses to decide
//!   whether it handles an instance;
//! * the op table ([`LIBRARY_KERNELS`]): which ops have library kernels and
//!   what each backend provides for them.
//!
//! The CPU kernels (`backend::cpu::kernels`) and the CUDA backend
//! (`backend::cuda`) both import these from here; the CUDA backend imports
//! nothing from the CPU backend's modules (its host fallback is a
//! [`crate::CpuBackend`] used through the [`crate::Backend`] trait).

mod attrs;
mod conv_shape;
mod error;
mod gemm_shape;
pub mod index_range;
mod layout;
mod pool_shape;
mod scatter_rows;
mod table;

pub(crate) use attrs::{float_attr, inputs_named, int_attr, only_attrs, outputs_named};
pub use conv_shape::{conv_shape, ConvKind, ConvShape};
pub use error::KernelError;
pub(crate) use gemm_shape::flat_shape;
pub use gemm_shape::{gemm_shape, GemmShape, Trans};
pub use layout::{window_layouts, Layouts};
pub use pool_shape::{pool_shape, PoolShape};
pub use scatter_rows::{scatter_rows_shape, ScatterRows};
pub use table::{library_kernel, CudaForm, LibraryKernel, LIBRARY_KERNELS, SHAPE_RANKS};
