//! MF on MovieLens-100K through the parameter server (issue 12): 90/10
//! split, 4 workers, s = 2 reaches held-out RMSE <= 0.95 (the Surprise
//! library's SVD scores 0.934 on this set).
//!
//! Needs `ml-100k.inter` from `scripts/fetch-movielens.sh` (cache
//! `${TOFU_DATA_CACHE:-~/.cache/tofu}/recbole-1.2.1`); without it the
//! test fails under CI and prints SKIPPED locally.

use std::path::PathBuf;

use datasets::movielens::{default_path, load};
use ssp::mf::{split, train, MfConfig};

fn data_file() -> Option<PathBuf> {
    let file = default_path();
    if file.is_file() {
        return Some(file);
    }
    let msg = format!(
        "{} is missing: run scripts/fetch-movielens.sh",
        file.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{msg}");
    eprintln!("SKIPPED: {msg}");
    None
}

#[test]
fn mf_movielens_4_workers_s2_reaches_heldout_rmse_095() {
    let Some(file) = data_file() else { return };
    let data = load(&file).unwrap();
    assert_eq!(data.ratings.len(), 100_000);
    let (tr, te) = split(&data, 0.9, 7);
    let cfg = MfConfig {
        workers: 4,
        staleness: 2,
        epochs: 15,
        ..MfConfig::default()
    };
    let report = train(&tr, &te, &cfg, &mut |e, a, b| {
        eprintln!("epoch {e}: train {a:.4} held-out {b:.4}")
    })
    .unwrap();
    // Oracle: a constant predictor (the training mean) scores about 1.12.
    assert!(
        report.heldout_rmse <= 0.95,
        "held-out RMSE {}",
        report.heldout_rmse
    );
}
