//! The managed-communication benchmark of thesis §3.3 (issue 12; `tofu ssp
//! bench`): one after the other, on the same split and seed, three MF runs
//! through [`super::train`] — BSP (s = 0), SSP (s = the base config's
//! staleness) and SSP + managed communication (the base config's bandwidth
//! budget and priority).
//!
//! Gives per run the epochs and seconds to the first held-out RMSE ≤ the
//! target ([`MfConfig::target_rmse`]), total seconds and bytes sent, and
//! its ratios to BSP: `seconds_to_target_vs_bsp` = run seconds to target /
//! BSP seconds to target (below 1: faster than BSP),
//! `epochs_to_target_vs_bsp` likewise; `None` when either run missed the
//! target.

use serde::Serialize;

use super::{train, MfConfig, Rating};
use crate::error::SspError;

/// One benchmark run and its ratios to the BSP run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchRun {
    /// `bsp`, `ssp` or `ssp+managed`.
    pub config: &'static str,
    /// Staleness s in clocks.
    pub staleness: u32,
    /// Bytes per second per client (0: no managed communication).
    pub bandwidth: u64,
    /// First epoch at the target, if any.
    pub epochs_to_target: Option<u32>,
    /// Seconds to the end of that epoch.
    pub seconds_to_target: Option<f64>,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
    /// Bytes of updates sent.
    pub bytes_sent: u64,
    /// Held-out RMSE after the last epoch.
    pub heldout_rmse: f64,
    /// Held-out RMSE after each epoch.
    pub heldout_rmse_per_epoch: Vec<f64>,
    /// Seconds to target / BSP's.
    pub seconds_to_target_vs_bsp: Option<f64>,
    /// Epochs to target / BSP's.
    pub epochs_to_target_vs_bsp: Option<f64>,
}

/// The three runs of `base`: `bsp` (staleness 0, no budget), `ssp` (no
/// budget) and `ssp+managed` (as `base`).
pub fn configs(base: &MfConfig) -> [(&'static str, MfConfig); 3] {
    let with = |staleness: u32, bandwidth: u64| {
        let mut c = base.clone();
        c.staleness = staleness;
        c.comm.bandwidth = bandwidth;
        c
    };
    [
        ("bsp", with(0, 0)),
        ("ssp", with(base.staleness, 0)),
        ("ssp+managed", with(base.staleness, base.comm.bandwidth)),
    ]
}

/// `run / bsp`, when both exist and BSP's is positive.
pub fn ratio(run: Option<f64>, bsp: Option<f64>) -> Option<f64> {
    match (run, bsp) {
        (Some(r), Some(b)) if b > 0.0 => Some(r / b),
        _ => None,
    }
}

/// Runs the three [`configs`] of `base` on `train`/`test`;
/// `progress(config, epoch, train_rmse, heldout_rmse)` as each epoch ends.
///
/// Errors: the first run that fails, with its config's name.
pub fn bench(
    train_set: &[Rating],
    test: &[Rating],
    base: &MfConfig,
    progress: &mut dyn FnMut(&str, u32, f64, f64),
) -> Result<Vec<BenchRun>, (&'static str, SspError)> {
    let mut reports = Vec::new();
    for (name, cfg) in configs(base) {
        let report = train(train_set, test, &cfg, &mut |e, trm, tem| {
            progress(name, e, trm, tem)
        })
        .map_err(|e| (name, e))?;
        reports.push((name, cfg, report));
    }
    let bsp = &reports[0].2;
    let (bsp_secs, bsp_epochs) = (bsp.seconds_to_target, bsp.epochs_to_target.map(f64::from));
    Ok(reports
        .iter()
        .map(|(config, cfg, r)| BenchRun {
            config,
            staleness: cfg.staleness,
            bandwidth: cfg.comm.bandwidth,
            epochs_to_target: r.epochs_to_target,
            seconds_to_target: r.seconds_to_target,
            seconds: r.seconds,
            bytes_sent: r.bytes_sent,
            heldout_rmse: r.heldout_rmse,
            heldout_rmse_per_epoch: r.heldout_rmse_per_epoch.clone(),
            seconds_to_target_vs_bsp: ratio(r.seconds_to_target, bsp_secs),
            epochs_to_target_vs_bsp: ratio(r.epochs_to_target.map(f64::from), bsp_epochs),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three configs differ from the base only in staleness and budget.
    #[test]
    fn configs_vary_staleness_and_budget() {
        let mut base = MfConfig {
            staleness: 3,
            ..MfConfig::default()
        };
        base.comm.bandwidth = 500;
        let got: Vec<(&str, u32, u64)> = configs(&base)
            .iter()
            .map(|(n, c)| (*n, c.staleness, c.comm.bandwidth))
            .collect();
        assert_eq!(got, [("bsp", 0, 0), ("ssp", 3, 0), ("ssp+managed", 3, 500)]);
    }

    /// Ratios exist only when both runs reached the target and BSP's is
    /// positive.
    #[test]
    fn ratio_needs_both() {
        assert_eq!(ratio(Some(3.0), Some(2.0)), Some(1.5));
        assert_eq!(ratio(None, Some(2.0)), None);
        assert_eq!(ratio(Some(3.0), None), None);
        assert_eq!(ratio(Some(3.0), Some(0.0)), None);
    }
}
