//! Errors of graph construction, validation and training-graph generation.
//!
//! Every variant names the operator instance (its unique name in the graph)
//! and, where shapes are involved, the mismatching dims, so that a model
//! author sees which layer is wrong.

use tdl::ShapeError;

/// Why a graph could not be built, validated or differentiated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GraphError {
    /// An operator names a spec the library does not define.
    #[error("operator `{op}`: no spec named `{spec}` in the operator library (an operator of your own: load its .tdl file with --specs PATH)")]
    UnknownSpec {
        /// Operator instance name.
        op: String,
        /// The missing spec name.
        spec: String,
    },
    /// Shape inference failed: the spec's error names the mismatching dims.
    #[error("operator `{op}`: {source}")]
    Shape {
        /// Operator instance name.
        op: String,
        /// The spec's shape error (op, tensor and dims).
        source: Box<ShapeError>,
    },
    /// A stored output shape is not the one the spec infers.
    #[error(
        "operator `{op}`: output `{output}` has shape {got:?} but the spec infers {expected:?}"
    )]
    OutputShape {
        /// Operator instance name.
        op: String,
        /// Output name in the spec.
        output: String,
        /// Inferred shape.
        expected: Vec<usize>,
        /// Stored shape.
        got: Vec<usize>,
    },
    /// An operator has a different number of outputs than its spec.
    #[error("operator `{op}`: spec `{spec}` has {expected} output(s) but the op lists {got}")]
    OutputCount {
        /// Operator instance name.
        op: String,
        /// Spec name.
        spec: String,
        /// Outputs of the spec.
        expected: usize,
        /// Outputs listed.
        got: usize,
    },
    /// Two operators or two tensors share a name.
    #[error("duplicate name `{name}`: operator and tensor names must be unique")]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// A gradient is needed for an input whose spec declares none.
    #[error("operator `{op}` (`{spec}`): input `{input}` needs a gradient but the spec declares no `grad {input} = ...`")]
    NoGradient {
        /// Operator instance name.
        op: String,
        /// Spec name.
        spec: String,
        /// Input name in the spec.
        input: String,
    },
    /// A gradient op produced a gradient whose shape differs from its tensor's.
    #[error("operator `{op}`: gradient `{spec}` gives `{input}` a gradient of shape {got:?}, but `{input}` has shape {expected:?}")]
    GradShape {
        /// Operator instance name of the gradient op.
        op: String,
        /// Gradient spec name.
        spec: String,
        /// Input of the forward op.
        input: String,
        /// Shape of the forward input.
        expected: Vec<usize>,
        /// Shape of its gradient.
        got: Vec<usize>,
    },
    /// A gradient declaration's attribute expression could not be evaluated.
    #[error("operator `{op}`: attribute `{attr}` of its gradient `{spec}`: {message}")]
    GradAttr {
        /// Forward operator instance name.
        op: String,
        /// Gradient spec name.
        spec: String,
        /// Attribute name.
        attr: String,
        /// What went wrong.
        message: String,
    },
    /// The loss is not a scalar (its gradient seed is the scalar 1).
    #[error("the loss `{name}` must be a scalar (shape []), but has shape {shape:?}")]
    LossNotScalar {
        /// Loss tensor name.
        name: String,
        /// Its shape.
        shape: Vec<usize>,
    },
    /// The graph has no loss to differentiate.
    #[error("the graph has no loss tensor")]
    NoLoss,
    /// A float attribute is NaN (±inf is accepted: a one-sided clamp's bound).
    #[error("operator `{op}`: attribute `{attr}` is NaN; give it a number or ±inf")]
    NanAttr {
        /// Operator instance name.
        op: String,
        /// Attribute name.
        attr: String,
    },
    /// A structural invariant is violated (graph files): `at` is the field path.
    #[error("{at}: {message}")]
    Invalid {
        /// Field path, e.g. `ops[3].inputs[1]`.
        at: String,
        /// What is wrong.
        message: String,
    },
}
