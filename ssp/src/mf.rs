//! Matrix factorisation by SGD through the parameter server (the thesis's
//! MF application, §3.3), on MovieLens-style ratings.
//!
//! Takes ratings `(user, item, rating)` and an [`MfConfig`]; gives an
//! [`MfReport`] with training RMSE and held-out RMSE per epoch. The model is
//! biased MF (the Surprise library's SVD): prediction
//! `μ + b_u + b_i + p_u · q_i`; table 0 holds user rows `[p_u, b_u]`, table
//! 1 item rows `[q_i, b_i]` (`rank + 1` columns each). A parameter is its
//! fixed pseudo-random initial value (std 0.1, biases 0) plus the server
//! row, so every process agrees on the start without communicating. Each
//! worker owns 1/N of the training ratings and makes `clocks_per_epoch`
//! clocks per epoch; within a clock it sees its own updates (a local
//! overlay), across workers it sees what SSP gives.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::client::Worker;
use crate::cluster::{ClusterConfig, LocalCluster};
use crate::comm::CommConfig;
use crate::error::SspError;
use crate::types::{RowKey, RowValues, TableConfig};

/// One rating: user index, item index, rating (1–5 for MovieLens).
pub type Rating = (u32, u32, f32);

/// Ratings with dense user and item indices.
#[derive(Clone, Debug)]
pub struct Ratings {
    /// The ratings.
    pub ratings: Vec<Rating>,
    /// Distinct users.
    pub users: u32,
    /// Distinct items.
    pub items: u32,
}

/// Reads a RecBole `.inter` file (tab-separated, a header line, columns
/// `user_id:token`, `item_id:token`, `rating:float`, …), mapping tokens to
/// dense indices in order of first appearance.
///
/// # Errors
/// [`SspError::Io`] when the file cannot be read; [`SspError::Config`]
/// naming the line when a line does not parse.
pub fn load_inter(path: &Path) -> Result<Ratings, SspError> {
    let text = std::fs::read_to_string(path).map_err(|e| SspError::Io {
        what: format!("reading {}", path.display()),
        source: e,
    })?;
    let mut users = HashMap::new();
    let mut items = HashMap::new();
    let mut ratings = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || {
            SspError::Config(format!(
                "{}:{}: expected `user<TAB>item<TAB>rating…`",
                path.display(),
                n + 1
            ))
        };
        if f.len() < 3 {
            return Err(bad());
        }
        let r: f32 = f[2].trim().parse().map_err(|_| bad())?;
        let nu = users.len() as u32;
        let u = *users.entry(f[0].to_string()).or_insert(nu);
        let ni = items.len() as u32;
        let i = *items.entry(f[1].to_string()).or_insert(ni);
        ratings.push((u, i, r));
    }
    Ok(Ratings {
        ratings,
        users: users.len() as u32,
        items: items.len() as u32,
    })
}

/// Splits ratings into training and held-out sets: a seeded shuffle, the
/// first `train_fraction` for training.
pub fn split(data: &Ratings, train_fraction: f64, seed: u64) -> (Vec<Rating>, Vec<Rating>) {
    let mut all = data.ratings.clone();
    all.shuffle(&mut StdRng::seed_from_u64(seed));
    let n = (all.len() as f64 * train_fraction).round() as usize;
    let test = all.split_off(n.min(all.len()));
    (all, test)
}

/// Settings of an MF run.
#[derive(Clone, Debug)]
pub struct MfConfig {
    /// Worker threads (in one client process).
    pub workers: usize,
    /// Server shards.
    pub shards: usize,
    /// Staleness s in clocks.
    pub staleness: u32,
    /// Latent factors.
    pub rank: u32,
    /// SGD step size.
    pub lr: f32,
    /// L2 regularisation.
    pub reg: f32,
    /// Passes over the training ratings.
    pub epochs: u32,
    /// Clocks per epoch (each worker's ratings are cut into this many).
    pub clocks_per_epoch: u32,
    /// Seed of initial values and visiting order.
    pub seed: u64,
    /// Communication settings (managed communication).
    pub comm: CommConfig,
    /// Held-out RMSE whose first reach is reported
    /// ([`MfReport::epochs_to_target`]).
    pub target_rmse: f64,
    /// AdaRevision's base rate α, or `None` for plain SGD increments.
    pub adarevision: Option<f32>,
}

impl Default for MfConfig {
    fn default() -> MfConfig {
        MfConfig {
            workers: 4,
            shards: 2,
            staleness: 2,
            rank: 100,
            lr: 0.005,
            reg: 0.02,
            epochs: 20,
            clocks_per_epoch: 10,
            seed: 1,
            comm: CommConfig::default(),
            target_rmse: 0.95,
            adarevision: None,
        }
    }
}

/// What an MF run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MfReport {
    /// Training RMSE per epoch (errors seen while training).
    pub rmse_per_epoch: Vec<f64>,
    /// Held-out RMSE after each epoch.
    pub heldout_rmse_per_epoch: Vec<f64>,
    /// Held-out RMSE after the last epoch.
    pub heldout_rmse: f64,
    /// Epochs run.
    pub epochs: u32,
    /// Wall-clock seconds of training (and per-epoch evaluation).
    pub seconds: f64,
    /// Seconds from the start to the end of each epoch.
    pub seconds_per_epoch: Vec<f64>,
    /// Bytes of increments sent to the servers.
    pub bytes_sent: u64,
    /// The target held-out RMSE ([`MfConfig::target_rmse`]).
    pub target_rmse: f64,
    /// First epoch whose held-out RMSE is at most the target, if any.
    pub epochs_to_target: Option<u32>,
    /// Seconds from the start to the end of that epoch.
    pub seconds_to_target: Option<f64>,
}

/// Most live AdaRevision snapshots per row: versions a client holds live
/// for at most s + 2 clocks, so this bounds clients × (s + 2).
const ADAREVISION_CAP: u32 = 1024;

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

struct Model<'a> {
    worker: &'a Worker,
    cfg: &'a MfConfig,
    local: HashMap<RowKey, Vec<f32>>,
}

impl Model<'_> {
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
        let p = self.row(RowKey::new(0, u64::from(u)))?.clone();
        let q = self.row(RowKey::new(1, u64::from(i)))?;
        Ok(mu + p[k] + q[k] + p[..k].iter().zip(&q[..k]).map(|(a, b)| a * b).sum::<f32>())
    }
}

/// Trains MF on `train` with a fresh in-process cluster; evaluates on
/// `test` after every epoch. `progress(epoch, train_rmse, heldout_rmse)`
/// is called as each epoch ends.
///
/// # Errors
/// [`SspError::Config`] for zero workers, epochs or clocks per epoch; any
/// server error.
pub fn train(
    train: &[Rating],
    test: &[Rating],
    cfg: &MfConfig,
    progress: &mut dyn FnMut(u32, f64, f64),
) -> Result<MfReport, SspError> {
    if cfg.workers == 0 || cfg.epochs == 0 || cfg.clocks_per_epoch == 0 || train.is_empty() {
        return Err(SspError::Config(
            "MF needs workers, epochs, clocks per epoch and training ratings ≥ 1".into(),
        ));
    }
    let len = cfg.rank + 1;
    let table = |id| {
        let t = TableConfig::dense(id, len, cfg.staleness);
        match cfg.adarevision {
            Some(alpha) => t.with_adarevision(alpha, ADAREVISION_CAP),
            None => t,
        }
    };
    let tables = vec![table(0), table(1)];
    // AdaRevision tables take the loss gradient: −(SGD step)/lr.
    let push_scale = if cfg.adarevision.is_some() {
        -1.0 / cfg.lr
    } else {
        1.0
    };
    let cluster_cfg = ClusterConfig {
        tables,
        shards: cfg.shards,
        clients: 1,
        workers_per_client: cfg.workers,
        comm: cfg.comm.clone(),
        checkpoint_every: 0,
    };
    let (cluster, mut workers) = LocalCluster::start(&cluster_cfg)?;
    let mu = (train.iter().map(|r| f64::from(r.2)).sum::<f64>() / train.len() as f64) as f32;
    // Per epoch: (train sse, train n, test sse, test n, end time).
    let sums = Arc::new(Mutex::new(vec![
        (0.0f64, 0usize, 0.0f64, 0usize, 0.0f64);
        cfg.epochs as usize
    ]));
    let start = Instant::now();
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<u32>();
    let threads: Vec<_> = workers
        .remove(0)
        .into_iter()
        .enumerate()
        .map(|(w, mut worker)| {
            let mine: Vec<Rating> = train.iter().skip(w).step_by(cfg.workers).copied().collect();
            let held: Vec<Rating> = test.iter().skip(w).step_by(cfg.workers).copied().collect();
            let (cfg, sums, done) = (cfg.clone(), Arc::clone(&sums), done_tx.clone());
            std::thread::spawn(move || -> Result<(), SspError> {
                let mut rng = StdRng::seed_from_u64(cfg.seed ^ (w as u64 + 1));
                let mut order = mine;
                let k = cfg.rank as usize;
                for epoch in 0..cfg.epochs {
                    order.shuffle(&mut rng);
                    let chunk = order.len().div_ceil(cfg.clocks_per_epoch as usize).max(1);
                    let (mut sse, mut n) = (0.0f64, 0usize);
                    for c in 0..cfg.clocks_per_epoch as usize {
                        let mut m = Model {
                            worker: &worker,
                            cfg: &cfg,
                            local: HashMap::new(),
                        };
                        for &(u, i, r) in order.iter().skip(c * chunk).take(chunk) {
                            let e = r - m.predict(mu, (u, i, r))?;
                            sse += f64::from(e * e);
                            n += 1;
                            let (uk, ik) =
                                (RowKey::new(0, u64::from(u)), RowKey::new(1, u64::from(i)));
                            let p = m.row(uk)?.clone();
                            let q = m.row(ik)?.clone();
                            let mut dp: Vec<f32> = (0..k)
                                .map(|j| cfg.lr * (e * q[j] - cfg.reg * p[j]))
                                .collect();
                            let mut dq: Vec<f32> = (0..k)
                                .map(|j| cfg.lr * (e * p[j] - cfg.reg * q[j]))
                                .collect();
                            dp.push(cfg.lr * (e - cfg.reg * p[k]));
                            dq.push(cfg.lr * (e - cfg.reg * q[k]));
                            m.row(uk)?.iter_mut().zip(&dp).for_each(|(x, d)| *x += d);
                            m.row(ik)?.iter_mut().zip(&dq).for_each(|(x, d)| *x += d);
                            let push = |d: Vec<f32>| {
                                RowValues::Dense(d.into_iter().map(|x| x * push_scale).collect())
                            };
                            worker.inc_row(uk, &push(dp))?;
                            worker.inc_row(ik, &push(dq))?;
                        }
                        drop(m);
                        worker.clock()?;
                    }
                    let mut m = Model {
                        worker: &worker,
                        cfg: &cfg,
                        local: HashMap::new(),
                    };
                    let mut tsse = 0.0f64;
                    for &rating in &held {
                        let e = rating.2 - m.predict(mu, rating)?.clamp(1.0, 5.0);
                        tsse += f64::from(e * e);
                    }
                    let mut s = crate::client::lock(&sums);
                    let slot = &mut s[epoch as usize];
                    slot.0 += sse;
                    slot.1 += n;
                    slot.2 += tsse;
                    slot.3 += held.len();
                    slot.4 = slot.4.max(start.elapsed().as_secs_f64());
                    drop(s);
                    let _ = done.send(epoch);
                }
                Ok(())
            })
        })
        .collect();
    // Progress as each epoch completes on every worker.
    drop(done_tx);
    let mut reported = vec![0usize; cfg.epochs as usize];
    let rmse = |sse: f64, n: usize| (sse / n.max(1) as f64).sqrt();
    while let Ok(epoch) = done_rx.recv() {
        reported[epoch as usize] += 1;
        if reported[epoch as usize] == cfg.workers {
            let s = crate::client::lock(&sums)[epoch as usize];
            progress(epoch + 1, rmse(s.0, s.1), rmse(s.2, s.3));
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
    let sums = crate::client::lock(&sums).clone();
    let rmse_per_epoch: Vec<f64> = sums.iter().map(|s| rmse(s.0, s.1)).collect();
    let heldout: Vec<f64> = sums.iter().map(|s| rmse(s.2, s.3)).collect();
    let hit = heldout.iter().position(|&r| r <= cfg.target_rmse);
    Ok(MfReport {
        target_rmse: cfg.target_rmse,
        epochs_to_target: hit.map(|e| e as u32 + 1),
        seconds_to_target: hit.map(|e| sums[e].4),
        heldout_rmse: heldout.last().copied().unwrap_or(f64::NAN),
        rmse_per_epoch,
        heldout_rmse_per_epoch: heldout,
        epochs: cfg.epochs,
        seconds,
        seconds_per_epoch: sums.iter().map(|s| s.4).collect(),
        bytes_sent,
    })
}
