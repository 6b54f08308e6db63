//! Errors of ONNX import.
//!
//! Every variant that concerns a node names the file, the node (its name, or
//! `#index` when it has none), its op type and the opset in force, and says
//! what to do about it. Reading errors name the file and what is wrong with
//! the bytes (not protobuf, no graph, external data, ...).

use std::path::PathBuf;

/// Why an ONNX file could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The file could not be read.
    #[error("cannot read `{path}`: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The bytes are not an ONNX model (not protobuf, truncated, corrupted,
    /// or a protobuf message without a graph).
    #[error("`{path}` is not a valid ONNX model: {message}")]
    NotOnnx {
        /// The file.
        path: PathBuf,
        /// What is wrong (the protobuf decoder's message, or the missing part).
        message: String,
    },
    /// The model is ONNX but uses something the importer does not read
    /// (external data, sparse initializers, non-tensor inputs, ...).
    #[error("`{path}`: {message}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What is not supported, and the fix.
        message: String,
    },
    /// A node's ai.onnx op type has no mapping to a TDL spec.
    #[error(
        "`{path}`: node `{node}` uses {op_type} (opset {opset}), which has no TDL spec mapping. \
         Either add a spec for it to `specs/onnx_*.tdl` and a row to the table in `onnx/src/table.rs`, \
         or pass `--opaque-unsupported` to import it as an opaque operator (replicated or split along its batch dim only)"
    )]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// Node name (or `#index`).
        node: String,
        /// ONNX op type.
        op_type: String,
        /// Opset version of ai.onnx.
        opset: i64,
    },
    /// A node's domain is not ai.onnx and the table has no row for it there.
    #[error(
        "`{path}`: node `{node}` uses {op_type} of the domain `{domain}` (opset {opset}), which tofu does not map: \
         {}. To import the rest of the model, pass `--opaque-unsupported` (the node becomes an opaque \
         operator, replicated or split along its batch dim only; a training graph through it fails)",
        crate::domain::explain(.domain, .op_type).1
    )]
    Domain {
        /// The file.
        path: PathBuf,
        /// Node name (or `#index`).
        node: String,
        /// ONNX op type.
        op_type: String,
        /// The node's domain, e.g. `ai.onnx.ml`.
        domain: String,
        /// Opset version of the domain.
        opset: i64,
        /// Whether tofu could ever train through it ([`crate::domain::explain`]
        /// says why, in the message).
        trainable: crate::domain::Trainable,
    },
    /// The training graph needs a gradient through a node that has none.
    #[error(
        "`{path}`: node `{node}` ({op_type}, opset {opset}) lies on a path from a weight to the loss, \
         but it has no gradient: {why} ({source}). \
         Put the loss on an output that does not depend on the weights through it (--loss NAME), \
         or import the inference graph (without --training)"
    )]
    NoGradient {
        /// The file.
        path: PathBuf,
        /// Node name (or `#index`).
        node: String,
        /// ONNX op type.
        op_type: String,
        /// Opset version of the node's domain.
        opset: i64,
        /// Why it has no gradient, e.g. `integer output`.
        why: String,
        /// The planner's error: the operator lowered from the node, its
        /// spec and the input that needs a gradient.
        source: Box<graph::GraphError>,
    },
    /// A node's op type is mapped but this use of it is not (an attribute
    /// value, an opset difference, a rank, a data-dependent shape).
    #[error("`{path}`: node `{node}` ({op_type}, opset {opset}): {reason}")]
    Node {
        /// The file.
        path: PathBuf,
        /// Node name (or `#index`).
        node: String,
        /// ONNX op type.
        op_type: String,
        /// Opset version of the node's domain.
        opset: i64,
        /// What is not supported or wrong, and what to do.
        reason: String,
    },
    /// The model has a control-flow subgraph (If, Loop, Scan), which tofu
    /// cannot partition.
    #[error(
        "`{path}`: node `{node}` ({op_type}, opset {opset}) has a subgraph (attribute `{attr}`, {nodes} node(s)); \
         control flow is not supported: export the model with the branch or loop resolved (e.g. a fixed sequence length), \
         or pass `--opaque-unsupported` to import the whole node as an opaque operator"
    )]
    Subgraph {
        /// The file.
        path: PathBuf,
        /// Node name (or `#index`).
        node: String,
        /// ONNX op type (If, Loop, Scan).
        op_type: String,
        /// Opset version.
        opset: i64,
        /// The graph attribute (`then_branch`, `body`, ...).
        attr: String,
        /// Nodes in the subgraph.
        nodes: usize,
    },
    /// A value is used before any node produces it.
    #[error(
        "`{path}`: node `{node}` reads `{value}`, which no node, input or initializer defines"
    )]
    UndefinedValue {
        /// The file.
        path: PathBuf,
        /// Node name.
        node: String,
        /// The value name.
        value: String,
    },
    /// A `--dim`, `--batch`, input-shape or `--loss` option does not fit the model.
    #[error("`{path}`: {message}")]
    Options {
        /// The file.
        path: PathBuf,
        /// What is wrong and the fix.
        message: String,
    },
    /// Graph construction failed (shape inference through a spec, training graph).
    #[error("`{path}`: {context}: {source}")]
    Graph {
        /// The file.
        path: PathBuf,
        /// Which node or step.
        context: String,
        /// The planner's error (names the op and the mismatching dims).
        source: Box<graph::GraphError>,
    },
    /// The operator library failed to load.
    #[error("loading the operator specs: {0}")]
    Library(String),
}
