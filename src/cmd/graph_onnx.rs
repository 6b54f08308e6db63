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

/// The ONNX fields of the `--json` object.
fn summary_json(
    file: &Path,
    args: &ImportOptions,
    opts: &onnx::Options,
    s: &onnx::Summary,
) -> serde_json::Map<String, serde_json::Value> {
    let mapped: usize = s.mapped.values().sum();
    let folded: usize = s.folded.values().sum();
    let summary = serde_json::json!({
            "model": s.model,
            "file": file.display().to_string(),
            "training": args.training,
            "batch": opts.dims.batch.unwrap_or(onnx::dims::DEFAULT_BATCH),
            "optimizer": if args.training { Some(args.optimizer.clone()) } else { None },
            "opsets": s.opsets,
            "onnx_nodes": s.nodes,
            "mapped_nodes": mapped,
            "folded_nodes": folded,
            "mapped_op_types": s.mapped,
            "folded_op_types": s.folded,
            "opaque_op_types": s.opaque.iter().fold(std::collections::BTreeMap::<&str, usize>::new(), |mut m, o| {
                *m.entry(o.op_type.as_str()).or_default() += 1;
                m
            }),
            "defaulted_dims": s.defaulted_dims.iter().map(|d| serde_json::json!({
                "input": d.input, "axis": d.axis, "name": d.name, "value": d.value, "rule": d.rule,
            })).collect::<Vec<_>>(),
            "opaque": s.opaque.iter().map(|o| serde_json::json!({
                "node": o.node, "op_type": o.op_type, "spec": o.spec,
            })).collect::<Vec<_>>(),
            "loss": s.loss,
    });
    match summary {
        serde_json::Value::Object(m) => m,
        _ => unreachable!("json! of an object literal is an object"),
    }
}

/// The ONNX lines of the text summary.
fn print_onnx(file: &Path, args: &ImportOptions, s: &onnx::Summary) {
    let mapped: usize = s.mapped.values().sum();
    let folded: usize = s.folded.values().sum();
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
