//! One ONNX node as the lowering functions see it.
//!
//! Takes a `NodeProto`, its display name and the opset in force; gives its
//! inputs by position (an empty name is a missing optional input), its
//! outputs and its typed [`Attrs`].

use onnx_protobuf::NodeProto;

use crate::attr::Attrs;

/// A node being lowered.
pub struct Node<'a> {
    /// The protobuf node.
    pub proto: &'a NodeProto,
    /// Display name: the node's name, or `<op_type>_<index>` when it has none
    /// or it is taken.
    pub name: String,
    /// Opset version of the node's domain.
    pub opset: i64,
    /// Its attributes.
    pub attrs: Attrs<'a>,
}

impl<'a> Node<'a> {
    /// Input `i`'s value name, `None` if absent or empty (an omitted optional input).
    pub fn input(&self, i: usize) -> Option<&'a str> {
        self.proto
            .input
            .get(i)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// Number of inputs listed (omitted optional ones included).
    pub fn n_inputs(&self) -> usize {
        self.proto.input.len()
    }

    /// Number of outputs that are used (non-empty names).
    pub fn n_outputs(&self) -> usize {
        self.proto.output.iter().filter(|o| !o.is_empty()).count()
    }

    /// Whether output `i` is requested.
    pub fn wants_output(&self, i: usize) -> bool {
        self.proto.output.get(i).is_some_and(|o| !o.is_empty())
    }

    /// The ONNX op type.
    pub fn op_type(&self) -> &'a str {
        &self.proto.op_type
    }
}
