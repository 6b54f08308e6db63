//! A whole MF run in one process: shards and clients on threads
//! ([`LocalCluster`]), every worker running [`run_worker`].
//!
//! Takes training and held-out ratings and an [`MfConfig`]; gives the
//! [`MfReport`], with progress as each epoch completes on every worker.

use std::time::Instant;

use super::{run_worker, EpochSums, MfConfig, MfReport, Rating};
use crate::cluster::{ClusterConfig, LocalCluster};
use crate::error::SspError;

/// Trains MF on `train` with a fresh in-process cluster of `cfg.clients`
/// clients and `cfg.shards` shards; evaluates on `test` after every epoch.
/// `progress(epoch, train_rmse, heldout_rmse)` is called as each epoch
/// ends on every worker.
///
/// # Errors
/// [`SspError::Config`] for a bad [`MfConfig`] or no training ratings;
/// any server error.
pub fn train(
    train: &[Rating],
    test: &[Rating],
    cfg: &MfConfig,
    progress: &mut dyn FnMut(u32, f64, f64),
) -> Result<MfReport, SspError> {
    cfg.check()?;
    if train.is_empty() {
        return Err(SspError::Config("MF needs training ratings".into()));
    }
    let cluster_cfg = ClusterConfig {
        tables: cfg.tables(),
        shards: cfg.shards,
        clients: cfg.clients,
        workers_per_client: cfg.workers_per_client(),
        comm: cfg.comm.clone(),
        checkpoint_every: 0,
    };
    let (cluster, workers) = LocalCluster::start(&cluster_cfg)?;
    let start = Instant::now();
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<(u32, EpochSums)>();
    let threads: Vec<_> = workers
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(w, mut worker)| {
            let (train, test) = (train.to_vec(), test.to_vec());
            let (cfg, done) = (cfg.clone(), done_tx.clone());
            std::thread::spawn(move || {
                run_worker(&mut worker, w, &train, &test, &cfg, &mut |e, s| {
                    let _ = done.send((e, s));
                })
            })
        })
        .collect();
    // Progress as each epoch completes on every worker.
    drop(done_tx);
    let epochs = cfg.epochs as usize;
    let mut sums = vec![EpochSums::default(); epochs];
    let mut ended = vec![0.0f64; epochs];
    let mut reported = vec![0usize; epochs];
    while let Ok((epoch, s)) = done_rx.recv() {
        let e = epoch as usize;
        sums[e].add(&s);
        reported[e] += 1;
        if reported[e] == cfg.workers {
            ended[e] = start.elapsed().as_secs_f64();
            progress(epoch + 1, sums[e].train_rmse(), sums[e].heldout_rmse());
        }
    }
    let mut results = Vec::new();
    for t in threads {
        results.push(
            t.join()
                .unwrap_or_else(|_| Err(SspError::Config("an MF worker panicked".into()))),
        );
    }
    let seconds = start.elapsed().as_secs_f64();
    let bytes_sent = cluster.bytes_sent();
    cluster.finish()?;
    results.into_iter().collect::<Result<Vec<()>, _>>()?;
    Ok(MfReport::new(cfg, &sums, ended, seconds, bytes_sent))
}
