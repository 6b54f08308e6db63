//! `tofu graph FILE.onnx ...`: import an ONNX model and summarise its graph.
//!
//! Takes the ONNX options of `tofu graph` ([`OnnxArgs`]); prints the same
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
use planner::graph::{format, MemoryReport, Optimizer};

use super::graph_summary::{graph_fields, print_graph_summary};

/// The ONNX-related options of `tofu graph`.
pub struct OnnxArgs {
    /// `--batch`.
    pub batch: Option<usize>,
    /// `--dim name=value`.
    pub dims: Vec<String>,
    /// `--input-shape NAME=D0,D1,...`.
    pub input_shapes: Vec<String>,
    /// `--input-value NAME=V[,V…]`.
    pub input_values: Vec<String>,
    /// `--training`.
    pub training: bool,
    /// `--loss`.
    pub loss: Option<String>,
    /// `--optimizer`.
    pub optimizer: String,
    /// `--opaque-unsupported`.
    pub opaque_unsupported: bool,
    /// `-o`.
    pub output: Option<PathBuf>,
    /// `--json`.
    pub json: bool,
}

/// Parse the ONNX options into importer options.
pub fn options(args: &OnnxArgs) -> miette::Result<onnx::Options> {
    let mut opts = onnx::Options {
        training: args.training,
        loss: args.loss.clone(),
        opaque_unsupported: args.opaque_unsupported,
        ..Default::default()
    };
    if let Some(b) = args.batch {
        if b == 0 {
            return Err(miette::miette!("--batch must be at least 1"));
        }
        opts.dims.batch = Some(b);
    }
    for d in &args.dims {
        let (name, value) = d
            .split_once('=')
            .and_then(|(n, v)| Some((n.trim(), v.trim().parse::<usize>().ok()?)))
            .filter(|(n, v)| !n.is_empty() && *v > 0)
            .ok_or_else(|| {
                miette::miette!("--dim `{d}`: expected NAME=VALUE with a positive integer, e.g. --dim seq_len=512")
            })?;
        opts.dims.named.insert(name.to_string(), value);
    }
    for spec in &args.input_shapes {
        let (name, dims) = parse_input_shape(spec)?;
        opts.input_shapes.insert(name, dims);
    }
    for spec in &args.input_values {
        let (name, values) = parse_input_value(spec)?;
        opts.fixed_inputs.insert(name, values);
    }
    opts.optimizer = Some(Optimizer::from_name(&args.optimizer).ok_or_else(|| {
        miette::miette!(
            "unknown optimizer `{}`: expected sgd, momentum or adam",
            args.optimizer
        )
    })?);
    Ok(opts)
}

/// Parse `--input-shape NAME=D0,D1,...` (the name may itself hold `=`: the
/// last one separates; an empty list is a scalar input).
pub fn parse_input_shape(spec: &str) -> miette::Result<(String, Vec<usize>)> {
    let bad = || {
        miette::miette!(
            "--input-shape `{spec}`: expected NAME=D0,D1,... with positive integers, e.g. --input-shape images=1,3,320,320"
        )
    };
    let (name, dims) = spec.rsplit_once('=').ok_or_else(bad)?;
    let name = name.trim();
    if name.is_empty() {
        return Err(bad());
    }
    let dims = dims.trim();
    let dims: Vec<usize> = if dims.is_empty() {
        Vec::new()
    } else {
        dims.split(',')
            .map(|d| d.trim().parse::<usize>().ok().filter(|&v| v > 0))
            .collect::<Option<_>>()
            .ok_or_else(bad)?
    };
    Ok((name.to_string(), dims))
}

/// Parse `--input-value NAME=V[,V…]`: a graph input fixed to these values
/// (row-major) at import (the name may itself hold `=`: the last one separates).
pub fn parse_input_value(spec: &str) -> miette::Result<(String, Vec<f64>)> {
    let bad = || {
        miette::miette!(
            "--input-value `{spec}`: expected NAME=V[,V…] with numbers, e.g. --input-value sample_rate=16000"
        )
    };
    let (name, values) = spec.rsplit_once('=').ok_or_else(bad)?;
    let name = name.trim();
    if name.is_empty() {
        return Err(bad());
    }
    let values: Vec<f64> = values
        .split(',')
        .map(|v| v.trim().parse::<f64>().ok().filter(|v| !v.is_nan()))
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    Ok((name.to_string(), values))
}

/// Run `tofu graph FILE.onnx`.
pub fn run(file: &Path, args: &OnnxArgs) -> miette::Result<ExitCode> {
    let opts = options(args)?;
    let imported = onnx::load_graph(file, &opts).map_err(|e| miette::miette!("{e}"))?;
    let graph = &imported.graph;
    let s = &imported.summary;
    if let Some(path) = &args.output {
        format::save(graph, path).into_diagnostic()?;
    }
    let mem = MemoryReport::of(graph);
    let mapped: usize = s.mapped.values().sum();
    let folded: usize = s.folded.values().sum();
    if args.json {
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
        let mut summary = match summary {
            serde_json::Value::Object(m) => m,
            _ => unreachable!("json! of an object literal is an object"),
        };
        summary.extend(graph_fields(graph, &mem));
        println!("{}", serde_json::Value::Object(summary));
        return Ok(ExitCode::SUCCESS);
    }
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
    print_graph_summary(graph, &mem);
    if let Some(p) = &args.output {
        println!("wrote        {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
