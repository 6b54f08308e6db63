//! CPU kernels: an op instance (spec + input shapes + attributes) → a
//! callable that computes its outputs from f32 buffers.
//!
//! Takes a [`tdl::Binding`] (the ellipsis-expanded spec with concrete dims,
//! attributes and shapes); gives an [`OpKernel`], prepared once per op
//! instance and run any number of times on row-major f32 buffers.
//!
//! Which implementation runs is data, not code: [`Registry`] maps op names to
//! the CPU kernels of the op table ([`crate::ops::LIBRARY_KERNELS`]: [`gemm`]: the matmul family on the `gemm` crate; [`conv`]:
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

use tdl::{Attrs, Binding, OpSpec};

use crate::ops::{library_kernel, KernelError, LIBRARY_KERNELS, SHAPE_RANKS};

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
    /// The CPU kernels of the op table ([`LIBRARY_KERNELS`]).
    fn default() -> Self {
        let mut r = Registry::empty();
        for k in LIBRARY_KERNELS {
            r.register(k.op, k.provider, k.cpu);
        }
        for op in shape::op_names(SHAPE_RANKS) {
            r.register(&op, "copy", shape::shape_op);
        }
        r
    }
}

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
    /// the op's windowed library kernel ([`LibraryKernel::cpu_window`](crate::ops::LibraryKernel::cpu_window)) when the
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
        let library = library_kernel(name)
            .filter(|_| self.table.contains_key(name))
            .and_then(|k| Some((k.provider, k.cpu_window?(&binding, window)?)));
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
