//! `tofu ssp mlp` end to end (issue 12, MLP Done-when item): tofu's MLP
//! training graph trained on scikit-learn's digits through the parameter
//! server, 4 workers, s = 2, gradients from the runner's CPU backend.
//!
//! Oracles: test accuracy on 20% of the images held out (a constant
//! predictor scores about 10%); the dense runs' epochs to 95% as the
//! baseline of the top-k runs, measured in the same test.
//!
//! The workers are threads, so under bounded staleness which updates a
//! read sees depends on the scheduler: one run's epochs to 95% varies by
//! several epochs (9 to 16 measured for the same seed), and the seed's
//! split moves the final accuracy between 0.95 and 0.98. The test
//! therefore sums five seeds on each side and asserts the mean, as one
//! would report it, instead of comparing two single runs.
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
            "40",
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
    const SEEDS: [&str; 5] = ["1", "2", "3", "4", "5"];
    let (mut e_dense, mut e_sparse) = (0, 0);
    let (mut b_dense, mut b_sparse) = (0, 0);
    let mut acc_dense = 0.0;
    for seed in SEEDS {
        let dense = mlp(&["--seed", seed]);
        assert_eq!(dense["loss_per_epoch"].as_array().unwrap().len(), 40);
        assert_eq!(dense["accuracy_per_epoch"].as_array().unwrap().len(), 40);
        acc_dense += dense["test_accuracy"].as_f64().unwrap();
        let losses: Vec<f64> = dense["loss_per_epoch"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert!(losses[39] < losses[0] / 4.0, "seed {seed}: loss {losses:?}");
        e_dense += dense["epochs_to_target"]
            .as_u64()
            .unwrap_or_else(|| panic!("dense, seed {seed}: never reaches 95%"));
        b_dense += dense["bytes_sent"].as_u64().unwrap();

        let sparse = mlp(&["--seed", seed, "--top-k", "0.01"]);
        e_sparse += sparse["epochs_to_target"]
            .as_u64()
            .unwrap_or_else(|| panic!("top-k 1%, seed {seed}: never reaches 95%"));
        b_sparse += sparse["bytes_sent"].as_u64().unwrap();
    }
    let acc = acc_dense / SEEDS.len() as f64;
    assert!(acc >= 0.95, "dense: mean test accuracy {acc}");
    assert!(
        2 * e_sparse <= 3 * e_dense,
        "top-k 1% took {e_sparse} epochs to 95% over {} seeds, dense {e_dense}",
        SEEDS.len()
    );
    // Only the chosen entries travel (sparse rows), not whole rows.
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
