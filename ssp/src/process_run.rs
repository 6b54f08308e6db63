//! A multi-process run from end to end (`tofu ssp server` / `tofu ssp
//! worker`): the run's shape, which every process must agree on, and what
//! a server process and a worker process do with it ([`serve`],
//! [`work`]), on top of [`crate::processes`].
//!
//! Two applications ([`App`]): `mf`, SGD matrix factorisation with the same
//! tables, per-worker loop and seeds as the in-process run
//! ([`crate::mf::run_worker`]), and `counter`, the tagged counter
//! ([`crate::counter`]). Servers take consistent checkpoints and a killed
//! run restarts from the latest one common to every shard
//! ([`RunShape::restart_clock`]), losing and repeating nothing. Errors
//! ([`RunError`]) name the flag of `tofu ssp server`/`worker` to change.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::checkpoint::ShardCheckpoint;
use crate::counter::CounterSpec;
use crate::mf::{MfConfig, Rating, Ratings};
use crate::placement::Policy;
use crate::processes::{
    run_client, shard_states, ClientRun, ClientSetup, CounterApp, MfApp, ProcessError,
    ServerSummary, WorkerApp,
};
use crate::tcp::TcpServer;
use crate::{Clock, CommConfig, ShardId, SspError, TableConfig};

/// The application a multi-process run trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum App {
    /// SGD matrix factorisation on MovieLens-100K.
    Mf,
    /// The tagged counter (the exactly-once oracle of the tests).
    Counter,
}

/// The shape of a multi-process run; servers and workers must agree.
#[derive(Clone, Debug)]
pub struct RunShape {
    /// What the run trains.
    pub app: App,
    /// Client (worker) processes.
    pub clients: usize,
    /// Worker threads per client process.
    pub workers: usize,
    /// Server processes.
    pub num_servers: usize,
    /// Shards per server process.
    pub shards_per_server: usize,
    /// Clocks each worker runs (counter).
    pub clocks: u32,
    /// Rows of the counter table.
    pub rows: u64,
    /// Staleness s in clocks.
    pub staleness: u32,
    /// Directory of consistent checkpoints.
    pub checkpoint_dir: Option<PathBuf>,
    /// MF latent factors.
    pub rank: u32,
    /// MF AdaRevision's base rate α (`None`: plain SGD).
    pub adarevision: Option<f32>,
    /// How long a peer may stay silent on an open connection before it
    /// counts as gone (a cut link, a host gone; issue 42).
    pub peer_timeout: Duration,
}

/// Why a process of a multi-process run could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A count of the shape is 0.
    #[error(
        "--clients, --workers, --num-servers, --shards-per-server and --clocks must be at least 1"
    )]
    Counts,
    /// Restarting without a checkpoint directory.
    #[error("--restore/--resume need --checkpoint-dir DIR (where the servers wrote checkpoints)")]
    NoCheckpointDir,
    /// No checkpoint every shard has.
    #[error("{} holds no checkpoint common to all {shards} shards: run without --restore/--resume", dir.display())]
    NoCommonCheckpoint {
        /// The checkpoint directory.
        dir: PathBuf,
        /// Shards of the run.
        shards: usize,
    },
    /// A flag out of range or missing its companion (the message).
    #[error("{0}")]
    Flags(String),
    /// The checkpoint directory cannot be created.
    #[error("--checkpoint-dir {}: {source}", dir.display())]
    CheckpointDir {
        /// The directory.
        dir: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A shard's checkpoint cannot be read.
    #[error("--restore: {0}")]
    Restore(SspError),
    /// The server cannot listen.
    #[error("--listen: {0}")]
    Listen(SspError),
    /// The MF settings, or the run itself.
    #[error(transparent)]
    Ssp(#[from] SspError),
    /// The tables cannot be placed.
    #[error("--placement: {0}")]
    Placement(SspError),
    /// The servers cannot be reached.
    #[error("--servers: {0}")]
    Connect(SspError),
    /// A worker thread failed.
    #[error("ssp worker {client}: {message}")]
    Worker {
        /// This client's index.
        client: usize,
        /// The first failure.
        message: String,
    },
}

impl RunShape {
    /// The counter's shape.
    pub fn spec(&self) -> CounterSpec {
        CounterSpec {
            workers: (self.clients * self.workers) as u32,
            clocks: self.clocks,
            rows: self.rows,
            staleness: self.staleness,
        }
    }

    /// Shards of the run (all servers together).
    pub fn shards(&self) -> usize {
        self.num_servers * self.shards_per_server
    }

    /// Checks the counts are at least 1.
    ///
    /// Errors: [`RunError::Counts`].
    pub fn check(&self) -> Result<(), RunError> {
        let counts = [
            self.clients,
            self.workers,
            self.num_servers,
            self.shards_per_server,
        ];
        if counts.contains(&0) || self.clocks == 0 {
            return Err(RunError::Counts);
        }
        Ok(())
    }

    /// Checks the counts ([`Self::check`]), that `servers` lists every
    /// server process and that `client` is one of the clients.
    ///
    /// Errors: [`RunError::Counts`], [`RunError::Flags`].
    pub fn check_worker(&self, servers: &[String], client: usize) -> Result<(), RunError> {
        self.check()?;
        if servers.len() != self.num_servers {
            return Err(RunError::Flags(format!(
                "--servers lists {} addresses but --num-servers is {}",
                servers.len(),
                self.num_servers
            )));
        }
        if client >= self.clients {
            return Err(RunError::Flags(format!(
                "--client {client} is out of range for --clients {}",
                self.clients
            )));
        }
        Ok(())
    }

    /// The MF settings of this shape (epochs, clocks per epoch and seed as
    /// given; communication settings default).
    pub fn mf_config(&self, epochs: u32, clocks_per_epoch: u32, seed: u64) -> MfConfig {
        MfConfig {
            workers: self.clients * self.workers,
            clients: self.clients,
            shards: self.shards(),
            staleness: self.staleness,
            rank: self.rank,
            epochs,
            clocks_per_epoch,
            seed,
            adarevision: self.adarevision,
            ..MfConfig::default()
        }
    }

    /// The tables of the run (servers and clients hold the same).
    pub fn tables(&self) -> Vec<TableConfig> {
        match self.app {
            App::Counter => vec![self.spec().table()],
            App::Mf => self.mf_config(1, 1, 0).tables(),
        }
    }

    /// The clock every shard has a checkpoint for, when restarting.
    ///
    /// Errors: no checkpoint directory, or none common to every shard.
    pub fn restart_clock(&self) -> Result<Clock, RunError> {
        let dir = self
            .checkpoint_dir
            .as_ref()
            .ok_or(RunError::NoCheckpointDir)?;
        let all: Vec<ShardId> = (0..self.shards()).map(|s| ShardId(s as u32)).collect();
        ShardCheckpoint::latest_common(dir, &all).ok_or_else(|| RunError::NoCommonCheckpoint {
            dir: dir.clone(),
            shards: all.len(),
        })
    }
}

/// A server process's own settings.
#[derive(Clone, Debug)]
pub struct ServerSetup<'a> {
    /// Address to listen on.
    pub listen: &'a str,
    /// This server's index (it hosts shards index·K … index·K + K − 1).
    pub index: usize,
    /// Checkpoint after every this many clocks (0: never).
    pub checkpoint_every: u32,
    /// Start from the latest checkpoint common to every shard.
    pub restore: bool,
}

/// What a server process held at the end.
#[derive(Clone, Debug)]
pub struct Served {
    /// What its shards hold (with the counter's final rows).
    pub summary: ServerSummary,
    /// The clock it restored from, if it did.
    pub restored_from: Option<Clock>,
}

/// Runs a server process until every client has said goodbye; `started`
/// is told the shards, the address and the restored clock once it listens.
///
/// Errors: [`RunError`] (flags, checkpoints, listening, the shards' run).
pub fn serve(
    shape: &RunShape,
    s: &ServerSetup<'_>,
    started: impl FnOnce(&[ShardId], SocketAddr, Option<Clock>),
) -> Result<Served, RunError> {
    shape.check()?;
    if s.index >= shape.num_servers {
        return Err(RunError::Flags(format!(
            "--index {} is out of range for --num-servers {}",
            s.index, shape.num_servers
        )));
    }
    if s.checkpoint_every > 0 && shape.checkpoint_dir.is_none() {
        return Err(RunError::Flags(
            "--checkpoint-every needs --checkpoint-dir DIR".into(),
        ));
    }
    if let Some(dir) = &shape.checkpoint_dir {
        std::fs::create_dir_all(dir).map_err(|source| RunError::CheckpointDir {
            dir: dir.clone(),
            source,
        })?;
    }
    let tables = shape.tables();
    let k = shape.shards_per_server;
    let ids: Vec<ShardId> = (s.index * k..(s.index + 1) * k)
        .map(|s| ShardId(s as u32))
        .collect();
    let restored = if s.restore {
        Some(shape.restart_clock()?)
    } else {
        None
    };
    let restore = restored
        .zip(shape.checkpoint_dir.as_deref())
        .map(|(t, d)| (d, t));
    let states = shard_states(&ids, &tables, shape.clients, restore, s.checkpoint_every)
        .map_err(RunError::Restore)?;
    let dir = shape.checkpoint_dir.clone();
    let server =
        TcpServer::start(s.listen, states, dir, shape.peer_timeout).map_err(RunError::Listen)?;
    started(&ids, server.local_addr(), restored);
    let states = server.wait()?;
    let row_len = (shape.app == App::Counter).then(|| shape.spec().table().row_len as usize);
    Ok(Served {
        summary: ServerSummary::of(&states, row_len),
        restored_from: restored,
    })
}

/// A worker process's own settings.
#[derive(Clone, Debug)]
pub struct WorkerSetup<'a> {
    /// Server addresses in index order.
    pub servers: &'a [String],
    /// This client's index (0 … clients − 1).
    pub client: usize,
    /// Start after the latest checkpoint common to every shard.
    pub resume: bool,
    /// Sleep after each clock (slow workers).
    pub delay: Duration,
    /// Communication settings (the seed is the run's; the client adds its
    /// index, as the in-process clients do).
    pub comm: CommConfig,
}

/// The MF run of a worker process: its settings and ratings.
pub struct MfInput {
    /// The run's settings ([`RunShape::mf_config`]).
    pub cfg: MfConfig,
    /// The ratings (for the tables' sizes).
    pub data: Ratings,
    /// The training ratings.
    pub train: Vec<Rating>,
    /// The held-out ratings.
    pub test: Vec<Rating>,
    /// Placement of the tables' rows (`None`: a hash of table and row).
    pub placement: Option<Policy>,
}

/// What a worker process ran.
pub struct Worked {
    /// The clock it started at.
    pub start: Clock,
    /// Its seconds and bytes sent.
    pub run: ClientRun,
    /// The MF app (its results), for `App::Mf`.
    pub mf: Option<MfApp>,
}

/// Runs a worker process: its client and worker threads, until they are
/// done and the servers have closed; `mf`: the MF run, for [`App::Mf`].
///
/// Errors: [`RunError`] (checkpoints, settings, the servers, a worker).
pub fn work(shape: &RunShape, w: WorkerSetup<'_>, mf: Option<MfInput>) -> Result<Worked, RunError> {
    let start = if w.resume {
        shape.restart_clock()? + 1
    } else {
        0
    };
    let mut comm = w.comm.clone();
    comm.seed = comm.seed.wrapping_add(w.client as u64);
    let mut counter;
    let mut mf_app: Option<MfApp> = None;
    let app: &mut dyn WorkerApp = match (shape.app, mf) {
        (
            App::Mf,
            Some(MfInput {
                mut cfg,
                data,
                train,
                test,
                placement,
            }),
        ) => {
            cfg.check()?;
            cfg.delay = w.delay;
            comm.placement = cfg
                .placement(placement, &data)
                .map_err(RunError::Placement)?;
            cfg.comm = comm.clone();
            mf_app.insert(MfApp::new(cfg, train, test))
        }
        _ => {
            counter = CounterApp {
                spec: shape.spec(),
                delay: w.delay,
            };
            &mut counter
        }
    };
    let tables = shape.tables();
    let setup = ClientSetup {
        client: w.client,
        servers: w.servers,
        shards_per_server: shape.shards_per_server,
        tables: &tables,
        workers: shape.workers,
        comm,
        start,
        peer_timeout: shape.peer_timeout,
    };
    let run = run_client(setup, app).map_err(|e| match e {
        ProcessError::Connect(e) => RunError::Connect(e),
        ProcessError::Worker(message) => RunError::Worker {
            client: w.client,
            message,
        },
        ProcessError::Client(e) => RunError::Ssp(e),
    })?;
    Ok(Worked {
        start,
        run,
        mf: mf_app,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> RunShape {
        RunShape {
            app: App::Counter,
            clients: 2,
            workers: 3,
            num_servers: 2,
            shards_per_server: 2,
            clocks: 4,
            rows: 8,
            staleness: 1,
            checkpoint_dir: None,
            rank: 4,
            adarevision: None,
            peer_timeout: Duration::from_secs(60),
        }
    }

    /// Counts, servers and client index are checked; the counter's shape
    /// and the MF settings follow the process counts.
    #[test]
    fn shape_checks_and_derives() {
        let s = shape();
        assert_eq!(s.shards(), 4);
        assert_eq!(s.spec().workers, 6);
        let servers = vec!["a:1".to_string(), "b:1".to_string()];
        assert!(s.check_worker(&servers, 1).is_ok());
        assert!(matches!(
            s.check_worker(&servers[..1], 0),
            Err(RunError::Flags(_))
        ));
        assert!(matches!(
            s.check_worker(&servers, 2),
            Err(RunError::Flags(_))
        ));
        let zero = RunShape {
            workers: 0,
            ..shape()
        };
        assert!(matches!(zero.check(), Err(RunError::Counts)));
        let mf = RunShape {
            app: App::Mf,
            ..shape()
        };
        let cfg = mf.mf_config(3, 5, 9);
        assert_eq!(
            (cfg.workers, cfg.clients, cfg.shards, cfg.rank),
            (6, 2, 4, 4)
        );
        assert_eq!(mf.tables().len(), cfg.tables().len());
    }

    /// Restarting needs a directory, and a checkpoint every shard has.
    #[test]
    fn restart_needs_a_common_checkpoint() {
        assert!(matches!(
            shape().restart_clock(),
            Err(RunError::NoCheckpointDir)
        ));
        let dir = std::env::temp_dir().join(format!("ssp-run-shape-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = RunShape {
            checkpoint_dir: Some(dir.clone()),
            ..shape()
        };
        assert!(matches!(
            s.restart_clock(),
            Err(RunError::NoCommonCheckpoint { shards: 4, .. })
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
