//! `tofu graph FILE.onnx ...`: import an ONNX model and summarise its graph.
//!
//! Takes the ONNX options of `tofu graph` ([`ImportOptions`]); prints
//! ([`onnx::ImportReport`], [`planner::graph::summary::GraphSummary`]) the same
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
use onnx::{ImportOptions, ImportReport};
use planner::graph::summary::{summary_fields, GraphSummary};
use planner::graph::{format, MemoryReport};

use super::lib_err;

/// Run `tofu graph FILE.onnx`.
pub fn run(
    (file, lib): (&Path, &tdl::Library),
    args: &ImportOptions,
    output: Option<&PathBuf>,
    json: bool,
) -> miette::Result<ExitCode> {
    let opts = args.options().map_err(lib_err)?;
    let imported = onnx::load_graph_with(file, lib, &opts).map_err(lib_err)?;
    let graph = &imported.graph;
    if let Some(path) = output {
        format::save(graph, path).into_diagnostic()?;
    }
    let mem = MemoryReport::of(graph);
    let report = ImportReport {
        file,
        options: args,
        summary: &imported.summary,
    };
    if json {
        let mut summary = report.json_fields();
        summary.extend(summary_fields(graph, &mem));
        println!("{}", serde_json::Value::Object(summary));
        return Ok(ExitCode::SUCCESS);
    }
    let summary = GraphSummary {
        graph,
        memory: &mem,
    };
    print!("{report}{summary}");
    if let Some(p) = output {
        println!("wrote        {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
