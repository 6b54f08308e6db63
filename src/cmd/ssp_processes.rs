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
//! repeating nothing. The processes' work is `ssp::processes`; this file
//! checks the flags and prints (the flags: [`super::ssp_processes_args`]).

use std::process::ExitCode;
use std::time::Duration;

use ssp::mf::MfReport;
use ssp::processes::{
    run_client, shard_states, ClientRun, ClientSetup, CounterApp, MfApp, ProcessError,
    ServerSummary, WorkerApp,
};
use ssp::tcp::TcpServer;
use ssp::{CommConfig, ShardId};

use super::ssp_mf::{load_movielens, placement, print_report};
use super::ssp_processes_args::App;
pub use super::ssp_processes_args::{ServerArgs, WorkerArgs};

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
    let restore = restored
        .zip(a.shape.checkpoint_dir.as_deref())
        .map(|(t, d)| (d, t));
    let states = shard_states(&ids, &tables, a.shape.clients, restore, a.checkpoint_every)
        .map_err(|e| miette::miette!("--restore: {e}"))?;
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
    let counter = a.shape.app == App::Counter;
    let row_len = counter.then(|| a.shape.spec().table().row_len as usize);
    let summary = ServerSummary::of(&states, row_len);
    if a.json {
        let held: Vec<_> = summary
            .rows_per_table
            .iter()
            .map(
                |(id, per_table)| serde_json::json!({ "shard": id.0, "rows_per_table": per_table }),
            )
            .collect();
        let mut v = serde_json::json!({
            "applied": summary.applied,
            "restored_from": restored,
            "shards": held,
        });
        if counter {
            let rows: serde_json::Map<String, serde_json::Value> = summary
                .rows
                .iter()
                .map(|(r, values)| (r.to_string(), serde_json::json!(values)))
                .collect();
            v["rows"] = rows.into();
        }
        println!("{v}");
    } else {
        eprintln!(
            "ssp server {}: done, {} increments applied",
            a.index, summary.applied
        );
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
    let mut comm = CommConfig {
        bandwidth: a.bandwidth,
        priority: a.priority,
        // As `tofu ssp mf`'s in-process clients: seed + client index.
        seed: a.seed.wrapping_add(a.client as u64),
        ..CommConfig::default()
    };
    let mut counter;
    let mut mf: Option<MfApp> = None;
    let app: &mut dyn WorkerApp = match a.shape.app {
        App::Counter => {
            counter = CounterApp {
                spec: a.shape.spec(),
                delay: Duration::from_millis(a.delay_ms),
            };
            &mut counter
        }
        App::Mf => {
            let mut cfg = a
                .shape
                .mf_config(&a.model, a.epochs, a.run.clocks_per_epoch, a.seed);
            cfg.check().map_err(|e| miette::miette!("{e}"))?;
            cfg.delay = Duration::from_millis(a.delay_ms);
            let (data, train, test) = load_movielens(a.run.data.as_deref(), a.seed)?;
            comm.placement = placement(a.run.placement, &cfg, &data)?;
            cfg.comm = comm.clone();
            mf = Some(MfApp::new(cfg, train, test));
            mf.as_mut().expect("just set")
        }
    };
    let tables = a.shape.tables(&a.model);
    let setup = ClientSetup {
        client: a.client,
        servers: &a.servers,
        shards_per_server: a.shape.shards_per_server,
        tables: &tables,
        workers: a.shape.workers,
        comm,
        start,
    };
    let run = run_client(setup, app).map_err(|e| match e {
        ProcessError::Connect(e) => miette::miette!("--servers: {e}"),
        ProcessError::Worker(e) => miette::miette!("ssp worker {}: {e}", a.client),
        ProcessError::Client(e) => miette::miette!("{e}"),
    })?;
    eprintln!("ssp worker {}: done from clock {start}", a.client);
    if let App::Mf = a.shape.app {
        print_mf(&a, mf.as_ref().expect("the MF app ran"), run, start)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints an MF worker process's results: RMSE per epoch, then the report.
fn print_mf(a: &WorkerArgs, app: &MfApp, run: ClientRun, start: u32) -> miette::Result<()> {
    let (sums, ended) = app.results();
    for (e, s) in sums.iter().enumerate() {
        eprintln!(
            "epoch {}: train RMSE {:.4}, held-out RMSE {:.4}",
            e + 1,
            s.train_rmse(),
            s.heldout_rmse()
        );
    }
    let cfg = app.config();
    let report = MfReport::new(cfg, &sums, ended, run.seconds, run.bytes_sent);
    print_report(
        &report,
        a.json,
        serde_json::json!({
            "staleness": a.shape.staleness,
            "workers": cfg.workers,
            "clients": a.shape.clients,
            "shards": a.shape.shards(),
            "client": a.client,
            "bandwidth": a.bandwidth,
            "adarevision": a.model.adarevision,
            "resumed_at": start,
        }),
    )
}
