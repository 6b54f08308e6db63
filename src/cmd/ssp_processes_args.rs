//! The arguments of `tofu ssp server` and `tofu ssp worker`
//! ([`super::ssp_processes`]): the run's shape, which every process must
//! agree on, and each process's own flags.

use std::path::PathBuf;

use ssp::process_run;
use ssp::Priority;

use super::ssp::{parse_priority, MfDataArgs, MfModelArgs};

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
    /// Seconds a silent peer (a cut link, a host gone) may take to answer.
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = rendezvous::seconds)]
    pub peer_timeout: std::time::Duration,
}

impl RunShape {
    /// The run's shape with the model flags, as the `ssp` crate takes it.
    pub(crate) fn shape(&self, model: &MfModelArgs) -> process_run::RunShape {
        process_run::RunShape {
            app: match self.app {
                App::Mf => process_run::App::Mf,
                App::Counter => process_run::App::Counter,
            },
            clients: self.clients,
            workers: self.workers,
            num_servers: self.num_servers,
            shards_per_server: self.shards_per_server,
            clocks: self.clocks,
            rows: self.rows,
            staleness: self.staleness,
            checkpoint_dir: self.checkpoint_dir.clone(),
            rank: model.rank,
            adarevision: model.adarevision.then_some(model.ada_alpha),
            peer_timeout: self.peer_timeout,
        }
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
