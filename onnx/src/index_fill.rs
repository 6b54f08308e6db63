//! Fills for the integer graph inputs that carry row ids.
//!
//! Takes the forward graph under construction and its graph inputs without a
//! known value; gives each integer input a fill a run can use: row ids
//! uniform in the rows of the smallest table they index
//! ([`Fill::Indices`]), found by following the input through one-input
//! operators (identity, reshape, cast, slice, …) to an `embedding` or
//! `gather` that reads it as ids; any other integer input (an attention
//! mask, a flag) gets 0/1 values. A float input keeps its normal fill.

use std::collections::HashMap;

use graph::{Fill, Graph, GraphBuilder, GraphError, TensorId};

/// Operators of the walk (one-input ops) are followed at most this deep.
const DEPTH: usize = 16;

/// Set the fill of every integer graph input of `inputs` (see the module doc).
///
/// Errors: [`GraphError::Invalid`] if an input is not a leaf.
pub fn set_index_fills(
    b: &mut GraphBuilder<'_>,
    inputs: &HashMap<TensorId, String>,
) -> Result<(), GraphError> {
    let mut ids: Vec<TensorId> = inputs.keys().copied().collect();
    ids.sort();
    for t in ids {
        if !b.graph().tensor(t).dtype.is_integer() {
            continue;
        }
        let fill = match rows_indexed(b.graph(), t) {
            Some(bound) => Fill::Indices { bound },
            None => Fill::Indices { bound: 2 },
        };
        b.set_fill(t, fill)?;
    }
    Ok(())
}

/// The fewest rows of a table that the values of `t` index, following
/// one-input operators (see the module doc).
fn rows_indexed(g: &Graph, t: TensorId) -> Option<usize> {
    let mut best: Option<usize> = None;
    let mut frontier = vec![t];
    for _ in 0..DEPTH {
        let mut next = Vec::new();
        for &x in &frontier {
            for &o in g.consumers(x) {
                let op = g.op(o);
                let ids_at = match op.spec.as_str() {
                    "embedding" | "gather" => Some(1),
                    _ => None,
                };
                if let Some(i) = ids_at {
                    if op.inputs.get(i) == Some(&x) {
                        let rows = g.tensor(op.inputs[0]).shape.first().copied()?;
                        best = Some(best.map_or(rows, |b| b.min(rows)));
                    }
                } else if op.inputs.len() == 1 {
                    next.extend(op.outputs.iter().copied());
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    best.filter(|&b| b > 0)
}
