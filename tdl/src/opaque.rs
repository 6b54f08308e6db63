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
pub const KNOWN: &[OpaqueInfo] = &[
    OpaqueInfo {
        name: "cholesky",
        arity: 1,
        result_rank: |r| r.first().copied().unwrap_or(0),
        eval: cholesky,
        doc: "lower-triangular L with L·Lᵀ = A for a symmetric positive-definite [n, n] slice",
    },
    OpaqueInfo {
        name: "det",
        arity: 1,
        result_rank: |_| 0,
        eval: det,
        doc: "determinant of a square [n, n] slice (LU with partial pivoting)",
    },
    OpaqueInfo {
        name: "adjugate",
        arity: 1,
        result_rank: |r| r.first().copied().unwrap_or(0),
        eval: adjugate,
        doc:
            "adjugate adj(A) of a square [n, n] slice (transposed cofactors; A·adj(A) = det(A)·I, \
              defined for singular A too)",
    },
];

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

/// The side of a square matrix slice, or the error naming `what`.
fn square(a: &Tensor, what: &str) -> Result<usize, String> {
    if a.shape.len() != 2 || a.shape[0] != a.shape[1] {
        return Err(format!(
            "{what} needs a square matrix slice, got shape {:?}",
            a.shape
        ));
    }
    Ok(a.shape[0])
}

/// Determinant of the row-major n×n matrix `m` by LU with partial pivoting.
fn det_of(mut m: Vec<f64>, n: usize) -> f64 {
    let mut d = 1.0;
    for c in 0..n {
        let p = (c..n)
            .max_by(|&i, &j| m[i * n + c].abs().total_cmp(&m[j * n + c].abs()))
            .unwrap_or(c);
        if m[p * n + c] == 0.0 {
            return 0.0;
        }
        if p != c {
            for k in 0..n {
                m.swap(p * n + k, c * n + k);
            }
            d = -d;
        }
        let piv = m[c * n + c];
        d *= piv;
        for i in c + 1..n {
            let f = m[i * n + c] / piv;
            for k in c..n {
                m[i * n + k] -= f * m[c * n + k];
            }
        }
    }
    d
}

fn det(args: &[Tensor]) -> Result<Tensor, String> {
    let n = square(&args[0], "det")?;
    Ok(Tensor {
        shape: vec![],
        data: vec![det_of(args[0].data.clone(), n)],
    })
}

fn adjugate(args: &[Tensor]) -> Result<Tensor, String> {
    let a = &args[0];
    let n = square(a, "adjugate")?;
    if n == 1 {
        return Ok(Tensor {
            shape: vec![1, 1],
            data: vec![1.0],
        });
    }
    let mut adj = vec![0.0; n * n];
    for r in 0..n {
        for c in 0..n {
            // Minor without row r and column c; adj[c, r] is its cofactor.
            let minor: Vec<f64> = (0..n)
                .filter(|&i| i != r)
                .flat_map(|i| {
                    (0..n)
                        .filter(move |&j| j != c)
                        .map(move |j| a.data[i * n + j])
                })
                .collect();
            let sign = if (r + c) % 2 == 0 { 1.0 } else { -1.0 };
            adj[c * n + r] = sign * det_of(minor, n - 1);
        }
    }
    Ok(Tensor {
        shape: vec![n, n],
        data: adj,
    })
}
