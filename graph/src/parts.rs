//! The parts a [`Graph`](super::Graph) is made of: element types
//! ([`DType`]), operator and tensor roles, forward/backward [`Group`]s,
//! [`Op`]s and [`Tensor`]s — plain serde data, as a graph file stores them.
//! Re-exported by `ir`, which holds the graph and its invariants.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tdl::Attrs;

use super::ids::{GroupId, OpId, TensorId};

/// Element type of a tensor (how it is stored and moved; arithmetic runs in
/// f32, see `codegen::wire`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DType {
    /// 32-bit float (4 bytes): every weight, activation and gradient of the zoo.
    F32,
    /// 16-bit IEEE float (2 bytes).
    F16,
    /// bfloat16 (2 bytes).
    Bf16,
    /// 64-bit float (8 bytes).
    F64,
    /// 32-bit integer (4 bytes): token ids.
    I32,
    /// 64-bit integer (8 bytes): ONNX's indices, shapes and token ids.
    I64,
    /// Unsigned byte (1 byte): quantised values, image bytes.
    U8,
    /// Boolean (1 byte, 0 or 1): masks.
    Bool,
}

impl DType {
    /// Bytes per element.
    pub fn size_bytes(self) -> u64 {
        match self {
            DType::U8 | DType::Bool => 1,
            DType::F16 | DType::Bf16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    /// Whether its values are integers (compared exactly, rounded when
    /// computed in f32).
    pub fn is_integer(self) -> bool {
        matches!(self, DType::I32 | DType::I64 | DType::U8 | DType::Bool)
    }

    /// Its name in graph files and messages (`f32`, `i64`, `bool`, …).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which phase of a training step an operator belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpRole {
    /// Written by the model (forward propagation up to the loss).
    Forward,
    /// Generated from gradient declarations (back-propagation, gradient sums,
    /// zero gradients of unused outputs).
    Backward,
    /// Optimizer update of a weight and its state.
    Update,
}

/// What a tensor is in a training step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TensorRole {
    /// Data fed to the step (images, token ids, labels).
    Input,
    /// An intermediate result of the forward pass (including the loss).
    Activation,
    /// A trainable parameter (or its updated value, see [`Tensor::updates`]).
    Weight,
    /// A gradient (partial or total) of a forward tensor, see [`Tensor::grad_of`].
    Gradient,
    /// Optimizer state of a weight (momentum, Adam's m and v).
    OptimizerState,
}

/// How to fill a tensor that no operator produces: defined with its
/// generator in [`tdl::fill`], upstream of the runner, which fills its tiles
/// from programs alone.
pub use tdl::Fill;

/// A forward/backward group (Tofu §4.2.1): the unit the coarsened search
/// places together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    /// A forward operator and its generated backward operators (including
    /// zero gradients of its unused outputs).
    Op(OpId),
    /// A forward tensor, its gradient(s), the `add` operators that sum its
    /// gradient contributions, and, for a weight, its optimizer state and
    /// update operator.
    Tensor(TensorId),
}

/// An operator instance: one application of a spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Op {
    /// Unique name, e.g. `layer1.0.conv2` or `grad/layer1.0.conv2/x`.
    pub name: String,
    /// Name of its TDL spec in the library, e.g. `conv2d`.
    pub spec: String,
    /// Attribute values passed to the spec (missing ones take the spec's default).
    #[serde(
        with = "super::attrs",
        default,
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub attrs: Attrs,
    /// Input tensors, in the spec's input order.
    pub inputs: Vec<TensorId>,
    /// Output tensors, in the spec's output order.
    pub outputs: Vec<TensorId>,
    /// Forward, backward or update.
    pub role: OpRole,
    /// Its group (Tofu §4.2.1).
    pub group: GroupId,
    /// For a forward operator of an unrolled recurrent network: its time
    /// step (0 first). The coarsening rule `rnn_steps` gives the ops (and
    /// tensors, [`Tensor::step`]) at the same place of every step one
    /// decision (Tofu §4.2.1). Absent otherwise, and absent from the graph
    /// file then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
}

/// A tensor: a value with a shape, produced by at most one operator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tensor {
    /// Unique name, e.g. `layer1.0.conv2.w` or `grad/layer1.0.conv2.w`.
    pub name: String,
    /// Elements per dimension (row-major; a scalar has shape `[]`).
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
    /// Input, activation, weight, gradient or optimizer state.
    pub role: TensorRole,
    /// Its group (Tofu §4.2.1).
    pub group: GroupId,
    /// The total gradient of this tensor (sum of all contributions), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad: Option<TensorId>,
    /// For a gradient (partial or total): the forward tensor it is the gradient of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_of: Option<TensorId>,
    /// For an optimizer output: the tensor it replaces in place (new weight,
    /// new momentum). Memory accounting counts the pair once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updates: Option<TensorId>,
    /// For a tensor no operator produces: how to fill it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<Fill>,
    /// For a constant leaf whose values are known (folded at ONNX import:
    /// index tables, masks, position ids): its values, row-major, as f64.
    /// A run uses them instead of [`Tensor::fill`], which stays as the
    /// description of their scale. Absent otherwise, and absent from the
    /// graph file then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Vec<f64>>,
    /// For a forward tensor of an unrolled recurrent network (an input or
    /// activation of one time step): its time step, as [`Op::step`]. Absent
    /// otherwise, and absent from the graph file then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
}

impl Tensor {
    /// Number of elements (saturating at `u64::MAX`).
    pub fn numel(&self) -> u64 {
        self.shape
            .iter()
            .fold(1u64, |a, &d| a.saturating_mul(d as u64))
    }

    /// Size in bytes (elements × element size, saturating).
    pub fn bytes(&self) -> u64 {
        self.numel().saturating_mul(self.dtype.size_bytes())
    }
}
