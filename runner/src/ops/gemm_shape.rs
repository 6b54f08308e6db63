//! The matmul family's shape recogniser: a bound op → the [`GemmShape`]
//! any GEMM library needs (the CPU runs it on the `gemm` crate, the CUDA
//! backend on cuBLAS), or `None` when the instance is not one.

use tdl::Binding;

use super::attrs::only_attrs;

/// Which operand is transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trans {
    /// `a[M, K] · b[K, N]`.
    NN,
    /// `a[M, K] · b[N, K]ᵀ`.
    NT,
    /// `a[K, M]ᵀ · b[K, N]`.
    TN,
}

/// A (batched) product: `batch` independent `[m, k] · [k, n]` products of
/// row-major operands (a: `m·k` elements per batch, or `k·m` when
/// transposed; b likewise; c: `m·n`). The shape any GEMM library needs; the
/// CPU runs it on the `gemm` crate, the CUDA backend on cuBLAS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    /// Independent products.
    pub batch: usize,
    /// Rows of the output.
    pub m: usize,
    /// Columns of the output.
    pub n: usize,
    /// The reduced extent.
    pub k: usize,
    /// Which operand is stored transposed.
    pub trans: Trans,
}

/// The GEMM shape of a bound op of the matmul family (the ops of
/// [`super::LIBRARY_KERNELS`] whose CUDA form is cuBLAS), `None` for any other
/// op or an instance whose shapes do not fit.
pub fn gemm_shape(b: &Binding) -> Option<GemmShape> {
    let (trans, batched, tails) = gemm_form(&b.spec.name)?;
    match tails {
        None => GemmShape::from_shapes(b, trans, batched),
        Some(t) => flat_shape(b, trans, t),
    }
}

/// How an op of the matmul family maps to one product: which operand is
/// transposed, whether leading dims are a batch, and (for ops whose
/// operands fold into matrices, [`flat_shape`]) the trailing dims each of
/// the two operands and the output keeps as columns. `None` for any other
/// op.
fn gemm_form(op: &str) -> Option<(Trans, bool, Option<[usize; 3]>)> {
    Some(match op {
        "matmul" => (Trans::NN, false, None),
        "matmul_nt" => (Trans::NT, false, None),
        "matmul_tn" => (Trans::TN, false, None),
        "batch_matmul" => (Trans::NN, true, None),
        "batch_matmul_nt" => (Trans::NT, true, None),
        "batch_matmul_tn" => (Trans::TN, true, None),
        "dense" => (Trans::NN, false, Some([1, 1, 1])),
        "dense_nt" => (Trans::NT, false, Some([1, 1, 1])),
        "dense_grad_w" => (Trans::TN, false, Some([1, 1, 1])),
        "gate_matmul" => (Trans::NN, false, Some([1, 2, 2])),
        "gate_matmul_grad_x" => (Trans::NT, false, Some([2, 2, 1])),
        "gate_matmul_grad_w" => (Trans::TN, false, Some([1, 2, 2])),
        _ => return None,
    })
}

impl GemmShape {
    /// From operand shapes `[..., r0, c0]`, `[..., r1, c1]` and output
    /// `[..., M, N]`; `None` if they do not fit.
    pub(crate) fn from_shapes(b: &Binding, trans: Trans, batched: bool) -> Option<GemmShape> {
        if !only_attrs(b, &[]) || b.input_shapes.len() != 2 || b.output_shapes.len() != 1 {
            return None;
        }
        let (sa, sb, sc) = (&b.input_shapes[0], &b.input_shapes[1], &b.output_shapes[0]);
        let r = sa.len();
        if r < 2 || sb.len() != r || sc.len() != r || (!batched && r != 2) {
            return None;
        }
        let lead = &sa[..r - 2];
        if &sb[..r - 2] != lead || &sc[..r - 2] != lead {
            return None;
        }
        let (a0, a1, b0, b1) = (sa[r - 2], sa[r - 1], sb[r - 2], sb[r - 1]);
        let (m, k, kb, n) = match trans {
            Trans::NN => (a0, a1, b0, b1),
            Trans::NT => (a0, a1, b1, b0),
            Trans::TN => (a1, a0, b0, b1),
        };
        if k != kb || sc[r - 2] != m || sc[r - 1] != n {
            return None;
        }
        Some(GemmShape {
            batch: lead.iter().product(),
            m,
            n,
            k,
            trans,
        })
    }
}

/// `[d0, …, dr-1]` as a matrix `[Π leading dims, Π last `tail` dims]`.
fn as_matrix(s: &[usize], tail: usize) -> Option<(usize, usize)> {
    let split = s.len().checked_sub(tail)?;
    Some((s[..split].iter().product(), s[split..].iter().product()))
}

/// The [`GemmShape`] of one product of operands flattened to matrices:
/// operand i keeps its last `tails[i]` dims as columns and folds the others
/// into rows; the output likewise with `tails[2]`. `None` if they do not fit.
pub(crate) fn flat_shape(b: &Binding, trans: Trans, tails: [usize; 3]) -> Option<GemmShape> {
    if !only_attrs(b, &[]) || b.input_shapes.len() != 2 || b.output_shapes.len() != 1 {
        return None;
    }
    let (a0, a1) = as_matrix(&b.input_shapes[0], tails[0])?;
    let (b0, b1) = as_matrix(&b.input_shapes[1], tails[1])?;
    let (m, k, kb, n) = match trans {
        Trans::NN => (a0, a1, b0, b1),
        Trans::NT => (a0, a1, b1, b0),
        Trans::TN => (a1, a0, b0, b1),
    };
    (k == kb && as_matrix(&b.output_shapes[0], tails[2])? == (m, n)).then_some(GemmShape {
        batch: 1,
        m,
        n,
        k,
        trans,
    })
}

#[cfg(test)]
mod tests {
    use super::gemm_form;
    use crate::ops::{CudaForm, LIBRARY_KERNELS};

    /// The op table sends to cuBLAS exactly the ops this recogniser knows.
    #[test]
    fn the_table_sends_to_cublas_exactly_the_matmul_family() {
        for k in LIBRARY_KERNELS {
            assert_eq!(
                gemm_form(k.op).is_some(),
                k.cuda == CudaForm::Cublas,
                "`{}`",
                k.op
            );
        }
        let cublas = LIBRARY_KERNELS
            .iter()
            .filter(|k| k.cuda == CudaForm::Cublas)
            .count();
        assert_eq!(
            cublas, 12,
            "matmul, dense and gate_matmul with their variants"
        );
    }
}
