//! The importer's training step: where each lowered operator came from (to
//! name the node when the training graph needs a gradient through it) and
//! the loss plus training graph of an imported model. Used by
//! [`crate::import`].

use std::collections::HashMap;
use std::path::Path;

use graph::{training_graph_with, Graph};
use tdl::Library;

use crate::error::OnnxError;
use crate::import::{graph_err, Options, Summary};
use crate::lower::{Lower, NodeError};
use crate::node::Node;
use crate::opaque;
use crate::proto::AI_ONNX;
use crate::tensor::Elem;

/// A lowered node, for naming it when the training graph needs a gradient
/// through one of its operators.
pub(crate) struct Origin {
    op_type: String,
    opset: i64,
    /// Why it has no gradient, when the node says: a boolean or integer
    /// output, an opaque operator. `None`: its spec declares none.
    why: Option<&'static str>,
}

/// The [`Origin`] of a node mapped to a user spec: its gradient is what the
/// spec declares, and a missing one is the user's to write.
pub(crate) fn custom_origin(node: &Node) -> Origin {
    Origin {
        op_type: node.op_type().to_string(),
        opset: node.opset,
        why: Some(
            "it is mapped to a user spec that declares no gradient for it: add `grad INPUT = OP(...);` \
             declarations to the spec (docs/tdl.md) to train through it",
        ),
    }
}

/// The [`Origin`] of `node` (`opaque`: imported as an opaque operator).
pub(crate) fn no_gradient_reason(node: &Node, opaque: bool) -> Origin {
    let why = if opaque {
        Some("it was imported as an opaque operator (--opaque-unsupported), whose gradient tofu cannot know")
    } else {
        // The operator without a gradient computes one of the node's
        // outputs; a node with a boolean or integer output (MaxPool's
        // Indices, TopK's) has it there.
        let elems: Vec<Elem> = (0..node.proto.output.len())
            .map(|i| crate::fold_eval::out_elem(node, i, &[]))
            .collect();
        if elems.contains(&Elem::Bool) {
            Some("boolean output (a comparison or logic: not differentiable)")
        } else if elems.iter().any(|e| e.is_integer()) {
            Some("integer output (indices or counts: not differentiable)")
        } else {
            None
        }
    };
    Origin {
        op_type: node.op_type().to_string(),
        opset: node.opset,
        why,
    }
}

/// The error for a node the table does not map (its domain is not ai.onnx,
/// no row, or a subgraph), without `--opaque-unsupported`.
pub(crate) fn unmapped(path: &Path, node: &Node, domain: &str, why: opaque::Why) -> OnnxError {
    let (path, name, op_type, opset) = (
        path.to_path_buf(),
        node.name.clone(),
        node.op_type().to_string(),
        node.opset,
    );
    match why {
        opaque::Why::Subgraph(attr, nodes) => OnnxError::Subgraph {
            path,
            node: name,
            op_type,
            opset,
            attr,
            nodes,
        },
        opaque::Why::NoMapping if domain != AI_ONNX => OnnxError::Domain {
            path,
            node: name,
            trainable: crate::domain::explain(domain, &op_type).0,
            op_type,
            domain: domain.to_string(),
            opset,
        },
        opaque::Why::NoMapping => OnnxError::Unsupported {
            path,
            node: name,
            op_type,
            opset,
        },
    }
}

/// `--training`: a loss on the chosen output (default: the first), then the
/// training graph; an operator without a gradient on a path from a weight
/// to the loss is an [`OnnxError::NoGradient`] naming its ONNX node.
pub(crate) fn training_step(
    mut l: Lower,
    graph: &onnx_protobuf::GraphProto,
    opts: &Options,
    path: &Path,
    library: &Library,
    s: &mut Summary,
    origins: &HashMap<String, Origin>,
) -> Result<Graph, OnnxError> {
    let options_err = |message: String| OnnxError::Options {
        path: path.to_path_buf(),
        message,
    };
    let loss_name = opts
        .loss
        .clone()
        .or_else(|| graph.output.first().map(|o| o.name.clone()))
        .ok_or_else(|| options_err("the model has no outputs to put a loss on".into()))?;
    let Some(t) = l.values.get(&loss_name).and_then(|e| e.tensor) else {
        let outputs: Vec<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
        return Err(options_err(format!(
            "--loss `{loss_name}` is not a tensor of the graph; name a graph output ({})",
            outputs.join(", ")
        )));
    };
    let (loss, fwd_extra) =
        crate::loss::attach(&mut l, t, !opts.class_ids).map_err(|e| match e {
            NodeError::Unsupported(r) => options_err(r),
            NodeError::Graph(g) => graph_err(path, "loss", g),
        })?;
    s.forward_ops += fwd_extra;
    s.loss = Some(loss_name);
    let fwd = l.b.finish(loss).map_err(|e| graph_err(path, "loss", e))?;
    let optimizer = opts.optimizer.unwrap_or_default();
    training_graph_with(&fwd, library, &optimizer, opts.weight_decay).map_err(|e| {
        let graph::GraphError::NoGradient { op, spec, .. } = &e else {
            return graph_err(path, "training graph", e);
        };
        let Some((node, o)) = origin_of(op, origins) else {
            return graph_err(path, "training graph", e);
        };
        OnnxError::NoGradient {
            path: path.to_path_buf(),
            node: node.to_string(),
            op_type: o.op_type.clone(),
            opset: o.opset,
            why: o
                .why
                .map_or_else(|| spec_says(library, spec), str::to_string),
            source: Box::new(e),
        }
    })
}

/// Why spec `spec` has no gradient, in its doc's words (the sentence that
/// says it is not differentiable), else that it declares none.
pub(crate) fn spec_says(library: &Library, spec: &str) -> String {
    let doc = library.get(spec).map(|s| s.doc.replace('\n', " "));
    doc.as_deref()
        .and_then(|d| {
            d.split(". ")
                .find(|s| s.contains("differentiable") || s.contains("gradient"))
                .map(|s| format!("the spec `{spec}` says: {}", s.trim().trim_end_matches('.')))
        })
        .unwrap_or_else(|| format!("the spec `{spec}` declares no gradient"))
}

/// The node an operator was lowered from: operators are named after their
/// node, the first `node`, the next `node/1`, `node/2`, ….
pub(crate) fn origin_of<'o>(
    op: &str,
    origins: &'o HashMap<String, Origin>,
) -> Option<(&'o str, &'o Origin)> {
    if let Some((k, o)) = origins.get_key_value(op) {
        return Some((k.as_str(), o));
    }
    let (node, k) = op.rsplit_once('/')?;
    if k.is_empty() || !k.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    origins.get_key_value(node).map(|(k, o)| (k.as_str(), o))
}
