//! The tolerance of an f32 kernel's outputs against an f64 reference
//! (`cuda_emulated.rs`: the generated CUDA kernels, which compute in f32,
//! against the TDL interpreter or the CPU's windowed evaluator, which
//! compute in f64 and round each output to f32 once).
//!
//! An element passes when `|got − want| ≤ rtol·|want| + atol·max(1, S)`,
//! `S` the largest finite magnitude in the reference tensor: a relative
//! bound for what f32 arithmetic loses on each operation, and an absolute
//! one for what it loses to cancellation, whose size is that of the terms
//! that cancelled, not of the result. The tests' inputs are O(1), so terms
//! are O(1) or of the tensor's scale (a sum of many). A reference beyond
//! f32's range (a sentinel such as -1e300) must be the same-signed
//! infinity; NaN agrees with NaN only where the caller allows it. Needs
//! the test crate's `common` module.

use tdl::Tensor;

/// Bounds of one comparison (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Relative to `|want|`.
    pub rtol: f64,
    /// Relative to `max(1, S)`.
    pub atol: f64,
}

impl Tolerance {
    /// Exact equality (a copy).
    pub const EXACT: Tolerance = Tolerance {
        rtol: 0.0,
        atol: 0.0,
    };
}

/// The worst element of one comparison: its share of the bound (≤ 1
/// passes), and where it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Worst {
    /// `|got − want|` over the element's bound (0 where they are equal).
    pub share: f64,
    /// `|got − want|`.
    pub abs: f64,
    /// `|got − want| / |want|` (infinite for a nonzero error of 0).
    pub rel: f64,
    /// Output and element.
    pub at: (usize, usize),
}

/// `got` (f32) against `want` (f64) within `tol`: the worst element, or a
/// message naming `op`, the output and the element that fails. `nan_agrees`:
/// NaN on both sides passes (a window cutting an average over nothing).
pub fn check(
    op: &str,
    got: &[Vec<f32>],
    want: &[Tensor],
    tol: Tolerance,
    nan_agrees: bool,
) -> Result<Worst, String> {
    crate::common::same_lengths(op, got, want)?;
    let f32_max = f32::MAX as f64;
    let mut worst = Worst::default();
    for (o, (g, w)) in got.iter().zip(want).enumerate() {
        let scale = w
            .data
            .iter()
            .filter(|x| x.abs() <= f32_max)
            .fold(1.0f64, |m, x| m.max(x.abs()));
        for (i, (&a, &b)) in g.iter().zip(&w.data).enumerate() {
            let a = a as f64;
            if a == b
                || (nan_agrees && a.is_nan() && b.is_nan())
                || (b.abs() > f32_max && a.is_infinite() && (a > 0.0) == (b > 0.0))
            {
                continue;
            }
            let abs = (a - b).abs();
            let share = abs / (tol.rtol * b.abs() + tol.atol * scale);
            if share.is_nan() || share > 1.0 {
                return Err(format!(
                    "`{op}` output {o} (shape {:?}) element {i}: got {a}, reference {b} \
                     (error {abs:.3e}, relative error {:.3e}; bound {:.3e}·|want| + {:.3e}·{scale:.3e})",
                    w.shape,
                    abs / b.abs(),
                    tol.rtol,
                    tol.atol
                ));
            }
            if share > worst.share {
                worst = Worst {
                    share,
                    abs,
                    rel: abs / b.abs(),
                    at: (o, i),
                };
            }
        }
    }
    Ok(worst)
}
