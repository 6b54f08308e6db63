//! End-to-end tests of `tofu loops` (issue 13): `mf --json` reports the
//! schedule (unordered 2D with 4 workers, serial with 1), the dependence
//! vectors and per-epoch RMSE; an inapplicable `--schedule` is an error that
//! names the flag and lists the vectors; `lr --json` runs 1D. The MF data
//! comes from `scripts/fetch-movielens.sh`; without it the MF tests fail
//! under CI and print SKIPPED locally.

use tofu_tests::{movielens_file, text, tofu};

#[test]
fn mf_json_reports_unordered_2d_and_serial() {
    if movielens_file().is_none() {
        return;
    }
    for (workers, schedule) in [("4", "unordered-2d"), ("1", "serial")] {
        let o = tofu(&[
            "loops",
            "mf",
            "--workers",
            workers,
            "--epochs",
            "2",
            "--json",
        ]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{err}");
        assert!(err.contains("epoch   1"), "progress goes to stderr: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["schedule"], schedule);
        assert_eq!(
            v["dependence_vectors"],
            serde_json::json!([["0", "*"], ["*", "0"]])
        );
        assert_eq!(v["rmse_per_epoch"].as_array().unwrap().len(), 2);
        assert_eq!(v["seconds_per_epoch"].as_array().unwrap().len(), 2);
        assert!(v["heldout_rmse"].as_f64().unwrap() < 1.1);
    }
}

#[test]
fn mf_inapplicable_schedule_names_the_flag() {
    if movielens_file().is_none() {
        return;
    }
    let o = tofu(&["loops", "mf", "--schedule", "1d", "--epochs", "1"]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("--schedule 1d") && err.contains("(0, *)"),
        "{err}"
    );
    let o = tofu(&["loops", "mf", "--schedule", "nope"]);
    assert!(!o.status.success());
    assert!(text(&o).1.contains("unordered-2d"));
}

#[test]
fn lr_json_runs_1d() {
    let o = tofu(&[
        "loops",
        "lr",
        "--workers",
        "2",
        "--epochs",
        "2",
        "--samples",
        "2000",
        "--json",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schedule"], "1d");
    assert_eq!(v["loss_per_epoch"].as_array().unwrap().len(), 2);
}
