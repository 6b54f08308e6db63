//! From a model (zoo name or plan file) to validated per-rank programs, with
//! the graph tensors the data set is fed through.
//!
//! Takes a zoo name sized to a [`DataSet`] (the MLP's input to the data's
//! features, its output to its classes, the batch given) and planned as
//! `tofu plan` would, or a plan file (`tofu plan -o`) whose inputs fit the
//! data; gives a [`Prepared`]: the graph, the partitioned programs
//! ([`codegen::compile`] of the [`BoundPlan`]: generated and verified) and
//! the unpartitioned ones for evaluation, from the one bound model.

use std::path::Path;

use codegen::{Programs, TensorId};
use interval::cache::StrategyCache;
use planner::graph::{Graph, Optimizer, TensorRole};
use planner::plan::model::Model;
use planner::plan::{plan_with_model, BoundPlan, PlanFile, PlanOptions, SearchKind};
use planner::zoo::{self, CnnConfig, GptConfig, MlpConfig};
use tdl::Library;

use crate::data::Data;
use crate::feed::TaskTensors;
use crate::samples::Samples;
use crate::text::VOCAB;
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
    /// The fed inputs and the loss.
    pub tensors: TaskTensors,
    /// The logits `[batch, …, classes]` (the loss's first input).
    pub logits: TensorId,
    /// The batch (the inputs' first dim).
    pub batch: usize,
    /// The plan's bytes sent by all ranks per step.
    pub comm_bytes: u64,
    /// How the graph was imported from a model file (the plan file's
    /// `import` record, e.g. `{"onnx": {…}}`): what reading the model's
    /// values again needs. `None` for a zoo model or a graph file.
    pub import: Option<serde_json::Value>,
    /// The operator library the plan was bound with (the shipped one, plus
    /// the user specs it was planned with).
    pub library: Library,
}

impl Prepared {
    /// The world size (ranks).
    pub fn world(&self) -> usize {
        self.programs.programs.len()
    }

    /// Held-out loss and accuracy of `weights` on the first `limit` samples
    /// of `test` ([`crate::evaluate::evaluate`] on the unpartitioned programs).
    ///
    /// Errors: as [`crate::evaluate::evaluate`].
    pub fn evaluate(
        &self,
        weights: &runner::Given,
        test: &dyn Samples,
        limit: Option<usize>,
        exec: &runner::choose::ExecChoice,
    ) -> Result<crate::Evaluation, TrainError> {
        let (one, tensors) = (&self.unpartitioned, &self.tensors);
        let b = (self.batch, limit);
        crate::evaluate::evaluate(one, tensors, self.logits, weights, test, b, exec)
    }
}

fn err(e: impl std::fmt::Display) -> TrainError {
    TrainError::Model(e.to_string())
}

/// The zoo model `name` sized to `data` with batch `batch`: for labelled
/// samples the classifiers whose input and output widths are free — the MLP
/// (input = features), the CNN (square grey images: side = √features, a
/// multiple of 4); for a corpus the GPT (vocabulary 256 bytes, sequence =
/// the windows' length).
///
/// Errors: [`TrainError::Model`] for an unknown name or a family that does
/// not fit the data.
pub fn sized_zoo(name: &str, data: &Data, batch: usize) -> Result<zoo::Model, TrainError> {
    let model = zoo::Model::parse(name).map_err(err)?;
    match (model, data) {
        (zoo::Model::Mlp(c), Data::Classes(d)) => Ok(zoo::Model::Mlp(MlpConfig {
            input: d.features,
            classes: d.classes,
            batch,
            ..c
        })),
        (zoo::Model::Cnn(c), Data::Classes(d)) if square(d.features).is_some() => {
            Ok(zoo::Model::Cnn(CnnConfig {
                in_channels: 1,
                image: square(d.features).unwrap_or(0),
                classes: d.classes,
                batch,
                ..c
            }))
        }
        (zoo::Model::Gpt(c), Data::Text(t)) => Ok(zoo::Model::Gpt(GptConfig {
            vocab: VOCAB,
            seq: t.seq,
            batch,
            ..c
        })),
        (model, Data::Tensors(t)) => sized_for_tensors(model, t, batch),
        (other, Data::Classes(d)) => Err(TrainError::Model(format!(
            "`{}` does not take {} features: train the MLP (mlp-<layers>-<hidden>) or, on square images whose side is a multiple of 4, the CNN (cnn-<channels>-<hidden>) on this data set, or give a plan file whose inputs `x[batch, …]` and `labels[batch, {}]` fit it",
            other.name(),
            d.features,
            d.classes
        ))),
        (other, Data::Text(_)) => Err(TrainError::Model(format!(
            "`{}` is not a language model: train the GPT (gpt-<layers>-<d_model>) on a corpus",
            other.name()
        ))),
    }
}

/// A zoo model sized to tensors from files: the MLP and the CNN to `x`
/// and the labels' classes, the GPT to `ids` (sequence) and the classes
/// (vocabulary).
fn sized_for_tensors(
    model: zoo::Model,
    t: &crate::tensors::TensorSet,
    batch: usize,
) -> Result<zoo::Model, TrainError> {
    let per = |name: &str| t.inputs().iter().find(|(n, _)| *n == name).map(|&(_, e)| e);
    let classes = t.label_classes().ok_or_else(|| {
        TrainError::Model(
            "the data feeds no `labels`: a zoo model needs them to size its output".into(),
        )
    })?;
    match (model, per("x"), per("ids")) {
        (zoo::Model::Mlp(c), Some(f), _) => Ok(zoo::Model::Mlp(MlpConfig { input: f, classes, batch, ..c })),
        (zoo::Model::Cnn(c), Some(f), _) if square(f).is_some() => Ok(zoo::Model::Cnn(CnnConfig {
            in_channels: 1,
            image: square(f).unwrap_or(0),
            classes,
            batch,
            ..c
        })),
        (zoo::Model::Gpt(c), _, Some(seq)) => Ok(zoo::Model::Gpt(GptConfig { vocab: classes, seq, batch, ..c })),
        (other, ..) => Err(TrainError::Model(format!(
            "`{}` does not fit these tensors: the MLP and the CNN take `x[samples, …]` and `labels`, the GPT `ids[samples, seq]` and `labels`",
            other.name()
        ))),
    }
}

/// The side of a square image of `n` pixels, if it is a multiple of 4.
fn square(n: usize) -> Option<usize> {
    let side = (n as f64).sqrt().round() as usize;
    (side * side == n && side.is_multiple_of(4)).then_some(side)
}

/// The zoo model `name` sized to `data` with batch `batch` ([`sized_zoo`]),
/// planned for `workers` workers with `search` and `optimizer` with L2
/// weight decay `weight_decay` (as `tofu plan --model` does) and prepared
/// for it.
///
/// Errors: [`TrainError::Model`] (name, graph, plan or program generation).
pub fn from_zoo(
    name: &str,
    (data, batch): (&Data, usize),
    (optimizer, weight_decay): (&Optimizer, f64),
    workers: usize,
    search: SearchKind,
) -> Result<Prepared, TrainError> {
    let model = sized_zoo(name, data, batch)?;
    let lib = Library::shipped().map_err(err)?;
    let graph = model
        .training_with(&lib, optimizer, weight_decay)
        .map_err(err)?;
    from_graph((graph, &lib, None), workers, search, data.samples())
}

/// The training graph `graph` (with the operator library it was built
/// with, and how it was imported: an ONNX import's record, kept for
/// reading the model's values again) planned for `workers` workers with
/// `search` (as `tofu plan` does) and prepared for `data`.
///
/// Errors: [`TrainError::Model`] (plan or program generation) and
/// [`task_tensors`]'s.
pub fn from_graph(
    (graph, lib, import): (Graph, &Library, Option<serde_json::Value>),
    workers: usize,
    search: SearchKind,
    data: &dyn Samples,
) -> Result<Prepared, TrainError> {
    let cache = StrategyCache::new();
    let ops = Model::new(&graph, lib, &cache).map_err(err)?;
    let opts = PlanOptions::default();
    let (planned, ops) = plan_with_model(&graph, ops, workers, search, opts).map_err(err)?;
    let mut plan = BoundPlan::from_planned(graph, ops, &planned);
    plan.import = import;
    let programs = codegen::compile(&plan, lib).map_err(err)?;
    finish(plan, lib, programs, planned.comm_bytes, data)
}

/// Load a plan file (`tofu plan -o`) with the user specs it records
/// (checked against `specs`, the `--specs` files given now:
/// [`PlanFile::load_with_specs`]), check its recorded costs and prepare
/// it for `data`, its optimizer's learning rate set to `lr` and its weight
/// decay to `weight_decay` where given ([`Graph::set_learning_rate`],
/// [`Graph::set_weight_decay`]; the plan's partition depends on neither).
///
/// Errors: [`TrainError::Model`] naming the file, also for `lr` on a plan
/// whose updates have no learning rate, `weight_decay` on a plan made
/// without weight decay, or a recorded spec that differs from `specs`.
pub fn from_plan_file(
    path: &Path,
    specs: &[(String, String)],
    data: &dyn Samples,
    (lr, weight_decay): (Option<f64>, Option<f64>),
) -> Result<Prepared, TrainError> {
    let named = |e: &dyn std::fmt::Display| TrainError::Model(format!("{}: {e}", path.display()));
    let (mut plan, lib) =
        PlanFile::load_with_specs(path, specs, &StrategyCache::new()).map_err(|e| named(&e))?;
    if let Some(lr) = lr {
        if plan.graph.set_learning_rate(lr) == 0 {
            return Err(named(&format!(
                "--lr {lr}: the plan's graph has no optimizer update with a learning rate (was it planned with --inference?)"
            )));
        }
    }
    if let Some(wd) = weight_decay {
        if plan.graph.set_weight_decay(wd) == 0 {
            return Err(named(&format!(
                "--weight-decay {wd}: the plan was made without weight decay, so its graph has no decay terms to set; plan it with `tofu plan --weight-decay`"
            )));
        }
    }
    let programs = codegen::compile(&plan, &lib).map_err(|e| named(&e))?;
    let bytes = programs.programs.iter().map(|p| p.bytes_sent()).sum();
    finish(plan, &lib, programs, bytes, data)
}

/// Find the fed tensors, check them against `data`, and generate
/// the evaluation programs.
fn finish(
    plan: BoundPlan,
    lib: &Library,
    programs: Programs,
    comm_bytes: u64,
    data: &dyn Samples,
) -> Result<Prepared, TrainError> {
    let (tensors, logits, batch) = task_tensors(&plan.graph, data)?;
    let mut unpartitioned = codegen::compile_unpartitioned(&plan, lib).map_err(err)?;
    for p in &mut unpartitioned.programs {
        p.keep_tiles(&[logits]);
    }
    Ok(Prepared {
        library: lib.clone(),
        import: plan.import,
        graph: plan.graph,
        factors: plan.factors,
        programs,
        unpartitioned,
        tensors,
        logits,
        batch,
        comm_bytes,
    })
}

/// The graph inputs `data` feeds (by name, each `[batch, …]` with the
/// data's elements per sample after the batch dim, one batch for all), the
/// loss and the logits ([`logits_of`]).
///
/// Errors: [`TrainError::Input`] naming what is missing or does not fit.
pub fn task_tensors(
    graph: &Graph,
    data: &dyn Samples,
) -> Result<(TaskTensors, TensorId, usize), TrainError> {
    let (mut inputs, mut one_hot) = (Vec::new(), Vec::new());
    let mut batch = None;
    for (name, elems) in data.inputs() {
        let t = graph_input_for(graph, name).ok_or_else(|| {
            TrainError::Input(format!(
                "the graph `{}` has no input `{name}` for the data set; its inputs are {}, the data set's tensors {} (elements per sample): map them with --input GRAPH_INPUT=TENSOR{}",
                graph.name(),
                listed(graph, fed_inputs(graph)),
                data.inputs()
                    .iter()
                    .map(|(n, e)| format!("`{n}` {e}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                match listed(graph, graph_inputs(graph).filter(|&t| generated(graph, t))) {
                    g if g.is_empty() => String::new(),
                    g => format!(" ({g} are computed from the shapes at import and need no data)"),
                },
            ))
        })?;
        let shape = &graph.tensor(t).shape;
        let (encoding, per) = fed_as(graph, t, name, elems, data.classes())?;
        if shape.is_empty() || shape[0] == 0 || per != elems * encoding.unwrap_or(1) {
            return Err(TrainError::Input(format!(
                "input `{}` (fed by the data's `{name}`) has shape {shape:?}; the data set needs [batch, …] with {elems} elements per sample: give the graph that sample shape (an ONNX model: --dim NAME=N or --input-shape; a text corpus' windows: --seq)",
                graph.tensor(t).name
            )));
        }
        one_hot.push(encoding);
        if *batch.get_or_insert(shape[0]) != shape[0] {
            return Err(TrainError::Input(format!(
                "input `{name}` has batch {} but another input has {}",
                shape[0],
                batch.unwrap_or(0)
            )));
        }
        inputs.push((t, shape[1..].to_vec()));
    }
    let loss = graph
        .loss()
        .ok_or_else(|| TrainError::Input(format!("the graph `{}` has no loss", graph.name())))?;
    let logits = logits_of(graph, loss)
        .ok_or_else(|| TrainError::Input("the loss is not computed by an operator".into()))?;
    let batch = batch.ok_or_else(|| TrainError::Input("the data set feeds no input".into()))?;
    let tensors = TaskTensors {
        inputs,
        one_hot,
        loss,
    };
    Ok((tensors, logits, batch))
}

/// How the data's input `name` (`elems` values per sample; class ids over
/// `classes` classes where it gives them) feeds the graph input `t`:
/// `Some(classes)` when the graph takes the ids one-hot encoded (dense
/// labels `[batch, …, classes]`), `None` when it takes the values as they
/// are; with the graph input's elements per sample.
///
/// Errors: [`TrainError::Input`] when the graph takes class ids and the
/// data gives probabilities, naming the input and the fix.
fn fed_as(
    graph: &Graph,
    t: TensorId,
    name: &str,
    elems: usize,
    classes: Option<usize>,
) -> Result<(Option<usize>, usize), TrainError> {
    let shape = &graph.tensor(t).shape;
    let per: usize = shape.iter().skip(1).product();
    let labels = crate::tensors::LABEL_INPUTS.contains(&name);
    match classes {
        Some(c) if labels && per != elems && per == elems * c => Ok((Some(c), per)),
        None if labels && per > 0 && elems > per && elems.is_multiple_of(per) => {
            Err(TrainError::Input(format!(
                "input `{}` takes integer class ids {shape:?} but the data's `{name}` are probabilities ({elems} values per sample): give the labels as integer class ids (int64 `[samples, …]`, -100 for a target that is not scored)",
                graph.tensor(t).name
            )))
        }
        _ => Ok((None, per)),
    }
}

/// The graph's inputs (data, not weights), in id order.
fn graph_inputs(graph: &Graph) -> impl Iterator<Item = TensorId> + '_ {
    graph
        .tensor_ids()
        .filter(|&t| graph.tensor(t).role == TensorRole::Input)
}

/// Whether graph input `t` is determined by the graph itself: a constant
/// an ONNX import folded (position ids, an attention mask computed from the
/// input's shape, constants the exporter lifted into inputs), which carries
/// its values or one value for all, so a run generates it and no data feeds
/// it unless a mapping names it.
fn generated(graph: &Graph, t: TensorId) -> bool {
    let x = graph.tensor(t);
    x.value.is_some() || matches!(x.fill, Some(tdl::Fill::Constant { .. }))
}

/// The graph inputs data feeds: [`graph_inputs`] less the [`generated`] ones.
fn fed_inputs(graph: &Graph) -> impl Iterator<Item = TensorId> + '_ {
    graph_inputs(graph).filter(move |&t| !generated(graph, t))
}

/// `` `name` [shape] `` of each of `inputs`, comma-separated.
fn listed(graph: &Graph, inputs: impl Iterator<Item = TensorId>) -> String {
    inputs
        .map(|t| format!("`{}` {:?}", graph.tensor(t).name, graph.tensor(t).shape))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The graph input a data set's tensor `name` feeds: the input of that
/// name; else, for `labels`, the graph's loss target (one of
/// [`crate::tensors::LABEL_INPUTS`], e.g. an imported ONNX model's
/// `loss.labels`); else, for `x` or `ids`, the graph's one input that is
/// not a loss target nor [`generated`], when there is exactly one. `None`
/// otherwise.
fn graph_input_for(graph: &Graph, name: &str) -> Option<TensorId> {
    use crate::tensors::LABEL_INPUTS;
    let named = |n: &str| graph_inputs(graph).find(|&t| graph.tensor(t).name == n);
    if let Some(t) = named(name) {
        return Some(t);
    }
    match name {
        "labels" => LABEL_INPUTS.iter().find_map(|n| named(n)),
        "x" | "ids" => {
            let mut data = fed_inputs(graph)
                .filter(|&t| !LABEL_INPUTS.contains(&graph.tensor(t).name.as_str()));
            let only = data.next()?;
            data.next().is_none().then_some(only)
        }
        _ => None,
    }
}

/// The logits of the loss `loss`: the loss op's first input, or, for a loss
/// in the vocabulary-parallel form (`cross_entropy_combine(m, z, p, sl)`,
/// the zoo's language models, or `softmax_cross_entropy_combine`), the first
/// input of the op producing its `z` (`cross_entropy_parts(logits, m,
/// labels)`). `None` when no
/// operator computes the loss.
fn logits_of(graph: &Graph, loss: TensorId) -> Option<TensorId> {
    let producer = |t: TensorId| graph.ops().iter().find(|op| op.outputs.contains(&t));
    let op = producer(loss)?;
    if op.spec == "softmax_cross_entropy_combine" || op.spec == "cross_entropy_combine" {
        if let Some(parts) = op.inputs.get(1).and_then(|&z| producer(z)) {
            return parts.inputs.first().copied();
        }
    }
    op.inputs.first().copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::DataSet;

    /// A zoo model is planned and compiled for its workers, with the
    /// unpartitioned evaluation programs beside.
    #[test]
    fn a_zoo_model_is_prepared_for_its_workers() {
        let d = DataSet {
            x: vec![0.5; 32 * 4],
            y: (0..32).map(|i| i % 3).collect(),
            features: 4,
            classes: 3,
        };
        let data = Data::Classes(d);
        let sgd = Optimizer::Sgd { lr: 0.1 };
        let prep = from_zoo(
            "mlp-2-8",
            (&data, 8),
            (&sgd, 0.0),
            2,
            SearchKind::CriticalDp,
        )
        .unwrap();
        assert_eq!(prep.world(), 2);
        assert_eq!(prep.unpartitioned.programs.len(), 1);
        assert_eq!(prep.batch, 8);
    }

    /// The language models' loss is Megatron's vocabulary-parallel form; the
    /// logits are found behind its combine and parts ops.
    #[test]
    fn logits_of_the_vocabulary_parallel_loss() {
        let lib = Library::shipped().unwrap();
        let g = zoo::Model::Gpt(GptConfig::tiny())
            .training(&lib, &Optimizer::Sgd { lr: 0.1 })
            .unwrap();
        let logits = logits_of(&g, g.loss().unwrap()).unwrap();
        assert_eq!(g.tensor(logits).name, "logits.y");
        assert_eq!(g.tensor(logits).shape, [2, 4, 7]);
    }
}
