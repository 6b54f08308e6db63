//! From a model (zoo name or plan file) to validated per-rank programs, with
//! the graph tensors a classifier is trained through.
//!
//! Takes a zoo name sized to a [`DataSet`] (the MLP's input to the data's
//! features, its output to its classes, the batch given) and planned as
//! `tofu plan` would, or a plan file (`tofu plan -o`) whose inputs fit the
//! data; gives a [`Prepared`]: the graph, its bound model (built once), the
//! partitioned programs (generated and validated) and the unpartitioned
//! ones for evaluation.

use std::path::Path;

use codegen::{Programs, TensorId};
use interval::cache::StrategyCache;
use planner::graph::{Graph, Optimizer, TensorRole};
use planner::plan::model::Model;
use planner::plan::{plan, PlanFile, SearchKind};
use planner::zoo::{self, CnnConfig, MlpConfig};
use tdl::Library;

use crate::data::DataSet;
use crate::feed::ClassifierTensors;
use crate::TrainError;

/// A model ready to train (see the module doc).
pub struct Prepared {
    /// The training graph.
    pub graph: Graph,
    /// Worker factor per recursion level (their product is the world size).
    pub factors: Vec<usize>,
    /// One program per rank.
    pub programs: Programs,
    /// The training graph's unpartitioned programs, logits kept (evaluation).
    pub unpartitioned: Programs,
    /// Features, labels and loss.
    pub tensors: ClassifierTensors,
    /// The logits `[batch, classes]` (the loss's first input).
    pub logits: TensorId,
    /// The batch (the inputs' first dim).
    pub batch: usize,
    /// One sample's shape in `x[batch, sample...]`.
    pub sample: Vec<usize>,
    /// The plan's bytes sent by all ranks per step.
    pub comm_bytes: u64,
}

impl Prepared {
    /// The world size (ranks).
    pub fn world(&self) -> usize {
        self.programs.programs.len()
    }
}

fn err(e: impl std::fmt::Display) -> TrainError {
    TrainError::Model(e.to_string())
}

/// The zoo model `name` sized to `data` with batch `batch`: the classifiers
/// whose input and output widths are free — the MLP (input = features), the
/// CNN (square grey images: side = √features, a multiple of 4).
///
/// Errors: [`TrainError::Model`] for an unknown name or a family that does
/// not take a feature vector.
pub fn sized_zoo(name: &str, data: &DataSet, batch: usize) -> Result<zoo::Model, TrainError> {
    let side = (data.features as f64).sqrt().round() as usize;
    match zoo::Model::parse(name).map_err(err)? {
        zoo::Model::Mlp(c) => Ok(zoo::Model::Mlp(MlpConfig {
            input: data.features,
            classes: data.classes,
            batch,
            ..c
        })),
        zoo::Model::Cnn(c) if side * side == data.features && side.is_multiple_of(4) => {
            Ok(zoo::Model::Cnn(CnnConfig {
                in_channels: 1,
                image: side,
                classes: data.classes,
                batch,
                ..c
            }))
        }
        other => Err(TrainError::Model(format!(
            "`{}` does not take {} features: train the MLP (mlp-<layers>-<hidden>) or, on square images whose side is a multiple of 4, the CNN (cnn-<channels>-<hidden>) on this data set, or give a plan file whose inputs `x[batch, {}]` and `labels[batch, {}]` fit it",
            other.name(),
            data.features,
            data.features,
            data.classes
        ))),
    }
}

/// Plan the zoo model `model` for `workers` workers with `search` and
/// `optimizer` (as `tofu plan --model` does) and prepare it for `data`.
///
/// Errors: [`TrainError::Model`] (graph, plan or program generation).
pub fn from_zoo(
    model: &zoo::Model,
    optimizer: &Optimizer,
    workers: usize,
    search: SearchKind,
    data: &DataSet,
) -> Result<Prepared, TrainError> {
    let lib = Library::shipped().map_err(err)?;
    let cache = StrategyCache::new();
    let graph = model.training(&lib, optimizer).map_err(err)?;
    let planned = plan(&graph, &lib, &cache, workers, search).map_err(err)?;
    let bound = Model::new(&graph, &lib, &cache).map_err(err)?;
    let programs = codegen::generate(&graph, &lib, &bound, &planned.factors, &planned.decisions)
        .map_err(err)?;
    codegen::validate(
        &graph,
        &bound,
        &planned.factors,
        &planned.decisions,
        &programs,
    )
    .map_err(err)?;
    finish(
        graph,
        &lib,
        &bound,
        planned.factors,
        programs,
        planned.comm_bytes,
        data,
    )
}

/// Load a plan file (`tofu plan -o`), check its recorded costs and prepare
/// it for `data`.
///
/// Errors: [`TrainError::Model`] naming the file.
pub fn from_plan_file(path: &Path, data: &DataSet) -> Result<Prepared, TrainError> {
    let named = |e: &dyn std::fmt::Display| TrainError::Model(format!("{}: {e}", path.display()));
    let lib = Library::shipped().map_err(err)?;
    let cache = StrategyCache::new();
    let (file, graph, decisions) = PlanFile::load(path, &lib, &cache).map_err(|e| named(&e))?;
    let bound = Model::new(&graph, &lib, &cache).map_err(|e| named(&e))?;
    codegen::check_recorded(&file, &graph, &bound, &decisions).map_err(|e| named(&e))?;
    let programs = codegen::generate(&graph, &lib, &bound, &file.factors, &decisions)
        .map_err(|e| named(&e))?;
    codegen::validate(&graph, &bound, &file.factors, &decisions, &programs)
        .map_err(|e| named(&e))?;
    let bytes = programs.programs.iter().map(|p| p.bytes_sent()).sum();
    finish(graph, &lib, &bound, file.factors, programs, bytes, data)
}

/// Find the classifier's tensors, check them against `data`, and generate
/// the evaluation programs.
fn finish(
    graph: Graph,
    lib: &Library,
    bound: &Model,
    factors: Vec<usize>,
    programs: Programs,
    comm_bytes: u64,
    data: &DataSet,
) -> Result<Prepared, TrainError> {
    let (tensors, logits, batch) = classifier_tensors(&graph, data)?;
    let sample = graph.tensor(tensors.x).shape[1..].to_vec();
    let mut unpartitioned = codegen::generate_unpartitioned(&graph, lib, bound).map_err(err)?;
    for p in &mut unpartitioned.programs {
        p.keep_tiles(&[logits]);
    }
    Ok(Prepared {
        graph,
        factors,
        programs,
        unpartitioned,
        tensors,
        logits,
        batch,
        sample,
        comm_bytes,
    })
}

/// The inputs `x[batch, sample...]` (features per sample = the data's) and
/// `labels[batch, classes]`, the loss
/// and the logits (the loss op's first input), checked against `data`.
///
/// Errors: [`TrainError::Input`] naming what is missing or does not fit.
pub fn classifier_tensors(
    graph: &Graph,
    data: &DataSet,
) -> Result<(ClassifierTensors, TensorId, usize), TrainError> {
    let input = |name: &str, what: &str| {
        graph
            .tensor_ids()
            .find(|&t| graph.tensor(t).name == name && graph.tensor(t).role == TensorRole::Input)
            .ok_or_else(|| {
                TrainError::Input(format!(
                    "the graph `{}` has no input `{name}` for the data set's {what}",
                    graph.name()
                ))
            })
    };
    let x = input("x", "features")?;
    let labels = input("labels", "one-hot labels")?;
    let (xs, ls) = (&graph.tensor(x).shape, &graph.tensor(labels).shape);
    let per_sample: usize = xs.iter().skip(1).product();
    if xs.len() < 2 || xs[0] == 0 || per_sample != data.features {
        return Err(TrainError::Input(format!(
            "input `x` has shape {xs:?}; the data set needs [batch, …] with {} features per sample",
            data.features
        )));
    }
    if ls.as_slice() != [xs[0], data.classes] {
        return Err(TrainError::Input(format!(
            "input `labels` has shape {ls:?}; the data set needs [{}, {}] (one-hot labels of its {} classes)",
            xs[0], data.classes, data.classes
        )));
    }
    let batch = xs[0];
    let loss = graph
        .loss()
        .ok_or_else(|| TrainError::Input(format!("the graph `{}` has no loss", graph.name())))?;
    let logits = graph
        .ops()
        .iter()
        .find(|op| op.outputs.contains(&loss))
        .and_then(|op| op.inputs.first().copied())
        .ok_or_else(|| TrainError::Input("the loss is not computed by an operator".into()))?;
    Ok((ClassifierTensors { x, labels, loss }, logits, batch))
}
