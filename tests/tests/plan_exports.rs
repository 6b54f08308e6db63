//! `tofu plan` on real transformer exports (issue 41): the summary folds
//! an export's numbered layers (item 3), and the plan's bytes at k = 8
//! against Megatron-LM's tensor-parallel hand count (Done-when item 1).
//!
//! Each model is imported as `tofu plan MODEL.onnx` does (class-id loss,
//! momentum) and planned with the default search. The hand counts are
//! written out from each model's dims: Megatron TP = k keeps every
//! activation between blocks replicated and all-reduces `[B, S, h]` f32
//! four times a layer (the attention's and the MLP's output in the forward
//! pass, the input gradients of their first projections in the backward),
//! plus the vocabulary-parallel embedding's forward and an LM head's input
//! gradient; a ring all-reduce of N bytes on k workers sends 2(k−1)·N. The
//! rows above 1.02× today are ignored tests that fail until the partial
//! layout lands (the ratio measured today in the reason); run them with
//!
//! ```text
//! cargo test --release -p tofu-tests --features tofu/cuda --test plan_exports -- --ignored --nocapture
//! ```

use std::collections::BTreeSet;
use std::path::Path;

use interval::cache::StrategyCache;
use planner::graph::{Graph, OpId, Optimizer};
use planner::plan::op_groups::group_ops;
use planner::plan::{plan_with, PlanOptions, Planned, SearchKind};
use tofu_tests::workspace_root;

/// The workers of every row.
const K: u64 = 8;

/// Import `path` as `tofu plan PATH [--input-shape NAME=DIMS]` does
/// (`input_shapes`: name and dims) and plan it for k = 8 with the default
/// search.
fn plan_export(path: &Path, input_shapes: &[(&str, &[usize])]) -> (Graph, Planned) {
    plan_export_with(path, input_shapes, PlanOptions::default())
}

/// [`plan_export`] with planning options `popts` (`tofu plan --partial-sums`).
fn plan_export_with(
    path: &Path,
    input_shapes: &[(&str, &[usize])],
    popts: PlanOptions,
) -> (Graph, Planned) {
    let opts = onnx::Options {
        training: true,
        class_ids: true,
        optimizer: Optimizer::from_name("momentum"),
        input_shapes: input_shapes
            .iter()
            .map(|(n, d)| (n.to_string(), d.to_vec()))
            .collect(),
        ..Default::default()
    };
    let lib = tdl::Library::shipped().expect("shipped specs");
    let imported = onnx::load_graph_with(path, &lib, &opts)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let cache = StrategyCache::new();
    let p = plan_with(
        &imported.graph,
        &imported.library,
        &cache,
        K as usize,
        SearchKind::CriticalDp,
        popts,
    )
    .expect("planned");
    (imported.graph, p)
}

fn export(name: &str) -> std::path::PathBuf {
    workspace_root().join(format!("onnx/tests/fixtures/exports/{name}.onnx"))
}

/// Megatron TP = k's bytes a step: `all_reduces` all-reduces of
/// `[batch, seq, hidden]` f32, each 2(k−1)·N on a ring.
fn megatron_hand_count(all_reduces: u64, batch: u64, seq: u64, hidden: u64) -> f64 {
    let n = batch * seq * hidden * 4;
    (all_reduces * 2 * (K - 1) * n) as f64
}

/// The shape of the graph tensor `name` (the hand count's dims are checked
/// against the import).
fn shape(g: &Graph, name: &str) -> Vec<usize> {
    let t = g
        .tensors()
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tensor `{name}`"));
    t.shape.clone()
}

/// The plan's bytes over the hand count, printed with the command's name.
fn ratio(model: &str, p: &Planned, hand: f64) -> f64 {
    let r = p.comm_bytes as f64 / hand;
    println!(
        "{model} k={K}: plan {} bytes ({}), Megatron hand count {hand:.4e}: {r:.4}×",
        p.comm_bytes, p.choice
    );
    r
}

/// BERT-base (bert-base-uncased's configuration): 12 layers, h = 768, the
/// import's default batch 1 and sequence 128; 4 all-reduces a layer and
/// the embedding's forward (its head is the pooler on one token: no LM
/// head). 49 · 2·7 · 393,216 = 269.75e6 bytes.
fn bert() -> (Graph, Planned, f64) {
    let (g, p) = plan_export(&export("bert-base"), &[]);
    assert_eq!(shape(&g, "input_ids"), [1, 128]);
    assert_eq!(shape(&g, "embeddings.word_embeddings.weight"), [30522, 768]);
    let hand = megatron_hand_count(4 * 12 + 1, 1, 128, 768);
    (g, p, hand)
}

/// ViT-B/16 (timm vit_base_patch16_224): 12 layers, h = 768, 197 tokens
/// (196 patches and the class token), batch 1; 4 all-reduces a layer (the
/// patch embedding and the class head on one token stay replicated).
/// 48 · 2·7 · 605,184 = 406.68e6 bytes.
fn vit() -> (Graph, Planned, f64) {
    let (g, p) = plan_export(&export("vit-b16"), &[]);
    assert_eq!(shape(&g, "pixel_values"), [1, 3, 224, 224]);
    assert_eq!(shape(&g, "pos_embed"), [1, 197, 768]);
    let hand = megatron_hand_count(4 * 12, 1, 197, 768);
    (g, p, hand)
}

/// BERT's plan today, no worse than when measured (2.376×: issue 41), and
/// its summary folds the 12 layers: the heaviest groups each hold the same
/// operator of different layers. The oracle reads layers apart from the
/// folding: an encoder layer ends in two LayerNorms (after attention and
/// after the MLP) and the embedding in one, so a forward operator's layer
/// is (LayerNorms before it − 1) / 2, and a backward operator `bwd/NAME/…`
/// is in its forward operator's layer.
#[test]
fn bert_export_plans_and_its_summary_folds_the_layers() {
    let (g, p, hand) = bert();
    assert!(ratio("bert-base", &p, hand) <= 2.38, "worse than measured");
    let groups = group_ops(&g, &p.op_comm_bytes);
    let layer = layers_by_layer_norms(&g);
    for grp in groups.iter().take(10) {
        let members: Vec<&str> = grp.members.iter().map(|&m| name(&g, m)).collect();
        println!("{} ×{} {:?}", grp.pattern, members.len(), &members[..2]);
        // One operator a layer, of one spec and one set of shapes.
        let layers: BTreeSet<usize> = grp
            .members
            .iter()
            .map(|&m| {
                let fwd = forward_name(name(&g, m));
                *layer
                    .get(fwd)
                    .unwrap_or_else(|| panic!("`{fwd}` is in no layer"))
            })
            .collect();
        assert_eq!(
            layers.len(),
            members.len(),
            "{}: two in a layer",
            grp.pattern
        );
        assert!(
            members.len() >= 11,
            "{}: {} members, BERT-base has 12 layers",
            grp.pattern,
            members.len()
        );
        let shapes = |m: OpId| {
            let op = g.op(m);
            let s = |ts: &[planner::graph::TensorId]| {
                ts.iter()
                    .map(|&t| g.tensor(t).shape.clone())
                    .collect::<Vec<_>>()
            };
            (op.spec.clone(), s(&op.inputs), s(&op.outputs))
        };
        assert!(grp
            .members
            .iter()
            .all(|&m| shapes(m) == shapes(grp.members[0])));
        let bytes: u64 = grp.members.iter().map(|m| p.op_comm_bytes[m.index()]).sum();
        assert_eq!(bytes, grp.comm_bytes);
    }
    assert!(
        groups
            .iter()
            .take(10)
            .filter(|grp| grp.members.len() == 12)
            .count()
            >= 5
    );
}

fn name(g: &Graph, id: OpId) -> &str {
    &g.op(id).name
}

/// `bwd/NAME/x` → `NAME` (the part between the first and last `/`);
/// a forward name stays.
fn forward_name(name: &str) -> &str {
    match name.strip_prefix("bwd/") {
        Some(rest) => rest.rsplit_once('/').map_or(rest, |(fwd, _)| fwd),
        None => name,
    }
}

/// Forward operator name → encoder layer: with `before` LayerNorms ahead
/// of an operator in graph order, layer (before − 1) / 2 for 1 ≤ before ≤
/// 24 (see the test's doc; the pooler and loss come after the 25th).
fn layers_by_layer_norms(g: &Graph) -> std::collections::BTreeMap<&str, usize> {
    let mut out = std::collections::BTreeMap::new();
    let mut before = 0;
    for op in g.ops().iter().take_while(|op| !op.name.starts_with("bwd/")) {
        if (1..=24).contains(&before) {
            out.insert(op.name.as_str(), (before - 1) / 2);
        }
        before += usize::from(op.spec == "layernorm");
    }
    out
}

#[test]
#[ignore = "issue 41: ratio 2.376 today (plan 640,965,760 bytes, hand count 269.75e6)"]
fn bert_export_moves_at_most_1_02_times_megatron_at_k_8() {
    at_most_1_02_times_megatron("bert-base", bert);
}

/// Done-when item 1's row of `model` (the plan, hand count from `row`).
fn at_most_1_02_times_megatron(model: &str, row: fn() -> (Graph, Planned, f64)) {
    let (_, p, hand) = row();
    assert!(ratio(model, &p, hand) <= 1.02);
}

/// ViT's plan today, no worse than when measured (1.722×: issue 41).
#[test]
fn vit_export_plans_no_worse_than_measured() {
    let (_, p, hand) = vit();
    assert!(ratio("vit-b16", &p, hand) <= 1.722, "worse than measured");
}

#[test]
#[ignore = "issue 41: ratio 1.722 today (plan 700,199,584 bytes, hand count 406.68e6)"]
fn vit_export_moves_at_most_1_02_times_megatron_at_k_8() {
    at_most_1_02_times_megatron("vit-b16", vit);
}

/// The LLaMA-7B-shaped `decoder` example (`onnx::synth`): 32 layers,
/// h = 4096, batch 1, sequence 2048; 4 all-reduces a layer, the embedding's
/// forward and the LM head's input gradient: 130 · 2·7 · 33,554,432 =
/// 61.07e9 bytes (the issue's count). Seconds in a release build.
#[test]
#[ignore = "issue 41: ratio 1.651 today (plan 100,799,610,920 bytes, hand count 61.07e9)"]
fn decoder_moves_at_most_1_02_times_megatron_at_k_8() {
    decoder_at_most_1_02_times_megatron(PlanOptions::default());
}

/// The decoder row with partial-sum layouts (`tofu plan --partial-sums`,
/// issue 41 item 1; plans not executable yet): 60,534,292,520 bytes,
/// 0.991× the hand count (2026-11-29, debug build).
#[test]
#[ignore = "issue 41: the 7B decoder planned at k = 8 (seconds in a release build)"]
fn decoder_with_partial_sums_moves_at_most_1_02_times_megatron_at_k_8() {
    decoder_at_most_1_02_times_megatron(PlanOptions {
        partial_sums: true,
        ..PlanOptions::default()
    });
}

/// Plan the LLaMA-7B-shaped decoder at batch 1, sequence 2048 with `popts`
/// and assert ≤ 1.02× Megatron's hand count.
fn decoder_at_most_1_02_times_megatron(popts: PlanOptions) {
    let cfg = onnx::synth::DecoderConfig::llama_7b();
    let dir = tofu_tests::temp_dir("plan-exports-decoder");
    let path = dir.join("llama7b.onnx");
    std::fs::write(&path, onnx::synth::to_bytes(&onnx::synth::decoder(&cfg))).unwrap();
    let (g, p) = plan_export_with(&path, &[("input_ids", &[1, 2048])], popts);
    assert_eq!((cfg.layers, cfg.d_model), (32, 4096));
    assert_eq!(shape(&g, "input_ids"), [1, 2048]);
    let hand = megatron_hand_count(4 * 32 + 2, 1, 2048, 4096);
    assert!((hand - 61.07e9).abs() < 0.01e9, "{hand}");
    assert!(ratio("decoder", &p, hand) <= 1.02);
}
