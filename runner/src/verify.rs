//! Comparing a partitioned run with the unpartitioned one.
//!
//! Takes two [`RunReport`]s of the same graph and data (e.g. k workers and
//! k = 1); gives the largest relative error over their common outputs (the
//! loss, updated weights and optimizer state after the last step). Per
//! tensor the error is normwise: `‖a − b‖₂ / max(‖b‖₂, 1e-3·√n)`. The floor
//! (an RMS of 1e-3) keeps tensors that are zero in exact arithmetic (e.g.
//! the gradient of an attention key bias, of a batch-norm shift followed by
//! another normalisation) from turning f32 round-off of order 1e-9 into a
//! "relative error" of order 1: below that RMS the comparison is absolute.
//!
//! Some tensors are zero in exact arithmetic and yet far above that floor
//! in f32: in a network whose weights are uniform constants (the ONNX
//! `light_*` models) every channel is the same, the classifier's rows are
//! one vector w and the gradient beneath it, `Σ_j (softmax − labels)_j · w`,
//! is exactly zero, while each f32 run returns its own round-off of terms
//! of order |w| — a different vector for each order of summation. No two
//! f32 programs agree on such a tensor, so [`judge`] measures each tensor's
//! **sensitivity**: the same unpartitioned run with every floating-point
//! leaf (weights, inputs, labels) multiplied by `1 + δ·u`, u standard
//! normal per element and δ = [`PERTURBATION`] (2⁻¹⁷, 64 f32 ulps), the
//! usual stochastic test of numerical stability (as in Monte Carlo
//! arithmetic). A tensor whose error exceeds the tolerance passes only when
//! the error is within [`SENSITIVITY_FACTOR`] times that change: the
//! partitioned run then differs from the reference no more than round-off
//! sized perturbations of the reference's own inputs do. Such tensors are
//! reported by name ([`Verification::ill_conditioned`]); a real
//! partitioning error (a lost partial sum, a wrong tile) changes a tensor
//! by its own size and fails.

use program::{DType, Init, Instr, Program, TensorId};
use tdl::fill::Fill;

use crate::exec::{ExecError, RunReport};
use crate::given::Given;

/// Relative size δ of the perturbation of the leaves in the sensitivity
/// run (2⁻¹⁷ ≈ 7.6e-6: 64 units in the last place of an f32).
pub const PERTURBATION: f64 = 1.0 / 131_072.0;

/// A tensor above the tolerance passes when its error is at most this many
/// times its sensitivity (see the module doc).
pub const SENSITIVITY_FACTOR: f64 = 10.0;

/// Per-tensor relative errors and their maximum (see the module doc).
/// Gives `(max, per tensor)`; `f64::INFINITY` for a tensor missing from one
/// side or of a different length, or for a non-finite value.
pub fn max_rel_error(run: &RunReport, reference: &RunReport) -> (f64, Vec<(TensorId, f64)>) {
    let mut per = Vec::new();
    for (t, b) in &reference.outputs {
        let e = match run.outputs.iter().find(|(u, _)| u == t) {
            Some((_, a)) => rel_error(a, b),
            None => f64::INFINITY,
        };
        per.push((*t, e));
    }
    let max = per.iter().fold(0.0f64, |m, (_, e)| m.max(*e));
    (max, per)
}

/// `‖a − b‖₂ / max(‖b‖₂, 1e-3·√n)`; infinite for different lengths or a
/// non-finite difference.
fn rel_error(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nd: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - *y as f64).powi(2))
        .sum::<f64>()
        .sqrt();
    let floor = 1e-3 * (b.len().max(1) as f64).sqrt();
    if nd.is_finite() {
        nd / nb.max(floor)
    } else {
        f64::INFINITY
    }
}

/// One tensor's verdict in a [`Verification`].
#[derive(Clone, Debug, PartialEq)]
pub struct TensorCheck {
    /// The tensor.
    pub tensor: TensorId,
    /// Its relative error against the reference (see the module doc).
    pub error: f64,
    /// Its relative change under the perturbation of the leaves, where the
    /// sensitivity run was made (only when some error exceeded the
    /// tolerance).
    pub sensitivity: Option<f64>,
    /// Within the tolerance, or within [`SENSITIVITY_FACTOR`] × its
    /// sensitivity.
    pub passed: bool,
}

/// The outcome of comparing a run with the reference (see [`judge`]).
#[derive(Clone, Debug)]
pub struct Verification {
    /// The largest relative error of any tensor.
    pub max_rel_error: f64,
    /// Every compared tensor, in the reference's order.
    pub tensors: Vec<TensorCheck>,
}

impl Verification {
    /// Every tensor passed.
    pub fn passed(&self) -> bool {
        self.tensors.iter().all(|t| t.passed)
    }

    /// Tensors above the tolerance that passed by their sensitivity (zero
    /// or ill-conditioned in exact arithmetic; see the module doc).
    pub fn ill_conditioned(&self) -> impl Iterator<Item = &TensorCheck> {
        self.tensors
            .iter()
            .filter(|t| t.passed && t.sensitivity.is_some())
    }

    /// The tensors a verdict names: those that failed, worst first, at
    /// most `n`; then every ill-conditioned one ([`Self::ill_conditioned`]).
    pub fn notable(&self, n: usize) -> (Vec<&TensorCheck>, Vec<&TensorCheck>) {
        let mut failed: Vec<_> = self.tensors.iter().filter(|c| !c.passed).collect();
        failed.sort_by(|a, b| b.error.total_cmp(&a.error));
        failed.truncate(n);
        (failed, self.ill_conditioned().collect())
    }
}

/// Judge `run` against `reference` with tolerance `tol` (max relative
/// error per tensor); `perturbed` is the reference re-run on perturbed
/// leaves ([`perturbed_leaves`]), needed only when some tensor exceeds
/// `tol` — without it such a tensor fails.
pub fn judge(
    run: &RunReport,
    reference: &RunReport,
    perturbed: Option<&RunReport>,
    tol: f64,
) -> Verification {
    let (max, per) = max_rel_error(run, reference);
    let tensors = per
        .into_iter()
        .map(|(tensor, error)| {
            if error <= tol {
                return TensorCheck {
                    tensor,
                    error,
                    sensitivity: None,
                    passed: true,
                };
            }
            let sensitivity = perturbed.map(|p| {
                let b = reference.outputs.iter().find(|(t, _)| *t == tensor);
                let a = p.outputs.iter().find(|(t, _)| *t == tensor);
                match (a, b) {
                    (Some((_, a)), Some((_, b))) => rel_error(a, b),
                    _ => 0.0,
                }
            });
            let passed = error.is_finite()
                && sensitivity.is_some_and(|s| s.is_finite() && error <= SENSITIVITY_FACTOR * s);
            TensorCheck {
                tensor,
                error,
                sensitivity,
                passed,
            }
        })
        .collect();
    Verification {
        max_rel_error: max,
        tensors,
    }
}

/// The floating-point leaves of `program` (every tensor a buffer of it is
/// filled with at allocation: weights, inputs, labels, optimizer state),
/// whole, from `given` where it has them and else from their fill or known
/// value under `seed`, each element multiplied by `1 + δ·u` with u standard
/// normal (drawn from `seed`'s perturbation stream by the element's global
/// index, so every tile of a tensor agrees) and δ = [`PERTURBATION`].
/// Integer and boolean leaves (ids, masks) are left out: the run keeps
/// their own values.
///
/// `program` must hold whole tensors (the unpartitioned program's one
/// rank); errors: [`ExecError::Invalid`] for a known value of the wrong
/// length.
pub fn perturbed_leaves(program: &Program, seed: u64, given: &Given) -> Result<Given, ExecError> {
    let mut out = Given::new();
    for ins in &program.instrs {
        let Instr::Alloc {
            buf,
            init: Init::Fill(syn),
        } = ins
        else {
            continue;
        };
        let t = program.buffers[*buf as usize].tensor;
        let Some(info) = program.tensor(t) else {
            continue;
        };
        let float = matches!(
            info.dtype,
            DType::F32 | DType::F16 | DType::Bf16 | DType::F64
        );
        if !float || out.contains_key(&t) {
            continue;
        }
        let whole: Vec<(i64, i64)> = info.shape.iter().map(|&d| (0, d as i64)).collect();
        let mut v = match given.get(&t) {
            Some(v) => v.clone(),
            None => crate::exec::fill_host(syn, info, seed, &whole)?,
        };
        let noise = Fill::Normal { std: PERTURBATION }.generate(
            &info.shape,
            seed ^ 0x7e57_ab1e_5eed_0001,
            2 * u64::from(t.0) * (1 << 40),
        );
        for (x, u) in v.iter_mut().zip(noise) {
            *x = (*x as f64 * (1.0 + u)) as f32;
        }
        out.insert(t, v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(outputs: &[(u32, Vec<f32>)]) -> RunReport {
        RunReport {
            outputs: outputs
                .iter()
                .map(|(t, v)| (TensorId(*t), v.clone()))
                .collect(),
            ..Default::default()
        }
    }

    /// Pseudo-random values in [-1, 1).
    fn noise(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    #[test]
    fn a_tensor_within_the_tolerance_passes_without_a_sensitivity_run() {
        let b: Vec<f32> = noise(100, 1);
        let a: Vec<f32> = b.iter().map(|x| x * (1.0 + 1e-6)).collect();
        let v = judge(&report(&[(0, a)]), &report(&[(0, b)]), None, 1e-4);
        assert!(v.passed());
        assert_eq!(v.ill_conditioned().count(), 0);
    }

    #[test]
    fn round_off_on_a_zero_tensor_passes_only_by_its_sensitivity() {
        // Two runs' round-off of a tensor that is zero in exact arithmetic,
        // and a perturbed reference that moves it as much.
        let (a, b, p) = (noise(100, 1), noise(100, 2), noise(100, 3));
        let (run, reference) = (report(&[(0, a)]), report(&[(0, b)]));
        let without = judge(&run, &reference, None, 1e-4);
        assert!(!without.passed(), "no sensitivity run: it fails");
        let v = judge(&run, &reference, Some(&report(&[(0, p)])), 1e-4);
        assert!(v.passed());
        assert_eq!(v.ill_conditioned().count(), 1);
    }

    #[test]
    fn a_wrong_tensor_that_is_insensitive_fails() {
        // A partitioning error (half the values lost) on a tensor that a
        // perturbation moves by round-off only.
        let b = noise(100, 1);
        let mut a = b.clone();
        a[..50].iter_mut().for_each(|x| *x = 0.0);
        let p: Vec<f32> = b.iter().map(|x| x * (1.0 + 1e-5)).collect();
        let v = judge(
            &report(&[(0, a)]),
            &report(&[(0, b)]),
            Some(&report(&[(0, p)])),
            1e-4,
        );
        assert!(!v.passed());
        assert!(v.tensors[0].error > 0.5);
    }

    #[test]
    fn a_missing_tensor_fails() {
        let b = noise(10, 1);
        let v = judge(
            &report(&[]),
            &report(&[(0, b.clone())]),
            Some(&report(&[(0, b)])),
            1e-4,
        );
        assert!(!v.passed());
        assert!(v.max_rel_error.is_infinite());
    }
}
