//! One MF worker's loop, the same whether its [`Worker`] talks to shards in
//! this process or over TCP.
//!
//! Takes a worker handle, its global index, the training and held-out
//! ratings and the [`MfConfig`]; runs SGD over its share clock by clock,
//! pushing every step as increments to the [`USERS`] and [`ITEMS`] rows
//! and its loss sums to the [`METRICS`] row of the epoch. Starts at the
//! worker's current clock, so a worker restarted after a checkpoint at
//! clock t (at clock t + 1) redoes exactly the clocks the checkpoint lacks:
//! its visiting order is replayed from the seed, not stored.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::{EpochSums, MfConfig, Rating, ITEMS, METRICS, METRIC_COLS, USERS};
use crate::client::Worker;
use crate::error::SspError;
use crate::types::{Clock, RowKey, RowValues};

/// The fixed initial value of a parameter: N(0, 0.1) for factors (Box–
/// Muller over a hash), 0 for the bias column `rank`.
fn init(seed: u64, key: RowKey, col: u32, rank: u32) -> f32 {
    if col == rank {
        return 0.0;
    }
    let h = |salt: u64| {
        let mut z =
            seed ^ key.row.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (u64::from(key.table.0) << 56);
        z ^= (u64::from(col) << 32) ^ salt;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let (u1, u2) = (h(1).max(1e-12), h(2));
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos() * 0.1) as f32
}

/// The parameters one worker sees within one clock: server rows plus its
/// own updates of this clock.
struct Model<'a> {
    worker: &'a Worker,
    cfg: &'a MfConfig,
    local: HashMap<RowKey, Vec<f32>>,
}

impl Model<'_> {
    fn new<'a>(worker: &'a Worker, cfg: &'a MfConfig) -> Model<'a> {
        Model {
            worker,
            cfg,
            local: HashMap::new(),
        }
    }

    fn row(&mut self, key: RowKey) -> Result<&mut Vec<f32>, SspError> {
        if !self.local.contains_key(&key) {
            let len = self.cfg.rank as usize + 1;
            let server = self.worker.get_row(key)?.to_dense(len);
            let v = (0..len)
                .map(|c| init(self.cfg.seed, key, c as u32, self.cfg.rank) + server[c])
                .collect();
            self.local.insert(key, v);
        }
        Ok(self.local.get_mut(&key).expect("inserted above"))
    }

    fn predict(&mut self, mu: f32, (u, i, _): Rating) -> Result<f32, SspError> {
        let k = self.cfg.rank as usize;
        let p = self.row(user(u))?.clone();
        let q = self.row(item(i))?;
        Ok(mu + p[k] + q[k] + p[..k].iter().zip(&q[..k]).map(|(a, b)| a * b).sum::<f32>())
    }

    /// One SGD step on `rating`: updates the overlay, pushes the change
    /// (or, for AdaRevision, the gradient) to the servers; returns the
    /// error before the step.
    fn step(&mut self, mu: f32, rating: Rating) -> Result<f32, SspError> {
        let cfg = self.cfg;
        let (u, i, r) = rating;
        let e = r - self.predict(mu, rating)?;
        let (uk, ik) = (user(u), item(i));
        let k = cfg.rank as usize;
        let p = self.row(uk)?.clone();
        let q = self.row(ik)?.clone();
        let mut dp: Vec<f32> = (0..k)
            .map(|j| cfg.lr * (e * q[j] - cfg.reg * p[j]))
            .collect();
        let mut dq: Vec<f32> = (0..k)
            .map(|j| cfg.lr * (e * p[j] - cfg.reg * q[j]))
            .collect();
        dp.push(cfg.lr * (e - cfg.reg * p[k]));
        dq.push(cfg.lr * (e - cfg.reg * q[k]));
        self.row(uk)?.iter_mut().zip(&dp).for_each(|(x, d)| *x += d);
        self.row(ik)?.iter_mut().zip(&dq).for_each(|(x, d)| *x += d);
        // AdaRevision tables take the loss gradient: −(SGD step)/lr.
        let scale = if cfg.adarevision.is_some() {
            -1.0 / cfg.lr
        } else {
            1.0
        };
        let push = |d: Vec<f32>| RowValues::Dense(d.into_iter().map(|x| x * scale).collect());
        self.worker.inc_row(uk, &push(dp))?;
        self.worker.inc_row(ik, &push(dq))?;
        Ok(e)
    }
}

fn user(u: u32) -> RowKey {
    RowKey::new(USERS.0, u64::from(u))
}

fn item(i: u32) -> RowKey {
    RowKey::new(ITEMS.0, u64::from(i))
}

fn metrics_row(epoch: u32) -> RowKey {
    RowKey::new(METRICS.0, u64::from(epoch))
}

/// The mean training rating μ (every worker computes the same).
fn mean(train: &[Rating]) -> f32 {
    (train.iter().map(|r| f64::from(r.2)).sum::<f64>() / train.len().max(1) as f64) as f32
}

/// Runs global worker `w` of `cfg.workers` from its current clock to the
/// end of the last epoch (clock `epochs · clocks_per_epoch`). It trains on
/// ratings `w, w + N, …` of `train` in a seeded order, evaluates ratings
/// `w, w + N, …` of `test` after each epoch (predictions clamped to
/// [1, 5]), adds its loss sums to the [`METRICS`] row of each epoch, and
/// calls `on_epoch(epoch, its sums)` as each epoch ends (partial sums for
/// an epoch it resumed in the middle of).
///
/// # Errors
/// Any server error.
pub fn run_worker(
    worker: &mut Worker,
    w: usize,
    train: &[Rating],
    test: &[Rating],
    cfg: &MfConfig,
    on_epoch: &mut dyn FnMut(u32, EpochSums),
) -> Result<(), SspError> {
    let start = worker.clock_value();
    let mu = mean(train);
    let n = cfg.workers.max(1);
    let mut order: Vec<Rating> = train.iter().skip(w).step_by(n).copied().collect();
    let held: Vec<Rating> = test.iter().skip(w).step_by(n).copied().collect();
    let mut rng = StdRng::seed_from_u64(cfg.seed ^ (w as u64 + 1));
    let per = cfg.clocks_per_epoch;
    for epoch in 0..cfg.epochs {
        // Shuffled even when skipped: a resumed worker replays the order.
        order.shuffle(&mut rng);
        let first: Clock = epoch * per;
        if first + per < start {
            continue;
        }
        let chunk = order.len().div_ceil(per as usize).max(1);
        let mut sums = EpochSums::default();
        for c in 0..per {
            if first + c < start {
                continue;
            }
            let mut m = Model::new(worker, cfg);
            let (mut sse, mut count) = (0.0f64, 0u64);
            for &rating in order.iter().skip(c as usize * chunk).take(chunk) {
                let e = m.step(mu, rating)?;
                sse += f64::from(e * e);
                count += 1;
            }
            drop(m);
            worker.batch_inc(&[
                (metrics_row(epoch), 0, sse as f32),
                (metrics_row(epoch), 1, count as f32),
            ])?;
            sums.train_sse += sse;
            sums.train_n += count;
            if !cfg.delay.is_zero() {
                std::thread::sleep(cfg.delay);
            }
            worker.clock()?;
        }
        let mut m = Model::new(worker, cfg);
        let mut tsse = 0.0f64;
        for &rating in &held {
            let e = rating.2 - m.predict(mu, rating)?.clamp(1.0, 5.0);
            tsse += f64::from(e * e);
        }
        drop(m);
        worker.batch_inc(&[
            (metrics_row(epoch), 2, tsse as f32),
            (metrics_row(epoch), 3, held.len() as f32),
        ])?;
        sums.heldout_sse = tsse;
        sums.heldout_n = held.len() as u64;
        on_epoch(epoch, sums);
    }
    Ok(())
}

/// The whole run's per-epoch loss sums, read from the [`METRICS`] table
/// by a worker that has finished [`run_worker`]: it clocks on (with no
/// work) to clock `epochs · clocks_per_epoch + s + 1`, where a read holds
/// every update of every worker up to the last epoch's evaluation.
///
/// # Errors
/// Any server error.
pub fn read_metrics(worker: &mut Worker, cfg: &MfConfig) -> Result<Vec<EpochSums>, SspError> {
    let end = cfg.epochs * cfg.clocks_per_epoch + cfg.staleness + 1;
    while worker.clock_value() < end {
        worker.clock()?;
    }
    (0..cfg.epochs)
        .map(|e| {
            let v = worker
                .get_row(metrics_row(e))?
                .to_dense(METRIC_COLS as usize);
            Ok(EpochSums {
                train_sse: f64::from(v[0]),
                train_n: v[1].round() as u64,
                heldout_sse: f64::from(v[2]),
                heldout_n: v[3].round() as u64,
            })
        })
        .collect()
}
