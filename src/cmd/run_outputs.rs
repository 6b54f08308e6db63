//! `tofu run PLAN --save-outputs FILE.safetensors`: run the forward pass of
//! the plan once (for a training plan, the first step's forward, before
//! the update) and save the model's outputs by their ONNX names
//! ([`planner::graph::Graph::outputs`]), each assembled from the ranks'
//! tiles, so another runtime's outputs can be compared with them
//! (`scripts/compare-onnxruntime.py`).
//!
//! Values: the weights given with `--weights` (an `.onnx` file gives its
//! initializers), the inputs given with `--inputs` (one tensor per graph
//! input the outputs depend on, by name); what is not given is the seeded
//! synthetic fill (`--seed`), and then is also written to the file (inputs
//! as the run held them, weights as the fill generates them), so another
//! runtime can be fed the same values. Tensors are written at their graph
//! element types ([`codegen::given_save`]); the file is replaced atomically
//! (a temporary sibling, then a rename).

use std::collections::HashSet;
use std::path::Path;
use std::process::ExitCode;

use codegen::given_save::{to_safetensors, Named};
use codegen::Programs;
use planner::graph::execute::fill_offsets;
use planner::graph::{Graph, TensorId, TensorRole};
use runner::{Given, RunOptions};
use tdl::AttrValue;

use super::run::Args;

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

/// Run one forward pass and write `path` (see the module doc).
pub fn run(
    args: &Args,
    graph: &Graph,
    progs: &Programs,
    given: &Given,
    path: &Path,
) -> miette::Result<ExitCode> {
    if args.steps != 1 || args.verify || args.estimate.is_some() {
        return Err(miette::miette!(
            "--save-outputs runs the forward pass of one step: leave out --steps, --verify and --estimate"
        ));
    }
    let outputs = graph.outputs();
    if outputs.is_empty() {
        return Err(miette::miette!(
            help = "plan the ONNX model again with this tofu (`tofu plan MODEL.onnx -k K -o PLAN.json`): it records the model's outputs",
            "{}: the plan's graph `{}` records no named model outputs (zoo models and plans made before outputs were recorded have none)",
            args.plan.display(),
            graph.name()
        ));
    }
    let needed = ancestors(graph, outputs.iter().map(|o| o.tensor));
    let leaf = |t: &TensorId, role: TensorRole| {
        let d = graph.tensor(*t);
        d.role == role && graph.producer(*t).is_none() && d.value.is_none()
    };
    let inputs: Vec<TensorId> = needed
        .iter()
        .copied()
        .filter(|t| leaf(t, TensorRole::Input))
        .collect();
    let weights: Vec<TensorId> = needed
        .iter()
        .copied()
        .filter(|t| leaf(t, TensorRole::Weight))
        .collect();
    // Dropout's keep-masks are graph inputs of a training graph: the
    // forward saved is the deterministic one, dropout as the identity (ONNX
    // inference), so each mask is 1 − ratio (y = x·mask / (1 − ratio) = x).
    let mut given = given.clone();
    let masks = identity_dropout(graph, &mut given);
    let given = &given;
    let inputs: Vec<TensorId> = inputs.into_iter().filter(|t| !masks.contains(t)).collect();
    if let Some(file) = &args.inputs {
        if let Some(&t) = inputs.iter().find(|t| !given.contains_key(t)) {
            let d = graph.tensor(t);
            return Err(miette::miette!(
                help = format!(
                    "add `{}` (shape {:?}, {}) to the file, or leave out --inputs to run on seeded synthetic inputs",
                    d.name, d.shape, d.dtype.name()
                ),
                "{}: no tensor `{}`, a graph input the model's outputs depend on",
                file.display(),
                d.name
            ));
        }
    }
    let synthetic: Vec<TensorId> = inputs
        .iter()
        .copied()
        .filter(|t| !given.contains_key(t))
        .collect();
    let mut progs = progs.clone();
    let keep: Vec<TensorId> = outputs
        .iter()
        .map(|o| o.tensor)
        .chain(synthetic.iter().copied())
        .collect();
    for p in &mut progs.programs {
        p.keep_tiles(&keep);
    }
    let opts = RunOptions {
        steps: 1,
        seed: args.seed,
    };
    let report = super::run::execute(args, &progs, opts, None, given)?;
    let value = |t: TensorId| {
        report
            .outputs
            .iter()
            .find(|(k, _)| *k == t)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| {
                miette::miette!("internal: no rank kept tensor `{}`", graph.tensor(t).name)
            })
    };
    let named = |name: &str, t: TensorId, values: Vec<f32>| -> Named {
        let d = graph.tensor(t);
        (name.to_string(), d.dtype, d.shape.clone(), values)
    };
    let mut file: Vec<Named> = Vec::new();
    for o in outputs {
        file.push(named(&o.name, o.tensor, value(o.tensor)?));
    }
    for &t in &synthetic {
        file.push(named(&graph.tensor(t).name, t, value(t)?));
    }
    let offsets = fill_offsets(graph);
    let mut fills = 0;
    for &t in weights.iter().filter(|t| !given.contains_key(t)) {
        let d = graph.tensor(t);
        if let (Some(fill), Some(offset)) = (d.fill, offsets[t.index()]) {
            let v = fill.generate(&d.shape, args.seed, offset);
            file.push(named(&d.name, t, v.into_iter().map(|x| x as f32).collect()));
            fills += 1;
        }
    }
    let mut seen = HashSet::new();
    file.retain(|(n, ..)| seen.insert(n.clone()));
    // An inference graph (`tofu plan --inference`) has no backward and no
    // update: its forward is the model's own.
    let training = graph
        .ops()
        .iter()
        .any(|o| o.role != planner::graph::OpRole::Forward);
    let forward = if training { FORWARD } else { FORWARD_INFERENCE };
    let bytes = to_safetensors(&file, &[(FORWARD_KEY, forward)])
        .map_err(|e| miette::miette!("{}: {e}", path.display()))?;
    planner::graph::format::write_atomic(path, &bytes).map_err(|e| miette::miette!("{e}"))?;
    let names = |from: usize, n: usize| {
        file[from..from + n]
            .iter()
            .map(|f| f.0.clone())
            .collect::<Vec<_>>()
    };
    let (outs, ins) = (
        names(0, outputs.len()),
        names(outputs.len(), synthetic.len()),
    );
    if args.json {
        let v = serde_json::json!({
            "plan": args.plan.display().to_string(),
            "workers": progs.programs.len(),
            "file": path.display().to_string(),
            "outputs": outs,
            "synthetic_inputs": ins,
            "synthetic_weights": fills,
            "step_seconds": report.step_seconds,
        });
        println!("{v}");
    } else {
        println!(
            "{} on {} workers: wrote outputs {} to {}",
            graph.name(),
            progs.programs.len(),
            outs.join(", "),
            path.display()
        );
        if !ins.is_empty() || fills > 0 {
            println!(
                "with the seeded synthetic values it ran on: inputs {}; {fills} weights",
                if ins.is_empty() {
                    "none".to_string()
                } else {
                    ins.join(", ")
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The tensors `roots` depend on (themselves included), in id order.
fn ancestors(graph: &Graph, roots: impl Iterator<Item = TensorId>) -> Vec<TensorId> {
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
fn identity_dropout(graph: &Graph, given: &mut Given) -> Vec<TensorId> {
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
