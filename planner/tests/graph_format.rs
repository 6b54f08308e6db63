//! The graph JSON format: exact round trips (zoo graphs and random small
//! graphs, property-tested) and malformed files (an error naming the field
//! and the position, never a panic).

use planner::graph::format::{from_json, load, save, to_json, FormatError};
use planner::graph::{
    float, DType, Fill, Graph, GraphBuilder, GraphOutput, MemoryReport, Optimizer, TensorId,
};
use planner::zoo::{GptConfig, MlpConfig, Model, RnnConfig, WResNetConfig};
use proptest::prelude::*;
use tdl::Library;

fn lib() -> &'static Library {
    use std::sync::OnceLock;
    static LIB: OnceLock<Library> = OnceLock::new();
    LIB.get_or_init(|| Library::shipped().expect("shipped specs load"))
}

fn assert_round_trip(g: &Graph) {
    let text = to_json(g);
    let back = from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", g.name()));
    assert_eq!(&back, g, "{}: graph differs after a round trip", g.name());
    assert_eq!(
        to_json(&back),
        text,
        "{}: text differs after a round trip",
        g.name()
    );
    back.check_shapes(lib()).unwrap();
}

fn tiny_models() -> Vec<Model> {
    vec![
        Model::Mlp(MlpConfig::tiny()),
        Model::WResNet(WResNetConfig::tiny()),
        Model::Rnn(RnnConfig::tiny()),
        Model::Gpt(GptConfig::tiny()),
    ]
}

#[test]
fn zoo_graphs_round_trip_exactly() {
    for m in tiny_models() {
        for opt in ["sgd", "momentum", "adam"] {
            let g = m
                .training(lib(), &Optimizer::from_name(opt).unwrap())
                .unwrap();
            assert_round_trip(&g);
        }
        assert_round_trip(&m.forward(lib()).unwrap());
    }
    assert_round_trip(
        &Model::parse("wresnet-50-4")
            .unwrap()
            .training(lib(), &Optimizer::default())
            .unwrap(),
    );
}

#[test]
fn save_and_load_a_file() {
    let dir = std::env::temp_dir().join(format!("tofu-graph-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("g.json");
    let g = Model::Rnn(RnnConfig::tiny())
        .training(lib(), &Optimizer::default())
        .unwrap();
    save(&g, &path).unwrap();
    assert_eq!(load(&path).unwrap(), g);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers.len(),
        1,
        "temporary files left behind: {leftovers:?}"
    );
    assert!(matches!(
        load(&dir.join("missing.json")),
        Err(FormatError::Io { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// ±inf attributes (a one-sided clamp: ONNX `Clip` with `max = inf`) are
/// kept, written as `"inf"` / `"-inf"` and read back exactly; NaN is
/// refused by the builder, naming the operator and the attribute.
#[test]
fn infinite_attributes_round_trip_and_nan_is_refused() {
    let mut b = GraphBuilder::new(lib(), "clamp");
    let x = b
        .input("x", &[2, 3], DType::F32, Fill::Normal { std: 1.0 })
        .unwrap();
    let w = b.weight("w", &[3, 3], 0.5).unwrap();
    let h = b.op1("matmul", "fc", &[x, w], &[]).unwrap();
    let lo = b
        .op1(
            "clip",
            "floor_only",
            &[h],
            &[("min", float(0.0)), ("max", float(f64::INFINITY))],
        )
        .unwrap();
    let y = b
        .op1(
            "clip",
            "ceiling_only",
            &[lo],
            &[("min", float(f64::NEG_INFINITY)), ("max", float(6.0))],
        )
        .unwrap();
    let labels = b
        .input("labels", &[2, 3], DType::F32, Fill::Probabilities)
        .unwrap();
    let loss = b
        .op1("softmax_cross_entropy", "loss", &[y, labels], &[])
        .unwrap();
    let fwd = b.finish(loss).unwrap();
    let g = planner::graph::training_graph(&fwd, lib(), &Optimizer::default()).unwrap();
    let text = to_json(&g);
    assert!(text.contains(r#""max": "inf""#), "{text}");
    assert!(text.contains(r#""min": "-inf""#), "{text}");
    assert_round_trip(&g);
    // The clip gradients carry the bounds too.
    let grads = g.ops().iter().filter(|o| o.spec == "clip_grad").count();
    assert_eq!(grads, 2);

    let mut b = GraphBuilder::new(lib(), "nan");
    let x = b
        .input("x", &[2], DType::F32, Fill::Normal { std: 1.0 })
        .unwrap();
    let err = b
        .op1("clip", "bad", &[x], &[("max", float(f64::NAN))])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`bad`") && err.contains("`max`") && err.contains("NaN"),
        "{err}"
    );
    let bad = text.replace(r#""max": "inf""#, r#""max": "infinity""#);
    assert!(from_json(&bad).is_err());
}

/// A valid small graph file to corrupt.
fn sample_text() -> String {
    to_json(
        &Model::Mlp(MlpConfig {
            layers: 2,
            hidden: 3,
            input: 2,
            classes: 2,
            batch: 2,
        })
        .training(lib(), &Optimizer::default())
        .unwrap(),
    )
}

fn json_err(text: &str) -> (String, usize, usize, String) {
    match from_json(text) {
        Err(FormatError::Json {
            path,
            line,
            column,
            message,
        }) => (path, line, column, message),
        other => panic!("expected a JSON error, got {other:?}"),
    }
}

#[test]
fn syntax_error_gives_line_and_column() {
    let text = sample_text();
    let cut = &text[..text.len() / 2];
    let (_, line, column, message) = json_err(cut);
    assert!(line > 1 && column > 0, "{line}:{column} {message}");
    let (_, line, column, _) =
        json_err("{\n  \"format\": \"tofu-graph\",\n  \"version\": 1,\n  oops\n}");
    assert_eq!((line, column), (4, 3));
}

#[test]
fn wrong_type_names_the_field() {
    let text = sample_text();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut bad = v.clone();
    bad["ops"][1]["inputs"][0] = serde_json::json!("x");
    let (path, line, _, message) = json_err(&serde_json::to_string_pretty(&bad).unwrap());
    assert_eq!(path, "ops[1].inputs[0]");
    assert!(line > 1);
    assert!(message.contains("invalid type"), "{message}");

    let mut bad = v.clone();
    bad["tensors"][0]["shape"][0] = serde_json::json!(-3);
    let (path, ..) = json_err(&serde_json::to_string_pretty(&bad).unwrap());
    assert_eq!(path, "tensors[0].shape[0]");

    let mut bad = v.clone();
    bad["tensors"][2]["role"] = serde_json::json!("weights");
    let (path, _, _, message) = json_err(&serde_json::to_string_pretty(&bad).unwrap());
    assert_eq!(path, "tensors[2].role");
    assert!(message.contains("unknown variant"), "{message}");
}

#[test]
fn missing_and_unknown_fields_are_named() {
    let v: serde_json::Value = serde_json::from_str(&sample_text()).unwrap();
    let mut bad = v.clone();
    bad["ops"][0].as_object_mut().unwrap().remove("spec");
    let (path, _, _, message) = json_err(&serde_json::to_string_pretty(&bad).unwrap());
    assert_eq!(path, "ops[0]");
    assert!(message.contains("missing field `spec`"), "{message}");

    let mut bad = v.clone();
    bad["tensors"][1]["colour"] = serde_json::json!("red");
    let (path, _, _, message) = json_err(&serde_json::to_string_pretty(&bad).unwrap());
    assert_eq!(path, "tensors[1].colour");
    assert!(message.contains("unknown field"), "{message}");
}

#[test]
fn broken_references_are_named() {
    let v: serde_json::Value = serde_json::from_str(&sample_text()).unwrap();
    let invalid = |bad: &serde_json::Value| match from_json(&serde_json::to_string(bad).unwrap()) {
        Err(FormatError::Invalid(e)) => e.to_string(),
        other => panic!("expected an invalid-graph error, got {other:?}"),
    };
    let mut bad = v.clone();
    bad["ops"][0]["inputs"][1] = serde_json::json!(9999);
    let msg = invalid(&bad);
    assert!(
        msg.starts_with("ops[0].inputs[1]: tensor id 9999 is out of range"),
        "{msg}"
    );

    let mut bad = v.clone();
    let ops = bad["ops"].as_array_mut().unwrap();
    ops.swap(0, 1);
    let msg = invalid(&bad);
    assert!(msg.contains("topological order"), "{msg}");

    let mut bad = v.clone();
    bad["tensors"][0]["group"] = serde_json::json!(100000);
    assert!(invalid(&bad).starts_with("tensors[0].group: group id 100000"));

    let mut bad = v.clone();
    let first_out = bad["ops"][0]["outputs"][0].clone();
    bad["ops"][1]["outputs"][0] = first_out;
    assert!(invalid(&bad).contains("is already produced by ops[0]"));
}

/// The model's named outputs (ONNX graph outputs) round-trip, survive
/// the training graph, and a bad one is named.
#[test]
fn named_outputs_round_trip_and_bad_ones_are_named() {
    let mut g = Model::Mlp(MlpConfig::tiny()).forward(lib()).unwrap();
    let last = TensorId(g.tensors().len() as u32 - 1);
    let outputs = vec![GraphOutput {
        name: "logits".into(),
        tensor: last,
    }];
    g.set_outputs(outputs.clone()).unwrap();
    assert_round_trip(&g);
    let trained = planner::graph::training_graph(&g, lib(), &Optimizer::default()).unwrap();
    assert_eq!(trained.outputs(), &outputs[..]);
    let mut v: serde_json::Value = serde_json::from_str(&to_json(&g)).unwrap();
    assert_eq!(v["outputs"][0]["name"], "logits");
    v["outputs"][0]["tensor"] = serde_json::json!(9999);
    match from_json(&v.to_string()) {
        Err(FormatError::Invalid(e)) => assert!(
            e.to_string()
                .starts_with("outputs[0]: tensor id 9999 is out of range"),
            "{e}"
        ),
        other => panic!("expected an invalid-graph error, got {other:?}"),
    }
    let twice = vec![outputs[0].clone(), outputs[0].clone()];
    assert!(g
        .set_outputs(twice)
        .unwrap_err()
        .to_string()
        .contains("given twice"));
    let no_outputs = Model::Mlp(MlpConfig::tiny()).forward(lib()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&to_json(&no_outputs)).unwrap();
    assert!(v.get("outputs").is_none(), "absent when empty");
}

#[test]
fn foreign_and_newer_files_are_refused() {
    let v: serde_json::Value = serde_json::from_str(&sample_text()).unwrap();
    let mut bad = v.clone();
    bad["version"] = serde_json::json!(2);
    assert!(matches!(
        from_json(&bad.to_string()),
        Err(FormatError::Version { found: 2 })
    ));
    let mut bad = v.clone();
    bad["format"] = serde_json::json!("onnx");
    assert!(matches!(
        from_json(&bad.to_string()),
        Err(FormatError::NotAGraph { .. })
    ));
    assert!(matches!(from_json("[]"), Err(FormatError::Json { .. })));
    assert!(matches!(from_json(""), Err(FormatError::Json { .. })));
}

/// A random small graph: tensors of shape [n, n], random elementwise,
/// `add`, `matmul` and `scale` ops over earlier tensors (so tensors are
/// used several times), a cross-entropy loss, and a training graph.
fn random_graph(n: usize, steps: &[(u8, usize, usize, f64)], opt: u8) -> Graph {
    let mut b = GraphBuilder::new(lib(), "random");
    let x = b
        .input("x", &[n, n], DType::F32, Fill::Normal { std: 1.0 })
        .unwrap();
    let labels = b
        .input("labels", &[n, n], DType::F32, Fill::Probabilities)
        .unwrap();
    let w0 = b.weight("w0", &[n, n], 0.5).unwrap();
    let mut pool: Vec<TensorId> = vec![x, w0];
    for (i, &(kind, a, c, alpha)) in steps.iter().enumerate() {
        let a = pool[a % pool.len()];
        let c = pool[c % pool.len()];
        let name = format!("op{i}");
        let t = match kind % 6 {
            0 => b.op1("relu", &name, &[a], &[]),
            1 => b.op1("tanh", &name, &[a], &[]),
            2 => b.op1("add", &name, &[a, c], &[]),
            3 => b.op1("matmul", &name, &[a, c], &[]),
            4 => b.op1("scale", &name, &[a], &[("alpha", float(alpha))]),
            _ => {
                let w = b
                    .weight(&format!("w{}", i + 1), &[n, n], alpha.abs() + 0.1)
                    .unwrap();
                b.op1("matmul", &name, &[a, w], &[])
            }
        }
        .unwrap();
        pool.push(t);
    }
    let last = *pool.last().unwrap();
    let mixed = b.op1("matmul", "mix", &[last, w0], &[]).unwrap();
    let loss = b
        .op1("softmax_cross_entropy", "loss", &[mixed, labels], &[])
        .unwrap();
    let fwd = b.finish(loss).unwrap();
    let opt = match opt % 3 {
        0 => Optimizer::Sgd { lr: 0.01 },
        1 => Optimizer::Momentum {
            lr: 0.1,
            momentum: 0.9,
        },
        _ => Optimizer::Adam {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        },
    };
    planner::graph::training_graph(&fwd, lib(), &opt).unwrap()
}

fn zoo_config() -> impl Strategy<Value = Model> {
    prop_oneof![
        (1usize..4, 1usize..9, 1usize..5, 1usize..5, 1usize..4).prop_map(
            |(layers, hidden, input, classes, batch)| Model::Mlp(MlpConfig {
                layers,
                hidden,
                input,
                classes,
                batch
            })
        ),
        (
            1usize..3,
            1usize..3,
            1usize..3,
            prop::sample::select(vec![8usize, 16, 32]),
            1usize..4
        )
            .prop_map(
                |(b0, widen, base, image, batch)| Model::WResNet(WResNetConfig {
                    depth: 50,
                    blocks: [b0, 1, 1, 1],
                    widen,
                    base,
                    image,
                    classes: 3,
                    batch
                })
            ),
        (
            1usize..3,
            1usize..5,
            1usize..4,
            1usize..4,
            2usize..6,
            1usize..3
        )
            .prop_map(|(layers, hidden, embed, steps, vocab, batch)| {
                Model::Rnn(RnnConfig {
                    layers,
                    hidden,
                    embed,
                    steps,
                    vocab,
                    batch,
                })
            }),
        (
            1usize..3,
            1usize..3,
            1usize..3,
            1usize..5,
            2usize..6,
            1usize..3
        )
            .prop_map(|(layers, heads, dh, seq, vocab, batch)| {
                Model::Gpt(GptConfig {
                    layers,
                    d_model: heads * dh,
                    heads,
                    d_ff: 2 * heads * dh,
                    seq,
                    vocab,
                    batch,
                })
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_zoo_configs_round_trip(model in zoo_config(), opt in 0u8..3, lr in -1e3f64..1e3) {
        let opt = match opt {
            0 => Optimizer::Sgd { lr },
            1 => Optimizer::Momentum { lr, momentum: lr / 7.0 },
            _ => Optimizer::Adam { lr, beta1: 0.9, beta2: 0.999, eps: lr.abs() * 1e-9 },
        };
        let g = model.training(lib(), &opt).unwrap();
        assert_round_trip(&g);
    }

    #[test]
    fn random_small_graphs_round_trip(
        n in 1usize..5,
        steps in prop::collection::vec((0u8..6, 0usize..50, 0usize..50, -10.0f64..10.0), 0..12),
        opt in 0u8..3,
    ) {
        let g = random_graph(n, &steps, opt);
        assert_round_trip(&g);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Corrupting a valid file anywhere gives a graph or an error, never a panic.
    #[test]
    fn random_corruption_never_panics(
        edits in prop::collection::vec((0.0f64..1.0, 0u8..4, any::<u8>(), 0usize..20), 1..4),
    ) {
        let mut bytes = sample_text().into_bytes();
        for (pos, kind, byte, len) in edits {
            let i = ((bytes.len() as f64) * pos) as usize;
            let i = i.min(bytes.len());
            match kind {
                0 => { bytes.truncate(i); }
                1 => { let j = (i + len).min(bytes.len()); bytes.drain(i..j); }
                2 => { bytes.insert(i, byte); }
                _ => if i < bytes.len() { bytes[i] = b"0123456789-.e\"[]{},:tn"[byte as usize % 22]; },
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        match from_json(&text) {
            Ok(g) => {
                // Whatever loads keeps the invariants the rest of tofu relies on.
                let _ = MemoryReport::of(&g);
                let order = g.topo_order();
                prop_assert_eq!(order.len(), g.ops().len());
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}
