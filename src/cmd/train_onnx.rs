//! `tofu train … --save-onnx OUT.onnx --onnx-model MODEL.onnx`: the model
//! with its initializers replaced by the trained weights
//! ([`onnx::with_trained_initializers`]), written atomically.

use std::collections::HashMap;

use planner::graph::Graph;
use program::given::Given;

use super::lib_err;
use super::train::Args;

/// Write `--save-onnx` from `weights` (whole tensors by `graph`'s ids),
/// when asked; says on stderr what was and was not replaced.
pub fn save_onnx(args: &Args, graph: &Graph, weights: &Given) -> miette::Result<()> {
    let Some(out) = &args.save_onnx else {
        return Ok(());
    };
    let trained_onnx = args.plan.as_ref().filter(|p| super::train::is_onnx(p));
    let Some(model) = args.onnx_model.as_ref().or(trained_onnx) else {
        return Err(miette::miette!(
            "--save-onnx {}: name the ONNX model the plan was made from with --onnx-model MODEL.onnx",
            out.display()
        ));
    };
    let named: HashMap<String, Vec<f32>> = weights
        .iter()
        .map(|(&t, v)| (graph.tensor(t).name.clone(), v.clone()))
        .collect();
    let trained = onnx::with_trained_initializers(model, &named).map_err(lib_err)?;
    if trained.replaced.is_empty() {
        return Err(miette::miette!(
            "--save-onnx: no trained weight is an initializer of {}: is it the model the plan was made from?",
            model.display()
        ));
    }
    durable::write_atomic(out, &trained.bytes)
        .map_err(|e| miette::miette!("--save-onnx {}: {e}", out.display()))?;
    eprintln!("wrote {}: {trained}", out.display());
    Ok(())
}
