//! A static cost model of a training step on the CUDA backend (issue 25,
//! item 5): no GPU needed, no kernel run. A model, not a measurement.
//!
//! Takes a rank's [`Program`] and a [`Roofline`] (a GPU's memory bandwidth,
//! FP32 and FP64 rates, launch overhead); gives, per kernel the backend
//! would launch, the bytes it must move, the floating-point operations it
//! performs and a roofline time, summed per operator spec and per step
//! ([`StepEstimate`]). The kernel chosen for each op instance is the one
//! [`CudaBackend`](super::CudaBackend) prepares: cuBLAS for the matmul
//! family, the scatter-add for `embedding_grad` / `gather_grad`, otherwise
//! CUDA C generated from the spec (one launch per statement, two for a
//! split reduction).
//!
//! The model, per kernel: `launches × launch + max(bytes / bandwidth,
//! flops / rate)`, where
//! * cuBLAS: `2·batch·m·n·k` FP32 flops; bytes the two operands and the
//!   product once each;
//! * scatter-add: a memset of the table, then each `dy` row read and added
//!   into its row (bytes: table written, ids and `dy` read, rows
//!   read-modify-written);
//! * generated: per statement, every tensor the statement reads is streamed
//!   once (its buffer: 4 bytes an element, `let` temporaries included)
//!   and the target written once; flops are the real arithmetic the
//!   interpreter's semantics perform (each `+ - * /`, comparison, built-in,
//!   reduction step), at the FP32 rate (the generated kernels compute in
//!   f32; a compensated sum's extra additions are not counted).
//!
//! Not modelled: index arithmetic (the decode of a flat index into
//! variables, bounds checks), caches beyond compulsory traffic, allocation
//! and memsets of buffers, communication, host kernels (an opaque function
//! runs on the CPU through host copies; costed at 25 GB/s of PCIe for its
//! bytes).

use std::collections::BTreeMap;

use ::program::Program;
use tdl::{Attrs, BinOp, Binding, Expr, ExprKind, OpSpec, TensorRef, Type};

use crate::backend::{BackendError, Window};
use crate::exec::instance::instance;
use crate::exec::ExecError;
use crate::ops::{window_layouts, KernelError};

use super::codegen::{self, ReduceOptions};
use super::library_form::{library_form, LibraryForm};

/// A GPU's peak rates, as a roofline uses them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Roofline {
    /// Name, as the CLI takes it (`h100`, `h200`).
    pub name: &'static str,
    /// Memory bandwidth, bytes per second.
    pub bandwidth: f64,
    /// FP32 (non-tensor-core) rate, operations per second.
    pub f32_flops: f64,
    /// FP64 (non-tensor-core) rate, operations per second (shown beside the
    /// FP32 rate; no kernel the model costs computes in f64).
    pub f64_flops: f64,
    /// Overhead of one kernel launch, seconds.
    pub launch: f64,
}

impl Roofline {
    /// NVIDIA H100 SXM: 3.35 TB/s HBM3, 67 TFLOP/s FP32, 34 TFLOP/s FP64,
    /// 5 µs a launch (the figures issue 25 names).
    pub const H100: Roofline = Roofline {
        name: "h100",
        bandwidth: 3.35e12,
        f32_flops: 67e12,
        f64_flops: 34e12,
        launch: 5e-6,
    };

    /// NVIDIA H200: the H100's compute with 4.8 TB/s HBM3e.
    pub const H200: Roofline = Roofline {
        name: "h200",
        bandwidth: 4.8e12,
        ..Roofline::H100
    };

    /// Every preset.
    pub const ALL: [Roofline; 2] = [Roofline::H100, Roofline::H200];

    /// Roofline seconds of `launches` launches moving `bytes` and
    /// performing `flops` at `rate` operations per second.
    pub fn seconds(&self, launches: usize, bytes: f64, flops: f64, rate: f64) -> f64 {
        launches as f64 * self.launch + (bytes / self.bandwidth).max(flops / rate)
    }

    /// The preset called `name` (case-insensitive).
    pub fn named(name: &str) -> Option<Roofline> {
        Self::ALL
            .into_iter()
            .find(|r| r.name.eq_ignore_ascii_case(name))
    }
}

/// Host-to-device bandwidth assumed for a kernel that runs on the host
/// (bytes per second).
const PCIE: f64 = 25e9;

/// The modelled cost of one op instance's kernels.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelEstimate {
    /// `"cublas"`, `"scatter-add"`, `"nvrtc"` or `"host"`.
    pub provider: &'static str,
    /// Kernel launches.
    pub launches: usize,
    /// Bytes moved to and from device memory.
    pub bytes: f64,
    /// Floating-point operations.
    pub flops: f64,
    /// Roofline seconds (see the module doc).
    pub seconds: f64,
}

impl KernelEstimate {
    /// Add `other`'s launches, bytes, FLOPs and seconds (another instance
    /// of the same op).
    fn add(&mut self, other: &KernelEstimate) {
        self.launches += other.launches;
        self.bytes += other.bytes;
        self.flops += other.flops;
        self.seconds += other.seconds;
    }
}

/// The model of one rank's step: per operator spec the summed estimates of
/// its instances, largest time first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepEstimate {
    /// (spec name, provider, instances, summed estimate).
    pub ops: Vec<(String, usize, KernelEstimate)>,
}

impl StepEstimate {
    /// Seconds of the whole step.
    pub fn seconds(&self) -> f64 {
        self.ops.iter().map(|o| o.2.seconds).sum()
    }

    /// Kernel launches of the whole step.
    pub fn launches(&self) -> usize {
        self.ops.iter().map(|o| o.2.launches).sum()
    }
}

/// The estimate of every `Compute` instruction of `p` on `gpu`.
///
/// Errors: [`ExecError::Invalid`] for an instruction naming a spec the
/// program lacks; [`ExecError::Backend`] for an instance whose shapes do
/// not fit its spec.
pub fn estimate_program(p: &Program, gpu: &Roofline) -> Result<StepEstimate, ExecError> {
    let mut by_op: BTreeMap<String, (usize, KernelEstimate)> = BTreeMap::new();
    for ins in &p.instrs {
        let Some(i) = instance(p, ins)? else {
            continue;
        };
        let e = estimate_kernel(i.spec, &i.shapes, i.attrs, i.window.as_ref(), gpu).map_err(
            |source| ExecError::Backend {
                rank: p.rank,
                source,
            },
        )?;
        match by_op.entry(i.spec.name.clone()) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert((1, e));
            }
            std::collections::btree_map::Entry::Occupied(mut o) => {
                let (n, sum) = o.get_mut();
                *n += 1;
                sum.add(&e);
            }
        }
    }
    let mut ops: Vec<(String, usize, KernelEstimate)> =
        by_op.into_iter().map(|(k, (n, e))| (k, n, e)).collect();
    ops.sort_by(|a, b| b.2.seconds.total_cmp(&a.2.seconds));
    Ok(StepEstimate { ops })
}

/// The estimate of one op instance: `shapes` are its local input shapes
/// (no `window`) or global ones with the `window` it computes.
///
/// Errors: [`BackendError`] when the shapes or attributes do not fit the
/// spec.
pub fn estimate_kernel(
    spec: &OpSpec,
    shapes: &[Vec<usize>],
    attrs: &Attrs,
    window: Option<&Window>,
    gpu: &Roofline,
) -> Result<KernelEstimate, BackendError> {
    let b = spec.bind(shapes, attrs).map_err(KernelError::from)?;
    let form = window.map_or_else(|| library_form(&b), |_| LibraryForm::Generated);
    match form {
        LibraryForm::Cublas(s) => {
            let (bt, m, n, k) = (s.batch as f64, s.m as f64, s.n as f64, s.k as f64);
            let bytes = 4.0 * bt * (m * k + k * n + m * n);
            let flops = 2.0 * bt * m * n * k;
            return Ok(KernelEstimate {
                provider: "cublas",
                launches: 1,
                bytes,
                flops,
                seconds: gpu.seconds(1, bytes, flops, gpu.f32_flops),
            });
        }
        LibraryForm::ScatterAdd(s) => {
            let (rows, w, t) = (s.rows as f64, s.width as f64, s.tokens as f64);
            let bytes = 4.0 * (rows * w + t + t * w + 2.0 * t * w);
            let flops = t * w;
            return Ok(KernelEstimate {
                provider: "scatter-add",
                launches: 2,
                bytes,
                flops,
                seconds: gpu.seconds(2, bytes, flops, gpu.f32_flops),
            });
        }
        // cuDNN's presence is known only when a backend runs: the estimate
        // is the generated kernels' (the fallback), so plans do not depend
        // on the machine that made them.
        LibraryForm::Cudnn(_) | LibraryForm::CudnnPool(_) | LibraryForm::Generated => {}
    }
    let whole;
    let w = match window {
        Some(w) => w,
        None => {
            whole = Window::whole(&b).map_err(|what| KernelError::Unsupported {
                op: spec.name.clone(),
                what,
            })?;
            &whole
        }
    };
    generated(&b, w, gpu)
}

/// The generated kernels' estimate (see the module doc).
fn generated(b: &Binding, w: &Window, gpu: &Roofline) -> Result<KernelEstimate, BackendError> {
    let layouts = window_layouts(b, w)?;
    let elems = |t: TensorRef| -> f64 {
        let (_, ext) = layouts.get(t);
        ext.iter().product::<usize>() as f64
    };
    let g = match codegen::generate(b, w, &layouts, ReduceOptions::default()) {
        Ok(g) => g,
        Err(KernelError::Unsupported { .. }) => {
            let bytes: f64 = (0..b.spec.inputs.len())
                .map(|i| 4.0 * elems(TensorRef::Input(i as u32)))
                .chain((0..b.spec.outputs.len()).map(|o| 4.0 * elems(TensorRef::Output(o as u32))))
                .sum();
            return Ok(KernelEstimate {
                provider: "host",
                launches: 0,
                bytes,
                flops: 0.0,
                seconds: bytes / PCIE,
            });
        }
        Err(e) => return Err(e.into()),
    };
    let (mut bytes, mut flops) = (0.0, 0.0);
    for s in &b.spec.stmts {
        let n = elems(s.target);
        if n == 0.0 {
            continue;
        }
        let mut read = Vec::new();
        tensors_read(&s.body, &mut read);
        read.sort();
        read.dedup();
        bytes += read.iter().map(|&t| 4.0 * elems(t)).sum::<f64>();
        bytes += 4.0 * n;
        flops += n * ops(&s.body, w);
    }
    let launches = g.launches().len();
    Ok(KernelEstimate {
        provider: "nvrtc",
        launches,
        bytes,
        flops,
        seconds: gpu.seconds(launches, bytes, flops, gpu.f32_flops),
    })
}

/// Every tensor `e` reads.
fn tensors_read(e: &Expr, out: &mut Vec<TensorRef>) {
    e.visit(&mut |x| {
        if let ExprKind::Read { tensor, .. } = &x.kind {
            out.push(*tensor);
        }
    });
}

/// Real operations of one evaluation of `e` (reductions: their iterations
/// over `w` times their body's, plus one combine per iteration; `select`:
/// the condition and the costlier branch).
fn ops(e: &Expr, w: &Window) -> f64 {
    if e.ty == Type::Int {
        return 0.0;
    }
    match &e.kind {
        ExprKind::Reduce { vars, body, .. } => {
            let iters: f64 = vars
                .iter()
                .map(|v| {
                    let (l, h) = w.vars[v.0 as usize];
                    (h - l).max(0) as f64
                })
                .product();
            iters * (ops(body, w) + 1.0)
        }
        ExprKind::Call(tdl::Builtin::Select, a) => {
            1.0 + ops(&a[0], w) + ops(&a[1], w).max(ops(&a[2], w))
        }
        ExprKind::Read { .. } | ExprKind::Real(_) | ExprKind::Attr(_) => 0.0,
        ExprKind::Binary(op, a, c) => {
            let own = if matches!(op, BinOp::And | BinOp::Or) {
                0.0
            } else {
                1.0
            };
            own + ops(a, w) + ops(c, w)
        }
        _ => 1.0 + e.children().map(|c| ops(c, w)).sum::<f64>(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lib() -> tdl::Library {
        tdl::Library::shipped().expect("shipped specs")
    }

    #[test]
    fn a_matmul_is_cublas_flops_and_an_elementwise_op_is_its_bytes() {
        let lib = lib();
        let gpu = Roofline::H100;
        let mm = lib.get("matmul").unwrap();
        let e = estimate_kernel(
            mm,
            &[vec![256, 4096], vec![4096, 4096]],
            &Attrs::new(),
            None,
            &gpu,
        )
        .unwrap();
        assert_eq!(e.provider, "cublas");
        assert_eq!(e.flops, 2.0 * 256.0 * 4096.0 * 4096.0);
        // Compute-bound: 8.6 GFLOP at 67 TFLOP/s.
        let want = 5e-6 + e.flops / 67e12;
        assert!((e.seconds - want).abs() < 1e-12, "{e:?}");

        let relu = lib.get("relu").unwrap();
        let e = estimate_kernel(relu, &[vec![1 << 20]], &Attrs::new(), None, &gpu).unwrap();
        assert_eq!((e.provider, e.launches), ("nvrtc", 1));
        assert_eq!(e.bytes, 8.0 * (1 << 20) as f64, "read x once, write y once");
        let want = 5e-6 + e.bytes / 3.35e12;
        assert!((e.seconds - want).abs() < 1e-12, "{e:?}");
    }

    #[test]
    fn embedding_grad_is_a_scatter_not_a_dense_sum() {
        let lib = lib();
        let spec = lib.get("embedding_grad").unwrap();
        let mut attrs = Attrs::new();
        attrs.insert("vocab".into(), tdl::AttrValue::Int(50257));
        let e = estimate_kernel(
            spec,
            &[vec![8, 1024], vec![8, 1024, 768]],
            &attrs,
            None,
            &Roofline::H100,
        )
        .unwrap();
        assert_eq!(e.provider, "scatter-add");
        assert_eq!(e.flops, 8.0 * 1024.0 * 768.0);
    }

    #[test]
    fn presets_are_found_by_name() {
        assert_eq!(Roofline::named("H200"), Some(Roofline::H200));
        assert_eq!(Roofline::named("a100"), None);
    }
}
