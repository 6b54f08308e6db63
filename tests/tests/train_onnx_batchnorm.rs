//! Batch normalization's running statistics train (issue 38): an ONNX
//! model `x[16, 1, 8, 8] → Conv 1×1 (3 channels) → BatchNormalization →
//! Flatten → Gemm → logits`, trained by `tofu train MODEL.onnx` on 2 and 4
//! workers on scikit-learn's digits with `--save-onnx`. The saved model's
//! `running_mean` / `running_var` are the node's running statistics after
//! the run, as PyTorch's `train()` leaves its buffers — for the node in
//! inference mode (what the dynamo exporter writes for a module in
//! `train()`) and in training mode (TorchScript's `TrainingMode.TRAINING`,
//! its momentum read from the node).
//!
//! Oracle: the recurrence of ONNX BatchNormalization (training mode),
//! `r ← r·momentum + s·(1 − momentum)` with the batch mean and biased
//! variance over (b, h, w), computed here in f64 from the batches the run
//! exports (`--export-batches`) and the convolution's weights, which a
//! learning rate of 1e-20 keeps as written (`--lr` must be positive; the
//! test checks they did not move). Before the fix the saved statistics were the
//! model's own, unchanged.
//!
//! Needs `digits.csv` (`scripts/fetch-digits.sh`); without it the test
//! prints `SKIPPED`, and fails under `CI`.

mod run_outputs_common;

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::AttributeProto;
use run_outputs_common::{model, node, random, read_f32};
use tofu_tests::{have_digits, temp_dir, text, tofu};

const STEPS: usize = 6;
const C: usize = 3;

/// The model; `training_mode`: the node in training mode with its running
/// statistics outputs and momentum `momentum`.
fn bn_model(
    training_mode: bool,
    momentum: f32,
    conv: &[f32],
    mean: &[f32],
    var: &[f32],
) -> Vec<u8> {
    let mut bn = node(
        "BatchNormalization",
        &["h", "scale", "bias", "running_mean", "running_var"],
        "n",
        &[],
    );
    if training_mode {
        bn.output = vec!["n".into(), "mean_out".into(), "var_out".into()];
        let mut a = AttributeProto::new();
        a.name = "training_mode".into();
        a.type_ = AttributeType::INT.into();
        a.i = 1;
        bn.attribute.push(a);
        let mut m = AttributeProto::new();
        m.name = "momentum".into();
        m.type_ = AttributeType::FLOAT.into();
        m.f = momentum;
        bn.attribute.push(m);
    }
    let c = C as i64;
    model(
        ("x", &[16, 1, 8, 8]),
        &[
            ("conv_w", vec![c, 1, 1, 1], conv[..C].to_vec()),
            ("conv_b", vec![c], conv[C..].to_vec()),
            ("scale", vec![c], vec![1.0; C]),
            ("bias", vec![c], vec![0.0; C]),
            ("running_mean", vec![c], mean.to_vec()),
            ("running_var", vec![c], var.to_vec()),
            ("fc_w", vec![c * 64, 10], random(C * 64 * 10, 3)),
            ("fc_b", vec![10], vec![0.0; 10]),
        ],
        vec![
            node(
                "Conv",
                &["x", "conv_w", "conv_b"],
                "h",
                &[("kernel_shape", vec![1, 1])],
            ),
            bn,
            node("Flatten", &["n"], "f", &[]),
            node("Gemm", &["f", "fc_w", "fc_b"], "logits", &[]),
        ],
        &[("logits", &[16, 10])],
    )
}

/// The running statistics after `STEPS` steps on `x` (`[STEPS, 16, 64]`).
fn expected(x: &[f32], conv: &[f32], momentum: f64, mean: &[f32], var: &[f32]) -> Vec<Vec<f64>> {
    let mut r: Vec<Vec<f64>> = [mean, var]
        .iter()
        .map(|v| v.iter().map(|&e| e as f64).collect())
        .collect();
    for batch in x.chunks(16 * 64) {
        for c in 0..C {
            let h: Vec<f64> = batch
                .iter()
                .map(|&p| conv[c] as f64 * p as f64 + conv[C + c] as f64)
                .collect();
            let n = h.len() as f64;
            let m = h.iter().sum::<f64>() / n;
            let v = h.iter().map(|e| (e - m) * (e - m)).sum::<f64>() / n;
            r[0][c] = r[0][c] * momentum + m * (1.0 - momentum);
            r[1][c] = r[1][c] * momentum + v * (1.0 - momentum);
        }
    }
    r
}

#[test]
fn running_statistics_train_and_are_saved_into_the_model() {
    if !have_digits() {
        return;
    }
    let conv = [0.5, -1.5, 2.0, 0.25, 0.0, -0.75];
    let (mean, var) = ([0.3, -0.2, 0.1], [2.0, 0.5, 1.5]);
    let cases = [(false, 0.9, "2"), (true, 0.8, "2"), (false, 0.9, "4")];
    for (training_mode, momentum, workers) in cases {
        let dir = temp_dir(&format!("train-onnx-bn-{training_mode}-{workers}"));
        let onnx = dir.join("bn.onnx");
        std::fs::write(&onnx, bn_model(training_mode, momentum, &conv, &mean, &var)).unwrap();
        let (batches, out) = (dir.join("batches.safetensors"), dir.join("trained.onnx"));
        let o = onnx.to_str().unwrap();
        let steps = STEPS.to_string();
        let args = [
            "train",
            o,
            "--workers",
            workers,
            "--data",
            "digits",
            "--weights",
            o,
            "--lr",
            "1e-20",
            "--steps",
            &steps,
            "--held-out",
            "0",
            "--export-batches",
            batches.to_str().unwrap(),
            "--save-onnx",
            out.to_str().unwrap(),
        ];
        let run = tofu(&args);
        assert!(run.status.success(), "{}", text(&run).1);
        let x = &read_f32(&batches)["x"];
        assert_eq!(x.0, vec![STEPS, 16, 64]);
        let want = expected(&x.1, &conv, momentum as f64, &mean, &var);
        let saved: std::collections::HashMap<_, _> = onnx::values::initializers(&out)
            .unwrap()
            .into_iter()
            .map(|(n, _, v)| (n, v))
            .collect();
        for (name, want) in ["running_mean", "running_var"].iter().zip(&want) {
            let got = &saved[*name];
            for c in 0..C {
                let tol = 1e-5 * (1.0 + want[c].abs());
                assert!(
                    (got[c] as f64 - want[c]).abs() <= tol,
                    "training_mode {training_mode}, {workers} workers: {name}[{c}] = {} vs {}",
                    got[c],
                    want[c]
                );
            }
        }
        // The convolution did not move (`--lr 1e-20`): the oracle's premise.
        assert_eq!(&saved["conv_w"][..], &conv[..C]);
    }
}
