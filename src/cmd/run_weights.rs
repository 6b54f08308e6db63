//! `tofu run PLAN --weights MODEL.onnx`: every value the import took from
//! the model, by graph tensor name.
//!
//! A model's values are not only its initializers: exporters (Paddle, the
//! spox builder of silero-vad) put weights in `Constant` nodes, inside `If`
//! branches (the importer names them `IF/then_branch/NAME`), and the import
//! folds views of them (`Reshape` of a bias) into new weight tensors; int8
//! initializers (a quantized MiniLM) become constant leaves, not weights.
//! So when the plan records how its graph was imported ([`record`], the
//! plan file's `import`), the model is imported again with those options
//! and every leaf whose value the import knew (`onnx::Imported::leaf_values`:
//! weights and constants, float and integer, at their element type converted
//! to the runner's f32, exact for integers up to 2^24) is given, matched to
//! the plan's graph by name and checked by shape. A plan without the record
//! (written before it existed) gets the initializers only, as before.

use std::path::Path;

use planner::graph::{Graph, TensorId};
use runner::given::{from_named, Kind};
use runner::Given;
use serde_json::{json, Value};

use super::graph_onnx::OnnxArgs;

/// The plan file's `import` record of an ONNX import with these options.
pub fn record(args: &OnnxArgs) -> Value {
    json!({"onnx": {
        "batch": args.batch,
        "dim": args.dims,
        "input_shape": args.input_shapes,
        "input_value": args.input_values,
        "loss": args.loss,
        "optimizer": args.optimizer,
        "opaque_unsupported": args.opaque_unsupported,
        "training": args.training,
    }})
}

/// The importer options of a plan file's `import` record; `None` when it
/// records no ONNX import. Errors name the plan file.
fn options_of(plan: &Path, import: &Value) -> miette::Result<Option<onnx::Options>> {
    let Some(o) = import.get("onnx") else {
        return Ok(None);
    };
    let bad = |what: &str| {
        miette::miette!(
            help = "plan the model again with this tofu (`tofu plan MODEL.onnx …`)",
            "{}: the `import` record's `{what}` is not what tofu writes",
            plan.display()
        )
    };
    let strings = |key: &str| -> miette::Result<Vec<String>> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(v) => serde_json::from_value(v.clone()).map_err(|_| bad(key)),
        }
    };
    let args = OnnxArgs {
        batch: match o.get("batch") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| bad("batch"))? as usize),
        },
        dims: strings("dim")?,
        input_shapes: strings("input_shape")?,
        input_values: strings("input_value")?,
        training: o.get("training").and_then(Value::as_bool).unwrap_or(true),
        loss: o.get("loss").and_then(Value::as_str).map(String::from),
        optimizer: o
            .get("optimizer")
            .and_then(Value::as_str)
            .unwrap_or("sgd")
            .to_string(),
        opaque_unsupported: o
            .get("opaque_unsupported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        output: None,
        json: false,
    };
    super::graph_onnx::options(&args).map(Some)
}

/// The values `model` gives the plan's `graph` (see the module doc).
pub fn read_onnx(
    graph: &Graph,
    plan: &Path,
    import: Option<&Value>,
    model: &Path,
) -> miette::Result<Given> {
    let name = model.display().to_string();
    let opts = match import {
        Some(v) => options_of(plan, v)?,
        None => None,
    };
    let Some(opts) = opts else {
        return initializers(graph, model);
    };
    let lib = tdl::Library::shipped().map_err(|e| miette::miette!("{e}"))?;
    let imported = onnx::load_graph_with(model, &lib, &opts).map_err(|e| {
        miette::miette!(
            help = "pass the model the plan was made from (`tofu plan MODEL.onnx …`)",
            "{e}"
        )
    })?;
    let by_name: std::collections::HashMap<&str, TensorId> = graph
        .tensor_ids()
        .map(|t| (graph.tensor(t).name.as_str(), t))
        .collect();
    let mut given = Given::new();
    for (t, known) in &imported.leaf_values {
        let leaf = imported.graph.tensor(*t);
        let Some(&p) = by_name.get(leaf.name.as_str()) else {
            continue;
        };
        let decl = graph.tensor(p);
        if graph.producer(p).is_some() || decl.shape != leaf.shape {
            return Err(miette::miette!(
                help = "pass the model the plan was made from, or plan this model again",
                "{name}: `{}` (shape {:?}) is not the plan's leaf of that name (shape {:?}{})",
                leaf.name,
                leaf.shape,
                decl.shape,
                if graph.producer(p).is_some() {
                    ", computed"
                } else {
                    ""
                }
            ));
        }
        let data = known
            .data()
            .map_err(|e| miette::miette!("{name}: `{}`: {e}", leaf.name))?;
        given.insert(p, data.values.iter().map(|&x| x as f32).collect());
    }
    Ok(given)
}

/// The model's initializers as weights, by name (plans without an
/// `import` record).
fn initializers(graph: &Graph, model: &Path) -> miette::Result<Given> {
    let name = model.display().to_string();
    let bytes = std::fs::read(model).map_err(|e| miette::miette!("{name}: {e}"))?;
    let proto = onnx::proto::decode(&bytes, model).map_err(|e| miette::miette!("{e}"))?;
    let mut tensors = Vec::new();
    for t in &proto.proto.graph.initializer {
        let d =
            onnx::tensor::decode(t).map_err(|e| miette::miette!("{name}: `{}`: {e}", t.name))?;
        tensors.push((
            t.name.clone(),
            d.shape,
            d.values.iter().map(|&x| x as f32).collect(),
        ));
    }
    from_named(graph, &name, tensors, Kind::Weights, true).map_err(|e| miette::miette!("{e}"))
}
