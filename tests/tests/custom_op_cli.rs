//! A custom ONNX operator planned, run and trained from its TDL spec
//! (issue 43, item 3).
//!
//! The operator is `swiglu` (`tdl/tests/user_specs/swiglu.tdl`: a fused,
//! scaled SwiGLU with its gradients, whose finite-difference check is
//! `tdl/tests/gradients.rs`), copied into a temporary directory as a user
//! would write it. The model, written here as ONNX without PyTorch, is
//! `logits = MatMul(SwiGLU(MatMul(x, w1), MatMul(x, w2); alpha = 0.5), w3)`
//! (x: [16, 64], logits: [16, 10], the shapes of the digits data set) with
//! the node `y` of the custom domain `com.example`, mapped by the spec's
//! doc line `onnx: com.example::SwiGLU`. It is committed as
//! `onnx/tests/fixtures/swiglu-mlp.onnx` for the guide
//! (`docs/guide/operator-spec.md`, which writes the spec verbatim).
//!
//! Oracles: `tofu run --verify` (the partitioned run equals the
//! unpartitioned one, which runs the same specs on one worker), the bytes
//! sent equal the plan's predicted bytes, and the plan splits the custom
//! operator (its strategy at every level is not `replicate`). Errors: a
//! custom node with no spec names `--specs` and `--op-map`, an attribute
//! of the wrong type names the spec's declaration, a spec without
//! gradients on a weight's path names the node in a training import.

mod run_outputs_common;

use std::path::Path;

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{AttributeProto, ModelProto, OperatorSetIdProto};
use protobuf::Message;
use run_outputs_common::{model, node, random};
use tofu_tests::{have_digits, temp_dir, text, tofu, workspace_root};

/// The user spec, as the guide writes it.
fn swiglu_spec() -> String {
    std::fs::read_to_string(workspace_root().join("tdl/tests/user_specs/swiglu.tdl"))
        .expect("the swiglu spec")
}

/// The model of the module doc; `alpha` is the SwiGLU node's attribute.
fn swiglu_onnx(alpha: AttributeProto) -> Vec<u8> {
    let w = |r: i64, c: i64, seed| {
        (
            vec![r, c],
            random((r * c) as usize, seed)
                .iter()
                .map(|v| v * 0.4)
                .collect(),
        )
    };
    let (w1, w2, w3) = (w(64, 32, 1), w(64, 32, 2), w(32, 10, 3));
    let mut swiglu = node("SwiGLU", &["a", "b"], "y", &[]);
    swiglu.domain = "com.example".into();
    swiglu.attribute.push(alpha);
    let bytes = model(
        ("x", &[16, 64]),
        &[("w1", w1.0, w1.1), ("w2", w2.0, w2.1), ("w3", w3.0, w3.1)],
        vec![
            node("MatMul", &["x", "w1"], "a", &[]),
            node("MatMul", &["x", "w2"], "b", &[]),
            swiglu,
            node("MatMul", &["y", "w3"], "logits", &[]),
        ],
        &[("logits", &[16, 10])],
    );
    let mut m = ModelProto::parse_from_bytes(&bytes).unwrap();
    let mut op = OperatorSetIdProto::new();
    op.domain = "com.example".into();
    op.version = 1;
    m.opset_import.push(op);
    m.write_to_bytes().unwrap()
}

fn float_attr(name: &str, f: f32) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::FLOAT.into();
    a.f = f;
    a
}

/// `tofu ARGS` (strings), with status and output.
fn run(args: &[&str]) -> (bool, String, String) {
    let o = tofu(args);
    let (out, err) = text(&o);
    (o.status.success(), out, err)
}

/// A directory with `myops/swiglu.tdl` and `model.onnx` (alpha = 0.5).
fn setup(name: &str) -> std::path::PathBuf {
    let dir = temp_dir(name);
    std::fs::create_dir_all(dir.join("myops")).unwrap();
    std::fs::write(dir.join("myops/swiglu.tdl"), swiglu_spec()).unwrap();
    std::fs::write(
        dir.join("model.onnx"),
        swiglu_onnx(float_attr("alpha", 0.5)),
    )
    .unwrap();
    dir
}

/// Plan `source` for `k` workers with the user specs and check that the
/// SwiGLU operator `y` is split; run it with `--verify` and check bytes.
fn plan_and_verify(dir: &Path, source: &Path, k: usize) {
    let (s, specs) = (dir.join(format!("plan{k}.json")), dir.join("myops"));
    let (ok, out, err) = run(&[
        "plan",
        source.to_str().unwrap(),
        "-k",
        &k.to_string(),
        "--specs",
        specs.to_str().unwrap(),
        "-o",
        s.to_str().unwrap(),
    ]);
    assert!(ok, "plan k={k}: {out}\n{err}");
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&s).unwrap()).unwrap();
    let op = plan["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["spec"] == "swiglu")
        .expect("the swiglu op");
    let strategies: Vec<&str> = op["strategies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        !strategies.is_empty() && strategies.iter().all(|s| *s != "replicate"),
        "k={k}: swiglu is not split: {strategies:?}"
    );
    let (ok, out, err) = run(&["run", s.to_str().unwrap(), "--verify", "--json"]);
    assert!(ok, "run k={k}: {out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(
        v["bytes_sent_per_rank"], v["predicted_bytes_per_rank"],
        "{v}"
    );
}

#[test]
fn a_custom_onnx_operator_is_partitioned_and_runs_from_its_spec() {
    let dir = setup("custom-op");
    let specs = dir.join("myops");
    let model = dir.join("model.onnx");

    let (ok, out, err) = run(&[
        "strategies",
        "swiglu",
        "--specs",
        specs.to_str().unwrap(),
        "--parts",
        "4",
    ]);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.lines().filter(|l| l.contains("split")).count() >= 2,
        "splits of swiglu:\n{out}"
    );

    for k in [2, 4] {
        plan_and_verify(&dir, &model, k);
    }
    // The same through a graph file.
    let g = dir.join("g.json");
    let (ok, out, err) = run(&[
        "graph",
        model.to_str().unwrap(),
        "--training",
        "--specs",
        specs.to_str().unwrap(),
        "-o",
        g.to_str().unwrap(),
    ]);
    assert!(ok, "{out}\n{err}");
    plan_and_verify(&dir, &g, 4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn custom_operator_errors_say_how_to_fix_them() {
    let dir = setup("custom-op-errors");
    let specs = dir.join("myops");
    let model = dir.join("model.onnx");
    // No spec for the node: the message names --specs and --op-map.
    let (ok, _, err) = run(&["plan", model.to_str().unwrap(), "-k", "2"]);
    assert!(!ok);
    assert!(
        err.contains("--specs") && err.contains("--op-map com.example::SwiGLU=SPEC"),
        "{err}"
    );

    // An attribute of the wrong type (a list of ints for `alpha: float`).
    let mut ints = AttributeProto::new();
    ints.name = "alpha".into();
    ints.type_ = AttributeType::INTS.into();
    ints.ints = vec![1, 2];
    let bad = dir.join("bad.onnx");
    std::fs::write(&bad, swiglu_onnx(ints)).unwrap();
    let (ok, _, err) = run(&[
        "plan",
        bad.to_str().unwrap(),
        "-k",
        "2",
        "--specs",
        specs.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        err.contains("attribute `alpha`") && err.contains("`alpha: float`"),
        "{err}"
    );

    // Mapped to a spec with a required attribute the node lacks.
    let req = dir.join("req.tdl");
    let text = "/// SwiGLU with a required gamma. Source: the custom-op test.\n\
                op swiglu_req<alpha: float = 1.0, gamma: float>(a[N, H], b[N, H]) -> y[N, H] {\n    \
                y[n, h] = gamma * alpha * a[n, h] * b[n, h];\n}\n";
    std::fs::write(&req, text).unwrap();
    let (ok, _, err) = run(&[
        "plan",
        model.to_str().unwrap(),
        "-k",
        "2",
        "--inference",
        "--specs",
        req.to_str().unwrap(),
        "--op-map",
        "com.example::SwiGLU=swiglu_req",
    ]);
    assert!(!ok);
    assert!(
        err.contains("no attribute `gamma`, which the spec `swiglu_req` requires"),
        "{err}"
    );

    // Mapped by --op-map to a spec without gradients: a training import
    // names the node and the spec; the inference import works.
    let nograd = dir.join("nograd.tdl");
    let text = "/// SwiGLU without gradients. Source: the custom-op test.\n\
                op swiglu_nograd<alpha: float = 1.0>(a[N, H], b[N, H]) -> y[N, H] {\n    \
                y[n, h] = alpha * a[n, h] * sigmoid(a[n, h]) * b[n, h];\n}\n";
    std::fs::write(&nograd, text).unwrap();
    let map = "com.example::SwiGLU=swiglu_nograd";
    let (ok, _, err) = run(&[
        "plan",
        model.to_str().unwrap(),
        "-k",
        "2",
        "--specs",
        nograd.to_str().unwrap(),
        "--op-map",
        map,
    ]);
    assert!(!ok);
    assert!(
        err.contains("node `y`") && err.contains("`swiglu_nograd`"),
        "{err}"
    );
    assert!(
        err.contains("add `grad INPUT = OP(...);` declarations to the spec"),
        "{err}"
    );
    let (ok, out, err) = run(&[
        "plan",
        model.to_str().unwrap(),
        "-k",
        "2",
        "--inference",
        "--specs",
        nograd.to_str().unwrap(),
        "--op-map",
        map,
    ]);
    assert!(ok, "{out}\n{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_guide_uses_this_spec_and_this_model() {
    let path = workspace_root().join("onnx/tests/fixtures/swiglu-mlp.onnx");
    let bytes = swiglu_onnx(float_attr("alpha", 0.5));
    if std::env::var_os("TOFU_UPDATE_FIXTURES").is_some() {
        std::fs::write(&path, &bytes).unwrap();
    }
    let fixture = std::fs::read(&path).expect("the fixture (TOFU_UPDATE_FIXTURES=1 writes it)");
    assert!(
        fixture == bytes,
        "{} is not the test's model: TOFU_UPDATE_FIXTURES=1 rewrites it",
        path.display()
    );
    let guide =
        std::fs::read_to_string(workspace_root().join("docs/guide/operator-spec.md")).unwrap();
    assert!(
        guide.contains(&swiglu_spec()),
        "the guide must write tdl/tests/user_specs/swiglu.tdl verbatim"
    );
}

#[test]
fn a_plan_of_the_custom_operator_trains_without_its_spec_files() {
    if !have_digits() {
        return;
    }
    let dir = setup("custom-op-train");
    let (model, plan) = (dir.join("model.onnx"), dir.join("plan.json"));
    let specs = dir.join("myops");
    let (ok, out, err) = run(&[
        "plan",
        model.to_str().unwrap(),
        "-k",
        "2",
        "--specs",
        specs.to_str().unwrap(),
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert!(ok, "{out}\n{err}");
    std::fs::remove_dir_all(&specs).unwrap();
    let (ok, out, err) = run(&[
        "train",
        plan.to_str().unwrap(),
        "--data",
        "digits",
        "--steps",
        "30",
        "--json",
    ]);
    assert!(ok, "{out}\n{err}");
    let last: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let acc = last["test_accuracy"].as_f64().expect("a held-out accuracy");
    assert!(
        acc > 0.3,
        "after 30 steps the held-out accuracy is {acc} (10 classes: chance is 0.1)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
