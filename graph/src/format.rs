//! The graph file format: versioned JSON (`"format": "tofu-graph"`, `"version": 1`).
//!
//! Takes a [`Graph`] (writing) or JSON text (reading); gives the other.
//! Writing then reading gives back an equal graph, and writing that again
//! gives the same text (exact round trip: reals are written in their shortest
//! exact form and read back exactly).
//!
//! A file is one object:
//!
//! ```json
//! {
//!   "format": "tofu-graph",          // always this string
//!   "version": 1,                    // this reader accepts 1
//!   "name": "mlp-2-8",               // model name
//!   "loss": 7,                       // tensor id of the scalar loss (optional)
//!   "outputs": [{"name": "logits", "tensor": 5}],  // (optional) the model's named outputs
//!   "groups": [{"op": 0}, {"tensor": 3}],      // Tofu §4.2.1 groups, by anchor
//!   "tensors": [{
//!     "name": "fc0.w", "shape": [8, 8], "dtype": "f32",   // f32 f16 bf16 f64 i32 i64 u8 bool
//!     "role": "weight",              // input activation weight gradient optimizer_state
//!     "group": 1,                    // group id
//!     "grad": 20,                    // (optional) id of its total gradient
//!     "grad_of": 2,                  // (optional, gradients) id of the forward tensor
//!     "updates": 2,                  // (optional, optimizer outputs) id of the tensor replaced
//!     "fill": {"normal": {"std": 0.35}}   // (tensors no op produces) normal{std},
//!                                    // constant{value}, indices{bound}, "probabilities", "positions"
//!     "value": [0, 1, 2]             // (optional, constant leaves) known values, row-major
//!   }],
//!   "ops": [{
//!     "name": "fc0", "spec": "matmul",     // spec name in the operator library
//!     "attrs": {"stride_h": 2, "eps": 1e-05},   // (optional) ints without, reals with a point/exponent,
//!                                    // ±inf as the strings "inf" / "-inf"
//!     "inputs": [0, 1], "outputs": [2],    // tensor ids in the spec's order
//!     "role": "forward",             // forward backward update
//!     "group": 0,
//!     "step": 3                      // (optional) time step of an unrolled RNN
//!   }]
//! }
//! ```
//!
//! Ids are indices into `ops`, `tensors` and `groups`. Operators are listed
//! in a topological order. Unknown fields are rejected. Reading never
//! panics: malformed text, a wrong type or a missing field gives
//! [`FormatError::Json`] with the line, column and field path (e.g.
//! `ops[3].inputs[1]`); a broken reference gives [`FormatError::Invalid`]
//! with the field path. Shapes are not re-inferred on load; call
//! [`Graph::check_shapes`] with a library for that.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::GraphError;
use super::ids::TensorId;
use super::ir::{Graph, Group, Op, Tensor};
use super::outputs::GraphOutput;

/// The value of the `format` field.
pub const FORMAT: &str = "tofu-graph";
/// The format version this code writes and reads.
pub const VERSION: u32 = 1;

/// Why a graph file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// Not JSON, or a field is missing, unknown or of the wrong type.
    #[error("line {line}, column {column}, at `{path}`: {message}")]
    Json {
        /// Field path, e.g. `ops[3].inputs[1]` (`.` for the top level).
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The `format` field is not `tofu-graph`.
    #[error("`format` is {found:?}, expected \"tofu-graph\": this is not a tofu graph file")]
    NotAGraph {
        /// The value found.
        found: String,
    },
    /// The `version` field is not one this reader understands.
    #[error("`version` is {found}, but this tofu reads version {VERSION} graph files")]
    Version {
        /// The value found.
        found: u64,
    },
    /// The JSON is well-formed but the graph breaks an invariant.
    #[error(transparent)]
    Invalid(#[from] GraphError),
    /// A file could not be read or written.
    #[error("`{path}`: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

#[derive(Serialize)]
struct FileOut<'a> {
    format: &'static str,
    version: u32,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    loss: Option<TensorId>,
    #[serde(skip_serializing_if = "<[GraphOutput]>::is_empty")]
    outputs: &'a [GraphOutput],
    groups: &'a [Group],
    tensors: &'a [Tensor],
    ops: &'a [Op],
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileIn {
    #[allow(dead_code)]
    format: String,
    #[allow(dead_code)]
    version: u64,
    name: String,
    #[serde(default)]
    loss: Option<TensorId>,
    #[serde(default)]
    outputs: Vec<GraphOutput>,
    groups: Vec<Group>,
    tensors: Vec<Tensor>,
    ops: Vec<Op>,
}

/// Just the header, read first so a foreign or newer file is named as such.
#[derive(Deserialize)]
struct Header {
    format: Option<serde_json::Value>,
    version: Option<serde_json::Value>,
}

/// Write a graph as pretty-printed JSON.
pub fn to_json(graph: &Graph) -> String {
    let f = FileOut {
        format: FORMAT,
        version: VERSION,
        name: graph.name(),
        loss: graph.loss(),
        outputs: graph.outputs(),
        groups: graph.groups(),
        tensors: graph.tensors(),
        ops: graph.ops(),
    };
    serde_json::to_string_pretty(&f).expect("a graph always serializes (finite attributes)")
}

/// Read a graph from JSON text (see the module doc for the errors).
pub fn from_json(text: &str) -> Result<Graph, FormatError> {
    if let Ok(h) = serde_json::from_str::<Header>(text) {
        match h.format {
            Some(serde_json::Value::String(s)) if s == FORMAT => {}
            Some(serde_json::Value::String(s)) => return Err(FormatError::NotAGraph { found: s }),
            _ => {}
        }
        if let Some(serde_json::Value::Number(n)) = h.version {
            match n.as_u64() {
                Some(v) if v == VERSION as u64 => {}
                Some(v) => return Err(FormatError::Version { found: v }),
                None => {}
            }
        }
    }
    let de = &mut serde_json::Deserializer::from_str(text);
    let file: FileIn = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let full = inner.to_string();
        let message = match full.rfind(" at line ") {
            Some(i) => full[..i].to_string(),
            None => full,
        };
        FormatError::Json {
            path,
            line: inner.line(),
            column: inner.column(),
            message,
        }
    })?;
    if file.format != FORMAT {
        return Err(FormatError::NotAGraph { found: file.format });
    }
    if file.version != VERSION as u64 {
        return Err(FormatError::Version {
            found: file.version,
        });
    }
    let mut graph = Graph::from_parts(file.name, file.ops, file.tensors, file.groups, file.loss)?;
    graph.set_outputs(file.outputs)?;
    Ok(graph)
}

/// Write a graph file atomically (a temporary file in the same directory, then rename).
pub fn save(graph: &Graph, path: &Path) -> Result<(), FormatError> {
    write_atomic(path, to_json(graph).as_bytes())
}

/// Read a graph file.
pub fn load(path: &Path) -> Result<Graph, FormatError> {
    let text = std::fs::read_to_string(path).map_err(|source| FormatError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    from_json(&text)
}

/// Write `bytes` to `path` whole or not at all (`durable::write_atomic`:
/// temporary file, fsync, rename, fsync of the directory).
///
/// Errors: [`FormatError::Io`] naming `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), FormatError> {
    durable::write_atomic(path, bytes).map_err(|source| FormatError::Io {
        path: path.to_path_buf(),
        source,
    })
}
