//! The shape of one row of the mapping table ([`crate::table`]): an ONNX op
//! type, the TDL specs it may lower to, its float attributes and its lowering
//! function. The `map_*` files implement [`LowerFn`]s against this type; only
//! `table.rs` names them, so the lowerings never import the table.

use crate::lower::{LResult, Lower, Out};
use crate::node::Node;

/// A lowering function: emits the node's operators and gives its outputs in order.
pub type LowerFn = fn(&mut Lower, &Node, &Mapping) -> LResult<Vec<Out>>;

/// One row of the table.
pub struct Mapping {
    /// ONNX op type.
    pub op: &'static str,
    /// Its domain ([`crate::proto::AI_ONNX`], `ai.onnx.ml`, `ai.onnx.preview.training`).
    pub domain: &'static str,
    /// TDL specs the node lowers to (empty: folded at import).
    pub specs: &'static [&'static str],
    /// ONNX float attribute → spec attribute, with ONNX's default.
    pub attrs: &'static [(&'static str, &'static str, f64)],
    /// The lowering.
    pub lower: LowerFn,
}
