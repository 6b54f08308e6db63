//! The matmul family on the `gemm` crate (pure Rust, SIMD, rayon-parallel).
//!
//! Takes a bound `matmul`, `matmul_nt`, `matmul_tn`, `batch_matmul*`,
//! `dense*` or `gate_matmul*` (see `specs/README.md` for their shapes; batch
//! dims of `dense` fold into rows); gives a kernel that
//! calls [`sgemm`] with the operands' strides (transposes are strides, never
//! copies). Each constructor checks the instance has the expected ranks and
//! output shape and no unknown attribute, and declines (`None`) otherwise.

use ::gemm::Parallelism;
use rayon::prelude::*;
use tdl::Binding;

use super::KernelImpl;
use crate::ops::{flat_shape, GemmShape, KernelError, Trans};

/// A strided f32 matrix operand: `data[i * rs + j * cs]` is element (i, j).
#[derive(Clone, Copy, Debug)]
pub struct Mat<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Row stride (elements).
    pub rs: usize,
    /// Column stride (elements).
    pub cs: usize,
}

/// `c[m, n] = Σ_k a[m, k]·b[k, n]` (+ the old `c` if `accumulate`), with `c`
/// row-major `[m, n]` and `a`, `b` strided views; `parallel` lets `gemm` use
/// the rayon pool (it still runs small products on one thread).
///
/// Panics if a view reaches past its slice (a bug in the caller).
#[allow(clippy::too_many_arguments)]
pub fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    c: &mut [f32],
    a: Mat<'_>,
    b: Mat<'_>,
    accumulate: bool,
    parallel: bool,
) {
    assert!(c.len() >= m * n, "gemm: destination too small");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            c[..m * n].fill(0.0);
        }
        return;
    }
    let last = |v: &Mat<'_>, rows: usize, cols: usize| (rows - 1) * v.rs + (cols - 1) * v.cs;
    assert!(
        last(&a, m, k) < a.data.len(),
        "gemm: lhs view out of bounds"
    );
    assert!(
        last(&b, k, n) < b.data.len(),
        "gemm: rhs view out of bounds"
    );
    let par = if parallel {
        Parallelism::Rayon(0)
    } else {
        Parallelism::None
    };
    // SAFETY: the asserts above keep every element the views address inside
    // their slices, and `c` (m × n, row-major) inside its slice; `c` is an
    // exclusive borrow, so it does not alias `a` or `b`.
    unsafe {
        ::gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            par,
        );
    }
}

fn boxed(s: Option<GemmShape>) -> Option<Box<dyn KernelImpl>> {
    s.map(|s| Box::new(s) as Box<dyn KernelImpl>)
}

impl GemmShape {
    fn views<'a>(&self, a: &'a [f32], b: &'a [f32]) -> (Mat<'a>, Mat<'a>) {
        let (m, n, k) = (self.m, self.n, self.k);
        match self.trans {
            Trans::NN => (
                Mat {
                    data: a,
                    rs: k,
                    cs: 1,
                },
                Mat {
                    data: b,
                    rs: n,
                    cs: 1,
                },
            ),
            Trans::NT => (
                Mat {
                    data: a,
                    rs: k,
                    cs: 1,
                },
                Mat {
                    data: b,
                    rs: 1,
                    cs: k,
                },
            ),
            Trans::TN => (
                Mat {
                    data: a,
                    rs: 1,
                    cs: m,
                },
                Mat {
                    data: b,
                    rs: n,
                    cs: 1,
                },
            ),
        }
    }
}

impl KernelImpl for GemmShape {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let (m, n, k) = (self.m, self.n, self.k);
        let (sa, sb, sc) = (m * k, k * n, m * n);
        let c = &mut *outputs[0];
        if self.batch == 0 || sc == 0 {
            return Ok(());
        }
        let one = |i: usize, c: &mut [f32], parallel: bool| {
            let (a, b) = self.views(
                &inputs[0][i * sa..(i + 1) * sa],
                &inputs[1][i * sb..(i + 1) * sb],
            );
            sgemm(m, n, k, c, a, b, false, parallel);
        };
        // Many small products: one per task. Few large ones: gemm's own threads.
        if self.batch >= rayon::current_num_threads() && m * n * k < 128 * 128 * 128 {
            c.par_chunks_mut(sc)
                .enumerate()
                .for_each(|(i, c)| one(i, c, false));
        } else {
            c.chunks_mut(sc)
                .enumerate()
                .for_each(|(i, c)| one(i, c, true));
        }
        Ok(())
    }
}

/// `matmul(a[M, K], b[K, N]) -> c[M, N]`.
pub fn matmul(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    boxed(GemmShape::from_shapes(b, Trans::NN, false))
}

/// `matmul_nt(a[M, K], b[N, K]) -> c[M, N]`.
pub fn matmul_nt(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    boxed(GemmShape::from_shapes(b, Trans::NT, false))
}

/// `matmul_tn(a[K, M], b[K, N]) -> c[M, N]`.
pub fn matmul_tn(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    boxed(GemmShape::from_shapes(b, Trans::TN, false))
}

/// `batch_matmul(a[..., M, K], b[..., K, N]) -> c[..., M, N]`.
pub fn batch_matmul(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    boxed(GemmShape::from_shapes(b, Trans::NN, true))
}

/// `batch_matmul_nt(a[..., M, K], b[..., N, K]) -> c[..., M, N]`.
pub fn batch_matmul_nt(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    boxed(GemmShape::from_shapes(b, Trans::NT, true))
}

/// `batch_matmul_tn(a[..., K, M], b[..., K, N]) -> c[..., M, N]`.
pub fn batch_matmul_tn(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    boxed(GemmShape::from_shapes(b, Trans::TN, true))
}

/// One product of operands flattened to matrices: operand i keeps its last
/// `tails[i]` dims as columns and folds the others into rows; the output
/// likewise with `tails[2]`.
fn flat(b: &Binding, trans: Trans, tails: [usize; 3]) -> Option<Box<dyn KernelImpl>> {
    boxed(flat_shape(b, trans, tails))
}

/// `dense(x[..., K], w[K, N]) -> y[..., N]`: one matmul over all batch rows.
pub fn dense(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    flat(b, Trans::NN, [1, 1, 1])
}

/// `dense_nt(x[..., N], w[K, N]) -> y[..., K]`.
pub fn dense_nt(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    flat(b, Trans::NT, [1, 1, 1])
}

/// ONNX Gemm with a bias row: the product of the first two inputs, then the
/// bias `c[N]` added to every row of `y[M, N]`.
struct Biased(GemmShape);

impl KernelImpl for Biased {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        self.0.run(&inputs[..2], outputs)?;
        let c = inputs[2];
        if !c.is_empty() {
            outputs[0]
                .par_chunks_mut(c.len())
                .for_each(|row| row.iter_mut().zip(c).for_each(|(y, b)| *y += b));
        }
        Ok(())
    }
}

/// [`Biased`] of `trans` for a binding `(a[M, K], b, c[N]) -> y[M, N]`.
fn biased(b: &Binding, trans: Trans) -> Option<Box<dyn KernelImpl>> {
    let n = *b.output_shapes.first()?.get(1)?;
    if b.input_shapes.len() != 3 || b.input_shapes[2] != [n] {
        return None;
    }
    let mut product = b.clone();
    product.input_shapes.truncate(2);
    let s = flat_shape(&product, trans, [1, 1, 1])?;
    Some(Box::new(Biased(s)))
}

/// `gemm_bias(a[M, K], b[K, N], c[N]) -> y[M, N]` (ONNX Gemm).
pub fn gemm_bias(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    biased(b, Trans::NN)
}

/// `gemm_nt_bias(a[M, K], b[N, K], c[N]) -> y[M, N]` (ONNX Gemm, transB).
pub fn gemm_nt_bias(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    biased(b, Trans::NT)
}

/// `dense_grad_w(x[..., K], dy[..., N]) -> dw[K, N]`: xᵀ·dy over all batch rows.
pub fn dense_grad_w(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    flat(b, Trans::TN, [1, 1, 1])
}

/// `gate_matmul_grad_x(dy[B, G, H], w[K, G, H]) -> dx[B, K]`.
pub fn gate_matmul_grad_x(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    flat(b, Trans::NT, [2, 2, 1])
}

/// `gate_matmul_grad_w(x[B, K], dy[B, G, H]) -> dw[K, G, H]`.
pub fn gate_matmul_grad_w(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    flat(b, Trans::TN, [1, 2, 2])
}

/// `gate_matmul(x[B, K], w[K, G, H]) -> y[B, G, H]`: a matmul with N = G·H.
pub fn gate_matmul(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    flat(b, Trans::NN, [1, 2, 2])
}
