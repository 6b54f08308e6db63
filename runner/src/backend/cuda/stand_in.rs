//! The stand-in for builds without the `cuda` feature: every constructor
//! fails with a message that names the missing feature.

use crate::backend::BackendError;

/// Why this build cannot open a CUDA device.
fn missing() -> BackendError {
    BackendError::Device {
        backend: "cuda",
        message: "this tofu was built without the `cuda` feature; rebuild with \
                  `cargo build --release --features cuda`"
            .into(),
    }
}

/// Number of CUDA devices this process can use.
///
/// Errors: always, naming the missing `cuda` feature.
pub fn device_count() -> Result<usize, BackendError> {
    Err(missing())
}
