//! Every value an ONNX model gives a graph planned from it, by the graph's
//! tensor ids (`tofu run PLAN --weights MODEL.onnx`).
//!
//! A model's values are not only its initializers: exporters (Paddle, the
//! spox builder of silero-vad) put weights in `Constant` nodes, inside `If`
//! branches (the importer names them `IF/then_branch/NAME`), and the import
//! folds views of them (`Reshape` of a bias) into new weight tensors; int8
//! initializers (a quantized MiniLM) become constant leaves, not weights.
//! So when the plan records how its graph was imported
//! ([`ImportOptions::from_record`], the plan file's `import`), the model is
//! imported again with those options and every leaf whose value the import
//! knew ([`crate::Imported::leaf_values`]: weights and constants, float and
//! integer, at their element type converted to f32, exact for integers up
//! to 2^24) is given, matched to the plan's graph by name and checked by
//! shape ([`ModelValues::ByTensor`]). A plan without the record (written
//! before it existed) gets the initializers only, by name
//! ([`ModelValues::Initializers`]; the caller checks them against the graph).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use graph::{Graph, TensorId};

use crate::import_options::{ImportOptions, ImportOptionsError};
use crate::OnnxError;

/// A named tensor: name, shape, row-major f32 values.
pub type NamedValues = (String, Vec<usize>, Vec<f32>);

/// What a model gives a plan's graph.
#[derive(Debug)]
pub enum ModelValues {
    /// Leaf values by the plan graph's tensor ids (row-major f32).
    ByTensor(Vec<(TensorId, Vec<f32>)>),
    /// The model's initializers `(name, shape, row-major f32)`, unchecked.
    Initializers(Vec<NamedValues>),
}

/// Why a model's values could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ValuesError {
    /// The plan's import record does not parse.
    #[error(transparent)]
    Options(#[from] ImportOptionsError),
    /// The model does not import with the plan's options.
    #[error(transparent)]
    Import(OnnxError),
    /// The model file cannot be read, or is not ONNX.
    #[error("{}: {message}", file.display())]
    Read {
        /// The model file.
        file: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A value of the model is not the plan graph's leaf of that name.
    #[error("{}: `{name}` (shape {shape:?}) is not the plan's leaf of that name (shape {plan_shape:?}{})", file.display(), if *computed { ", computed" } else { "" })]
    NotLeaf {
        /// The model file.
        file: PathBuf,
        /// The tensor name.
        name: String,
        /// Its shape in the model.
        shape: Vec<usize>,
        /// The plan graph's shape of that name.
        plan_shape: Vec<usize>,
        /// The plan graph computes that tensor.
        computed: bool,
    },
    /// A value that does not decode.
    #[error("{}: `{name}`: {message}", file.display())]
    Value {
        /// The model file.
        file: PathBuf,
        /// The tensor name.
        name: String,
        /// The decoder's message.
        message: String,
    },
}

/// The values `model` gives the plan's `graph`, imported again with the
/// plan's `import` options (see the module doc); `lib` is the operator
/// library the plan was made with.
///
/// Errors: [`ValuesError`], naming the model file and the tensor.
pub fn values(
    graph: &Graph,
    model: &Path,
    lib: &tdl::Library,
    import: Option<&ImportOptions>,
) -> Result<ModelValues, ValuesError> {
    let Some(opts) = import else {
        return initializers(model).map(ModelValues::Initializers);
    };
    let imported =
        crate::load_graph_with(model, lib, &opts.options()?).map_err(ValuesError::Import)?;
    let by_name: HashMap<&str, TensorId> = graph
        .tensor_ids()
        .map(|t| (graph.tensor(t).name.as_str(), t))
        .collect();
    let mut out = Vec::new();
    for (t, known) in &imported.leaf_values {
        let leaf = imported.graph.tensor(*t);
        let Some(&p) = by_name.get(leaf.name.as_str()) else {
            continue;
        };
        let decl = graph.tensor(p);
        let computed = graph.producer(p).is_some();
        if computed || decl.shape != leaf.shape {
            return Err(ValuesError::NotLeaf {
                file: model.to_path_buf(),
                name: leaf.name.clone(),
                shape: leaf.shape.clone(),
                plan_shape: decl.shape.clone(),
                computed,
            });
        }
        let data = known.data().map_err(|message| ValuesError::Value {
            file: model.to_path_buf(),
            name: leaf.name.clone(),
            message,
        })?;
        out.push((p, data.values.iter().map(|&x| x as f32).collect()));
    }
    Ok(ModelValues::ByTensor(out))
}

/// The model's initializers `(name, shape, values)` as f32.
///
/// Errors: the file cannot be read or decoded.
pub fn initializers(model: &Path) -> Result<Vec<NamedValues>, ValuesError> {
    let read = |message: String| ValuesError::Read {
        file: model.to_path_buf(),
        message,
    };
    let bytes = std::fs::read(model).map_err(|e| read(e.to_string()))?;
    let proto = crate::proto::decode(&bytes, model).map_err(ValuesError::Import)?;
    let mut tensors = Vec::new();
    for t in &proto.proto.graph.initializer {
        let d = crate::tensor::decode(t).map_err(|message| ValuesError::Value {
            file: model.to_path_buf(),
            name: t.name.clone(),
            message,
        })?;
        let values = d.values.iter().map(|&x| x as f32).collect();
        tensors.push((t.name.clone(), d.shape, values));
    }
    Ok(tensors)
}
