//! Reading ONNX files: bytes → a checked [`ModelProto`] with its opsets.
//!
//! Takes a path or bytes; gives the decoded model (via the maintained
//! `onnx-protobuf` messages; no hand-written parser, no `protoc`), the opset
//! version of each operator domain, and checks that the bytes really are a
//! model (protobuf that decodes, a graph, an IR version). Never panics on
//! any input: truncated, corrupted and non-ONNX bytes give
//! [`OnnxError::NotOnnx`] naming the file.

use std::collections::BTreeMap;
use std::path::Path;

use onnx_protobuf::{Message, ModelProto};

use crate::error::OnnxError;

/// The domain name ONNX uses for its standard operators (also spelled `""`).
pub const AI_ONNX: &str = "ai.onnx";

/// A decoded model and the opset version of each domain it imports.
#[derive(Debug, Clone)]
pub struct Model {
    /// The protobuf message.
    pub proto: ModelProto,
    /// Opset version per domain (`""` normalised to [`AI_ONNX`]).
    pub opsets: BTreeMap<String, i64>,
}

impl Model {
    /// Opset version in force for a node of `domain` (0 if the model does not import it).
    pub fn opset(&self, domain: &str) -> i64 {
        self.opsets
            .get(normalise_domain(domain))
            .copied()
            .unwrap_or(0)
    }
}

/// `""` and `ai.onnx` are the same domain.
pub fn normalise_domain(domain: &str) -> &str {
    if domain.is_empty() {
        AI_ONNX
    } else {
        domain
    }
}

/// Read and decode an ONNX file.
///
/// Errors: [`OnnxError::Io`], [`OnnxError::NotOnnx`].
pub fn read(path: &Path) -> Result<Model, OnnxError> {
    let bytes = std::fs::read(path).map_err(|source| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    decode(&bytes, path)
}

/// Decode ONNX bytes (`path` is only used in messages).
///
/// Errors: [`OnnxError::NotOnnx`] when the bytes are not protobuf, or decode
/// to a message without an IR version or a graph.
pub fn decode(bytes: &[u8], path: &Path) -> Result<Model, OnnxError> {
    let not_onnx = |message: String| OnnxError::NotOnnx {
        path: path.to_path_buf(),
        message,
    };
    if bytes.is_empty() {
        return Err(not_onnx("the file is empty".into()));
    }
    let proto = ModelProto::parse_from_bytes(bytes).map_err(|e| {
        not_onnx(format!(
            "protobuf decoding failed ({e}); the file is truncated, corrupted or not an ONNX model"
        ))
    })?;
    if proto.ir_version <= 0 {
        return Err(not_onnx(
            "no IR version (field 1): the bytes decode as protobuf but not as an ONNX ModelProto"
                .into(),
        ));
    }
    if proto.graph.is_none() {
        return Err(not_onnx("the model has no graph (field 7)".into()));
    }
    let mut opsets = BTreeMap::new();
    for o in &proto.opset_import {
        opsets.insert(normalise_domain(&o.domain).to_string(), o.version);
    }
    if opsets.is_empty() {
        // IR version 2 models predate opset_import: opset 1.
        opsets.insert(AI_ONNX.to_string(), 1);
    }
    Ok(Model { proto, opsets })
}
