//! Fills for the integer graph inputs that carry row ids.
//!
//! Takes the forward graph under construction and its graph inputs without a
//! known value; gives each integer input a fill a run can use: ids uniform in
//! the range that keeps every id derived from them (directly, through data
//! movement and casts, or through integer arithmetic with known operands) a
//! row of the table an `embedding`, `gather` or any spec that reads it as an
//! index reads
//! ([`graph::value_ranges::integer_input_fills`]); any other integer input
//! (an attention mask, a flag) gets 0/1 values. A float input keeps its
//! normal fill. An input whose ids cannot be kept in range keeps 0/1 values,
//! and `tofu run` names it ([`graph::value_ranges::check_synthetic_ids`]).

use std::collections::HashMap;

use graph::{GraphBuilder, GraphError, TensorId};

/// Set the fill of every integer graph input of `inputs` (see the module doc).
///
/// Errors: [`GraphError::Invalid`] if an input is not a leaf.
pub fn set_index_fills(
    b: &mut GraphBuilder<'_>,
    inputs: &HashMap<TensorId, String>,
) -> Result<(), GraphError> {
    let mut ids: Vec<TensorId> = inputs
        .keys()
        .copied()
        .filter(|&t| b.graph().tensor(t).dtype.is_integer())
        .collect();
    ids.sort();
    let lib = b.library();
    for (t, fill) in graph::value_ranges::integer_input_fills(b.graph(), lib, &ids) {
        b.set_fill(t, fill)?;
    }
    Ok(())
}
