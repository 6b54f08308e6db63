//! Applications written against the loop API: SGD matrix factorisation
//! (the 2D example of thesis §5.3.3) and sparse logistic regression (1D).

/// The MF benchmark: seconds per epoch and epochs to a target RMSE.
pub mod bench;
/// Sparse logistic regression (1D, buffered writes).
pub mod lr;
/// SGD matrix factorisation (unordered 2D).
pub mod mf;
/// What `tofu loops` prints of the applications' runs, as text and JSON.
pub mod report;
