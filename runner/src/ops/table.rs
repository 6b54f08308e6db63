//! The op table: which ops have a library kernel (keyed by the op's spec
//! name) and what each backend provides for it, one line per op. Both
//! backends read it: the CPU's [`Registry`](crate::Registry) registers the
//! [`LibraryKernel::cpu`] constructors (and the windowed ones,
//! [`LibraryKernel::cpu_window`]); the CUDA backend runs
//! [`LibraryKernel::cuda`] (cuBLAS, its scatter-add kernel, cuDNN, or CUDA C
//! generated from the spec). An op not listed runs through each backend's
//! spec compiler (the CPU's compiled evaluator, CUDA's generated kernels),
//! so adding a spec needs no line here.

use crate::backend::cpu::kernels::{
    bias, conv, cross_entropy_parts, elementwise, embedding, gemm, loss, lrn, optim, permute, pool,
    qkv, reduce, rows, KernelFactory, WindowKernelFactory,
};

/// What the CUDA backend runs for an op of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaForm {
    /// cuBLAS SGEMM of the op's [`GemmShape`](super::GemmShape)
    /// ([`gemm_shape`](super::gemm_shape)).
    Cublas,
    /// The scatter-add of rows kernel on the op's
    /// [`ScatterRows`](super::ScatterRows)
    /// ([`scatter_rows_shape`](super::scatter_rows_shape)).
    ScatterAdd,
    /// cuDNN's convolution of the op's [`ConvShape`](super::ConvShape)
    /// ([`conv_shape`](super::conv_shape)), where cuDNN is present.
    Cudnn,
    /// cuDNN's max pooling of the op's [`PoolShape`](super::PoolShape)
    /// ([`pool_shape`](super::pool_shape)), where cuDNN is present.
    CudnnPool,
    /// CUDA C generated from the op's spec, as for an op not in the table.
    Generated,
}

/// One op's library kernels (see the module doc).
#[derive(Clone, Copy, Debug)]
pub struct LibraryKernel {
    /// The op (spec) name.
    pub op: &'static str,
    /// The CPU library kernel's name (e.g. `"gemm"`, `"im2col+gemm"`), as
    /// [`Provider::Library`](crate::Provider::Library) reports it.
    pub provider: &'static str,
    /// The CPU kernel's constructor (declines instances it does not
    /// handle: the compiled evaluator runs those).
    pub cpu: KernelFactory,
    /// The CPU kernel of a windowed share, where there is one; any other
    /// share runs through the compiled evaluator.
    pub cpu_window: Option<WindowKernelFactory>,
    /// What the CUDA backend runs (when the instance fits; else it
    /// generates CUDA C from the spec).
    pub cuda: CudaForm,
}

/// An op whose CPU kernel is `provider` and which CUDA generates from its spec.
const fn cpu(op: &'static str, provider: &'static str, cpu: KernelFactory) -> LibraryKernel {
    LibraryKernel {
        op,
        provider,
        cpu,
        cpu_window: None,
        cuda: CudaForm::Generated,
    }
}

/// A product of the matmul family: the `gemm` crate, cuBLAS.
const fn cublas(op: &'static str, cpu: KernelFactory) -> LibraryKernel {
    LibraryKernel {
        cuda: CudaForm::Cublas,
        ..self::cpu(op, "gemm", cpu)
    }
}

/// A scatter-add of rows: the CPU's gather kernel, CUDA's scatter-add.
const fn scatter_add(op: &'static str, cpu: KernelFactory) -> LibraryKernel {
    LibraryKernel {
        cuda: CudaForm::ScatterAdd,
        ..self::cpu(op, "scatter-add", cpu)
    }
}

/// A 2-D convolution or one of its gradients: im2col + gemm, cuDNN.
const fn cudnn(op: &'static str, cpu: KernelFactory) -> LibraryKernel {
    LibraryKernel {
        cuda: CudaForm::Cudnn,
        ..self::cpu(op, "im2col+gemm", cpu)
    }
}

/// A 2-D max pooling or its gradient: a direct loop, cuDNN.
const fn cudnn_pool(op: &'static str, cpu: KernelFactory) -> LibraryKernel {
    LibraryKernel {
        cuda: CudaForm::CudnnPool,
        ..self::cpu(op, "direct", cpu)
    }
}

impl LibraryKernel {
    /// With a CPU kernel for windowed shares.
    const fn with_window(self, f: WindowKernelFactory) -> LibraryKernel {
        LibraryKernel {
            cpu_window: Some(f),
            ..self
        }
    }
}

/// Trailing ranks up to which the ONNX shape ops (`reshape_M_N`,
/// `broadcast_K`, `unbroadcast_K`) are CPU library kernels (provider
/// `"copy"`), besides [`LIBRARY_KERNELS`] (the importer generates them up
/// to rank 5); CUDA generates them from their specs.
pub const SHAPE_RANKS: usize = 8;

/// The library kernels, one line per op (see the module doc).
pub const LIBRARY_KERNELS: &[LibraryKernel] = &[
    cublas("matmul", gemm::matmul),
    cublas("matmul_nt", gemm::matmul_nt),
    cublas("matmul_tn", gemm::matmul_tn),
    cublas("batch_matmul", gemm::batch_matmul),
    cublas("batch_matmul_nt", gemm::batch_matmul_nt),
    cublas("batch_matmul_tn", gemm::batch_matmul_tn),
    cublas("dense", gemm::dense),
    cublas("dense_nt", gemm::dense_nt),
    cublas("dense_grad_w", gemm::dense_grad_w),
    cpu("gemm_bias", "gemm", gemm::gemm_bias),
    cpu("gemm_nt_bias", "gemm", gemm::gemm_nt_bias),
    cublas("gate_matmul", gemm::gate_matmul),
    cublas("gate_matmul_grad_x", gemm::gate_matmul_grad_x),
    cublas("gate_matmul_grad_w", gemm::gate_matmul_grad_w),
    cpu("conv1d", "im2col+gemm", conv::conv1d),
    cpu("conv1d_grad_x", "im2col+gemm", conv::conv1d_grad_x),
    cpu("conv1d_grad_w", "im2col+gemm", conv::conv1d_grad_w),
    cudnn("conv2d", conv::conv2d),
    cudnn("conv2d_grad_x", conv::conv2d_grad_x),
    cudnn("conv2d_grad_w", conv::conv2d_grad_w),
    cpu("conv2d_bias", "im2col+gemm", conv::conv2d),
    cpu("conv2d_group", "im2col+gemm", conv::conv2d),
    cpu("conv2d_group_bias", "im2col+gemm", conv::conv2d),
    cpu("conv2d_group_grad_x", "im2col+gemm", conv::conv2d_grad_x),
    cpu("conv2d_group_grad_w", "im2col+gemm", conv::conv2d_grad_w),
    cpu("conv2d_ext", "im2col+gemm", conv::conv2d_ext),
    cpu("conv2d_group_ext", "im2col+gemm", conv::conv2d_ext),
    cpu("lrn", "rows", lrn::lrn),
    cpu("lrn_grad", "rows", lrn::lrn_grad),
    cpu("relu", "elementwise", elementwise::relu),
    cpu("relu_grad", "elementwise", elementwise::relu_grad),
    cpu("add", "elementwise", elementwise::add),
    cpu("mul", "elementwise", elementwise::mul),
    cpu("div", "elementwise", elementwise::div),
    cpu("div_grad_b", "elementwise", elementwise::div_grad_b),
    cpu("scale", "elementwise", elementwise::scale),
    cpu("erf", "elementwise", elementwise::erf),
    cpu("erf_grad", "elementwise", elementwise::erf_grad),
    cpu("is_nan", "elementwise", elementwise::is_nan),
    cpu("bias_add", "elementwise", bias::bias_add),
    cpu("bias_add2", "elementwise", bias::bias_add),
    cpu("sum_leading", "column sum", bias::sum_leading),
    cpu("sum_leading2", "column sum", bias::sum_leading),
    cpu("where", "elementwise", elementwise::where_select),
    cpu("where_grad", "elementwise", elementwise::where_grad),
    cpu("identity", "elementwise", elementwise::identity),
    cpu("gelu", "elementwise", elementwise::gelu),
    cpu("gelu_grad", "elementwise", elementwise::gelu_grad),
    cpu("sgd_update", "elementwise", optim::sgd),
    cpu("momentum_update", "elementwise", optim::momentum),
    cpu("adam_update", "elementwise", optim::adam),
    cpu("adamw_update", "elementwise", optim::adamw),
    cpu("adagrad_update", "elementwise", optim::adagrad),
    cpu("rmsprop_update", "elementwise", optim::rmsprop),
    cudnn_pool("maxpool2d", pool::maxpool2d),
    cudnn_pool("maxpool2d_grad", pool::maxpool2d_grad),
    cpu("maxpool2d_ext", "direct", pool::maxpool2d_ext),
    cpu("maxpool2d_ext_grad", "direct", pool::maxpool2d_ext_grad),
    cpu("softmax", "rows", rows::softmax),
    cpu("softmax_grad", "rows", rows::softmax_grad),
    cpu("log_softmax", "rows", rows::log_softmax),
    cpu("log_softmax_grad", "rows", rows::log_softmax_grad),
    cpu("layernorm", "rows", rows::layernorm),
    cpu("layernorm_grad", "rows", rows::layernorm_grad),
    cpu("softmax_cross_entropy", "rows", loss::softmax_cross_entropy),
    cpu(
        "softmax_cross_entropy_grad",
        "rows",
        loss::softmax_cross_entropy_grad,
    ),
    cpu(
        "softmax_cross_entropy_parts",
        "rows",
        cross_entropy_parts::softmax_cross_entropy_parts,
    ),
    cpu(
        "softmax_cross_entropy_parts_grad",
        "rows",
        cross_entropy_parts::softmax_cross_entropy_parts_grad,
    ),
    cpu("cross_entropy", "rows", loss::cross_entropy),
    cpu("cross_entropy_grad", "rows", loss::cross_entropy_grad),
    cpu(
        "cross_entropy_parts",
        "rows",
        cross_entropy_parts::cross_entropy_parts,
    ),
    cpu(
        "cross_entropy_parts_grad",
        "rows",
        cross_entropy_parts::cross_entropy_parts_grad,
    ),
    cpu("reduce_max", "rows", reduce::reduce_max),
    cpu("reduce_min", "rows", reduce::reduce_min),
    cpu(
        "sparse_softmax_cross_entropy",
        "rows",
        loss::sparse_softmax_cross_entropy,
    ),
    cpu(
        "sparse_softmax_cross_entropy_grad",
        "rows",
        loss::sparse_softmax_cross_entropy_grad,
    ),
    cpu("transpose", "permute", permute::transpose),
    cpu("batch_transpose", "permute", permute::batch_transpose),
    cpu("transpose_0213", "permute", permute::transpose_0213),
    cpu("swap_blocks", "permute", permute::swap_blocks),
    cpu("split_heads", "permute", permute::split_heads),
    cpu("merge_heads", "permute", permute::merge_heads),
    cpu("split_qkv", "permute", qkv::split_qkv),
    cpu("merge_qkv", "permute", qkv::merge_qkv),
    cpu("embedding", "gather", embedding::embedding),
    cpu("vocab_embedding", "gather", embedding::vocab_embedding)
        .with_window(embedding::vocab_embedding_window),
    scatter_add("embedding_grad", embedding::embedding_grad),
    cpu("gather", "gather", embedding::gather),
    scatter_add("gather_grad", embedding::gather_grad),
];

/// The table's line for `op`, `None` for an op without library kernels.
pub fn library_kernel(op: &str) -> Option<&'static LibraryKernel> {
    LIBRARY_KERNELS.iter().find(|k| k.op == op)
}
