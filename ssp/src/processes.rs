//! A run as separate processes over TCP ([`crate::tcp`]): what a server
//! process and a worker (client) process do between parsing their
//! arguments and printing their results (`tofu ssp server` / `tofu ssp
//! worker`).
//!
//! Server side: [`shard_states`] builds a process's shards, fresh or
//! restored from a checkpoint, and [`ServerSummary`] says what they hold
//! once every client has left. Client side: [`run_client`] connects to the
//! servers, starts the client and one thread per worker running a
//! [`WorkerApp`]'s job — [`CounterApp`] (the tagged counter,
//! [`crate::counter`]) or [`MfApp`] (SGD MF, [`crate::mf::run_worker`],
//! reading the run's per-epoch sums back from the servers' metrics table)
//! — and waits for them and for the servers to close. A worker that fails
//! closes the connections at once rather than waiting for servers that may
//! be gone.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::checkpoint::ShardCheckpoint;
use crate::counter::CounterSpec;
use crate::mf::{read_metrics, run_worker, EpochSums, MfConfig, Rating};
use crate::server::ShardState;
use crate::tcp::TcpConnections;
use crate::{Client, ClientId, Clock, CommConfig, ShardId, SspError, TableConfig, Worker};

/// The shards `ids` of a server process for `clients` clients: restored
/// from their checkpoints at clock `restore.1` in directory `restore.0`,
/// or fresh; each checkpointing every `checkpoint_every` clocks (0: never).
///
/// # Errors
/// A checkpoint file that is missing or does not decode.
pub fn shard_states(
    ids: &[ShardId],
    tables: &[TableConfig],
    clients: usize,
    restore: Option<(&Path, Clock)>,
    checkpoint_every: u32,
) -> Result<Vec<ShardState>, SspError> {
    ids.iter()
        .map(|&id| {
            let state = match restore {
                Some((dir, t)) => {
                    ShardState::restore(ShardCheckpoint::read(dir, id, t)?, tables, clients)
                }
                None => ShardState::new(id, tables, clients),
            };
            Ok(state.with_checkpoints(checkpoint_every))
        })
        .collect()
}

/// What a server process's shards hold at the end of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerSummary {
    /// Increments applied, all shards together.
    pub applied: u64,
    /// Per shard: rows held per table id.
    pub rows_per_table: Vec<(ShardId, BTreeMap<u32, u64>)>,
    /// Every row's values by row id, dense (with a row length).
    pub rows: BTreeMap<u64, Vec<f32>>,
}

impl ServerSummary {
    /// Summarises `states`; with `row_len`, also every row's values as
    /// `row_len` dense columns (the counter's table).
    pub fn of(states: &[ShardState], row_len: Option<usize>) -> ServerSummary {
        let mut s = ServerSummary::default();
        for st in states {
            s.applied += st.applied();
            let mut per_table = BTreeMap::<u32, u64>::new();
            for (key, values) in st.rows() {
                *per_table.entry(key.table.0).or_default() += 1;
                if let Some(len) = row_len {
                    s.rows.insert(key.row.0, values.to_dense(len));
                }
            }
            s.rows_per_table.push((st.id(), per_table));
        }
        s
    }
}

/// What one worker thread runs.
pub type Job = Box<dyn FnOnce(Worker) -> Result<(), SspError> + Send>;

/// An application's part in a worker process.
pub trait WorkerApp {
    /// The job of global worker `w`; `reporter` is the one thread per
    /// process that reads the run's results back at the end.
    fn job(&mut self, w: usize, reporter: bool) -> Job;
}

/// The tagged counter ([`crate::counter::run_worker`]).
pub struct CounterApp {
    /// The run's shape.
    pub spec: CounterSpec,
    /// Sleep after each clock (slow workers).
    pub delay: Duration,
}

impl WorkerApp for CounterApp {
    fn job(&mut self, w: usize, _reporter: bool) -> Job {
        let (spec, delay) = (self.spec, self.delay);
        Box::new(move |mut worker| crate::counter::run_worker(&mut worker, w as u32, spec, delay))
    }
}

/// SGD matrix factorisation ([`crate::mf::run_worker`]); after the run,
/// [`MfApp::results`] gives the run's per-epoch sums (read back from the
/// servers by the reporting thread) and when each epoch ended here.
pub struct MfApp {
    cfg: Arc<MfConfig>,
    data: Arc<(Vec<Rating>, Vec<Rating>)>,
    began: Instant,
    /// Seconds from the start to each epoch's end on this process's workers.
    ended: Arc<Mutex<Vec<f64>>>,
    /// The run's per-epoch sums, read back by the reporting thread.
    sums: Arc<Mutex<Vec<EpochSums>>>,
}

impl MfApp {
    /// The app of run `cfg` on the ratings `train` and `test`.
    pub fn new(cfg: MfConfig, train: Vec<Rating>, test: Vec<Rating>) -> MfApp {
        let epochs = cfg.epochs as usize;
        MfApp {
            cfg: Arc::new(cfg),
            data: Arc::new((train, test)),
            began: Instant::now(),
            ended: Arc::new(Mutex::new(vec![0.0; epochs])),
            sums: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The run's settings.
    pub fn config(&self) -> &MfConfig {
        &self.cfg
    }

    /// The run's per-epoch sums (empty before the reporting thread read
    /// them) and the seconds from this app's creation to each epoch's end
    /// on this process's workers.
    pub fn results(&self) -> (Vec<EpochSums>, Vec<f64>) {
        let sums = self.sums.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let ended = self.ended.lock().unwrap_or_else(|p| p.into_inner()).clone();
        (sums, ended)
    }
}

impl WorkerApp for MfApp {
    fn job(&mut self, w: usize, reporter: bool) -> Job {
        let (cfg, data) = (Arc::clone(&self.cfg), Arc::clone(&self.data));
        let (ended, sums, began) = (Arc::clone(&self.ended), Arc::clone(&self.sums), self.began);
        Box::new(move |mut worker| {
            run_worker(&mut worker, w, &data.0, &data.1, &cfg, &mut |e, _| {
                let mut ended = ended.lock().unwrap_or_else(|p| p.into_inner());
                ended[e as usize] = ended[e as usize].max(began.elapsed().as_secs_f64());
            })?;
            if reporter {
                let read = read_metrics(&mut worker, &cfg)?;
                *sums.lock().unwrap_or_else(|p| p.into_inner()) = read;
            }
            Ok(())
        })
    }
}

/// A worker process's client: who it is and where the servers are.
pub struct ClientSetup<'a> {
    /// This client's index.
    pub client: usize,
    /// Server addresses in index order.
    pub servers: &'a [String],
    /// Shards per server process.
    pub shards_per_server: usize,
    /// The run's tables.
    pub tables: &'a [TableConfig],
    /// Worker threads in this process (global worker ids `client ·
    /// workers + i`).
    pub workers: usize,
    /// Communication settings.
    pub comm: CommConfig,
    /// The clock every worker starts at (after a checkpoint: its clock + 1).
    pub start: Clock,
    /// How long a server may stay silent on an open connection before it
    /// counts as gone ([`TcpConnections::connect`]).
    pub peer_timeout: Duration,
}

/// What [`run_client`] measured.
#[derive(Clone, Copy, Debug)]
pub struct ClientRun {
    /// Seconds from the workers' start to the last one's end.
    pub seconds: f64,
    /// Bytes of updates this client sent.
    pub bytes_sent: u64,
}

/// Why a worker process failed.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The servers could not be reached.
    #[error("{0}")]
    Connect(SspError),
    /// A worker thread failed or panicked (the message of the first).
    #[error("{0}")]
    Worker(String),
    /// Starting or closing the client failed.
    #[error(transparent)]
    Client(SspError),
}

/// Runs a worker process's client and its worker threads, each running
/// `app`'s job, until they are done and the servers have closed (waiting
/// at most 20 s to connect).
///
/// # Errors
/// [`ProcessError::Connect`] when a server cannot be reached,
/// [`ProcessError::Worker`] with the first worker's failure,
/// [`ProcessError::Client`] when the client cannot start or stop cleanly.
pub fn run_client(
    setup: ClientSetup<'_>,
    app: &mut dyn WorkerApp,
) -> Result<ClientRun, ProcessError> {
    let id = ClientId(setup.client as u32);
    let (conns, links, inbox) = TcpConnections::connect(
        id,
        setup.servers,
        setup.shards_per_server,
        (Duration::from_secs(20), setup.peer_timeout),
    )
    .map_err(ProcessError::Connect)?;
    let (client, workers) = Client::start_at(
        id,
        setup.tables,
        links,
        inbox,
        setup.workers,
        setup.comm,
        setup.start,
    )
    .map_err(ProcessError::Client)?;
    let began = Instant::now();
    let threads: Vec<_> = workers
        .into_iter()
        .enumerate()
        .map(|(i, w)| {
            let job = app.job(setup.client * setup.workers + i, i == 0);
            std::thread::spawn(move || job(w))
        })
        .collect();
    let mut first_err = None;
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_err.get_or_insert(e.to_string());
            }
            Err(_) => {
                first_err.get_or_insert("a worker thread panicked".into());
            }
        }
    }
    if let Some(e) = first_err {
        // The servers may be gone: do not wait for them.
        conns.close();
        return Err(ProcessError::Worker(e));
    }
    let bytes_sent = client.stats().bytes_sent.load(Ordering::Relaxed);
    client.join().map_err(ProcessError::Client)?;
    conns.close();
    Ok(ClientRun {
        seconds: began.elapsed().as_secs_f64(),
        bytes_sent,
    })
}
