//! One forward pass of a plan, with the model's outputs written by their
//! ONNX names (`tofu run PLAN --save-outputs FILE.safetensors`): for a
//! training plan the first step's forward, before the update; each output
//! assembled from the ranks' tiles, so another runtime's outputs can be
//! compared with them (`scripts/compare-onnxruntime.py`).
//!
//! Takes the plan's graph ([`Graph::outputs`]), its programs, the backend
//! choice, the seed and the values given (weights, inputs). What is not
//! given is the seeded synthetic fill, and then is also written to the file
//! (inputs as the run held them, weights as the fill generates them), so
//! another runtime can be fed the same values. Dropout's keep-masks are
//! graph inputs of a training graph: the forward saved is the deterministic
//! one, dropout as the identity (ONNX inference), so each mask not given is
//! 1 − ratio (y = x·mask / (1 − ratio) = x). Tensors are written at their
//! graph element types ([`program::given_save`]); the file is replaced
//! atomically ([`durable::write_atomic`]).

use std::collections::HashSet;
use std::path::Path;

use graph::execute::fill_offsets;
use graph::{Graph, OpRole, TensorId, TensorRole};
use program::given_save::{to_safetensors, Named};
use program::Program;
use tdl::AttrValue;

use crate::choose::{ChooseError, ExecChoice};
use crate::{Given, RunOptions};

/// The file's metadata key saying which forward pass the outputs are of.
pub const FORWARD_KEY: &str = "tofu.forward";
/// Its value for a training plan: a training step's forward, batch
/// normalization on the batch's statistics (what training computes) and
/// dropout as the identity (its expectation; random masks no other runtime
/// could reproduce).
pub const FORWARD: &str = "training-step: batch-norm on batch statistics, dropout as identity";
/// Its value for an inference plan (`tofu plan MODEL.onnx --inference`):
/// the model's own forward, batch normalization on its running statistics.
pub const FORWARD_INFERENCE: &str =
    "inference: batch-norm on running statistics, dropout as identity";

/// What [`forward_outputs`] wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedOutputs {
    /// The model's outputs, by ONNX name, in order.
    pub outputs: Vec<String>,
    /// The graph inputs that ran on the synthetic fill (written too).
    pub synthetic_inputs: Vec<String>,
    /// How many weights ran on the synthetic fill (written too).
    pub synthetic_weights: usize,
    /// Seconds of the one step.
    pub step_seconds: Vec<f64>,
}

/// Why the outputs could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// The graph records no named model outputs (zoo models, old plans).
    #[error("the plan's graph `{graph}` records no named model outputs (zoo models and plans made before outputs were recorded have none)")]
    NoOutputs {
        /// The graph's name.
        graph: String,
    },
    /// With `inputs_given`: an input the outputs depend on was not given.
    #[error("no tensor `{name}`, a graph input the model's outputs depend on")]
    MissingInput {
        /// The input's name.
        name: String,
        /// Its shape.
        shape: Vec<usize>,
        /// Its element type's name.
        dtype: String,
    },
    /// The run failed.
    #[error(transparent)]
    Run(#[from] ChooseError),
    /// No rank kept a tensor to write (a broken invariant of `keep_tiles`).
    #[error("internal: no rank kept tensor `{0}`")]
    NotKept(String),
    /// The tensors could not be encoded or the file written.
    #[error("{0}")]
    Write(String),
}

/// Run one forward pass of `programs` and write `path` (see the module
/// doc); `inputs_given`: the caller gave an inputs file, so every input the
/// outputs depend on must be in `given`.
///
/// Errors: [`ForwardError`].
pub fn forward_outputs(
    graph: &Graph,
    programs: &[Program],
    choice: &ExecChoice,
    seed: u64,
    given: &Given,
    inputs_given: bool,
    path: &Path,
) -> Result<SavedOutputs, ForwardError> {
    let outputs = graph.outputs();
    if outputs.is_empty() {
        return Err(ForwardError::NoOutputs {
            graph: graph.name().to_string(),
        });
    }
    let needed = ancestors(graph, outputs.iter().map(|o| o.tensor));
    let mut given = given.clone();
    let masks = identity_dropout(graph, &mut given);
    let inputs: Vec<TensorId> = leaves(graph, &needed, TensorRole::Input)
        .filter(|t| !masks.contains(t))
        .collect();
    if let Some(&t) = inputs
        .iter()
        .find(|t| inputs_given && !given.contains_key(t))
    {
        let d = graph.tensor(t);
        return Err(ForwardError::MissingInput {
            name: d.name.clone(),
            shape: d.shape.clone(),
            dtype: d.dtype.name().to_string(),
        });
    }
    let synthetic: Vec<TensorId> = inputs
        .into_iter()
        .filter(|t| !given.contains_key(t))
        .collect();
    let keep: Vec<TensorId> = outputs
        .iter()
        .map(|o| o.tensor)
        .chain(synthetic.iter().copied())
        .collect();
    let mut programs = programs.to_vec();
    for p in &mut programs {
        p.keep_tiles(&keep);
    }
    let report = choice.execute(&programs, RunOptions { steps: 1, seed }, None, &given)?;
    let value = |t: TensorId| {
        let kept = report.outputs.iter().find(|(k, _)| *k == t);
        kept.map(|(_, v)| v.clone())
            .ok_or_else(|| ForwardError::NotKept(graph.tensor(t).name.clone()))
    };
    let mut file: Vec<Named> = Vec::new();
    for o in outputs {
        file.push(named(graph, &o.name, o.tensor, value(o.tensor)?));
    }
    for &t in &synthetic {
        file.push(named(graph, &graph.tensor(t).name, t, value(t)?));
    }
    let weights: Vec<TensorId> = leaves(graph, &needed, TensorRole::Weight).collect();
    let synthetic_weights = synthetic_fills(graph, &weights, &given, seed, &mut file);
    let mut seen = HashSet::new();
    file.retain(|(n, ..)| seen.insert(n.clone()));
    write(graph, &file, path)?;
    let names = |from: usize, n: usize| file[from..from + n].iter().map(|f| f.0.clone()).collect();
    Ok(SavedOutputs {
        outputs: names(0, outputs.len()),
        synthetic_inputs: names(outputs.len(), synthetic.len()),
        synthetic_weights,
        step_seconds: report.step_seconds,
    })
}

/// A tensor to write, at its graph element type and shape.
fn named(graph: &Graph, name: &str, t: TensorId, values: Vec<f32>) -> Named {
    let d = graph.tensor(t);
    (name.to_string(), d.dtype, d.shape.clone(), values)
}

/// The leaves of `role` among `needed` that hold no known value.
fn leaves<'a>(
    graph: &'a Graph,
    needed: &'a [TensorId],
    role: TensorRole,
) -> impl Iterator<Item = TensorId> + 'a {
    needed.iter().copied().filter(move |&t| {
        let d = graph.tensor(t);
        d.role == role && graph.producer(t).is_none() && d.value.is_none()
    })
}

/// Append the synthetic fill of every weight not given; gives their count.
fn synthetic_fills(
    graph: &Graph,
    weights: &[TensorId],
    given: &Given,
    seed: u64,
    file: &mut Vec<Named>,
) -> usize {
    let offsets = fill_offsets(graph);
    let mut fills = 0;
    for &t in weights.iter().filter(|t| !given.contains_key(t)) {
        let d = graph.tensor(t);
        if let (Some(fill), Some(offset)) = (d.fill, offsets[t.index()]) {
            let v = fill.generate(&d.shape, seed, offset);
            file.push(named(
                graph,
                &d.name,
                t,
                v.into_iter().map(|x| x as f32).collect(),
            ));
            fills += 1;
        }
    }
    fills
}

/// Encode `file` with the forward's metadata and replace `path` with it.
fn write(graph: &Graph, file: &[Named], path: &Path) -> Result<(), ForwardError> {
    // An inference graph (`tofu plan --inference`) has no backward and no
    // update: its forward is the model's own.
    let training = graph.ops().iter().any(|o| o.role != OpRole::Forward);
    let forward = if training { FORWARD } else { FORWARD_INFERENCE };
    let bytes = to_safetensors(file, &[(FORWARD_KEY, forward)])
        .map_err(|e| ForwardError::Write(format!("{}: {e}", path.display())))?;
    durable::write_atomic(path, &bytes)
        .map_err(|e| ForwardError::Write(format!("`{}`: {e}", path.display())))
}

/// The tensors `roots` depend on (themselves included), in id order.
pub fn ancestors(graph: &Graph, roots: impl Iterator<Item = TensorId>) -> Vec<TensorId> {
    let mut need = vec![false; graph.tensors().len()];
    roots.for_each(|t| need[t.index()] = true);
    for op in graph.ops().iter().rev() {
        if op.outputs.iter().any(|t| need[t.index()]) {
            op.inputs.iter().for_each(|t| need[t.index()] = true);
        }
    }
    graph.tensor_ids().filter(|t| need[t.index()]).collect()
}

/// Give every `dropout` keep-mask not given the constant 1 − ratio (dropout
/// as the identity); gives the masks.
pub fn identity_dropout(graph: &Graph, given: &mut Given) -> Vec<TensorId> {
    let mut masks = Vec::new();
    for op in graph.ops().iter().filter(|o| o.spec == "dropout") {
        let Some(&mask) = op.inputs.get(1) else {
            continue;
        };
        let ratio = match op.attrs.get("ratio") {
            Some(AttrValue::Float(r)) => *r,
            _ => 0.5,
        };
        let n = graph.tensor(mask).numel() as usize;
        given
            .entry(mask)
            .or_insert_with(|| vec![(1.0 - ratio) as f32; n]);
        masks.push(mask);
    }
    masks
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::{float, DType, Fill, GraphBuilder};

    /// `y = relu(x + w)`, `z = dropout(v, mask)` beside it: the ancestors
    /// of `y` are x, w, x + w and y (written out by hand), none of the
    /// dropout branch; the mask not given becomes 1 − ratio, a given mask
    /// is kept.
    #[test]
    fn ancestors_and_identity_dropout() {
        let lib = tdl::Library::shipped().unwrap();
        let mut b = GraphBuilder::new(&lib, "t");
        let normal = Fill::Normal { std: 1.0 };
        let x = b.input("x", &[2, 3], DType::F32, normal).unwrap();
        let w = b.weight("w", &[2, 3], 1.0).unwrap();
        let s = b.op1("add", "s", &[x, w], &[]).unwrap();
        let y = b.op1("relu", "y", &[s], &[]).unwrap();
        let v = b.input("v", &[4], DType::F32, normal).unwrap();
        let mask = b.input("mask", &[4], DType::F32, normal).unwrap();
        let _z = b
            .op1("dropout", "z", &[v, mask], &[("ratio", float(0.25))])
            .unwrap();
        let g = b.into_graph();
        let mut want = vec![x, w, s, y];
        want.sort();
        assert_eq!(ancestors(&g, [y].into_iter()), want);
        let mut given = Given::new();
        assert_eq!(identity_dropout(&g, &mut given), vec![mask]);
        assert_eq!(given[&mask], vec![0.75; 4]);
        let mut given: Given = [(mask, vec![2.0; 4])].into_iter().collect();
        identity_dropout(&g, &mut given);
        assert_eq!(given[&mask], vec![2.0; 4], "a given mask is kept");
    }
}
