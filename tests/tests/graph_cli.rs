//! End-to-end tests of `tofu graph`: the summary (text and `--json`), the
//! graph file written with `-o` (loads back as a tofu graph), and errors for
//! unknown models.
//!
//! The binary is built like in `check_cli.rs` (`cargo build -p tofu --profile
//! test`, same target directory); `TOFU_BIN` overrides the path.

use tofu_tests::tofu;

#[test]
fn json_summary_has_the_documented_fields() {
    let out = tofu(&["graph", "--model", "mlp-2-8", "--batch", "4", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    // mlp-2-8: two 8×8 weights and two biases of 8.
    assert_eq!(v["parameters"], 2 * (8 * 8 + 8));
    assert_eq!(v["parameter_bytes"], 4 * 2 * (8 * 8 + 8));
    assert_eq!(v["training_state_bytes"], 3 * 4 * 2 * (8 * 8 + 8));
    assert_eq!(v["batch"], 4);
    for field in [
        "ops",
        "tensors",
        "peak_activation_bytes",
        "gradient_bytes",
        "optimizer_state_bytes",
    ] {
        assert!(v[field].as_u64().is_some_and(|n| n > 0), "{field}: {v}");
    }
}

#[test]
fn text_summary_and_graph_file() {
    let dir = std::env::temp_dir().join(format!("tofu-graph-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rnn.json");
    let out = tofu(&[
        "graph",
        "--model",
        "rnn-2-64",
        "--batch",
        "2",
        "--optimizer",
        "adam",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "operators",
        "tensors",
        "parameters",
        "optimizer state",
        "peak",
    ] {
        assert!(text.contains(word), "{word} missing from:\n{text}");
    }
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(file["format"], "tofu-graph");
    assert_eq!(file["version"], 1);
    assert_eq!(file["name"], "rnn-2-64");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unknown_model_is_an_error() {
    let out = tofu(&["graph", "--model", "wresnet-34-2"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("50, 101 or 152"), "{err}");
}
