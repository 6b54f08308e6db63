//! Kernels of the [`CudaBackend`]: [`CudaKernel`] (cuBLAS for the matmul
//! family, CUDA C generated from the TDL spec, or the CPU backend's kernel
//! through host copies for opaque functions), how each is prepared for an op instance and
//! how it is launched on the backend's stream.

use comm::HostMemory;
use cudarc::cublas::{sys as blas_sys, Gemm, GemmConfig, StridedBatchedConfig};
use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};
use tdl::{Attrs, Binding};

use super::codegen::{self, Param};
use super::device::{config, device_err, load, CudaBackend};
use super::scatter::{ScatterArgs, SCATTER_SRC};
use super::CudaBuffer;
use crate::backend::{Backend, BackendError, CpuBackend, Window};
use crate::ops::{window_layouts, GemmShape, KernelError, ScatterRows, Trans};

/// A kernel prepared for one op instance on a [`CudaBackend`].
pub enum CudaKernel {
    /// cuBLAS SGEMM (strided batched where `batch > 1`).
    Gemm {
        /// The op.
        op: String,
        /// The product.
        shape: GemmShape,
    },
    /// Kernels generated from the spec, one per statement.
    Generated {
        /// The op.
        op: String,
        /// Id for device-side error reports.
        id: i32,
        /// Its launches, in order ([`codegen::Generated::launches`]).
        launches: Vec<(CudaFunction, LaunchConfig)>,
        /// The functions' parameters ([`codegen::Generated::params`]).
        params: Vec<Param>,
        /// Elements of the split reductions' scratch.
        scratch: usize,
        /// Integer parameters (`P`).
        ints: CudaSlice<i64>,
        /// Real parameters (`F`).
        reals: CudaSlice<f32>,
        /// Elements of each `let` temporary.
        locals: Vec<usize>,
        /// Elements of each input buffer.
        inputs: Vec<usize>,
        /// Elements of each output buffer.
        outputs: Vec<usize>,
    },
    /// The scatter-add of rows (`embedding_grad`, `gather_grad`):
    /// [`super::scatter`].
    ScatterRows {
        /// The op.
        op: String,
        /// Its shape.
        shape: ScatterRows,
        /// `scatter_add_rows`.
        function: CudaFunction,
    },
    /// A cuDNN convolution or max pooling ([`super::cudnn`]).
    Cudnn(Box<super::cudnn::CudnnCall>),
    /// The CPU backend's kernel, through host copies.
    Host(<CpuBackend as Backend>::Kernel),
}

impl CudaKernel {
    /// How it runs: `"cublas"`, `"scatter-add"`, `"cudnn"`, `"nvrtc"` or
    /// `"host"`.
    pub fn provider(&self) -> &'static str {
        match self {
            CudaKernel::Gemm { .. } => "cublas",
            CudaKernel::ScatterRows { .. } => "scatter-add",
            CudaKernel::Cudnn(_) => "cudnn",
            CudaKernel::Generated { .. } => "nvrtc",
            CudaKernel::Host(_) => "host",
        }
    }
}

impl CudaBackend {
    pub(super) fn generated(
        &self,
        b: &Binding,
        window: &Window,
    ) -> Result<CudaKernel, BackendError> {
        let layouts = window_layouts(b, window)?;
        let opts = *self.reduce_opts.lock().expect("reduce options");
        let g = match codegen::generate(b, window, &layouts, opts) {
            Ok(g) => g,
            Err(KernelError::Unsupported { .. }) => {
                return Ok(CudaKernel::Host(self.host.prepare_window(
                    &b.spec,
                    &b.input_shapes,
                    &attrs_of(b),
                    window,
                )?))
            }
            Err(e) => return Err(e.into()),
        };
        let module = load(&self.ctx, &g.source)?;
        let launches = g
            .launches()
            .iter()
            .map(|l| {
                let f = module
                    .load_function(&l.function)
                    .map_err(|e| device_err(format!("`{}`: {}: {e}", b.spec.name, l.function)))?;
                Ok((f, config(l)))
            })
            .collect::<Result<Vec<_>, BackendError>>()?;
        let up_i = |v: &[i64]| {
            let v = if v.is_empty() { &[0][..] } else { v };
            self.stream.clone_htod(v)
        };
        let ints = up_i(&g.ints).map_err(device_err)?;
        let reals = if g.reals.is_empty() {
            self.stream.clone_htod(&[0.0f32][..])
        } else {
            self.stream.clone_htod(&g.reals[..])
        }
        .map_err(device_err)?;
        let elems = |v: &[(Vec<i64>, Vec<usize>)]| {
            v.iter()
                .map(|(_, e)| e.iter().product::<usize>())
                .collect::<Vec<_>>()
        };
        let mut names = self.names.lock().expect("names");
        names.push(b.spec.name.clone());
        Ok(CudaKernel::Generated {
            op: b.spec.name.clone(),
            id: (names.len() - 1) as i32,
            launches,
            params: g.params.clone(),
            scratch: g.scratch(),
            ints,
            reals,
            locals: elems(&layouts.locals),
            inputs: elems(&layouts.inputs),
            outputs: elems(&layouts.outputs),
        })
    }

    /// The scatter-add kernel of an `embedding_grad` / `gather_grad`
    /// instance of `shape`.
    ///
    /// Errors: NVRTC's or the driver's (compiling or loading the module).
    pub(super) fn scatter_rows(
        &self,
        op: &str,
        shape: ScatterRows,
    ) -> Result<CudaKernel, BackendError> {
        let module = load(&self.ctx, SCATTER_SRC)?;
        let function = module
            .load_function("scatter_add_rows")
            .map_err(|e| device_err(format!("`{op}`: scatter_add_rows: {e}")))?;
        Ok(CudaKernel::ScatterRows {
            op: op.to_string(),
            shape,
            function,
        })
    }

    /// Run a CPU backend's kernel on host copies of the buffers: the
    /// inputs downloaded, the outputs computed on the host (zero-filled
    /// first) and uploaded.
    ///
    /// Errors: the driver's (copies), the kernel's.
    fn run_on_host(
        &self,
        k: &<CpuBackend as Backend>::Kernel,
        inputs: &[&CudaBuffer],
        outputs: &mut [&mut CudaBuffer],
    ) -> Result<(), BackendError> {
        let ins = inputs
            .iter()
            .map(|b| self.host.upload_owned(b.to_host().map_err(device_err)?))
            .collect::<Result<Vec<_>, _>>()?;
        let mut outs = outputs
            .iter()
            .map(|b| self.host.alloc(b.len))
            .collect::<Result<Vec<_>, _>>()?;
        let ins_ref: Vec<_> = ins.iter().collect();
        let mut outs_ref: Vec<_> = outs.iter_mut().collect();
        self.host.launch(k, &ins_ref, &mut outs_ref)?;
        for (b, v) in outputs.iter_mut().zip(&outs) {
            b.copy_from_host(v.host()).map_err(device_err)?;
        }
        Ok(())
    }

    /// [`Backend::launch`]: check the buffer lengths, then run cuBLAS, the
    /// generated kernels in statement order, or the host kernel.
    pub(super) fn run_kernel(
        &self,
        kernel: &CudaKernel,
        inputs: &[&CudaBuffer],
        outputs: &mut [&mut CudaBuffer],
    ) -> Result<(), BackendError> {
        match kernel {
            CudaKernel::Gemm { op, shape } => {
                let s = shape;
                let want_in = [s.batch * s.m * s.k, s.batch * s.k * s.n];
                check_lens(op, "input", &want_in, inputs.iter().map(|b| b.len))?;
                check_lens(
                    op,
                    "output",
                    &[s.batch * s.m * s.n],
                    outputs.iter().map(|b| b.len),
                )?;
                run_gemm(self, s, inputs[0], inputs[1], outputs[0])
            }
            CudaKernel::ScatterRows {
                op,
                shape,
                function,
            } => {
                let want_in = [shape.tokens, shape.tokens * shape.width];
                check_lens(op, "input", &want_in, inputs.iter().map(|b| b.len))?;
                let want_out = [shape.rows * shape.width];
                check_lens(op, "output", &want_out, outputs.iter().map(|b| b.len))?;
                self.stream
                    .memset_zeros(&mut outputs[0].data)
                    .map_err(|e| device_err(format!("`{op}`: cuMemsetD8: {e}")))?;
                let Some((args, launch)) = ScatterArgs::new(shape) else {
                    return Ok(());
                };
                let (ids, dy, out) = (inputs[0].ptr(), inputs[1].ptr(), outputs[0].ptr_mut());
                let mut lb = self.stream.launch_builder(function);
                lb.arg(&ids).arg(&dy).arg(&out).arg(&args);
                // SAFETY: the buffers have the lengths the shape needs
                // (checked above); the kernel writes only rows < `rows`.
                unsafe { lb.launch(config(&launch)) }
                    .map(|_| ())
                    .map_err(|e| device_err(format!("`{op}`: launch: {e}")))
            }
            CudaKernel::Cudnn(k) => self.run_cudnn(k, inputs, outputs),
            CudaKernel::Host(k) => self.run_on_host(k, inputs, outputs),
            CudaKernel::Generated {
                op,
                id,
                launches,
                params,
                scratch,
                ints,
                reals,
                locals,
                inputs: want_in,
                outputs: want_out,
            } => {
                check_lens(op, "input", want_in, inputs.iter().map(|b| b.len))?;
                check_lens(op, "output", want_out, outputs.iter().map(|b| b.len))?;
                // SAFETY (both allocations, left unset: no memset per
                // launch): a local's statement writes every element of its
                // box before a later statement reads it, and a split
                // statement's partials kernel writes every scratch element
                // its combining kernel reads (`codegen::generate`).
                let locs: Vec<CudaSlice<f32>> = locals
                    .iter()
                    .map(|&n| unsafe { self.stream.alloc::<f32>(n.max(1)) })
                    .collect::<Result<_, _>>()
                    .map_err(device_err)?;
                let scr = unsafe { self.stream.alloc::<f32>(*scratch) }.map_err(device_err)?;
                // Every pointer argument, in the functions' parameter order.
                let mut ptrs: Vec<u64> = Vec::with_capacity(params.len());
                for p in params {
                    ptrs.push(match *p {
                        Param::Input(i) => inputs[i].ptr(),
                        Param::Output(o) => outputs[o].ptr_mut(),
                        Param::Local(l) => locs[l].device_ptr(&self.stream).0,
                        Param::Ints => ints.device_ptr(&self.stream).0,
                        Param::Reals => reals.device_ptr(&self.stream).0,
                        Param::Scratch => scr.device_ptr(&self.stream).0,
                        Param::ErrorWord => {
                            self.err
                                .lock()
                                .expect("error word")
                                .device_ptr(&self.stream)
                                .0
                        }
                        Param::KernelId => continue,
                    });
                }
                for (f, cfg) in launches {
                    let mut lb = self.stream.launch_builder(f);
                    let mut next = ptrs.iter();
                    for p in params {
                        match p {
                            Param::KernelId => lb.arg(id),
                            _ => lb.arg(next.next().expect("one pointer per parameter")),
                        };
                    }
                    // SAFETY: every buffer has the length its layout needs
                    // (checked above), the scratch the split statements
                    // need; reads are bounds-checked in the kernel.
                    unsafe { lb.launch(*cfg) }
                        .map_err(|e| device_err(format!("`{op}`: launch: {e}")))?;
                }
                drop(scr);
                drop(locs);
                Ok(())
            }
        }
    }
}

/// What a GEMM of a shape needs on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GemmCall {
    /// Nothing: the output has no elements (`batch`, `m` or `n` is 0).
    Nothing,
    /// Zeroing the output: `k` is 0, so every element is an empty sum
    /// (cuBLAS would be handed a leading dimension of 0, which it refuses).
    Zero,
    /// A cuBLAS call.
    Blas,
}

/// What a GEMM of `s` needs on the device (see [`GemmCall`]).
pub(super) fn gemm_call(s: &GemmShape) -> GemmCall {
    if s.batch == 0 || s.m == 0 || s.n == 0 {
        GemmCall::Nothing
    } else if s.k == 0 {
        GemmCall::Zero
    } else {
        GemmCall::Blas
    }
}

/// The device side of a GEMM ([`run_gemm`]'s steps), so that the order of
/// the steps can be checked with a stand-in.
pub(super) trait GemmDevice {
    /// A device buffer.
    type Buf;
    /// Bind the device's context to the calling thread (cuBLAS calls on a
    /// rank's thread need it; an earlier allocation may not have done it).
    fn bind(&self) -> Result<(), BackendError>;
    /// Zero every element of `c`.
    fn zero(&self, c: &mut Self::Buf) -> Result<(), BackendError>;
    /// `c = a · b` through cuBLAS, on a bound context.
    fn sgemm(
        &self,
        s: &GemmShape,
        a: &Self::Buf,
        b: &Self::Buf,
        c: &mut Self::Buf,
    ) -> Result<(), BackendError>;
}

impl GemmDevice for CudaBackend {
    type Buf = CudaBuffer;

    fn bind(&self) -> Result<(), BackendError> {
        CudaBackend::bind(self)
    }

    fn zero(&self, c: &mut CudaBuffer) -> Result<(), BackendError> {
        self.stream
            .memset_zeros(&mut c.data)
            .map_err(|e| device_err(format!("cuMemsetD8: {e}")))
    }

    fn sgemm(
        &self,
        s: &GemmShape,
        a: &CudaBuffer,
        b: &CudaBuffer,
        c: &mut CudaBuffer,
    ) -> Result<(), BackendError> {
        let dim = |v: usize| {
            i32::try_from(v).map_err(|_| {
                device_err(format!(
                    "cuBLAS takes 32-bit extents: a GEMM of {s:?} is too large"
                ))
            })
        };
        let (m, n, k) = (dim(s.m)?, dim(s.n)?, dim(s.k)?);
        use blas_sys::cublasOperation_t::{CUBLAS_OP_N as N, CUBLAS_OP_T as T};
        // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: B first.
        let (tb, ldb, ta, lda) = match s.trans {
            Trans::NN => (N, n, N, k),
            Trans::NT => (T, k, N, k),
            Trans::TN => (N, n, T, m),
        };
        let gemm = GemmConfig {
            transa: tb,
            transb: ta,
            m: n,
            n: m,
            k,
            alpha: 1.0f32,
            lda: ldb,
            ldb: lda,
            beta: 0.0f32,
            ldc: n,
        };
        let r = if s.batch == 1 {
            // SAFETY: the buffer lengths were checked against m, n, k.
            unsafe { self.blas.gemm(gemm, &b.data, &a.data, &mut c.data) }
        } else {
            let cfg = StridedBatchedConfig {
                gemm,
                batch_size: dim(s.batch)?,
                stride_a: (s.k * s.n) as i64,
                stride_b: (s.m * s.k) as i64,
                stride_c: (s.m * s.n) as i64,
            };
            // SAFETY: as above, for every batch.
            unsafe {
                self.blas
                    .gemm_strided_batched(cfg, &b.data, &a.data, &mut c.data)
            }
        };
        r.map_err(|e| device_err(format!("cublasSgemm: {e}")))
    }
}

/// `c = a · b` for `s` on `d`: nothing for an empty output, zeros for an
/// empty sum (k = 0, no cuBLAS call), else bind the context, then cuBLAS.
///
/// Errors: the device's.
pub(super) fn run_gemm<D: GemmDevice>(
    d: &D,
    s: &GemmShape,
    a: &D::Buf,
    b: &D::Buf,
    c: &mut D::Buf,
) -> Result<(), BackendError> {
    match gemm_call(s) {
        GemmCall::Nothing => Ok(()),
        GemmCall::Zero => d.zero(c),
        GemmCall::Blas => {
            d.bind()?;
            d.sgemm(s, a, b, c)
        }
    }
}

/// The attributes of a bound op, by name (to re-prepare it on the host).
fn attrs_of(b: &Binding) -> Attrs {
    let mut a = Attrs::new();
    for (decl, v) in b.spec.attrs.iter().zip(&b.attrs) {
        a.insert(decl.name.clone(), *v);
    }
    a
}

pub(super) fn check_lens(
    op: &str,
    what: &'static str,
    want: &[usize],
    got: impl ExactSizeIterator<Item = usize>,
) -> Result<(), BackendError> {
    if got.len() != want.len() {
        return Err(KernelError::BufferCount {
            op: op.to_string(),
            what,
            expected: want.len(),
            got: got.len(),
        }
        .into());
    }
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        if *w != g {
            return Err(KernelError::BufferLength {
                op: op.to_string(),
                tensor: format!("{what} {i}"),
                shape: vec![*w],
                expected: *w,
                got: g,
            }
            .into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    fn shape(batch: usize, m: usize, n: usize, k: usize) -> GemmShape {
        GemmShape {
            batch,
            m,
            n,
            k,
            trans: Trans::NN,
        }
    }

    #[test]
    fn zero_extents_never_reach_cublas() {
        assert_eq!(gemm_call(&shape(1, 4, 5, 6)), GemmCall::Blas);
        assert_eq!(gemm_call(&shape(3, 4, 5, 0)), GemmCall::Zero);
        for s in [shape(0, 4, 5, 6), shape(1, 0, 5, 6), shape(1, 4, 0, 0)] {
            assert_eq!(gemm_call(&s), GemmCall::Nothing, "{s:?}");
        }
    }

    /// A stand-in device: buffers are host vectors, every step is recorded,
    /// and the step named in `fail` fails.
    #[derive(Default)]
    struct StandIn {
        steps: RefCell<Vec<&'static str>>,
        fail: Option<&'static str>,
    }

    impl StandIn {
        fn step(&self, what: &'static str) -> Result<(), BackendError> {
            self.steps.borrow_mut().push(what);
            match self.fail {
                Some(f) if f == what => Err(device_err(format!("{what}: injected fault"))),
                _ => Ok(()),
            }
        }
    }

    impl GemmDevice for StandIn {
        type Buf = Vec<f32>;

        fn bind(&self) -> Result<(), BackendError> {
            self.step("bind")
        }

        fn zero(&self, c: &mut Vec<f32>) -> Result<(), BackendError> {
            self.step("zero")?;
            c.fill(0.0);
            Ok(())
        }

        fn sgemm(
            &self,
            _: &GemmShape,
            _: &Vec<f32>,
            _: &Vec<f32>,
            _: &mut Vec<f32>,
        ) -> Result<(), BackendError> {
            self.step("sgemm")
        }
    }

    #[test]
    fn cublas_runs_on_a_bound_context() {
        let d = StandIn::default();
        let mut c = vec![1.0; 20];
        run_gemm(
            &d,
            &shape(1, 4, 5, 6),
            &vec![0.0; 24],
            &vec![0.0; 30],
            &mut c,
        )
        .unwrap();
        assert_eq!(*d.steps.borrow(), ["bind", "sgemm"]);
    }

    #[test]
    fn a_context_that_does_not_bind_stops_the_gemm() {
        let d = StandIn {
            fail: Some("bind"),
            ..StandIn::default()
        };
        let mut c = vec![1.0; 20];
        let e = run_gemm(
            &d,
            &shape(1, 4, 5, 6),
            &vec![0.0; 24],
            &vec![0.0; 30],
            &mut c,
        );
        assert!(e.unwrap_err().to_string().contains("injected fault"));
        assert_eq!(*d.steps.borrow(), ["bind"]);
    }

    #[test]
    fn an_empty_sum_zeroes_the_output_without_cublas() {
        let d = StandIn::default();
        let mut c = vec![1.0; 6];
        run_gemm(&d, &shape(2, 1, 3, 0), &vec![], &vec![], &mut c).unwrap();
        assert_eq!(*d.steps.borrow(), ["zero"]);
        assert_eq!(c, vec![0.0; 6]);
    }

    #[test]
    fn an_empty_output_is_left_alone() {
        let d = StandIn::default();
        let mut c = vec![];
        run_gemm(&d, &shape(1, 0, 5, 6), &vec![], &vec![0.0; 30], &mut c).unwrap();
        assert!(d.steps.borrow().is_empty());
    }
}
