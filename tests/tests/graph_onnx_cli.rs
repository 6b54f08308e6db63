//! End-to-end tests of `tofu graph FILE.onnx` (issue 5): the ResNet-50
//! light model's training graph as JSON, and a clear error for a file that
//! is not ONNX. The model comes from the fetched ONNX test data
//! (`scripts/fetch-onnx-data.sh`); without it the test fails under CI and
//! prints SKIPPED locally.

use std::path::PathBuf;

use tofu_tests::{tofu, workspace_root};

fn onnx_cache() -> Option<PathBuf> {
    let dir = std::env::var_os("TOFU_ONNX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/tofu/onnx-1.22.0")
        });
    if dir.join("light").is_dir() {
        return Some(dir);
    }
    let msg = format!(
        "ONNX test data not in {}: run `bash scripts/fetch-onnx-data.sh`",
        dir.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{msg}");
    eprintln!("SKIPPED: {msg}");
    None
}

#[test]
fn resnet50_training_graph_as_json() {
    let Some(dir) = onnx_cache() else { return };
    let model = dir.join("light/light_resnet50.onnx");
    let out = tofu(&["graph", model.to_str().unwrap(), "--training", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["training"], true);
    assert_eq!(v["onnx_nodes"], 415);
    assert_eq!(v["mapped_nodes"], 176);
    assert!(v["backward_ops"].as_u64().unwrap() > 0);
    assert!(v["update_ops"].as_u64().unwrap() > 0);
    // Trainable parameters: batch-norm running statistics are not trained.
    assert_eq!(v["parameters"], 25_557_032);
}

#[test]
fn json_lists_mapped_folded_and_opaque_op_types() {
    let Some(dir) = onnx_cache() else { return };
    let model = dir.join("light/light_resnet50.onnx");
    let out = tofu(&["graph", model.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    // ResNet-50 has 53 convolutions (49 in the bottlenecks, 4 projections).
    assert_eq!(v["mapped_op_types"]["Conv"], 53);
    let sum = |k: &str| -> u64 {
        v[k].as_object()
            .unwrap()
            .values()
            .map(|x| x.as_u64().unwrap())
            .sum()
    };
    assert_eq!(sum("mapped_op_types"), v["mapped_nodes"].as_u64().unwrap());
    assert_eq!(sum("folded_op_types"), v["folded_nodes"].as_u64().unwrap());
    assert_eq!(v["opaque_op_types"], serde_json::json!({}));
}

#[test]
fn input_shape_must_fit_the_model() {
    let Some(dir) = onnx_cache() else { return };
    let model = dir.join("light/light_squeezenet.onnx");
    let m = model.to_str().unwrap();
    let ok = tofu(&["graph", m, "--input-shape", "data_0=1,3,224,224", "--json"]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let bad = tofu(&["graph", m, "--input-shape", "data_0=1,3,225,224"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("axis 2") && err.contains("224"), "{err}");
    let unknown = tofu(&["graph", m, "--input-shape", "nope=1"]);
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        err.contains("not a graph input") && err.contains("data_0"),
        "{err}"
    );
}

#[test]
fn non_onnx_file_is_a_clear_error() {
    let path = workspace_root().join("Cargo.toml");
    let out = tofu(&["graph", path.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a valid ONNX model"), "{err}");
}

/// `--dim NAME=V` with a name no graph input has is an error listing the
/// model's dim names (it used to be ignored, the dim taking its default);
/// the right name is taken. The model: the BERT export of
/// `onnx/tests/fixtures/exports` (dims `batch` and `sequence`).
#[test]
fn a_dim_name_the_model_lacks_is_an_error_listing_its_dims() {
    let model = workspace_root().join("onnx/tests/fixtures/exports/bert-base.onnx");
    let m = model.to_str().unwrap();
    let bad = tofu(&["graph", m, "--dim", "seq_len=64"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    for part in ["bert-base.onnx", "`seq_len`", "`batch`", "`sequence`"] {
        assert!(err.contains(part), "`{part}` missing from: {err}");
    }
    let ok = tofu(&["graph", m, "--dim", "sequence=64", "--json"]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&ok.stdout).expect("one JSON object");
    let defaulted = v["defaulted_dims"].as_array().unwrap();
    assert!(
        defaulted.iter().all(|d| d["name"] != "sequence"),
        "`sequence` was given, not defaulted: {defaulted:?}"
    );
}

/// Issue 26 item 3: an `If` on a graph input's value (a sample rate) is an
/// error naming the input and `--input-value`; with the flag the input
/// folds, the branch is taken, and `tofu plan` plans it. The model:
/// `onnx/tests/fixtures/if-sample-rate.onnx` (built by
/// `onnx/tests/input_values.rs`).
#[test]
fn an_if_on_an_input_value_needs_input_value_and_takes_the_branch() {
    let model = workspace_root().join("onnx/tests/fixtures/if-sample-rate.onnx");
    let m = model.to_str().unwrap();
    let bad = tofu(&["graph", m]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    for part in [
        "if-sample-rate.onnx",
        "graph input `sample_rate`",
        "--input-value sample_rate=V",
    ] {
        assert!(err.contains(part), "`{part}` missing from: {err}");
    }
    for (rate, taken) in [("16000", "Relu"), ("8000", "Neg")] {
        let flag = format!("sample_rate={rate}");
        let ok = tofu(&["graph", m, "--input-value", &flag, "--json"]);
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&ok.stdout).expect("one JSON object");
        assert!(
            v["mapped_op_types"].get(taken).is_some(),
            "{rate}: {}",
            v["mapped_op_types"]
        );
    }
    let plan = tofu(&[
        "plan",
        m,
        "--workers",
        "2",
        "--input-value",
        "sample_rate=16000",
    ]);
    assert!(
        plan.status.success(),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    let bad_value = tofu(&["graph", m, "--input-value", "sample_rate=fast"]);
    assert!(!bad_value.status.success());
    let err = String::from_utf8_lossy(&bad_value.stderr);
    assert!(err.contains("expected NAME=V[,V…]"), "{err}");
}
