//! Lowering of data-movement ONNX operators: Reshape, Flatten, Squeeze,
//! Unsqueeze, Transpose, Concat, Split, Slice, Pad, Tile, Expand, Gather,
//! OneHot, Trilu, DepthToSpace, SpaceToDepth, CumSum.
//!
//! One file per kind of movement: [`view`] (views and layout changes),
//! [`last_axis`] (axis-generic operators lowered to last-axis specs between
//! [`Lower::axis_to_last`] and [`Lower::last_to_axis`]) and [`index`]
//! (position-dependent operators). Shape-like arguments (shape, axes,
//! starts, pads, repeats) must be known at import time (initializers,
//! constants, folded Shape arithmetic, or values supplied by the caller);
//! [`ints_input`] reads them.

pub mod index;
pub mod last_axis;
pub mod view;

pub use index::{compress, gather, one_hot, reverse_sequence, trilu};
pub use last_axis::{
    center_crop_pad, concat, concat_tensors, cumsum, pad, slice, slice_args, slice_indices, split,
    split_sizes, tile,
};
pub use view::{depth_space, expand, transpose, view, view_shape};

use crate::lower::{unsupported, LResult, Lower};
use crate::node::Node;
use crate::tensor::{Data, Elem};

/// Integer data of a shape-like input (`None` when the input is omitted).
pub fn ints_input(l: &Lower, n: &Node, i: usize) -> LResult<Option<Vec<i64>>> {
    match n.input(i) {
        None => Ok(None),
        Some(name) => match l.arg_data(name) {
            Some(d) => Ok(Some(d.as_i64())),
            None => unsupported(format!(
                "input {i} (`{name}`) must be known at import time (a constant or initializer); it is computed at run time"
            )),
        },
    }
}

/// An empty (zero-element) value of the given shape.
pub fn empty(elem: Elem, shape: Vec<usize>) -> Data {
    Data {
        elem,
        shape,
        values: Vec::new(),
    }
}
