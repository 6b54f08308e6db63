//! `tofu graph FILE.onnx ...`: import an ONNX model and summarise its graph.
//!
//! Takes the ONNX options of `tofu graph` ([`ImportOptions`]); prints the same
//! summary as for zoo models (operators by role, tensors, parameters,
//! training state and peak activation bytes) plus the ONNX facts: opsets,
//! nodes mapped and folded, dims that took a default, opaque nodes and the
//! loss. `--json` prints one object with the zoo fields and `onnx_nodes`,
//! `mapped_nodes`, `folded_nodes`, `mapped_op_types` / `folded_op_types` /
//! `opaque_op_types` (op type → node count), `opsets`, `defaulted_dims`, `opaque`,
//! `loss`, `training`. `-o` writes the graph file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use miette::IntoDiagnostic;
use onnx::ImportOptions;
use planner::graph::{format, MemoryReport};

use super::graph_summary::{graph_fields, print_graph_summary};
use super::lib_err;

/// Run `tofu graph FILE.onnx`.
pub fn run(
    file: &Path,
    args: &ImportOptions,
    output: Option<&PathBuf>,
    json: bool,
) -> miette::Result<ExitCode> {
    let opts = args.options().map_err(lib_err)?;
    let imported = onnx::load_graph(file, &opts).map_err(lib_err)?;
    let graph = &imported.graph;
    if let Some(path) = output {
        format::save(graph, path).into_diagnostic()?;
    }
    let mem = MemoryReport::of(graph);
    if json {
        let mut summary = summary_json(file, args, &opts, &imported.summary);
        summary.extend(graph_fields(graph, &mem));
        println!("{}", serde_json::Value::Object(summary));
        return Ok(ExitCode::SUCCESS);
    }
    print_onnx(file, args, &imported.summary);
    print_graph_summary(graph, &mem);
    if let Some(p) = output {
        println!("wrote        {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The ONNX fields of the `--json` object ([`onnx::Summary::json_fields`]
/// and the options).
fn summary_json(
    file: &Path,
    args: &ImportOptions,
    opts: &onnx::Options,
    s: &onnx::Summary,
) -> serde_json::Map<String, serde_json::Value> {
    let mut m = s.json_fields();
    let optimizer = args.training.then(|| args.optimizer.clone());
    m.insert("file".into(), file.display().to_string().into());
    m.insert("training".into(), args.training.into());
    m.insert(
        "batch".into(),
        opts.dims.batch.unwrap_or(onnx::dims::DEFAULT_BATCH).into(),
    );
    m.insert("optimizer".into(), optimizer.into());
    m
}

/// The ONNX lines of the text summary.
fn print_onnx(file: &Path, args: &ImportOptions, s: &onnx::Summary) {
    let (mapped, folded) = (s.mapped_nodes(), s.folded_nodes());
    let opsets: Vec<String> = s.opsets.iter().map(|(d, v)| format!("{d} {v}")).collect();
    println!("model        {} ({})", s.model, file.display());
    println!("opsets       {}", opsets.join(", "));
    println!(
        "onnx nodes   {} ({mapped} mapped, {folded} folded at import, {} opaque)",
        s.nodes,
        s.opaque.len()
    );
    if !s.folded.is_empty() {
        let f: Vec<String> = s.folded.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!("folded       {}", f.join(", "));
    }
    for d in &s.defaulted_dims {
        println!(
            "default dim  input `{}` axis {} (`{}`) = {} ({} default; set with {})",
            d.input,
            d.axis,
            d.name,
            d.value,
            d.rule,
            if d.rule == "batch" {
                "--batch".to_string()
            } else {
                format!("--dim {}=N", d.name)
            }
        );
    }
    for o in &s.opaque {
        println!(
            "opaque       node `{}` ({}) → spec `{}`",
            o.node, o.op_type, o.spec
        );
    }
    if let Some(l) = &s.loss {
        println!("loss         on `{l}` (optimizer {})", args.optimizer);
    }
}
