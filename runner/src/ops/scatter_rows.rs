//! The scatter-add of rows' shape recogniser (`embedding_grad`,
//! `gather_grad`): a bound op → its [`ScatterRows`], which the CPU's
//! gather kernel and the CUDA backend's `scatter_add_rows` both run.

use tdl::Binding;

use super::attrs::{inputs_named, int_attr, only_attrs};

/// The shape of a scatter-add of rows (`embedding_grad`, `gather_grad`):
/// the output `[rows, width]` is zeroed, then row `ids[t]` of it gets
/// `dy[t, :]` added for every position `t < tokens`; `ids` is input 0 and
/// `dy` (`[tokens, width]` flattened) input 1 of both ops. Shared by the
/// CPU kernel and the CUDA backend's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScatterRows {
    /// Rows of the output table.
    pub rows: usize,
    /// Elements per row.
    pub width: usize,
    /// Ids (rows of `dy`).
    pub tokens: usize,
}

/// The [`ScatterRows`] of a bound `embedding_grad` or `gather_grad`, `None`
/// for any other op or an instance whose shapes do not fit.
pub fn scatter_rows_shape(b: &Binding) -> Option<ScatterRows> {
    match b.spec.name.as_str() {
        "embedding_grad" => {
            // embedding_grad<vocab>(ids[...], dy[..., D]) -> dtable[vocab, D]
            if !inputs_named(b, &["ids", "dy"]) || !only_attrs(b, &["vocab"]) {
                return None;
            }
            let vocab = int_attr(b, "vocab")?.max(0) as usize;
            let d = *b.input_shapes[1].last()?;
            let ids: usize = b.input_shapes[0].iter().product();
            let fits = b.output_shapes[0] == [vocab, d]
                && b.input_shapes[1].iter().product::<usize>() == ids * d;
            fits.then_some(ScatterRows {
                rows: vocab,
                width: d,
                tokens: ids,
            })
        }
        "gather_grad" => {
            // gather_grad<n>(ids[M], dy[M, ...]) -> dx[n, ...]
            if !inputs_named(b, &["ids", "dy"])
                || !only_attrs(b, &["n"])
                || b.input_shapes[0].len() != 1
            {
                return None;
            }
            let n = int_attr(b, "n")?.max(0) as usize;
            let (&m, rest) = b.input_shapes[1].split_first()?;
            let fits = m == b.input_shapes[0][0]
                && b.output_shapes[0].first() == Some(&n)
                && b.output_shapes[0][1..] == *rest;
            fits.then_some(ScatterRows {
                rows: n,
                width: rest.iter().product(),
                tokens: m,
            })
        }
        _ => None,
    }
}
