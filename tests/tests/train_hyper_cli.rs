//! The optimizer's hyper-parameters on the command line (issue 38, item 1):
//! `--weight-decay` on `tofu train --model` and on `tofu plan`, which also
//! takes `--lr`; a plan records both and `tofu train PLAN` overrides them.
//!
//! Oracle: PyTorch SGD's `weight_decay` rule, g ← g + λ·w, which makes one
//! decayed step the plain step minus lr·λ·w₀ for every weight (w₀ from a run
//! of 0 steps, the same seed); the plan file's operators for the recorded
//! values.
//!
//! Needs `digits.csv` (`scripts/fetch-digits.sh`); without it the test
//! prints `SKIPPED`, and fails under `CI`.

mod run_outputs_common;

use run_outputs_common::read_f32;
use tofu_tests::{have_digits, temp_dir, text, tofu};

/// `tofu ARGS`, which must succeed.
fn ok(args: &[&str]) {
    let o = tofu(args);
    assert!(o.status.success(), "tofu {args:?}: {}", text(&o).1);
}

#[test]
fn weight_decay_takes_lr_lambda_w_off_each_weight() {
    if !have_digits() {
        return;
    }
    let dir = temp_dir("train-weight-decay");
    let path = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let base = [
        "train",
        "--model",
        "mlp-3-256",
        "--data",
        "digits",
        "--workers",
        "2",
    ];
    let (w0, plain, decayed) = (path("w0"), path("w1"), path("w2"));
    ok(&[&base[..], &["--steps", "0", "--save-weights", &w0]].concat());
    ok(&[&base[..], &["--steps", "1", "--save-weights", &plain]].concat());
    let decay = [
        "--steps",
        "1",
        "--weight-decay",
        "0.05",
        "--save-weights",
        &decayed,
    ];
    ok(&[&base[..], &decay].concat());
    let (w0, plain, decayed) = (
        read_f32(w0.as_ref()),
        read_f32(plain.as_ref()),
        read_f32(decayed.as_ref()),
    );
    assert!(w0.len() >= 4);
    let (lr, lambda) = (0.1f64, 0.05f64);
    for (name, (_, start)) in &w0 {
        let (a, b) = (&plain[name].1, &decayed[name].1);
        for i in 0..start.len() {
            let want = a[i] as f64 - lr * lambda * start[i] as f64;
            let tol = 1e-6 * (1.0 + want.abs());
            assert!(
                (b[i] as f64 - want).abs() <= tol,
                "{name}[{i}]: {} vs {want}",
                b[i]
            );
        }
    }
    let bad = tofu(&[&base[..], &["--steps", "1", "--weight-decay=-1"]].concat());
    assert!(!bad.status.success());
    assert!(
        text(&bad).1.contains("--weight-decay -1"),
        "{}",
        text(&bad).1
    );
}

#[test]
fn a_plan_records_lr_and_weight_decay_and_train_overrides_them() {
    if !have_digits() {
        return;
    }
    let dir = temp_dir("plan-hyper");
    let (with, without) = (dir.join("with.json"), dir.join("without.json"));
    let (w, wo) = (with.to_str().unwrap(), without.to_str().unwrap());
    let plan = [
        "plan",
        "--model",
        "mlp-3-64",
        "--batch",
        "16",
        "-k",
        "2",
        "--optimizer",
        "sgd",
    ];
    ok(&[
        &plan[..],
        &["--lr", "0.05", "--weight-decay", "0.01", "-o", w],
    ]
    .concat());
    ok(&[&plan[..], &["-o", wo]].concat());
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&with).unwrap()).unwrap();
    let ops = file["graph"]["ops"].as_array().unwrap();
    let attr = |prefix: &str, key: &str| -> Vec<f64> {
        ops.iter()
            .filter(|o| o["name"].as_str().unwrap().starts_with(prefix))
            .map(|o| o["attrs"][key].as_f64().unwrap())
            .collect()
    };
    let (lrs, decays) = (attr("update/", "lr"), attr("decay/", "alpha"));
    assert!(!lrs.is_empty() && lrs.iter().all(|&v| v == 0.05), "{lrs:?}");
    assert_eq!(decays.len(), lrs.len(), "one decay term per trained weight");
    assert!(decays.iter().all(|&v| v == 0.01), "{decays:?}");

    let train = [
        "train",
        "--data",
        "digits",
        "--steps",
        "1",
        "--weight-decay",
        "0.02",
    ];
    ok(&[&train[..], &[w]].concat());
    let refused = tofu(&[&train[..], &[wo]].concat());
    assert!(!refused.status.success());
    let err = text(&refused).1;
    assert!(
        err.contains("--weight-decay 0.02") && err.contains("tofu plan --weight-decay"),
        "{err}"
    );
}
