//! Convolutions through cuDNN on a [`CudaBackend`]: a `conv2d`,
//! `conv2d_grad_x` or `conv2d_grad_w` instance the op table sends to cuDNN
//! ([`crate::ops::conv_shape`] recognises it) is prepared as a
//! [`CudnnConv`] (descriptors, cuDNN's algorithm, its workspace size) and
//! launched as one cuDNN call on the backend's stream, with its workspace
//! allocated for the call and freed in stream order after it.
//!
//! cuDNN is opened once per process ([`super::cudnn_api::cudnn`], from
//! `TOFU_CUDNN_LIBRARY` or `libcudnn.so.9`, `libcudnn.so`); where it is
//! absent, [`CudaBackend::cudnn_conv`] gives `None` and the backend
//! generates the op's CUDA C, as for any op. Which of the two happened is
//! said once per process on stderr (`tofu: convolutions through cuDNN
//! (…)` or `tofu: cuDNN not loaded (…)`).

use std::sync::{Mutex, Once};

use super::cudnn_api::{cudnn, ConvDescs, Handle};
use super::device::{device_err, CudaBackend};
use super::kernel::check_lens;
use super::{CudaBuffer, CudaKernel};
use crate::backend::{Backend, BackendError};
use crate::ops::ConvShape;

/// A convolution prepared for cuDNN.
pub struct CudnnConv {
    /// The op.
    pub(super) op: String,
    /// Its shape.
    pub(super) shape: ConvShape,
    descs: ConvDescs,
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
                announce(|| format!("convolutions through cuDNN (`{}`)", api.path));
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
        Ok(Some(CudaKernel::Cudnn(Box::new(CudnnConv {
            op: op.to_string(),
            shape,
            descs,
        }))))
    }

    /// Launch `k`: check the buffers' lengths, allocate its workspace,
    /// queue the cuDNN call on the stream, free the workspace after it (in
    /// stream order).
    ///
    /// Errors: a buffer of the wrong length, no device memory for the
    /// workspace, cuDNN's refusal (naming the op).
    pub(super) fn run_cudnn(
        &self,
        k: &CudnnConv,
        inputs: &[&CudaBuffer],
        outputs: &mut [&mut CudaBuffer],
    ) -> Result<(), BackendError> {
        let (want_in, want_out) = k.shape.io();
        check_lens(&k.op, "input", &want_in, inputs.iter().map(|b| b.len))?;
        check_lens(&k.op, "output", &[want_out], outputs.iter().map(|b| b.len))?;
        let Some(h) = self.cudnn.get().and_then(Option::as_ref) else {
            return Err(device_err(format!("`{}`: no cuDNN handle", k.op)));
        };
        let ws = self.alloc_workspace(k.descs.workspace.div_ceil(4).max(1))?;
        self.bind()?;
        let h = h.lock().expect("cuDNN handle");
        // SAFETY: the buffers have the shape's lengths (checked above), the
        // workspace the algorithm's bytes; each is freed in stream order,
        // after the call has run.
        let r = unsafe {
            k.descs.run(
                &h,
                [inputs[0].ptr(), inputs[1].ptr()],
                outputs[0].ptr_mut(),
                ws.ptr(),
            )
        };
        drop(ws);
        r.map_err(|e| device_err(format!("`{}`: {e}", k.op)))
    }
}
