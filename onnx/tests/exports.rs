//! Real exports import for inference and for training and plan at k = 4
//! without `--opaque-unsupported` (issue 15, "GPU-made exports"): BERT-base,
//! GPT-2 small, ViT-B/16 and ResNet-50 as torch.onnx's dynamo exporter
//! writes them (opset 18, dynamic batch / sequence axes), graph only — the
//! weights were external data and are not in the repository, so these also
//! check that tofu plans from the graph alone (issue 15 item 6). The fixtures
//! and `VERSIONS.txt` are written by `scripts/export-onnx-fixtures.py`
//! (see `fixtures/exports/README.md`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use interval::cache::StrategyCache;
use planner::graph::OpRole;
use planner::plan::{plan, SearchKind};

fn library() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/exports")
        .join(format!("{name}.onnx"))
}

/// The input shapes a user passes (`--input-shape`): batch 2, sequence 128
/// for the text models (35 for the LSTM LM), 224×224 images.
fn shapes(name: &str) -> BTreeMap<String, Vec<usize>> {
    let s = |v: &[(&str, &[usize])]| {
        v.iter()
            .map(|(n, d)| (n.to_string(), d.to_vec()))
            .collect::<BTreeMap<_, _>>()
    };
    match name {
        "bert-base" => s(&[("input_ids", &[2, 128]), ("attention_mask", &[2, 128])]),
        "gpt2" => s(&[("input_ids", &[2, 128])]),
        "lstm-lm" => s(&[("input_ids", &[2, 35])]),
        _ => s(&[("pixel_values", &[2, 3, 224, 224])]),
    }
}

/// Import `name` for inference and training and plan the training graph at
/// k = 4; gives a one-line summary. Panics (naming the step) on failure.
fn import_and_plan(name: &str) -> String {
    let path = fixture(name);
    let base = onnx::Options {
        input_shapes: shapes(name),
        ..Default::default()
    };
    let inference = onnx::load_graph_with(&path, library(), &base)
        .unwrap_or_else(|e| panic!("{name}: inference import: {e}"));
    assert!(
        inference.summary.opaque.is_empty(),
        "{name}: opaque nodes without --opaque-unsupported"
    );
    let opts = onnx::Options {
        training: true,
        ..base
    };
    let training = onnx::load_graph_with(&path, library(), &opts)
        .unwrap_or_else(|e| panic!("{name}: training import: {e}"));
    let g = &training.graph;
    assert!(
        g.ops().iter().any(|o| o.role == OpRole::Backward),
        "{name}: the training graph has no backward operators"
    );
    let cache = StrategyCache::new();
    let p = plan(g, &training.library, &cache, 4, SearchKind::CriticalDp)
        .unwrap_or_else(|e| panic!("{name}: plan at k = 4: {e}"));
    assert_eq!(p.memory.len(), 4, "{name}: memory of 4 workers");
    let s = format!(
        "{name}: {} forward ops, {} training ops, {:.1} MiB max per worker at k = 4",
        inference.graph.ops().len(),
        g.ops().len(),
        p.memory.iter().map(|m| m.total()).max().unwrap_or(0) as f64 / (1u64 << 20) as f64
    );
    println!("{s}");
    s
}

#[test]
fn bert_base_imports_trains_and_plans() {
    import_and_plan("bert-base");
}

#[test]
fn gpt2_imports_trains_and_plans() {
    import_and_plan("gpt2");
}

#[test]
fn vit_b16_imports_trains_and_plans() {
    import_and_plan("vit-b16");
}

#[test]
fn resnet50_imports_trains_and_plans() {
    import_and_plan("resnet50");
}

/// The LSTM language model goes through the ONNX `LSTM` lowering
/// (`onnx/src/rnn/`), unrolled over its time steps.
#[test]
fn lstm_lm_imports_trains_and_plans() {
    import_and_plan("lstm-lm");
}

/// The fixtures are graph-only: every float initializer of 1 KiB or more is
/// external data whose file is absent, so importing reads no weight byte.
#[test]
fn fixtures_hold_no_weights() {
    for name in ["bert-base", "gpt2", "vit-b16", "resnet50", "lstm-lm"] {
        let path = fixture(name);
        let bytes = std::fs::metadata(&path).unwrap().len();
        assert!(bytes < 2 << 20, "{name}: {bytes} bytes");
        assert!(!path.with_file_name("weights.bin").exists());
        let model = onnx::proto::read(&path).unwrap().proto;
        let g = model.graph.as_ref().unwrap();
        assert!(
            g.initializer.iter().any(onnx::external::is_external),
            "{name}: no external initializer"
        );
    }
}

/// What a run of an export needs beyond its graph (issue 27 item 1): the
/// integer inputs that carry token ids get ids inside the embedding tables
/// they index (GPT-2's `input_ids` in its 50,257-row vocabulary), folded
/// constants keep their values (GPT-2's position ids 0..127), and a `Pow`
/// whose exponent is a known scalar (GELU's 3, which the exporter lifted
/// into an initializer) becomes `pow_scalar`: the exponent is not trained
/// (its gradient would be ln of a negative base).
#[test]
fn gpt2_leaves_carry_what_a_run_needs() {
    use planner::graph::{DType, Fill};
    let opts = onnx::Options {
        input_shapes: shapes("gpt2"),
        training: true,
        ..Default::default()
    };
    let g = onnx::load_graph_with(&fixture("gpt2"), library(), &opts)
        .unwrap()
        .graph;
    let named = |n: &str| {
        g.tensors()
            .iter()
            .find(|t| t.name == n)
            .unwrap_or_else(|| panic!("no tensor `{n}`"))
    };
    let ids = named("input_ids");
    assert_eq!(ids.dtype, DType::I64);
    assert_eq!(ids.fill, Some(Fill::Indices { bound: 50257 }));
    let positions = g
        .tensors()
        .iter()
        .find(|t| t.dtype == DType::I64 && t.value.is_some())
        .expect("the folded position ids keep their values");
    let want: Vec<f64> = (0..128).map(f64::from).collect();
    assert_eq!(positions.value.as_deref(), Some(&want[..]));
    assert_eq!(g.ops().iter().filter(|o| o.spec == "pow").count(), 0);
    assert_eq!(
        g.ops().iter().filter(|o| o.spec == "pow_scalar").count(),
        12,
        "one GELU x³ per layer"
    );
}
