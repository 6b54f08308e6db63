//! [`KernelError`]: why preparing or running a kernel failed, on any
//! backend (the CPU's library kernels and compiled evaluator, the CUDA
//! backend's generated kernels and its device-side error word).

use tdl::ShapeError;

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
