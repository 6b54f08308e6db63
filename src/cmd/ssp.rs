//! `tofu ssp …`: data-parallel training through the Stale Synchronous
//! Parallel parameter server (crate `ssp`, Bösen, thesis ch. 3).
//!
//! `tofu ssp mf`: SGD matrix factorisation on MovieLens-100K (the
//! `ml-100k.inter` file that `scripts/fetch-movielens.sh` caches, or
//! `--data FILE`), 90/10 split, with progress on stderr and a `--json`
//! summary (`rmse_per_epoch`, `heldout_rmse`, `epochs`, `seconds`,
//! `bytes_sent`, …).
//!
//! `tofu ssp server` / `tofu ssp worker`: the same run as separate
//! processes over TCP. The multi-process application is the tagged counter
//! (`ssp::counter`: every worker adds 1 to its (worker, clock) column of
//! every row and checks each read against the SSP bound); servers take
//! consistent checkpoints (`--checkpoint-dir`, `--checkpoint-every`) and a
//! killed run restarts from the latest one (`server --restore`, `worker
//! --resume`), losing and repeating nothing.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use ssp::checkpoint::ShardCheckpoint;
use ssp::counter::{run_worker, CounterSpec};
use ssp::mf::{load_inter, split, train, MfConfig, Rating, Ratings};
use ssp::server::ShardState;
use ssp::tcp::{TcpConnections, TcpServer};
use ssp::{Client, ClientId, CommConfig, Priority, ShardId};

/// Arguments of `tofu ssp`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: SspCommand,
}

/// The `tofu ssp` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum SspCommand {
    /// SGD matrix factorisation on MovieLens-100K through the parameter server.
    Mf(MfArgs),
    /// Benchmark: MF on MovieLens-100K under BSP, SSP and SSP + managed
    /// communication in one run; epochs and seconds to a held-out RMSE,
    /// with ratios against BSP.
    Bench(super::ssp_bench::BenchArgs),
    /// Data-parallel training of tofu's MLP training graph (digits) through
    /// the parameter server, gradients from the runner's CPU backend.
    Mlp(super::ssp_mlp::MlpArgs),
    /// A server process: hosts shards of the tagged-counter run over TCP.
    Server(ServerArgs),
    /// A client process: worker threads of the tagged-counter run over TCP.
    Worker(WorkerArgs),
}

/// The shape of a multi-process counter run; servers and workers must agree.
#[derive(clap::Args, Debug, Clone)]
pub struct RunShape {
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
    /// Clocks each worker runs.
    #[arg(long, default_value_t = 10)]
    pub clocks: u32,
    /// Rows of the counter table.
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

    fn all_shards(&self) -> Vec<ShardId> {
        (0..self.num_servers * self.shards_per_server)
            .map(|s| ShardId(s as u32))
            .collect()
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
    /// Print the final rows as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `tofu ssp worker`.
#[derive(clap::Args, Debug)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub shape: RunShape,
    /// Server addresses in index order, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub servers: Vec<String>,
    /// This client's index (0 … clients − 1).
    #[arg(long, default_value_t = 0)]
    pub client: usize,
    /// Sleep after each clock, milliseconds.
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u64,
    /// Managed communication budget, bytes per second (0 = off).
    #[arg(long, default_value_t = 0)]
    pub bandwidth: u64,
    /// Start after the latest checkpoint common to every shard.
    #[arg(long)]
    pub resume: bool,
}

/// Communication flags shared by the applications.
#[derive(clap::Args, Debug, Clone)]
pub struct CommArgs {
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Staleness s in clocks (0 = BSP).
    #[arg(long, default_value_t = 2)]
    pub staleness: u32,
    /// Managed communication: budget for early updates, bytes per second
    /// per client (0 = off: plain bounded staleness).
    #[arg(long, default_value_t = 0)]
    pub bandwidth: u64,
    /// Order of early sends under `--bandwidth`.
    #[arg(long, default_value = "magnitude", value_parser = parse_priority)]
    pub priority: Priority,
    /// Epochs (passes over the training data).
    #[arg(long, default_value_t = 20)]
    pub epochs: u32,
    /// Seed of initialisation, split and order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn parse_priority(s: &str) -> Result<Priority, String> {
    s.parse()
}

/// Arguments of `tofu ssp mf`.
#[derive(clap::Args, Debug)]
pub struct MfArgs {
    #[command(flatten)]
    pub comm: CommArgs,
    /// Ratings file (RecBole `.inter`); default: the cached MovieLens-100K.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Latent factors.
    #[arg(long, default_value_t = 100)]
    pub rank: u32,
    /// Clocks per epoch.
    #[arg(long, default_value_t = 10)]
    pub clocks_per_epoch: u32,
    /// AdaRevision on the servers (thesis §3.2.3): workers push gradients,
    /// servers take adaptive steps revised for stale reads.
    #[arg(long)]
    pub adarevision: bool,
    /// AdaRevision's base rate α (with --adarevision).
    #[arg(long, default_value_t = 0.05)]
    pub ada_alpha: f32,
}

/// Run the subcommand.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    match args.command {
        SspCommand::Mf(a) => mf(a),
        SspCommand::Bench(a) => super::ssp_bench::bench(a),
        SspCommand::Mlp(a) => super::ssp_mlp::mlp(a),
        SspCommand::Server(a) => server(a),
        SspCommand::Worker(a) => worker(a),
    }
}

/// The client communication settings of the flags.
pub(crate) fn comm_config(c: &CommArgs) -> CommConfig {
    CommConfig {
        bandwidth: c.bandwidth,
        priority: c.priority,
        seed: c.seed,
        tick: Duration::from_millis(2),
        ..CommConfig::default()
    }
}

fn default_movielens() -> miette::Result<PathBuf> {
    let cache = match std::env::var_os("TOFU_MOVIELENS_CACHE") {
        Some(c) => PathBuf::from(c),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/tofu/recbole-1.2.1"),
    };
    let file = cache.join("ml-100k.inter");
    if file.is_file() {
        Ok(file)
    } else {
        Err(miette::miette!(
            "{} is missing: run scripts/fetch-movielens.sh (or pass --data FILE)",
            file.display()
        ))
    }
}

/// MovieLens-100K (or `data`), split 90/10 with `seed`: the ratings and
/// the train and held-out sets.
///
/// # Errors
/// The file is missing (names the fetch script) or malformed.
pub(crate) fn load_movielens(
    data: Option<&Path>,
    seed: u64,
) -> miette::Result<(Ratings, Vec<Rating>, Vec<Rating>)> {
    let file = match data {
        Some(f) => f.to_path_buf(),
        None => default_movielens()?,
    };
    let ratings = load_inter(&file).map_err(|e| miette::miette!("--data: {e}"))?;
    let (tr, te) = split(&ratings, 0.9, seed);
    Ok((ratings, tr, te))
}

/// The MF run settings of the communication flags, rank (latent factors),
/// clocks per epoch and AdaRevision's base rate α (`None`: plain SGD).
///
/// # Errors
/// `--workers`, `--epochs`, `rank` or `clocks_per_epoch` is zero.
pub(crate) fn mf_config(
    c: &CommArgs,
    rank: u32,
    clocks_per_epoch: u32,
    adarevision: Option<f32>,
) -> miette::Result<MfConfig> {
    if c.workers == 0 || c.epochs == 0 || rank == 0 || clocks_per_epoch == 0 {
        return Err(miette::miette!(
            "--workers, --epochs, --rank and --clocks-per-epoch must be at least 1"
        ));
    }
    Ok(MfConfig {
        workers: c.workers,
        staleness: c.staleness,
        rank,
        epochs: c.epochs,
        clocks_per_epoch,
        seed: c.seed,
        comm: comm_config(c),
        adarevision,
        ..MfConfig::default()
    })
}

fn mf(a: MfArgs) -> miette::Result<ExitCode> {
    let c = &a.comm;
    let cfg = mf_config(
        c,
        a.rank,
        a.clocks_per_epoch,
        a.adarevision.then_some(a.ada_alpha),
    )?;
    let (data, tr, te) = load_movielens(a.data.as_deref(), c.seed)?;
    if !c.json {
        eprintln!(
            "ssp mf: {} ratings ({} users, {} items), {} train / {} held out, {} workers, s = {}",
            data.ratings.len(),
            data.users,
            data.items,
            tr.len(),
            te.len(),
            c.workers,
            c.staleness
        );
    }
    let report = train(&tr, &te, &cfg, &mut |e, trm, tem| {
        eprintln!("epoch {e}: train RMSE {trm:.4}, held-out RMSE {tem:.4}");
    })
    .map_err(|e| miette::miette!("{e}"))?;
    if c.json {
        let mut v = serde_json::to_value(&report).map_err(|e| miette::miette!("{e}"))?;
        v["staleness"] = c.staleness.into();
        v["workers"] = c.workers.into();
        v["bandwidth"] = c.bandwidth.into();
        v["adarevision"] = a.adarevision.into();
        println!("{v}");
    } else {
        println!(
            "held-out RMSE {:.4} after {} epochs, {:.2} s, {} bytes of updates sent",
            report.heldout_rmse, report.epochs, report.seconds, report.bytes_sent
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn server(a: ServerArgs) -> miette::Result<ExitCode> {
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
    let tables = [a.shape.spec().table()];
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
    let mut applied = 0;
    for st in &states {
        applied += st.applied();
        for (key, values) in st.rows() {
            rows.insert(
                key.row.0.to_string(),
                serde_json::json!(values.to_dense(a.shape.spec().table().row_len as usize)),
            );
        }
    }
    if a.json {
        println!(
            "{}",
            serde_json::json!({ "rows": rows, "applied": applied, "restored_from": restored })
        );
    } else {
        eprintln!(
            "ssp server {}: done, {} rows, {applied} increments applied",
            a.index,
            rows.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn worker(a: WorkerArgs) -> miette::Result<ExitCode> {
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
    let spec = a.shape.spec();
    let id = ClientId(a.client as u32);
    let (conns, links, inbox) = TcpConnections::connect(
        id,
        &a.servers,
        a.shape.shards_per_server,
        Duration::from_secs(20),
    )
    .map_err(|e| miette::miette!("--servers: {e}"))?;
    let comm = CommConfig {
        bandwidth: a.bandwidth,
        ..CommConfig::default()
    };
    let (client, workers) = Client::start_at(
        id,
        &[spec.table()],
        links,
        inbox,
        a.shape.workers,
        comm,
        start,
    )
    .map_err(|e| miette::miette!("{e}"))?;
    let delay = Duration::from_millis(a.delay_ms);
    let threads: Vec<_> = workers
        .into_iter()
        .enumerate()
        .map(|(i, mut w)| {
            let global = (a.client * a.shape.workers + i) as u32;
            std::thread::spawn(move || run_worker(&mut w, global, spec, delay))
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
    client.join().map_err(|e| miette::miette!("{e}"))?;
    conns.close();
    eprintln!(
        "ssp worker {}: clocks {start}..{} done",
        a.client, a.shape.clocks
    );
    Ok(ExitCode::SUCCESS)
}
