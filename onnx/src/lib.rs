//! ONNX import for tofu (issue 5): real models → tofu graphs, through the
//! TDL specs.
//!
//! Takes an `.onnx` file (read with the maintained `onnx-protobuf` messages);
//! gives a [`graph::Graph`] — inference graph, or training graph
//! (backward + optimizer from the specs' gradient declarations) — whose
//! every operator is a spec of the library and whose every shape the specs
//! infer. [`load_graph`] is the entry point; `tofu graph FILE.onnx` and
//! `tofu plan FILE.onnx` call it.
//!
//! Data flow: [`proto`] (bytes → checked `ModelProto`, never panics) →
//! [`import`] (initializers, inputs with [`dims`] resolved, nodes in order:
//! [`fold`] at import, or lowered by the one mapping [`table`] through
//! [`lower::Lower`], or [`opaque`]) → with `training`, [`loss`] +
//! [`graph::training_graph`].
//!
//! Invariants: every ai.onnx op the table maps lowers only to specs that
//! exist in the shipped library (tested); an unsupported node is an error
//! naming the file, node, op type and opset and the way to add it; no input
//! makes the reader panic (property-tested on corrupted models).
#![warn(missing_docs)]

pub mod attr;
pub mod batch;
pub mod conformance;
pub mod conformance_report;
pub mod control;
pub mod custom;
pub mod dims;
pub mod domain;
pub mod error;
pub mod external;
pub mod fold;
pub mod fold_eval;
pub mod import;
pub mod import_inputs;
pub mod import_options;
pub mod import_report;
pub mod import_training;
pub mod index_fill;
pub mod loss;
pub mod lower;
pub mod map_bitwise;
pub mod map_conv_transpose;
pub mod map_einsum;
pub mod map_elementwise;
pub mod map_gather_elements;
pub mod map_gather_nd;
pub mod map_grid_sample;
pub mod map_integer;
pub mod map_ml;
pub mod map_nll;
pub mod map_nn;
pub mod map_norm;
pub mod map_quant;
pub mod map_reduce;
pub mod map_resize;
pub mod map_rotary;
pub mod map_sequence;
pub mod map_shape;
pub mod map_signal;
pub mod map_tensor;
pub mod map_training;
pub mod mapping;
pub mod node;
pub mod opaque;
pub mod opaque_shape;
pub mod proto;
pub mod rnn;
pub mod scan;
pub mod summary_json;
pub mod synth;
pub mod table;
pub mod tensor;
pub mod trained;
pub mod values;

use std::path::Path;

pub use dims::{DefaultedDim, DimOptions};
pub use error::OnnxError;
pub use import::{import, Imported, OpaqueNode, Options, Output, Summary};
pub use import_options::{ImportOptions, ImportOptionsError};
pub use import_report::ImportReport;
pub use tensor::{Data, Elem};
pub use trained::{with_trained_initializers, TrainedModel};
pub use values::{values, ModelValues, ValuesError};

/// Import the ONNX file at `path` with the shipped operator library.
///
/// Gives the graph (see [`Imported`]: with `options.training` a training
/// graph whose loss is on `options.loss`), its outputs and a summary.
/// Errors: [`OnnxError`] naming the file, and for node problems the node, op
/// type, opset and the fix.
pub fn load_graph(path: &Path, options: &Options) -> Result<Imported, OnnxError> {
    let lib = tdl::Library::shipped().map_err(|e| match e {
        tdl::LibraryError::Invalid(d) => OnnxError::Library(d.render()),
        other => OnnxError::Library(other.to_string()),
    })?;
    load_graph_with(path, &lib, options)
}

/// [`load_graph`] with a given operator library.
pub fn load_graph_with(
    path: &Path,
    lib: &tdl::Library,
    options: &Options,
) -> Result<Imported, OnnxError> {
    let model = proto::read(path)?;
    import(&model, path, lib, options)
}
