//! Typed errors of the loops crate: what went wrong and where (array,
//! access, index, flag), so a caller can print an actionable message.

use thiserror::Error;

/// Everything that can go wrong while declaring, scheduling or running a
/// parallel loop, or loading its data.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum LoopError {
    /// A subscript or shape does not fit the iteration space or the array.
    #[error("invalid loop declaration: {0}")]
    Declaration(String),
    /// An iteration-space point lies outside its shape or is repeated.
    #[error("invalid iteration space: {0}")]
    Space(String),
    /// The body touched an element its declared subscripts do not allow.
    #[error(
        "access {access} touched index {index:?} at iteration {point:?}, which its declared subscripts do not allow ({why})"
    )]
    UndeclaredAccess {
        /// Access id (order of declaration).
        access: usize,
        /// The index the body asked for.
        index: Vec<usize>,
        /// The iteration (index vector) running.
        point: Vec<usize>,
        /// Which rule failed.
        why: String,
    },
    /// The requested schedule is not valid for this loop.
    #[error("schedule `{requested}` is not valid for this loop: {why}")]
    Schedule {
        /// The schedule asked for.
        requested: String,
        /// Why it does not apply, with the dependence vectors.
        why: String,
    },
    /// A worker thread failed (disconnected channel or panicking body).
    #[error("worker {worker} failed: {why}")]
    Worker {
        /// Worker number.
        worker: usize,
        /// What happened.
        why: String,
    },
}
