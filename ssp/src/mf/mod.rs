//! Matrix factorisation by SGD through the parameter server (the thesis's
//! MF application, §3.3), on MovieLens-style ratings.
//!
//! Takes ratings `(user, item, rating)` and an [`MfConfig`]; gives an
//! [`MfReport`] with training RMSE and held-out RMSE per epoch. The model is
//! biased MF (the Surprise library's SVD): prediction
//! `μ + b_u + b_i + p_u · q_i`; table [`USERS`] holds user rows
//! `[p_u, b_u]`, table [`ITEMS`] item rows `[q_i, b_i]` (`rank + 1` columns
//! each). A parameter is its fixed pseudo-random initial value (std 0.1,
//! biases 0) plus the server row, so every process agrees on the start
//! without communicating. Global worker `w` of `N` owns the training
//! ratings `w, w + N, …` and makes `clocks_per_epoch` clocks per epoch;
//! within a clock it sees its own updates (a local overlay), across workers
//! it sees what SSP gives. Table [`METRICS`] gathers the loss sums: row `e`
//! holds epoch e's `[train squared error, train ratings, held-out squared
//! error, held-out ratings]`, incremented by every worker at every clock,
//! so worker processes read the run's RMSE from the servers
//! ([`read_metrics`]) and a checkpoint holds them up to its clock.
//!
//! * [`data`]-level: [`split`] (the ratings come from
//!   `datasets::movielens::load`);
//! * one worker's loop: [`run_worker`] (the same in one process and over
//!   TCP);
//! * a whole run in one process: [`train`];
//! * BSP vs SSP vs managed communication: [`bench`];
//! * what the commands print of a run or the benchmark: [`summary`].

pub mod bench;
mod data;
mod local;
pub mod summary;
mod worker;

use crate::comm::CommConfig;
use crate::error::SspError;
use crate::placement::TableSize;
use crate::types::{TableConfig, TableId};

pub use data::{load_split, split, LoadError, Rating, Ratings};
pub use local::train;
pub use worker::{read_metrics, run_worker};

/// The user-factor table: row u is `[p_u, b_u]`.
pub const USERS: TableId = TableId(0);
/// The item-factor table: row i is `[q_i, b_i]`.
pub const ITEMS: TableId = TableId(1);
/// The loss-sum table: row e is epoch e's `[train SSE, train ratings,
/// held-out SSE, held-out ratings]` summed over every worker.
pub const METRICS: TableId = TableId(2);
/// Columns of a [`METRICS`] row.
pub const METRIC_COLS: u32 = 4;

/// Settings of an MF run.
#[derive(Clone, Debug)]
pub struct MfConfig {
    /// Worker threads over every client.
    pub workers: usize,
    /// Client processes (each with its own row cache); `workers` are split
    /// evenly over them, client c holding global workers
    /// `c · workers/clients …`.
    pub clients: usize,
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
    /// Communication settings (managed communication, placement).
    pub comm: CommConfig,
    /// Held-out RMSE whose first reach is reported
    /// ([`MfReport::epochs_to_target`]).
    pub target_rmse: f64,
    /// AdaRevision's base rate α, or `None` for plain SGD increments.
    pub adarevision: Option<f32>,
    /// Sleep of every worker after each clock (slow workers, e.g. to give
    /// a test time to kill a server mid-run); zero by default.
    pub delay: std::time::Duration,
}

impl Default for MfConfig {
    fn default() -> MfConfig {
        MfConfig {
            workers: 4,
            clients: 1,
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
            delay: std::time::Duration::ZERO,
        }
    }
}

/// Most live AdaRevision snapshots per row: versions a client holds live
/// for at most s + 2 clocks, so this bounds clients × (s + 2).
const ADAREVISION_CAP: u32 = 1024;

impl MfConfig {
    /// The placement of the tables over `self.shards` shards for the
    /// ratings `data` by `policy` (`None`: a hash of table and row).
    ///
    /// # Errors
    /// Zero shards.
    pub fn placement(
        &self,
        policy: Option<crate::placement::Policy>,
        data: &Ratings,
    ) -> Result<Option<std::sync::Arc<crate::placement::Placement>>, SspError> {
        let Some(policy) = policy else {
            return Ok(None);
        };
        let sizes = self.table_sizes(data.users, data.items);
        let p = crate::placement::Placement::new(&sizes, self.shards, policy)?;
        Ok(Some(std::sync::Arc::new(p)))
    }

    /// Checks the counts.
    ///
    /// # Errors
    /// [`SspError::Config`] for zero workers, clients, shards, epochs or
    /// clocks per epoch, or workers not a multiple of clients.
    pub fn check(&self) -> Result<(), SspError> {
        if self.workers == 0
            || self.clients == 0
            || self.shards == 0
            || self.epochs == 0
            || self.clocks_per_epoch == 0
            || self.rank == 0
        {
            return Err(SspError::Config(
                "MF needs workers, clients, shards, epochs, clocks per epoch and rank ≥ 1".into(),
            ));
        }
        if !self.workers.is_multiple_of(self.clients) {
            return Err(SspError::Config(format!(
                "{} workers cannot be split evenly over {} clients",
                self.workers, self.clients
            )));
        }
        Ok(())
    }

    /// Worker threads per client.
    pub fn workers_per_client(&self) -> usize {
        self.workers / self.clients.max(1)
    }

    /// The run's tables: [`USERS`] and [`ITEMS`] (`rank + 1` dense
    /// columns, AdaRevision when configured) and [`METRICS`], all of
    /// staleness s. Servers and clients must hold the same.
    pub fn tables(&self) -> Vec<TableConfig> {
        let len = self.rank + 1;
        let factors = |id: TableId| {
            let t = TableConfig::dense(id.0, len, self.staleness);
            match self.adarevision {
                Some(alpha) => t.with_adarevision(alpha, ADAREVISION_CAP),
                None => t,
            }
        };
        vec![
            factors(USERS),
            factors(ITEMS),
            TableConfig::dense(METRICS.0, METRIC_COLS, self.staleness),
        ]
    }

    /// The tables' sizes for a placement policy
    /// ([`crate::placement::Placement::new`]): `users` and `items` rows of
    /// `rank + 1` columns, one metrics row per epoch.
    pub fn table_sizes(&self, users: u32, items: u32) -> Vec<TableSize> {
        let cols = u64::from(self.rank) + 1;
        vec![
            TableSize {
                table: USERS,
                rows: u64::from(users),
                cols,
            },
            TableSize {
                table: ITEMS,
                rows: u64::from(items),
                cols,
            },
            TableSize {
                table: METRICS,
                rows: u64::from(self.epochs),
                cols: u64::from(METRIC_COLS),
            },
        ]
    }
}

/// One epoch's loss sums over some workers (a [`METRICS`] row).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EpochSums {
    /// Sum of squared training errors (seen while training).
    pub train_sse: f64,
    /// Training ratings visited.
    pub train_n: u64,
    /// Sum of squared held-out errors after the epoch.
    pub heldout_sse: f64,
    /// Held-out ratings evaluated.
    pub heldout_n: u64,
}

impl EpochSums {
    /// Adds another worker's sums.
    pub fn add(&mut self, o: &EpochSums) {
        self.train_sse += o.train_sse;
        self.train_n += o.train_n;
        self.heldout_sse += o.heldout_sse;
        self.heldout_n += o.heldout_n;
    }

    /// Training RMSE.
    pub fn train_rmse(&self) -> f64 {
        (self.train_sse / self.train_n.max(1) as f64).sqrt()
    }

    /// Held-out RMSE.
    pub fn heldout_rmse(&self) -> f64 {
        (self.heldout_sse / self.heldout_n.max(1) as f64).sqrt()
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
    /// Training and held-out ratings counted in each epoch (every worker's
    /// share: each rating once, or something was lost or counted twice).
    pub ratings_per_epoch: Vec<(u64, u64)>,
}

impl MfReport {
    /// The report of per-epoch sums over every worker, the seconds from
    /// the start to each epoch's end, the total seconds and bytes sent.
    pub fn new(
        cfg: &MfConfig,
        sums: &[EpochSums],
        seconds_per_epoch: Vec<f64>,
        seconds: f64,
        bytes_sent: u64,
    ) -> MfReport {
        let heldout: Vec<f64> = sums.iter().map(EpochSums::heldout_rmse).collect();
        let hit = heldout.iter().position(|&r| r <= cfg.target_rmse);
        MfReport {
            target_rmse: cfg.target_rmse,
            epochs_to_target: hit.map(|e| e as u32 + 1),
            seconds_to_target: hit.and_then(|e| seconds_per_epoch.get(e).copied()),
            heldout_rmse: heldout.last().copied().unwrap_or(f64::NAN),
            rmse_per_epoch: sums.iter().map(EpochSums::train_rmse).collect(),
            heldout_rmse_per_epoch: heldout,
            epochs: cfg.epochs,
            seconds,
            seconds_per_epoch,
            bytes_sent,
            ratings_per_epoch: sums.iter().map(|s| (s.train_n, s.heldout_n)).collect(),
        }
    }
}
