//! `tofu ssp server` / `tofu ssp worker`: a parameter-server run as
//! separate processes over TCP (`ssp::tcp`), on one host or several.
//!
//! Two applications (`--app`): `mf`, SGD matrix factorisation on
//! MovieLens-100K with the same tables, per-worker loop and seeds as
//! `tofu ssp mf` (`ssp::mf::run_worker`; worker processes report the
//! run's RMSE per epoch, read back from the servers' metrics table), and
//! `counter`, the tagged counter (`ssp::counter`: every worker adds 1 to
//! its (worker, clock) column of every row and checks each read against
//! the SSP bound). Servers take consistent checkpoints
//! (`--checkpoint-dir`, `--checkpoint-every`) and a killed run restarts
//! from the latest one (`server --restore`, `worker --resume`), losing and
//! repeating nothing.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ssp::checkpoint::ShardCheckpoint;
use ssp::counter::CounterSpec;
use ssp::mf::{read_metrics, run_worker, MfConfig, MfReport};
use ssp::server::ShardState;
use ssp::tcp::{TcpConnections, TcpServer};
use ssp::{Client, ClientId, CommConfig, Priority, ShardId, SspError, TableConfig, Worker};

use super::ssp::{
    load_movielens, parse_priority, placement, print_report, MfDataArgs, MfModelArgs,
};

/// The application a multi-process run trains.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum App {
    /// SGD matrix factorisation on MovieLens-100K (as `tofu ssp mf`).
    Mf,
    /// The tagged counter (the exactly-once oracle of the tests).
    Counter,
}

/// The shape of a multi-process run; servers and workers must agree.
#[derive(clap::Args, Debug, Clone)]
pub struct RunShape {
    /// What the run trains.
    #[arg(long, value_enum, default_value = "counter")]
    pub app: App,
    /// Client (worker) processes.
    #[arg(long, default_value_t = 2)]
    pub clients: usize,
    /// Worker threads per client process.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Server processes.
    #[arg(long, default_value_t = 1)]
    pub num_servers: usize,
    /// Shards per server process.
    #[arg(long, default_value_t = 2)]
    pub shards_per_server: usize,
    /// Clocks each worker runs (`--app counter`).
    #[arg(long, default_value_t = 10)]
    pub clocks: u32,
    /// Rows of the counter table (`--app counter`).
    #[arg(long, default_value_t = 8)]
    pub rows: u64,
    /// Staleness s in clocks.
    #[arg(long, default_value_t = 1)]
    pub staleness: u32,
    /// Directory of consistent checkpoints.
    #[arg(long)]
    pub checkpoint_dir: Option<PathBuf>,
}

impl RunShape {
    fn spec(&self) -> CounterSpec {
        CounterSpec {
            workers: (self.clients * self.workers) as u32,
            clocks: self.clocks,
            rows: self.rows,
            staleness: self.staleness,
        }
    }

    fn shards(&self) -> usize {
        self.num_servers * self.shards_per_server
    }

    fn all_shards(&self) -> Vec<ShardId> {
        (0..self.shards()).map(|s| ShardId(s as u32)).collect()
    }

    fn check(&self) -> miette::Result<()> {
        if self.clients == 0
            || self.workers == 0
            || self.num_servers == 0
            || self.shards_per_server == 0
            || self.clocks == 0
        {
            return Err(miette::miette!(
                "--clients, --workers, --num-servers, --shards-per-server and --clocks must be at least 1"
            ));
        }
        Ok(())
    }

    /// The MF settings of this shape and the model flags (epochs, clocks
    /// per epoch and seed as given; communication settings default).
    fn mf_config(
        &self,
        model: &MfModelArgs,
        epochs: u32,
        clocks_per_epoch: u32,
        seed: u64,
    ) -> MfConfig {
        MfConfig {
            workers: self.clients * self.workers,
            clients: self.clients,
            shards: self.shards(),
            staleness: self.staleness,
            rank: model.rank,
            epochs,
            clocks_per_epoch,
            seed,
            adarevision: model.adarevision.then_some(model.ada_alpha),
            ..MfConfig::default()
        }
    }

    /// The tables of the run (servers and clients hold the same).
    fn tables(&self, model: &MfModelArgs) -> Vec<TableConfig> {
        match self.app {
            App::Counter => vec![self.spec().table()],
            App::Mf => self.mf_config(model, 1, 1, 0).tables(),
        }
    }

    /// The clock every shard has a checkpoint for, when restarting.
    fn restart_clock(&self) -> miette::Result<u32> {
        let dir = self.checkpoint_dir.as_ref().ok_or_else(|| {
            miette::miette!("--restore/--resume need --checkpoint-dir DIR (where the servers wrote checkpoints)")
        })?;
        ShardCheckpoint::latest_common(dir, &self.all_shards()).ok_or_else(|| {
            miette::miette!(
                "{} holds no checkpoint common to all {} shards: run without --restore/--resume",
                dir.display(),
                self.all_shards().len()
            )
        })
    }
}

/// Arguments of `tofu ssp server`.
#[derive(clap::Args, Debug)]
pub struct ServerArgs {
    #[command(flatten)]
    pub shape: RunShape,
    #[command(flatten)]
    pub model: MfModelArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070")]
    pub listen: String,
    /// This server's index (it hosts shards index·K … index·K + K − 1).
    #[arg(long, default_value_t = 0)]
    pub index: usize,
    /// Checkpoint after every this many clocks (needs --checkpoint-dir).
    #[arg(long, default_value_t = 0)]
    pub checkpoint_every: u32,
    /// Start from the latest checkpoint common to every shard.
    #[arg(long)]
    pub restore: bool,
    /// Print one JSON object on stdout: increments applied, rows held per
    /// shard and table, and (`--app counter`) the final rows.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `tofu ssp worker`.
#[derive(clap::Args, Debug)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub shape: RunShape,
    #[command(flatten)]
    pub model: MfModelArgs,
    #[command(flatten)]
    pub run: MfDataArgs,
    /// Server addresses in index order, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub servers: Vec<String>,
    /// This client's index (0 … clients − 1).
    #[arg(long, default_value_t = 0)]
    pub client: usize,
    /// Epochs (`--app mf`).
    #[arg(long, default_value_t = 20)]
    pub epochs: u32,
    /// Seed of initialisation, split and order (`--app mf`).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Sleep after each clock, milliseconds (slow workers).
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u64,
    /// Managed communication (thesis §3.2): this client's bandwidth
    /// budget, bytes per second, metered by a leaky bucket over every
    /// increment message it sends, clock-end flushes and early sends alike
    /// (0 = off: updates go out only at clock end).
    #[arg(long, default_value_t = 0)]
    pub bandwidth: u64,
    /// Order of early sends under `--bandwidth`.
    #[arg(long, default_value = "magnitude", value_parser = parse_priority)]
    pub priority: Priority,
    /// Start after the latest checkpoint common to every shard.
    #[arg(long)]
    pub resume: bool,
    /// Print the run's summary as one JSON object on stdout (`--app mf`).
    #[arg(long)]
    pub json: bool,
}

/// Runs a server process until every client has said goodbye.
pub fn server(a: ServerArgs) -> miette::Result<ExitCode> {
    a.shape.check()?;
    if a.index >= a.shape.num_servers {
        return Err(miette::miette!(
            "--index {} is out of range for --num-servers {}",
            a.index,
            a.shape.num_servers
        ));
    }
    if a.checkpoint_every > 0 && a.shape.checkpoint_dir.is_none() {
        return Err(miette::miette!(
            "--checkpoint-every needs --checkpoint-dir DIR"
        ));
    }
    if let Some(dir) = &a.shape.checkpoint_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| miette::miette!("--checkpoint-dir {}: {e}", dir.display()))?;
    }
    let tables = a.shape.tables(&a.model);
    let k = a.shape.shards_per_server;
    let ids: Vec<ShardId> = (a.index * k..(a.index + 1) * k)
        .map(|s| ShardId(s as u32))
        .collect();
    let restored = if a.restore {
        Some(a.shape.restart_clock()?)
    } else {
        None
    };
    let mut states = Vec::new();
    for &id in &ids {
        let state = match (restored, &a.shape.checkpoint_dir) {
            (Some(t), Some(dir)) => {
                let ck = ShardCheckpoint::read(dir, id, t)
                    .map_err(|e| miette::miette!("--restore: {e}"))?;
                ShardState::restore(ck, &tables, a.shape.clients)
            }
            _ => ShardState::new(id, &tables, a.shape.clients),
        };
        states.push(state.with_checkpoints(a.checkpoint_every));
    }
    let server = TcpServer::start(&a.listen, states, a.shape.checkpoint_dir.clone())
        .map_err(|e| miette::miette!("--listen: {e}"))?;
    eprintln!(
        "ssp server {}: shards {:?} on {}{}",
        a.index,
        ids.iter().map(|s| s.0).collect::<Vec<_>>(),
        server.local_addr(),
        restored
            .map(|t| format!(", restored from the checkpoint at clock {t}"))
            .unwrap_or_default()
    );
    let states = server.wait().map_err(|e| miette::miette!("{e}"))?;
    let mut rows = serde_json::Map::new();
    let mut held = Vec::new();
    let mut applied = 0;
    for st in &states {
        applied += st.applied();
        let mut per_table = std::collections::BTreeMap::<u32, u64>::new();
        for (key, values) in st.rows() {
            *per_table.entry(key.table.0).or_default() += 1;
            if a.shape.app == App::Counter {
                rows.insert(
                    key.row.0.to_string(),
                    serde_json::json!(values.to_dense(a.shape.spec().table().row_len as usize)),
                );
            }
        }
        held.push(serde_json::json!({ "shard": st.id().0, "rows_per_table": per_table }));
    }
    if a.json {
        let mut v = serde_json::json!({
            "applied": applied,
            "restored_from": restored,
            "shards": held,
        });
        if a.shape.app == App::Counter {
            v["rows"] = rows.into();
        }
        println!("{v}");
    } else {
        eprintln!("ssp server {}: done, {applied} increments applied", a.index);
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs a worker process: its client and worker threads, until they are
/// done and the servers have closed.
pub fn worker(a: WorkerArgs) -> miette::Result<ExitCode> {
    a.shape.check()?;
    if a.servers.len() != a.shape.num_servers {
        return Err(miette::miette!(
            "--servers lists {} addresses but --num-servers is {}",
            a.servers.len(),
            a.shape.num_servers
        ));
    }
    if a.client >= a.shape.clients {
        return Err(miette::miette!(
            "--client {} is out of range for --clients {}",
            a.client,
            a.shape.clients
        ));
    }
    let start = if a.resume {
        a.shape.restart_clock()? + 1
    } else {
        0
    };
    let id = ClientId(a.client as u32);
    let mut comm = CommConfig {
        bandwidth: a.bandwidth,
        priority: a.priority,
        // As `tofu ssp mf`'s in-process clients: seed + client index.
        seed: a.seed.wrapping_add(a.client as u64),
        ..CommConfig::default()
    };
    let mut app: Box<dyn WorkerApp> = match a.shape.app {
        App::Counter => Box::new(CounterApp {
            spec: a.shape.spec(),
            delay: Duration::from_millis(a.delay_ms),
        }),
        App::Mf => {
            let mut cfg = a
                .shape
                .mf_config(&a.model, a.epochs, a.run.clocks_per_epoch, a.seed);
            cfg.check().map_err(|e| miette::miette!("{e}"))?;
            cfg.delay = Duration::from_millis(a.delay_ms);
            let (data, train, test) = load_movielens(a.run.data.as_deref(), a.seed)?;
            comm.placement = placement(a.run.placement, &cfg, &data)?;
            cfg.comm = comm.clone();
            Box::new(MfApp::new(cfg, train, test))
        }
    };
    let tables = a.shape.tables(&a.model);
    let (conns, links, inbox) = TcpConnections::connect(
        id,
        &a.servers,
        a.shape.shards_per_server,
        Duration::from_secs(20),
    )
    .map_err(|e| miette::miette!("--servers: {e}"))?;
    let (client, workers) =
        Client::start_at(id, &tables, links, inbox, a.shape.workers, comm, start)
            .map_err(|e| miette::miette!("{e}"))?;
    let began = Instant::now();
    let threads: Vec<_> = workers
        .into_iter()
        .enumerate()
        .map(|(i, w)| {
            let global = a.client * a.shape.workers + i;
            let job = app.job(global, i == 0);
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
        return Err(miette::miette!("ssp worker {}: {e}", a.client));
    }
    let bytes_sent = client
        .stats()
        .bytes_sent
        .load(std::sync::atomic::Ordering::Relaxed);
    client.join().map_err(|e| miette::miette!("{e}"))?;
    conns.close();
    eprintln!("ssp worker {}: done from clock {start}", a.client);
    app.finish(&a, began.elapsed().as_secs_f64(), bytes_sent, start)?;
    Ok(ExitCode::SUCCESS)
}

/// What one worker thread runs.
type Job = Box<dyn FnOnce(Worker) -> Result<(), SspError> + Send>;

/// An application's part in a worker process.
trait WorkerApp {
    /// The job of global worker `w`; `reporter` is the one thread per
    /// process that reads the run's results back at the end.
    fn job(&mut self, w: usize, reporter: bool) -> Job;
    /// Prints the results once every thread is done.
    fn finish(
        &mut self,
        a: &WorkerArgs,
        seconds: f64,
        bytes_sent: u64,
        start: u32,
    ) -> miette::Result<()>;
}

struct CounterApp {
    spec: CounterSpec,
    delay: Duration,
}

impl WorkerApp for CounterApp {
    fn job(&mut self, w: usize, _reporter: bool) -> Job {
        let (spec, delay) = (self.spec, self.delay);
        Box::new(move |mut worker| ssp::counter::run_worker(&mut worker, w as u32, spec, delay))
    }

    fn finish(&mut self, _: &WorkerArgs, _: f64, _: u64, _: u32) -> miette::Result<()> {
        Ok(())
    }
}

struct MfApp {
    cfg: Arc<MfConfig>,
    data: Arc<(Vec<ssp::mf::Rating>, Vec<ssp::mf::Rating>)>,
    began: Instant,
    /// Seconds from the start to each epoch's end on this process's workers.
    ended: Arc<Mutex<Vec<f64>>>,
    /// The run's per-epoch sums, read back by the reporting thread.
    sums: Arc<Mutex<Vec<ssp::mf::EpochSums>>>,
}

impl MfApp {
    fn new(cfg: MfConfig, train: Vec<ssp::mf::Rating>, test: Vec<ssp::mf::Rating>) -> MfApp {
        let epochs = cfg.epochs as usize;
        MfApp {
            cfg: Arc::new(cfg),
            data: Arc::new((train, test)),
            began: Instant::now(),
            ended: Arc::new(Mutex::new(vec![0.0; epochs])),
            sums: Arc::new(Mutex::new(Vec::new())),
        }
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

    fn finish(
        &mut self,
        a: &WorkerArgs,
        seconds: f64,
        bytes_sent: u64,
        start: u32,
    ) -> miette::Result<()> {
        let sums = self.sums.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let ended = self.ended.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for (e, s) in sums.iter().enumerate() {
            eprintln!(
                "epoch {}: train RMSE {:.4}, held-out RMSE {:.4}",
                e + 1,
                s.train_rmse(),
                s.heldout_rmse()
            );
        }
        let report = MfReport::new(&self.cfg, &sums, ended, seconds, bytes_sent);
        print_report(
            &report,
            a.json,
            serde_json::json!({
                "staleness": a.shape.staleness,
                "workers": self.cfg.workers,
                "clients": a.shape.clients,
                "shards": a.shape.shards(),
                "client": a.client,
                "bandwidth": a.bandwidth,
                "adarevision": a.model.adarevision,
                "resumed_at": start,
            }),
        )
    }
}
