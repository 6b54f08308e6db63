//! Convolutions and max pooling through cuDNN on a [`CudaBackend`]: a
//! `conv2d`, `conv2d_grad_x` or `conv2d_grad_w` instance the op table sends
//! to cuDNN ([`crate::ops::conv_shape`] recognises it) is prepared as a
//! [`CudnnCall`] (descriptors, cuDNN's algorithm, its workspace size) and
//! launched as one cuDNN call on the backend's stream, with its workspace
//! allocated for the call and freed in stream order after it; a
//! `maxpool2d` or `maxpool2d_grad` ([`crate::ops::pool_shape`]) likewise,
//! without a workspace.
//!
//! cuDNN is opened once per process ([`super::cudnn_api::cudnn`], from
//! `TOFU_CUDNN_LIBRARY` or `libcudnn.so.9`, `libcudnn.so`); where it is
//! absent, [`CudaBackend::cudnn_conv`] (and `cudnn_pool`) give `None` and the backend
//! generates the op's CUDA C, as for any op. Which of the two happened is
//! said once per process on stderr (`tofu: convolutions and max pooling
//! through cuDNN (…)`, or cuDNN's load error, which ends in
//! `… convolutions run as generated CUDA kernels`).

use std::sync::{Mutex, Once};

use super::cudnn_api::{cudnn, ConvDescs, Handle, PoolDescs};
use super::device::{device_err, CudaBackend};
use super::kernel::check_lens;
use super::{CudaBuffer, CudaKernel};
use crate::backend::{Backend, BackendError};
use crate::ops::{ConvShape, PoolShape};

/// An op instance prepared for cuDNN.
pub struct CudnnCall {
    /// The op.
    pub(super) op: String,
    /// Elements of each input and of the output.
    io: (Vec<usize>, usize),
    descs: Descs,
}

/// What the call is.
enum Descs {
    Conv(ConvDescs),
    Pool(PoolDescs),
}

/// Whether the injected fault `TOFU_CUDA_FAULT=cudnn-convolution-mode` is
/// set (read once): cuDNN is asked for a true convolution (the filter
/// flipped) instead of the spec's cross-correlation, the negative control
/// of `tests/cpu_cudnn.rs`.
fn flip_fault() -> bool {
    static FAULT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FAULT.get_or_init(|| {
        std::env::var("TOFU_CUDA_FAULT").is_ok_and(|v| v == "cudnn-convolution-mode")
    })
}

/// Say once per process whether convolutions go through cuDNN.
fn announce(line: impl FnOnce() -> String) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| eprintln!("tofu: {}", line()));
}

impl CudaBackend {
    /// This backend's cuDNN handle (made on first use, on the backend's
    /// stream), `None` where cuDNN is absent.
    ///
    /// Errors: cuDNN is present but refuses a handle, or the context does
    /// not bind.
    fn cudnn_handle(&self) -> Result<Option<&Mutex<Handle>>, BackendError> {
        if let Some(h) = self.cudnn.get() {
            return Ok(h.as_ref());
        }
        let made = match cudnn() {
            Err(e) => {
                announce(|| format!("{e}"));
                None
            }
            Ok(api) => {
                self.bind()?;
                let h = Handle::new(api, self.stream.cu_stream() as *mut _)
                    .map_err(|e| device_err(format!("{} at `{}`: {e}", "cuDNN", api.path)))?;
                announce(|| {
                    format!(
                        "convolutions and max pooling through cuDNN (`{}`)",
                        api.path
                    )
                });
                Some(Mutex::new(h))
            }
        };
        Ok(self.cudnn.get_or_init(|| made).as_ref())
    }

    /// The cuDNN kernel of `op` of `shape`, `None` where cuDNN is absent
    /// (the caller generates the op's CUDA C).
    ///
    /// Errors: cuDNN refuses the descriptors or offers no deterministic
    /// algorithm (an error naming the op), the context does not bind.
    pub(super) fn cudnn_conv(
        &self,
        op: &str,
        shape: ConvShape,
    ) -> Result<Option<CudaKernel>, BackendError> {
        let Some(h) = self.cudnn_handle()? else {
            return Ok(None);
        };
        self.bind()?;
        let h = h.lock().expect("cuDNN handle");
        let descs = ConvDescs::new(&h, &shape, flip_fault())
            .map_err(|e| device_err(format!("`{op}` through cuDNN ({shape:?}): {e}")))?;
        let (ins, out) = shape.io();
        Ok(Some(CudaKernel::Cudnn(Box::new(CudnnCall {
            op: op.to_string(),
            io: (ins.to_vec(), out),
            descs: Descs::Conv(descs),
        }))))
    }

    /// The cuDNN kernel of `op` of `shape`, `None` where cuDNN is absent
    /// (the caller generates the op's CUDA C).
    ///
    /// Errors: cuDNN refuses the descriptors (an error naming the op).
    pub(super) fn cudnn_pool(
        &self,
        op: &str,
        shape: PoolShape,
    ) -> Result<Option<CudaKernel>, BackendError> {
        if self.cudnn_handle()?.is_none() {
            return Ok(None);
        }
        let api = cudnn().map_err(BackendError::from)?;
        let descs = PoolDescs::new(api, &shape)
            .map_err(|e| device_err(format!("`{op}` through cuDNN ({shape:?}): {e}")))?;
        Ok(Some(CudaKernel::Cudnn(Box::new(CudnnCall {
            op: op.to_string(),
            io: shape.io(),
            descs: Descs::Pool(descs),
        }))))
    }

    /// Launch `k`: check the buffers' lengths, allocate a convolution's
    /// workspace, queue the cuDNN call on the stream, free the workspace
    /// after it (in stream order).
    ///
    /// Errors: a buffer of the wrong length, no device memory for the
    /// workspace, cuDNN's refusal (naming the op).
    pub(super) fn run_cudnn(
        &self,
        k: &CudnnCall,
        inputs: &[&CudaBuffer],
        outputs: &mut [&mut CudaBuffer],
    ) -> Result<(), BackendError> {
        check_lens(&k.op, "input", &k.io.0, inputs.iter().map(|b| b.len))?;
        check_lens(&k.op, "output", &[k.io.1], outputs.iter().map(|b| b.len))?;
        let Some(h) = self.cudnn.get().and_then(Option::as_ref) else {
            return Err(device_err(format!("`{}`: no cuDNN handle", k.op)));
        };
        let ins: Vec<u64> = inputs.iter().map(|b| b.ptr()).collect();
        let out = outputs[0].ptr_mut();
        let r = match &k.descs {
            Descs::Conv(d) => {
                let ws = self.alloc_workspace(d.workspace.div_ceil(4).max(1))?;
                self.bind()?;
                let h = h.lock().expect("cuDNN handle");
                // SAFETY: the buffers have the shape's lengths (checked
                // above), the workspace the algorithm's bytes; each is
                // freed in stream order, after the call has run.
                let r = unsafe { d.run(&h, [ins[0], ins[1]], out, ws.ptr()) };
                drop(ws);
                r
            }
            Descs::Pool(d) => {
                self.bind()?;
                let h = h.lock().expect("cuDNN handle");
                // SAFETY: the buffers have the shape's lengths (checked
                // above) and are freed in stream order.
                unsafe { d.run(&h, &ins, out) }
            }
        };
        r.map_err(|e| device_err(format!("`{}`: {e}", k.op)))
    }
}
