//! Opaque functions (Tofu §3.1, Figure 4): computations TDL does not look
//! inside, applied to slices of tensors.
//!
//! Takes the materialised argument slices (row-major, with their shapes); gives
//! the result tensor. The checker only needs each function's arity and result
//! rank; the interpreter calls [`OpaqueInfo::eval`]. The interval analysis sees
//! only which dims of each argument are taken whole (`:`), so an opaque
//! operator can be partitioned only along the dims it indexes with variables.

use crate::tensor::Tensor;

/// A registered opaque function.
pub struct OpaqueInfo {
    /// Name used in TDL.
    pub name: &'static str,
    /// Number of arguments.
    pub arity: usize,
    /// Rank of the result, given the rank of each argument slice (number of `:`).
    pub result_rank: fn(&[usize]) -> usize,
    /// Evaluate on concrete slices. Errors are messages shown to the user.
    pub eval: fn(&[Tensor]) -> Result<Tensor, String>,
    /// One-line description.
    pub doc: &'static str,
}

/// Every opaque function the interpreter implements.
pub const KNOWN: &[OpaqueInfo] = &[OpaqueInfo {
    name: "cholesky",
    arity: 1,
    result_rank: |r| r.first().copied().unwrap_or(0),
    eval: cholesky,
    doc: "lower-triangular L with L·Lᵀ = A for a symmetric positive-definite [n, n] slice",
}];

/// Look an opaque function up by name.
pub fn lookup(name: &str) -> Option<&'static OpaqueInfo> {
    KNOWN.iter().find(|o| o.name == name)
}

fn cholesky(args: &[Tensor]) -> Result<Tensor, String> {
    let a = &args[0];
    if a.shape.len() != 2 || a.shape[0] != a.shape[1] {
        return Err(format!(
            "cholesky needs a square matrix slice, got shape {:?}",
            a.shape
        ));
    }
    let n = a.shape[0];
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let mut d = a.data[j * n + j];
        for k in 0..j {
            d -= l[j * n + k] * l[j * n + k];
        }
        if d <= 0.0 {
            return Err("cholesky: matrix is not positive definite".into());
        }
        let d = d.sqrt();
        l[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a.data[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = s / d;
        }
    }
    Ok(Tensor {
        shape: vec![n, n],
        data: l,
    })
}
