//! The models people export import for inference and for training and plan
//! at k = 4 without `--opaque-unsupported` (issue 15): the nine light models
//! and the real exported models fetched by `scripts/fetch-onnx-models.sh`
//! (YOLOv8n from nudenet 3.4.2; a 6-layer int8 MiniLM). Each model is
//! either in [`EXPECTED`] — it must pass — or its failure is printed.
//!
//! The real models need operators of the `onnx-ops` branch (Resize for
//! YOLOv8n; GatherND and DequantizeLinear / DynamicQuantizeLinear for
//! MiniLM): once merged with it, a model that passes is reported as
//! "passes: add it to EXPECTED".

mod common;

use std::path::Path;

use interval::cache::StrategyCache;
use planner::graph::OpRole;
use planner::plan::{plan, SearchKind};

/// Models that must import and plan on this branch.
const EXPECTED: &[&str] = &[
    "light_bvlc_alexnet",
    "light_densenet121",
    "light_inception_v1",
    "light_inception_v2",
    "light_resnet50",
    "light_shufflenet",
    "light_squeezenet",
    "light_vgg19",
    "light_zfnet512",
    "nudenet-320n",
    "minilm-int8",
];

fn library() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

/// Import for inference and training and plan the training graph at k = 4.
fn import_and_plan(path: &Path) -> Result<String, String> {
    let inference = onnx::load_graph_with(path, library(), &onnx::Options::default())
        .map_err(|e| format!("inference import: {e}"))?;
    let opts = onnx::Options {
        training: true,
        ..Default::default()
    };
    let training = onnx::load_graph_with(path, library(), &opts)
        .map_err(|e| format!("training import: {e}"))?;
    let g = &training.graph;
    if !g.ops().iter().any(|o| o.role == OpRole::Backward) {
        return Err("the training graph has no backward operators".into());
    }
    let cache = StrategyCache::new();
    let p = plan(g, &training.library, &cache, 4, SearchKind::CriticalDp)
        .map_err(|e| format!("plan at k = 4: {e}"))?;
    if p.memory.len() != 4 {
        return Err(format!("memory of {} workers reported", p.memory.len()));
    }
    Ok(format!(
        "{} forward ops, {} training ops, {:.1} MiB max per worker at k = 4",
        inference.graph.ops().len(),
        g.ops().len(),
        p.memory.iter().map(|m| m.total()).max().unwrap_or(0) as f64 / (1u64 << 20) as f64
    ))
}

#[test]
fn models_import_for_inference_and_training_and_plan_at_k4() {
    let Some(dir) = common::data_dir() else {
        return;
    };
    let mut models: Vec<(String, std::path::PathBuf)> = common::LIGHT
        .iter()
        .map(|n| (n.to_string(), dir.join("light").join(format!("{n}.onnx"))))
        .collect();
    if let Some(mdir) = common::models_dir() {
        models.extend(
            common::REAL
                .iter()
                .map(|(n, f)| (n.to_string(), mdir.join(f))),
        );
    }
    let mut failures = Vec::new();
    let mut passed = 0;
    for (name, path) in &models {
        let expected = EXPECTED.contains(&name.as_str());
        match import_and_plan(path) {
            Ok(s) => {
                passed += 1;
                let note = if expected {
                    ""
                } else {
                    " (passes: add it to EXPECTED)"
                };
                println!("PASS {name}: {s}{note}");
            }
            Err(e) if expected => failures.push(format!("{name}: {e}")),
            Err(e) => println!("not yet {name}: {e}"),
        }
    }
    println!("{passed} of {} models import and plan", models.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `--opaque-unsupported` works on the real models, which declare no
/// intermediate shapes: the output shapes of nodes without a spec come from
/// folding and the ONNX type information (`onnx::opaque_shape`).
#[test]
fn real_models_import_with_opaque_unsupported() {
    let Some(mdir) = common::models_dir() else {
        return;
    };
    for (name, file) in common::REAL {
        let opts = onnx::Options {
            opaque_unsupported: true,
            ..Default::default()
        };
        let imported = onnx::load_graph_with(&mdir.join(file), library(), &opts)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut ops: Vec<&str> = imported
            .summary
            .opaque
            .iter()
            .map(|o| o.op_type.as_str())
            .collect();
        ops.sort();
        ops.dedup();
        println!(
            "{name}: {} operators, opaque op types {ops:?}",
            imported.graph.ops().len()
        );
    }
}
