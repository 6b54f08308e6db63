//! Kernels of the [`CudaBackend`]: [`CudaKernel`] (cuBLAS for the matmul
//! family, CUDA C generated from the TDL spec, or the CPU kernel through host
//! copies for opaque functions), how each is prepared for an op instance and
//! how it is launched on the backend's stream.

use cudarc::cublas::{sys as blas_sys, Gemm, GemmConfig, StridedBatchedConfig};
use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};
use tdl::{Attrs, Binding};

use super::codegen::{self, Param};
use super::device::{config, device_err, load, CudaBackend};
use super::CudaBuffer;
use crate::backend::{BackendError, Window};
use crate::kernels::compiled::window_layouts;
use crate::kernels::gemm::{GemmShape, Trans};
use crate::kernels::{KernelError, OpKernel};

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
        reals: CudaSlice<f64>,
        /// Elements of each `let` temporary.
        locals: Vec<usize>,
        /// Elements of each input buffer.
        inputs: Vec<usize>,
        /// Elements of each output buffer.
        outputs: Vec<usize>,
    },
    /// The CPU kernel, through host copies.
    Host(OpKernel),
}

impl CudaKernel {
    /// How it runs: `"cublas"`, `"nvrtc"` or `"host"`.
    pub fn provider(&self) -> &'static str {
        match self {
            CudaKernel::Gemm { .. } => "cublas",
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
            self.stream.clone_htod(&[0.0f64][..])
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

    pub(super) fn gemm(
        &self,
        s: &GemmShape,
        a: &CudaBuffer,
        b: &CudaBuffer,
        c: &mut CudaBuffer,
    ) -> Result<(), BackendError> {
        let (m, n, k) = (s.m as i32, s.n as i32, s.k as i32);
        if s.batch == 0 || m == 0 || n == 0 {
            return Ok(());
        }
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
                batch_size: s.batch as i32,
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
                self.gemm(s, inputs[0], inputs[1], outputs[0])
            }
            CudaKernel::Host(k) => {
                let ins: Vec<Vec<f32>> = inputs
                    .iter()
                    .map(|b| b.to_host())
                    .collect::<Result<_, _>>()
                    .map_err(device_err)?;
                let mut outs: Vec<Vec<f32>> = outputs.iter().map(|b| vec![0.0; b.len]).collect();
                {
                    let ins: Vec<&[f32]> = ins.iter().map(|v| &v[..]).collect();
                    let mut o: Vec<&mut [f32]> = outs.iter_mut().map(|v| &mut v[..]).collect();
                    k.run(&ins, &mut o)?;
                }
                for (b, v) in outputs.iter_mut().zip(&outs) {
                    b.copy_from_host(v).map_err(device_err)?;
                }
                Ok(())
            }
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
                let locs: Vec<CudaSlice<f64>> = locals
                    .iter()
                    .map(|&n| self.stream.alloc_zeros::<f64>(n.max(1)))
                    .collect::<Result<_, _>>()
                    .map_err(device_err)?;
                let scr = self
                    .stream
                    .alloc_zeros::<f64>(*scratch)
                    .map_err(device_err)?;
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

/// The attributes of a bound op, by name (to re-prepare it on the host).
fn attrs_of(b: &Binding) -> Attrs {
    let mut a = Attrs::new();
    for (decl, v) in b.spec.attrs.iter().zip(&b.attrs) {
        a.insert(decl.name.clone(), *v);
    }
    a
}

fn check_lens(
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
