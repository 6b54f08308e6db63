//! Real tensors instead of synthetic fills: leaf values read from a
//! safetensors file (Hugging Face's format, through the `safetensors`
//! crate), checked against the graph.
//!
//! Takes a graph and the bytes of a `.safetensors` file whose tensor names
//! are graph tensor names; gives [`Given`] values (row-major f32 of each
//! tensor's shape) that the runner (`runner::run_programs_given`, `RankRunner::set`) uses instead of
//! the tensors' synthetic [`graph::Fill`]. Weights go in with
//! [`Kind::Weights`] (trainable parameters and optimizer state, the step's
//! initial values), data with [`Kind::Inputs`] (the graph inputs, the same
//! every step). F32, F64, F16, BF16, I64, I32 and U8 elements are accepted
//! and converted to f32 (as the runner holds every tensor).
//!
//! Errors ([`GivenError`]) name the file and the tensor: a name the graph
//! does not have, a tensor of the wrong kind, a shape or element type that
//! does not fit, a file that is not safetensors.

use std::collections::HashMap;

use graph::{Graph, TensorId, TensorRole};
use safetensors::{Dtype, SafeTensors};

/// Leaf values by tensor (row-major f32, the tensor's shape).
pub type Given = HashMap<TensorId, Vec<f32>>;

/// Check, before a run synthesizes the graph inputs that `given` lacks, that
/// their synthetic values keep every table's row ids in range
/// ([`graph::value_ranges::check_synthetic_ids`]; given inputs count with
/// the range of their values).
///
/// Errors: [`graph::value_ranges::UnboundedIds`] naming the input that needs
/// `--inputs` and why.
pub fn check_synthetic_ids(
    graph: &Graph,
    lib: &tdl::Library,
    given: &Given,
) -> Result<(), graph::value_ranges::UnboundedIds> {
    let ranges = given
        .iter()
        .map(|(&t, v)| {
            let v: Vec<f64> = v.iter().map(|&x| f64::from(x)).collect();
            (t, graph::value_ranges::hull_of(&v))
        })
        .collect();
    graph::value_ranges::check_synthetic_ids(graph, lib, &ranges)
}

/// Which leaves a file supplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Trainable parameters and optimizer state (`--weights`).
    Weights,
    /// Graph inputs: data, labels, token ids (`--inputs`).
    Inputs,
}

impl Kind {
    fn accepts(self, role: TensorRole) -> bool {
        match self {
            Kind::Weights => matches!(role, TensorRole::Weight | TensorRole::OptimizerState),
            Kind::Inputs => role == TensorRole::Input,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Weights => "a weight or optimizer state",
            Kind::Inputs => "a graph input",
        }
    }
}

/// Why a file's tensors cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GivenError {
    /// Not a safetensors file (bad header, truncated data).
    #[error("{file}: not a safetensors file: {message}")]
    Format {
        /// The file.
        file: String,
        /// The parser's words.
        message: String,
    },
    /// A tensor name the graph does not have.
    #[error("{file}: tensor `{name}` is not in graph `{graph}`{hint}")]
    Unknown {
        /// The file.
        file: String,
        /// The name in the file.
        name: String,
        /// The graph.
        graph: String,
        /// `; did you mean …?` or empty.
        hint: String,
    },
    /// A tensor of another kind (e.g. an activation, or an input given as a weight).
    #[error("{file}: tensor `{name}` is not {expected} of the graph (it is {role}); pass it with {flag}")]
    WrongKind {
        /// The file.
        file: String,
        /// The tensor.
        name: String,
        /// What this file supplies.
        expected: &'static str,
        /// Its role in the graph.
        role: String,
        /// The flag that takes it, if any.
        flag: &'static str,
    },
    /// A shape that differs from the graph's.
    #[error("{file}: tensor `{name}` has shape {got:?} but the graph's is {want:?}")]
    Shape {
        /// The file.
        file: String,
        /// The tensor.
        name: String,
        /// Shape in the file.
        got: Vec<usize>,
        /// Shape in the graph.
        want: Vec<usize>,
    },
    /// An element type with no f32 conversion.
    #[error(
        "{file}: tensor `{name}` has element type {dtype}; use F32, F64, F16, BF16, I64, I32, U8 or BOOL"
    )]
    DType {
        /// The file.
        file: String,
        /// The tensor.
        name: String,
        /// Its element type.
        dtype: String,
    },
    /// An integer the runner's f32 arithmetic cannot hold exactly
    /// (|v| > 2²⁴); token ids and indices are far below.
    #[error(
        "{file}: tensor `{name}` holds the integer {value}, beyond the ±2^24 that f32 arithmetic holds exactly"
    )]
    Inexact {
        /// The file.
        file: String,
        /// The tensor.
        name: String,
        /// The first such value.
        value: i64,
    },
}

/// Read the leaves of `kind` from safetensors `bytes` (named `file` in
/// errors) for `graph` (see the module doc).
///
/// Errors: [`GivenError`], naming the file and the first bad tensor.
pub fn from_safetensors(
    graph: &Graph,
    file: &str,
    bytes: &[u8],
    kind: Kind,
) -> Result<Given, GivenError> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| GivenError::Format {
        file: file.to_string(),
        message: e.to_string(),
    })?;
    let mut names: Vec<String> = st.names().into_iter().map(String::from).collect();
    names.sort();
    let mut tensors = Vec::with_capacity(names.len());
    for name in names {
        let view = st.tensor(&name).map_err(|e| GivenError::Format {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        if view.dtype() == Dtype::I64 {
            let mut values = view
                .data()
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
            if let Some(value) = values.find(|v| v.unsigned_abs() > 1 << 24) {
                return Err(GivenError::Inexact {
                    file: file.to_string(),
                    name,
                    value,
                });
            }
        }
        let values = to_f32(view.dtype(), view.data()).ok_or_else(|| GivenError::DType {
            file: file.to_string(),
            name: name.clone(),
            dtype: format!("{:?}", view.dtype()),
        })?;
        tensors.push((name, view.shape().to_vec(), values));
    }
    from_named(graph, file, tensors, kind, false)
}

/// Check named tensors `(name, shape, row-major values)` from `file`
/// against `graph` and key them by tensor (see the module doc). With
/// `skip_unknown`, names the graph does not have are left out (an ONNX
/// file's initializers include constants the import folded away) instead
/// of being an error.
///
/// Errors: [`GivenError`] naming the file and the first bad tensor.
pub fn from_named(
    graph: &Graph,
    file: &str,
    tensors: Vec<(String, Vec<usize>, Vec<f32>)>,
    kind: Kind,
    skip_unknown: bool,
) -> Result<Given, GivenError> {
    let by_name: HashMap<&str, TensorId> = graph
        .tensor_ids()
        .map(|t| (graph.tensor(t).name.as_str(), t))
        .collect();
    let mut given = Given::new();
    for (name, shape, values) in tensors {
        let Some(&t) = by_name.get(name.as_str()) else {
            if skip_unknown {
                continue;
            }
            return Err(GivenError::Unknown {
                file: file.to_string(),
                graph: graph.name().to_string(),
                hint: hint(&name, graph),
                name,
            });
        };
        let decl = graph.tensor(t);
        if !kind.accepts(decl.role) || graph.producer(t).is_some() {
            return Err(GivenError::WrongKind {
                file: file.to_string(),
                name,
                expected: kind.what(),
                role: format!("{:?}", decl.role).to_lowercase(),
                flag: match (kind, decl.role) {
                    (Kind::Weights, TensorRole::Input) => "--inputs",
                    (Kind::Inputs, TensorRole::Weight | TensorRole::OptimizerState) => "--weights",
                    _ => "neither flag (it is computed)",
                },
            });
        }
        if shape != decl.shape {
            return Err(GivenError::Shape {
                file: file.to_string(),
                name,
                got: shape,
                want: decl.shape.clone(),
            });
        }
        given.insert(t, values);
    }
    Ok(given)
}

/// Little-endian elements of `dtype` (F32, F64, F16, BF16, I64, I32, U8, BOOL)
/// as f32, `None` for other types.
pub fn to_f32(dtype: Dtype, b: &[u8]) -> Option<Vec<f32>> {
    let chunks = |n: usize| b.chunks_exact(n);
    Some(match dtype {
        Dtype::F32 => chunks(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        Dtype::F64 => chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32)
            .collect(),
        Dtype::F16 => chunks(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Dtype::BF16 => chunks(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Dtype::I64 => chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32)
            .collect(),
        Dtype::I32 => chunks(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32)
            .collect(),
        Dtype::U8 => b.iter().map(|&x| x as f32).collect(),
        Dtype::BOOL => b.iter().map(|&x| (x != 0) as u8 as f32).collect(),
        _ => return None,
    })
}

/// `; did you mean `x`?` for the graph tensor sharing the longest suffix.
fn hint(name: &str, graph: &Graph) -> String {
    let common = |a: &str| {
        a.bytes()
            .rev()
            .zip(name.bytes().rev())
            .take_while(|(x, y)| x == y)
            .count()
    };
    graph
        .tensor_ids()
        .filter(|&t| graph.producer(t).is_none())
        .map(|t| graph.tensor(t).name.as_str())
        .max_by_key(|n| common(n))
        .filter(|n| common(n) >= 2)
        .map(|n| format!("; did you mean `{n}`?"))
        .unwrap_or_default()
}
