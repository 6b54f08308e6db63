//! Weights in and out as safetensors (Hugging Face's format, written by
//! the project's one writer, `program::given_save`; what PyTorch's
//! `safetensors.torch.load_file` reads).
//!
//! Takes whole tensors by graph id ([`runner::Given`]); gives a file whose
//! tensors are named by their graph names (`fc0.w`, …), F32, row-major in
//! the graph's shapes, written atomically; and the synthetic initial
//! weights of a run (what every rank's tiles hold before step 0), so a
//! reference implementation can start from the same point.

use std::collections::HashMap;
use std::path::Path;

use codegen::given_save::{self, Named};
use planner::graph::DType;
use planner::graph::{Graph, TensorRole};
use runner::Given;

use crate::TrainError;
use planner::graph::format::write_atomic;

/// A safetensors file of named F32 tensors `(name, shape, values)` with
/// `metadata`, through the project's one safetensors writer
/// (`program::given_save::to_safetensors`, re-exported by `codegen`).
///
/// Errors: [`TrainError::Data`] when a tensor's length is not its shape's.
pub fn to_safetensors(
    tensors: &[(String, Vec<usize>, &[f32])],
    metadata: Option<HashMap<String, String>>,
) -> Result<Vec<u8>, TrainError> {
    let named: Vec<Named> = tensors
        .iter()
        .map(|(name, shape, v)| (name.clone(), DType::F32, shape.clone(), v.to_vec()))
        .collect();
    let meta = metadata.unwrap_or_default();
    let pairs: Vec<(&str, &str)> = meta.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    given_save::to_safetensors(&named, &pairs).map_err(|e| TrainError::Data(e.to_string()))
}

/// Write `weights` (whole tensors by graph id) to `path` as safetensors
/// named by graph names, atomically.
///
/// Errors: [`TrainError::Data`] naming the file (I/O) or the tensor.
pub fn save(path: &Path, graph: &Graph, weights: &Given) -> Result<(), TrainError> {
    let mut named: Vec<(String, Vec<usize>, &[f32])> = weights
        .iter()
        .map(|(&t, v)| {
            let info = graph.tensor(t);
            (info.name.clone(), info.shape.clone(), v.as_slice())
        })
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let bytes = to_safetensors(&named, None)?;
    write_atomic(path, &bytes).map_err(|e| TrainError::Data(e.to_string()))
}

/// The weights a run with `seed` starts from: every trainable weight's
/// synthetic fill, whole (the values the ranks' tiles are generated from).
pub fn initial(graph: &Graph, seed: u64) -> Given {
    let offsets = planner::graph::execute::fill_offsets(graph);
    graph
        .tensor_ids()
        .zip(offsets)
        .filter_map(|(t, offset)| {
            let info = graph.tensor(t);
            let (TensorRole::Weight, Some(fill), Some(offset)) = (info.role, info.fill, offset)
            else {
                return None;
            };
            let whole: Vec<(i64, i64)> = info.shape.iter().map(|&d| (0, d as i64)).collect();
            let v = tdl::fill::fill_region(fill, &info.shape, seed, offset, &whole)
                .into_iter()
                .map(|x| x as f32)
                .collect();
            Some((t, v))
        })
        .collect()
}

/// Weights from a safetensors file written by [`save`] (or any file whose
/// names are the graph's weight names).
///
/// Errors: [`TrainError::Data`] naming the file and the tensor.
pub fn load(path: &Path, graph: &Graph) -> Result<Given, TrainError> {
    let bytes =
        std::fs::read(path).map_err(|e| TrainError::Data(format!("{}: {e}", path.display())))?;
    runner::given::from_safetensors(
        graph,
        &path.display().to_string(),
        &bytes,
        runner::given::Kind::Weights,
    )
    .map_err(|e| TrainError::Data(e.to_string()))
}

/// Write the batches of steps `0..steps` to `path` as safetensors, for a
/// reference implementation to train on the same data in the same order:
/// one tensor per fed input, named as the input (`x`, `labels`; `ids`,
/// `labels`), of shape `[steps, batch, elements per sample]`.
///
/// Errors: [`TrainError::Data`] naming the file.
pub fn export_batches(
    path: &Path,
    data: &dyn crate::samples::Samples,
    batches: &crate::batches::Batches,
    steps: usize,
) -> Result<(), TrainError> {
    let inputs = data.inputs();
    let mut values: Vec<Vec<f32>> = vec![Vec::new(); inputs.len()];
    let mut batch = 0;
    for s in 0..steps {
        let idx = batches.batch(s);
        batch = idx.len();
        for &i in &idx {
            for (k, v) in values.iter_mut().enumerate() {
                v.extend_from_slice(&data.sample(i, k));
            }
        }
    }
    let named: Vec<(String, Vec<usize>, &[f32])> = inputs
        .iter()
        .zip(&values)
        .map(|((name, elems), v)| (name.to_string(), vec![steps, batch, *elems], v.as_slice()))
        .collect();
    let bytes = to_safetensors(&named, None)?;
    write_atomic(path, &bytes).map_err(|e| TrainError::Data(e.to_string()))
}
