//! CPU kernels: an op instance (spec + input shapes + attributes) → a
//! callable that computes its outputs from f32 buffers.
//!
//! Takes a [`tdl::Binding`] (the ellipsis-expanded spec with concrete dims,
//! attributes and shapes); gives an [`OpKernel`], prepared once per op
//! instance and run any number of times on row-major f32 buffers.
//!
//! Which implementation runs is data, not code: [`Registry`] maps op names to
//! library kernels ([`gemm`]: the matmul family on the `gemm` crate; [`conv`]:
//! convolutions as im2col + gemm; [`elementwise`] and [`optim`]: hot
//! elementwise ops and optimizer updates as contiguous loops; [`bias`]:
//! bias rows and their column-sum gradients; [`pool`]: max pooling and its gradient as direct loops; [`rows`]
//! and [`loss`]: softmax, layer norm and cross-entropy row by row;
//! [`cross_entropy_parts`]: the vocabulary-parallel cross-entropy's row sums
//! and gradient; [`reduce`]: row max and min;
//! [`embedding`]: row gathers (the masked `vocab_embedding` too) and their
//! scatter-add gradients; [`permute`]: transposes and attention's head
//! split/merge as strided copies; [`qkv`]: Megatron's fused QKV split/merge
//! as row copies), and every other op (or a library kernel
//! that declines an unusual instance) falls back to the evaluator
//! [`compiled`] builds from the op's TDL spec. Adding a spec therefore needs
//! no change here. The reference interpreter is never called: it is the test
//! oracle only.
//!
//! Keeps true: every kernel overwrites every element of every output (callers
//! need not zero them); inputs are never written.

pub mod bias;
pub mod compiled;
pub mod conv;
pub mod cross_entropy_parts;
pub mod elementwise;
pub mod embedding;
pub mod f32_math;
pub mod gemm;
pub mod loss;
pub mod lrn;
pub mod optim;
pub mod permute;
pub mod pool;
pub mod qkv;
pub mod reduce;
pub mod rows;
pub mod shape;

use std::collections::BTreeMap;

use tdl::{Attrs, Binding, OpSpec, ShapeError};

/// Why preparing or running a kernel failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum KernelError {
    /// The input shapes or attributes do not fit the op's spec.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// Wrong number of input or output buffers.
    #[error("`{op}`: expected {expected} {what} buffer(s), got {got}")]
    BufferCount {
        /// The op.
        op: String,
        /// `"input"` or `"output"`.
        what: &'static str,
        /// Buffers the op has.
        expected: usize,
        /// Buffers given.
        got: usize,
    },
    /// A buffer's length does not match its tensor's shape.
    #[error(
        "`{op}`: buffer of `{tensor}` has {got} elements but its shape {shape:?} needs {expected}"
    )]
    BufferLength {
        /// The op.
        op: String,
        /// The tensor.
        tensor: String,
        /// Its shape (elements per dim).
        shape: Vec<usize>,
        /// Elements the shape needs.
        expected: usize,
        /// Elements given.
        got: usize,
    },
    /// A read of an unpadded tensor outside its shape (a spec bug or a bad
    /// data-dependent index such as an embedding id out of range).
    #[error("`{op}`: read of `{tensor}` at {index:?} is outside its shape {shape:?}")]
    OutOfBounds {
        /// The op.
        op: String,
        /// The tensor read.
        tensor: String,
        /// The index.
        index: Vec<i64>,
        /// The tensor's shape.
        shape: Vec<usize>,
    },
    /// An integer division or modulo by zero in an index expression.
    #[error("`{op}`: division by zero in an index expression")]
    DivByZero {
        /// The op.
        op: String,
    },
    /// An opaque function failed (e.g. Cholesky of a non-SPD matrix).
    #[error("`{op}`: opaque function `{name}` failed: {message}")]
    Opaque {
        /// The op.
        op: String,
        /// The function.
        name: String,
        /// Its message.
        message: String,
    },
    /// The spec uses something the compiled evaluator cannot run.
    #[error("`{op}`: cannot compile: {what}")]
    Unsupported {
        /// The op.
        op: String,
        /// What.
        what: String,
    },
}

/// The computation of a prepared kernel on row-major f32 buffers whose
/// lengths [`OpKernel::run`] has already checked against the shapes.
pub trait KernelImpl: Send + Sync {
    /// Compute every output element from the inputs.
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError>;
}

/// A library kernel's constructor: gives `None` when this op instance is one
/// the kernel does not handle (unknown attribute, unexpected ranks or tensor
/// names), and the compiled evaluator runs it instead.
pub type KernelFactory = fn(&Binding) -> Option<Box<dyn KernelImpl>>;

/// A windowed library kernel's constructor (one worker's share in global
/// coordinates, [`compiled::Window`]): `None` when it does not handle this
/// window, and the compiled evaluator runs it instead.
pub type WindowKernelFactory = fn(&Binding, &compiled::Window) -> Option<Box<dyn KernelImpl>>;

/// Where an [`OpKernel`]'s implementation comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// A library kernel from the [`Registry`], named (e.g. `"gemm"`, `"im2col+gemm"`).
    Library(&'static str),
    /// The evaluator compiled from the op's TDL spec.
    Compiled,
}

/// An op instance ready to run: shapes fixed, implementation chosen.
pub struct OpKernel {
    op: String,
    provider: Provider,
    input_names: Vec<String>,
    output_names: Vec<String>,
    input_shapes: Vec<Vec<usize>>,
    output_shapes: Vec<Vec<usize>>,
    imp: Box<dyn KernelImpl>,
}

impl std::fmt::Debug for OpKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpKernel")
            .field("op", &self.op)
            .field("provider", &self.provider)
            .field("input_shapes", &self.input_shapes)
            .field("output_shapes", &self.output_shapes)
            .finish_non_exhaustive()
    }
}

impl OpKernel {
    /// The op's name.
    pub fn op(&self) -> &str {
        &self.op
    }

    /// Which implementation runs.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// Shape of each input (elements per dim).
    pub fn input_shapes(&self) -> &[Vec<usize>] {
        &self.input_shapes
    }

    /// Shape of each output (elements per dim), from the spec's shape inference.
    pub fn output_shapes(&self) -> &[Vec<usize>] {
        &self.output_shapes
    }

    /// Compute the outputs: one row-major buffer per input and per output,
    /// each of its shape's element count. Every output element is written.
    ///
    /// Errors: wrong buffer count or length ([`KernelError::BufferCount`],
    /// [`KernelError::BufferLength`]); run-time failures of the op itself
    /// (out-of-bounds data-dependent reads, failing opaque functions).
    pub fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        self.check(
            "input",
            &self.input_names,
            &self.input_shapes,
            inputs.iter().map(|b| b.len()),
        )?;
        self.check(
            "output",
            &self.output_names,
            &self.output_shapes,
            outputs.iter().map(|b| b.len()),
        )?;
        self.imp.run(inputs, outputs)
    }

    fn check(
        &self,
        what: &'static str,
        names: &[String],
        shapes: &[Vec<usize>],
        lens: impl ExactSizeIterator<Item = usize>,
    ) -> Result<(), KernelError> {
        if lens.len() != shapes.len() {
            return Err(KernelError::BufferCount {
                op: self.op.clone(),
                what,
                expected: shapes.len(),
                got: lens.len(),
            });
        }
        for ((len, shape), name) in lens.zip(shapes).zip(names) {
            let expected: usize = shape.iter().product();
            if len != expected {
                return Err(KernelError::BufferLength {
                    op: self.op.clone(),
                    tensor: name.clone(),
                    shape: shape.clone(),
                    expected,
                    got: len,
                });
            }
        }
        Ok(())
    }
}

/// Op name → library kernel table, with the compiled evaluator as fallback.
#[derive(Clone)]
pub struct Registry {
    table: BTreeMap<String, (&'static str, KernelFactory)>,
}

impl Default for Registry {
    /// The library kernels of [`LIBRARY_KERNELS`].
    fn default() -> Self {
        let mut r = Registry::empty();
        for &(op, provider, f) in LIBRARY_KERNELS {
            r.register(op, provider, f);
        }
        for op in shape::op_names(SHAPE_RANKS) {
            r.register(&op, "copy", shape::shape_op);
        }
        r
    }
}

/// Trailing ranks up to which the ONNX shape ops (`reshape_M_N`,
/// `broadcast_K`, `unbroadcast_K`: `shape.rs`) are library kernels, besides
/// [`LIBRARY_KERNELS`] (the importer generates them up to rank 5).
pub const SHAPE_RANKS: usize = 8;

/// The library kernels, one line per op: (op name, provider, constructor).
/// A name not listed here runs through the compiled evaluator.
pub const LIBRARY_KERNELS: &[(&str, &str, KernelFactory)] = &[
    ("matmul", "gemm", gemm::matmul),
    ("matmul_nt", "gemm", gemm::matmul_nt),
    ("matmul_tn", "gemm", gemm::matmul_tn),
    ("batch_matmul", "gemm", gemm::batch_matmul),
    ("batch_matmul_nt", "gemm", gemm::batch_matmul_nt),
    ("batch_matmul_tn", "gemm", gemm::batch_matmul_tn),
    ("dense", "gemm", gemm::dense),
    ("dense_nt", "gemm", gemm::dense_nt),
    ("dense_grad_w", "gemm", gemm::dense_grad_w),
    ("gemm_bias", "gemm", gemm::gemm_bias),
    ("gemm_nt_bias", "gemm", gemm::gemm_nt_bias),
    ("gate_matmul", "gemm", gemm::gate_matmul),
    ("gate_matmul_grad_x", "gemm", gemm::gate_matmul_grad_x),
    ("gate_matmul_grad_w", "gemm", gemm::gate_matmul_grad_w),
    ("conv1d", "im2col+gemm", conv::conv1d),
    ("conv1d_grad_x", "im2col+gemm", conv::conv1d_grad_x),
    ("conv1d_grad_w", "im2col+gemm", conv::conv1d_grad_w),
    ("conv2d", "im2col+gemm", conv::conv2d),
    ("conv2d_grad_x", "im2col+gemm", conv::conv2d_grad_x),
    ("conv2d_grad_w", "im2col+gemm", conv::conv2d_grad_w),
    ("conv2d_bias", "im2col+gemm", conv::conv2d),
    ("conv2d_group", "im2col+gemm", conv::conv2d),
    ("conv2d_group_bias", "im2col+gemm", conv::conv2d),
    ("conv2d_group_grad_x", "im2col+gemm", conv::conv2d_grad_x),
    ("conv2d_group_grad_w", "im2col+gemm", conv::conv2d_grad_w),
    ("conv2d_ext", "im2col+gemm", conv::conv2d_ext),
    ("conv2d_group_ext", "im2col+gemm", conv::conv2d_ext),
    ("lrn", "rows", lrn::lrn),
    ("lrn_grad", "rows", lrn::lrn_grad),
    ("relu", "elementwise", elementwise::relu),
    ("relu_grad", "elementwise", elementwise::relu_grad),
    ("add", "elementwise", elementwise::add),
    ("mul", "elementwise", elementwise::mul),
    ("div", "elementwise", elementwise::div),
    ("div_grad_b", "elementwise", elementwise::div_grad_b),
    ("scale", "elementwise", elementwise::scale),
    ("erf", "elementwise", elementwise::erf),
    ("erf_grad", "elementwise", elementwise::erf_grad),
    ("is_nan", "elementwise", elementwise::is_nan),
    ("bias_add", "elementwise", bias::bias_add),
    ("bias_add2", "elementwise", bias::bias_add),
    ("sum_leading", "column sum", bias::sum_leading),
    ("sum_leading2", "column sum", bias::sum_leading),
    ("where", "elementwise", elementwise::where_select),
    ("where_grad", "elementwise", elementwise::where_grad),
    ("identity", "elementwise", elementwise::identity),
    ("gelu", "elementwise", elementwise::gelu),
    ("gelu_grad", "elementwise", elementwise::gelu_grad),
    ("sgd_update", "elementwise", optim::sgd),
    ("momentum_update", "elementwise", optim::momentum),
    ("adam_update", "elementwise", optim::adam),
    ("adamw_update", "elementwise", optim::adamw),
    ("adagrad_update", "elementwise", optim::adagrad),
    ("rmsprop_update", "elementwise", optim::rmsprop),
    ("maxpool2d", "direct", pool::maxpool2d),
    ("maxpool2d_grad", "direct", pool::maxpool2d_grad),
    ("maxpool2d_ext", "direct", pool::maxpool2d_ext),
    ("maxpool2d_ext_grad", "direct", pool::maxpool2d_ext_grad),
    ("softmax", "rows", rows::softmax),
    ("softmax_grad", "rows", rows::softmax_grad),
    ("log_softmax", "rows", rows::log_softmax),
    ("log_softmax_grad", "rows", rows::log_softmax_grad),
    ("layernorm", "rows", rows::layernorm),
    ("layernorm_grad", "rows", rows::layernorm_grad),
    ("softmax_cross_entropy", "rows", loss::softmax_cross_entropy),
    (
        "softmax_cross_entropy_grad",
        "rows",
        loss::softmax_cross_entropy_grad,
    ),
    (
        "softmax_cross_entropy_parts",
        "rows",
        cross_entropy_parts::softmax_cross_entropy_parts,
    ),
    (
        "softmax_cross_entropy_parts_grad",
        "rows",
        cross_entropy_parts::softmax_cross_entropy_parts_grad,
    ),
    ("reduce_max", "rows", reduce::reduce_max),
    ("reduce_min", "rows", reduce::reduce_min),
    (
        "sparse_softmax_cross_entropy",
        "rows",
        loss::sparse_softmax_cross_entropy,
    ),
    (
        "sparse_softmax_cross_entropy_grad",
        "rows",
        loss::sparse_softmax_cross_entropy_grad,
    ),
    ("transpose", "permute", permute::transpose),
    ("batch_transpose", "permute", permute::batch_transpose),
    ("transpose_0213", "permute", permute::transpose_0213),
    ("swap_blocks", "permute", permute::swap_blocks),
    ("split_heads", "permute", permute::split_heads),
    ("merge_heads", "permute", permute::merge_heads),
    ("split_qkv", "permute", qkv::split_qkv),
    ("merge_qkv", "permute", qkv::merge_qkv),
    ("embedding", "gather", embedding::embedding),
    ("vocab_embedding", "gather", embedding::vocab_embedding),
    ("embedding_grad", "scatter-add", embedding::embedding_grad),
    ("gather", "gather", embedding::gather),
    ("gather_grad", "scatter-add", embedding::gather_grad),
];

/// The library kernels for windowed shares, one line per op: (op name,
/// provider, constructor). Used only for ops the registry has a library
/// kernel for ([`LIBRARY_KERNELS`]); every other windowed share runs through
/// the compiled evaluator.
pub const WINDOW_KERNELS: &[(&str, &str, WindowKernelFactory)] = &[(
    "vocab_embedding",
    "gather",
    embedding::vocab_embedding_window,
)];

impl Registry {
    /// A registry without library kernels: everything runs compiled.
    pub fn empty() -> Self {
        Registry {
            table: BTreeMap::new(),
        }
    }

    /// Add or replace the library kernel of `op`.
    pub fn register(&mut self, op: &str, provider: &'static str, factory: KernelFactory) {
        self.table.insert(op.to_string(), (provider, factory));
    }

    /// Names of the ops with a library kernel.
    pub fn library_ops(&self) -> impl Iterator<Item = &str> {
        self.table.keys().map(String::as_str)
    }

    /// Prepare an op instance: bind shapes (shape inference), then the
    /// library kernel if one is registered and accepts the instance, else the
    /// compiled evaluator.
    ///
    /// Errors: [`KernelError::Shape`] when shapes or attributes do not fit
    /// the spec; [`KernelError::Unsupported`] if the spec cannot be compiled.
    pub fn prepare(
        &self,
        spec: &OpSpec,
        input_shapes: &[Vec<usize>],
        attrs: &Attrs,
    ) -> Result<OpKernel, KernelError> {
        let binding = spec.bind(input_shapes, attrs)?;
        match collapse_ellipsis(spec, input_shapes) {
            // Same elements in the same row-major order, in fewer, longer rows.
            Some(flat) => {
                let mut k = self.prepare_bound(&spec.bind(&flat, attrs)?)?;
                k.input_shapes = binding.input_shapes;
                k.output_shapes = binding.output_shapes;
                Ok(k)
            }
            None => self.prepare_bound(&binding),
        }
    }

    /// One worker's share of an op instance in global coordinates, through
    /// the op's windowed library kernel ([`WINDOW_KERNELS`]) when the
    /// registry has its library kernel and the window kernel accepts the
    /// share, else the compiled evaluator (see [`compiled::compile_window`]):
    /// the kernel's
    /// input buffers hold `window.inputs`, its outputs the boxes of
    /// [`compiled::Window::output_region`].
    ///
    /// Errors: as [`Registry::prepare`]; a window that does not fit the spec.
    pub fn prepare_window(
        &self,
        spec: &OpSpec,
        input_shapes: &[Vec<usize>],
        attrs: &Attrs,
        window: &compiled::Window,
    ) -> Result<OpKernel, KernelError> {
        let binding = spec.bind(input_shapes, attrs)?;
        let name = binding.spec.name.as_str();
        let library = WINDOW_KERNELS
            .iter()
            .filter(|(op, ..)| *op == name && self.table.contains_key(name))
            .find_map(|&(_, provider, factory)| Some((provider, factory(&binding, window)?)));
        let (provider, imp) = match library {
            Some((provider, k)) => (Provider::Library(provider), k),
            None => (
                Provider::Compiled,
                Box::new(compiled::compile_window(&binding, window)?) as Box<dyn KernelImpl>,
            ),
        };
        let ext = |r: &[(i64, i64)]| r.iter().map(|&(l, h)| (h - l).max(0) as usize).collect();
        Ok(OpKernel {
            op: binding.spec.name.clone(),
            provider,
            input_names: binding.spec.inputs.iter().map(|t| t.name.clone()).collect(),
            output_names: binding
                .spec
                .outputs
                .iter()
                .map(|t| t.name.clone())
                .collect(),
            input_shapes: window.inputs.iter().map(|r| ext(r)).collect(),
            output_shapes: (0..binding.output_shapes.len())
                .map(|o| ext(&window.output_region(&binding, o)))
                .collect(),
            imp,
        })
    }

    /// [`Registry::prepare`] for an already bound op.
    pub fn prepare_bound(&self, binding: &Binding) -> Result<OpKernel, KernelError> {
        let lib = self
            .table
            .get(&binding.spec.name)
            .and_then(|(provider, f)| f(binding).map(|k| (Provider::Library(provider), k)));
        let (provider, imp) = match lib {
            Some(x) => x,
            None => (Provider::Compiled, compiled::compile(binding)?),
        };
        Ok(OpKernel {
            op: binding.spec.name.clone(),
            provider,
            input_names: binding.spec.inputs.iter().map(|t| t.name.clone()).collect(),
            output_names: binding
                .spec
                .outputs
                .iter()
                .map(|t| t.name.clone())
                .collect(),
            input_shapes: binding.input_shapes.clone(),
            output_shapes: binding.output_shapes.clone(),
            imp,
        })
    }
}

/// The input shapes with the op's ellipsis of batch dims merged into one
/// dim (their product), when it has two or more dims; `None` otherwise.
///
/// The dims of `...` are indexed only as a group, by the same variables in
/// every tensor and always in range, so an op bound to the merged shapes
/// computes the same elements in the same row-major order: it is the same
/// kernel with longer innermost rows (e.g. an optimizer update over a
/// `[CO, CI, 1, 1]` convolution weight runs as one row, not one per element).
fn collapse_ellipsis(spec: &OpSpec, input_shapes: &[Vec<usize>]) -> Option<Vec<Vec<usize>>> {
    if !spec.has_ellipsis() {
        return None;
    }
    let rank = spec.ellipsis_rank_for(input_shapes).ok()?;
    if rank < 2 {
        return None;
    }
    spec.inputs
        .iter()
        .zip(input_shapes)
        .map(|(t, s)| {
            match t
                .dims
                .iter()
                .position(|d| matches!(d, tdl::DimEntry::Ellipsis))
            {
                Some(p) => {
                    let e = s.get(p..p + rank)?;
                    let mut flat = s[..p].to_vec();
                    flat.push(e.iter().product());
                    flat.extend_from_slice(&s[p + rank..]);
                    Some(flat)
                }
                None => Some(s.clone()),
            }
        })
        .collect()
}

/// The value of an int attribute of a bound op, `None` if the spec has no
/// attribute of that name.
pub(crate) fn int_attr(b: &Binding, name: &str) -> Option<i64> {
    float_attr(b, name).map(|v| v as i64)
}

/// The value of a float (or int) attribute of a bound op, `None` if the
/// spec has no attribute of that name.
pub(crate) fn float_attr(b: &Binding, name: &str) -> Option<f64> {
    b.spec.attr(name).map(|id| b.attrs[id.0 as usize].as_f64())
}

/// Whether the op's inputs have these names, in order (a library kernel
/// declines a spec whose tensors it cannot place).
pub(crate) fn inputs_named(b: &Binding, names: &[&str]) -> bool {
    b.spec
        .inputs
        .iter()
        .map(|t| t.name.as_str())
        .eq(names.iter().copied())
}

/// Whether the op's outputs have these names, in order.
pub(crate) fn outputs_named(b: &Binding, names: &[&str]) -> bool {
    b.spec
        .outputs
        .iter()
        .map(|t| t.name.as_str())
        .eq(names.iter().copied())
}

/// Whether every attribute of the spec is one of `known` (library kernels
/// decline specs with attributes they do not understand).
pub(crate) fn only_attrs(b: &Binding, known: &[&str]) -> bool {
    b.spec
        .attrs
        .iter()
        .all(|a| known.contains(&a.name.as_str()))
}
