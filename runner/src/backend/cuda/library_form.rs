//! Which library kernel the CUDA backend runs for a whole op instance: the
//! op table's CUDA column ([`crate::ops::LibraryKernel::cuda`]) applied to
//! the instance's shapes. Shared by the backend (`device.rs`) and the cost
//! model ([`super::estimate`]), so both take the same path.

use tdl::Binding;

use crate::ops::{
    conv_shape, gemm_shape, library_kernel, pool_shape, scatter_rows_shape, ConvShape, CudaForm,
    GemmShape, PoolShape, ScatterRows,
};

/// The kernel an instance takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LibraryForm {
    /// cuBLAS SGEMM.
    Cublas(GemmShape),
    /// The scatter-add of rows kernel ([`super::scatter`]).
    ScatterAdd(ScatterRows),
    /// cuDNN's convolution (the backend generates CUDA C instead where
    /// cuDNN is absent).
    Cudnn(ConvShape),
    /// cuDNN's max pooling (generated CUDA C where cuDNN is absent).
    CudnnPool(PoolShape),
    /// CUDA C generated from the spec (no library kernel, or an instance
    /// the library kernel does not fit).
    Generated,
}

/// The kernel the op table gives `b` on CUDA (see the module doc).
pub(crate) fn library_form(b: &Binding) -> LibraryForm {
    let form = library_kernel(&b.spec.name).map(|k| k.cuda);
    let library = match form {
        Some(CudaForm::Cublas) => gemm_shape(b).map(LibraryForm::Cublas),
        Some(CudaForm::ScatterAdd) => scatter_rows_shape(b).map(LibraryForm::ScatterAdd),
        Some(CudaForm::Cudnn) => conv_shape(b).map(LibraryForm::Cudnn),
        Some(CudaForm::CudnnPool) => pool_shape(b).map(LibraryForm::CudnnPool),
        Some(CudaForm::Generated) | None => None,
    };
    library.unwrap_or(LibraryForm::Generated)
}
