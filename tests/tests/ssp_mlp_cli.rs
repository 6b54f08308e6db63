//! `tofu ssp mlp` end to end (issue 12, MLP Done-when item): tofu's MLP
//! training graph trained on scikit-learn's digits through the parameter
//! server, 4 workers, s = 2, gradients from the runner's CPU backend.
//!
//! Oracles: test accuracy on 20% of the images held out (a constant
//! predictor scores about 10%); the dense run's epochs to 95% as the
//! baseline of the top-k run, measured in the same test.
//!
//! Needs `digits.csv` from `scripts/fetch-digits.sh` (cache
//! `${TOFU_DATA_CACHE:-~/.cache/tofu}/sklearn-digits`); without it the test
//! fails under CI and prints SKIPPED locally.

use std::process::Command;

use tofu_tests::{have_digits, tofu_bin};

fn mlp(extra: &[&str]) -> serde_json::Value {
    let out = Command::new(tofu_bin())
        .args([
            "ssp",
            "mlp",
            "--data",
            "digits",
            "--workers",
            "4",
            "--staleness",
            "2",
            "--epochs",
            "25",
            "--json",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn mlp_digits_reaches_95_percent_and_top_k_1_percent_within_1_5x_the_epochs() {
    if !have_digits() {
        return;
    }
    let dense = mlp(&[]);
    assert_eq!(dense["loss_per_epoch"].as_array().unwrap().len(), 25);
    assert_eq!(dense["accuracy_per_epoch"].as_array().unwrap().len(), 25);
    let acc = dense["test_accuracy"].as_f64().unwrap();
    assert!(acc >= 0.95, "dense: test accuracy {acc}");
    let losses: Vec<f64> = dense["loss_per_epoch"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!(losses[24] < losses[0] / 4.0, "loss {losses:?}");
    let e_dense = dense["epochs_to_target"]
        .as_u64()
        .expect("dense reaches 95%");

    let sparse = mlp(&["--top-k", "0.01"]);
    let e_sparse = sparse["epochs_to_target"]
        .as_u64()
        .expect("top-k 1% reaches 95%");
    assert!(
        2 * e_sparse <= 3 * e_dense,
        "top-k 1% took {e_sparse} epochs to 95%, dense {e_dense}"
    );
    // Only the chosen entries travel (sparse rows), not whole rows.
    let (b_dense, b_sparse) = (
        dense["bytes_sent"].as_u64().unwrap(),
        sparse["bytes_sent"].as_u64().unwrap(),
    );
    assert!(
        b_sparse * 3 < b_dense,
        "top-k sent {b_sparse} bytes, dense {b_dense}"
    );
}

#[test]
fn mlp_rejects_a_bad_top_k_fraction() {
    let out = Command::new(tofu_bin())
        .args(["ssp", "mlp", "--top-k", "1.5"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--top-k"), "{err}");
}
