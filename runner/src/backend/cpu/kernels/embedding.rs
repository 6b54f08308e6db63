//! Row gathers by data-dependent ids and their scatter-add gradients.
//!
//! Takes a bound `embedding(table[V, D], ids[...]) -> y[..., D]`,
//! `vocab_embedding(table[V, D], ids[...]) -> y[..., D]`,
//! `embedding_grad<vocab>(ids[...], dy[..., D]) -> dtable[vocab, D]`,
//! `gather(x[N, ...], ids[M]) -> y[M, ...]` or `gather_grad<n>(ids[M],
//! dy[M, ...]) -> dx[n, ...]` (`specs/shape.tdl`): a table of rows (`D`
//! elements, or the product of `...` for `gather`) and one id per output
//! row. The forward copies rows: an id is rounded to the nearest integer
//! (as every data-dependent index) and one outside the table is
//! [`KernelError::OutOfBounds`], as the spec's read is; `vocab_embedding`
//! (Megatron-LM's masked lookup, `Σ_v select(ids == v, table[v, d], 0)`)
//! gives a zero row for an id that is not exactly a row number, as its
//! spec's comparison does, and never fails. The gradient zeroes
//! the table and adds each `dy` row into the row its id names, in position
//! order (the order of the spec's sum); as the spec's `ids == v`, an id
//! that is not exactly a row number adds nowhere. Work is tokens × D
//! instead of the spec's dense V × tokens × D sum.

use rayon::prelude::*;
use tdl::Binding;

use super::KernelImpl;
use crate::ops::{inputs_named, only_attrs, scatter_rows_shape, KernelError};

struct Gather {
    /// Rows of the table.
    rows: usize,
    /// Elements per row.
    width: usize,
    grad: bool,
    /// A forward id that is not a row number gives a zero row
    /// (`vocab_embedding`) instead of an error.
    masked: bool,
    /// Input positions of (table or dy, ids).
    data: usize,
    ids: usize,
    op: String,
    table: String,
}

impl KernelImpl for Gather {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let (data, ids) = (inputs[self.data], inputs[self.ids]);
        let w = self.width;
        let out = &mut *outputs[0];
        if self.grad {
            out.fill(0.0);
            if w == 0 {
                return Ok(());
            }
            for (&id, dy) in ids.iter().zip(data.chunks(w)) {
                let v = id as f64;
                if v >= 0.0 && v < self.rows as f64 && v.fract() == 0.0 {
                    let row = &mut out[v as usize * w..(v as usize + 1) * w];
                    row.iter_mut().zip(dy).for_each(|(a, d)| *a += d);
                }
            }
            return Ok(());
        }
        if w == 0 {
            return Ok(());
        }
        if self.masked {
            out.par_chunks_mut(w)
                .zip(ids.par_iter())
                .for_each(|(y, &id)| {
                    let v = id as f64;
                    if v >= 0.0 && v < self.rows as f64 && v.fract() == 0.0 {
                        y.copy_from_slice(&data[v as usize * w..(v as usize + 1) * w]);
                    } else {
                        y.fill(0.0);
                    }
                });
            return Ok(());
        }
        out.par_chunks_mut(w)
            .zip(ids.par_iter())
            .map(|(y, &id)| {
                let v = (id as f64).round() as i64;
                if v < 0 || v >= self.rows as i64 {
                    return Err(KernelError::OutOfBounds {
                        op: self.op.clone(),
                        tensor: self.table.clone(),
                        index: vec![v],
                        shape: vec![self.rows, w],
                    });
                }
                y.copy_from_slice(&data[v as usize * w..(v as usize + 1) * w]);
                Ok(())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .collect()
    }
}

/// `embedding(table[V, D], ids[...]) -> y[..., D]`.
pub fn embedding(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    lookup(b, false)
}

/// `vocab_embedding(table[V, D], ids[...]) -> y[..., D]`: zero rows for ids
/// that are not row numbers.
pub fn vocab_embedding(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    lookup(b, true)
}

fn lookup(b: &Binding, masked: bool) -> Option<Box<dyn KernelImpl>> {
    if !inputs_named(b, &["table", "ids"]) || !only_attrs(b, &[]) {
        return None;
    }
    let &[v, d] = b.input_shapes[0].as_slice() else {
        return None;
    };
    let ids: usize = b.input_shapes[1].iter().product();
    (b.output_shapes[0].iter().product::<usize>() == ids * d).then(|| {
        Box::new(Gather {
            rows: v,
            width: d,
            grad: false,
            masked,
            data: 0,
            ids: 1,
            op: b.spec.name.clone(),
            table: "table".into(),
        }) as Box<dyn KernelImpl>
    })
}

/// One worker's share of `vocab_embedding` in global coordinates (a
/// [`super::compiled::Window`], codegen's windowed compute): the rows of a
/// vocabulary shard `[v0, v1)` (a plan that reduces over V), a box of
/// positions and of features. Each output row is the table row of its id if
/// the id is exactly a row number inside the shard, else zeros: the share's
/// partial sum of the spec's `Σ_v select(ids == v, table[v, d], 0)`, in
/// tokens × features work instead of the compiled evaluator's tokens ×
/// features × shard rows. `None` (the compiled evaluator runs it) when the
/// buffers are not the boxes this needs.
pub fn vocab_embedding_window(
    b: &Binding,
    w: &super::compiled::Window,
) -> Option<Box<dyn KernelImpl>> {
    if !inputs_named(b, &["table", "ids"]) || !only_attrs(b, &[]) || w.inputs.len() != 2 {
        return None;
    }
    let var = |name: &str| b.spec.vars.iter().position(|v| v.name == name);
    let (v, d) = (*w.vars.get(var("v")?)?, *w.vars.get(var("d")?)?);
    let out = w.output_region(b, 0);
    let (&d_out, positions) = out.split_last()?;
    let (table, ids) = (&w.inputs[0], &w.inputs[1]);
    let &[rows, cols] = table.as_slice() else {
        return None;
    };
    let fits = d_out == d
        && ids == positions
        && rows.0 <= v.0
        && v.1 <= rows.1
        && cols.0 <= d.0
        && d.1 <= cols.1
        && d.0 < d.1;
    fits.then(|| {
        Box::new(ShardLookup {
            shard: v,
            first_row: rows.0,
            table_width: (cols.1 - cols.0) as usize,
            first_col: (d.0 - cols.0) as usize,
            width: (d.1 - d.0) as usize,
        }) as Box<dyn KernelImpl>
    })
}

/// [`vocab_embedding_window`]'s kernel.
struct ShardLookup {
    /// The global rows `[lo, hi)` of the shard.
    shard: (i64, i64),
    /// Global row of the table buffer's first row.
    first_row: i64,
    /// Elements per row of the table buffer.
    table_width: usize,
    /// Column of the table buffer where the output's features start.
    first_col: usize,
    /// Features per output row.
    width: usize,
}

impl KernelImpl for ShardLookup {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let (table, ids) = (inputs[0], inputs[1]);
        let (lo, hi) = (self.shard.0 as f64, self.shard.1 as f64);
        outputs[0]
            .par_chunks_mut(self.width)
            .zip(ids.par_iter())
            .for_each(|(y, &id)| {
                let v = id as f64;
                if v >= lo && v < hi && v.fract() == 0.0 {
                    let at =
                        (v as i64 - self.first_row) as usize * self.table_width + self.first_col;
                    y.copy_from_slice(&table[at..at + self.width]);
                } else {
                    y.fill(0.0);
                }
            });
        Ok(())
    }
}

fn scatter_kernel(b: &Binding, table: &str) -> Option<Box<dyn KernelImpl>> {
    let s = scatter_rows_shape(b)?;
    Some(Box::new(Gather {
        rows: s.rows,
        width: s.width,
        grad: true,
        masked: false,
        data: 1,
        ids: 0,
        op: b.spec.name.clone(),
        table: table.into(),
    }))
}

/// `embedding_grad<vocab>(ids[...], dy[..., D]) -> dtable[vocab, D]`.
pub fn embedding_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    scatter_kernel(b, "dtable")
}

/// `gather(x[N, ...], ids[M]) -> y[M, ...]`.
pub fn gather(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !inputs_named(b, &["x", "ids"]) || !only_attrs(b, &[]) || b.input_shapes[1].len() != 1 {
        return None;
    }
    let (&n, rest) = b.input_shapes[0].split_first()?;
    let m = b.input_shapes[1][0];
    let fits = b.output_shapes[0].first() == Some(&m) && b.output_shapes[0][1..] == *rest;
    fits.then(|| {
        Box::new(Gather {
            rows: n,
            width: rest.iter().product(),
            grad: false,
            masked: false,
            data: 0,
            ids: 1,
            op: b.spec.name.clone(),
            table: "x".into(),
        }) as Box<dyn KernelImpl>
    })
}

/// `gather_grad<n>(ids[M], dy[M, ...]) -> dx[n, ...]`.
pub fn gather_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    scatter_kernel(b, "dx")
}
