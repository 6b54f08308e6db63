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
//! repeating nothing. The processes' work is `ssp::process_run`; this file
//! checks the flags and prints (the flags: [`super::ssp_processes_args`]).

use std::process::ExitCode;
use std::time::Duration;

use ssp::mf::summary::MfSummary;
use ssp::mf::MfReport;
use ssp::process_run::{serve, work, MfInput, RunShape, ServerSetup, WorkerSetup};
use ssp::processes::{ClientRun, MfApp};
use ssp::served_summary::ServedSummary;
use ssp::CommConfig;

use super::lib_err;
use super::ssp_mf::{load_movielens, placement_policy, print_summary};
use super::ssp_processes_args::App;
pub use super::ssp_processes_args::{ServerArgs, WorkerArgs};

/// Runs a server process until every client has said goodbye.
pub fn server(a: ServerArgs) -> miette::Result<ExitCode> {
    let shape = a.shape.shape(&a.model);
    let setup = ServerSetup {
        listen: &a.listen,
        index: a.index,
        checkpoint_every: a.checkpoint_every,
        restore: a.restore,
    };
    let served = serve(&shape, &setup, |ids, addr, restored| {
        eprintln!(
            "ssp server {}: shards {:?} on {addr}{}",
            a.index,
            ids.iter().map(|s| s.0).collect::<Vec<_>>(),
            restored
                .map(|t| format!(", restored from the checkpoint at clock {t}"))
                .unwrap_or_default()
        );
    })
    .map_err(lib_err)?;
    if a.json {
        let summary = ServedSummary::new(&served, a.shape.app == App::Counter);
        println!("{}", serde_json::to_value(summary).map_err(lib_err)?);
    } else {
        eprintln!(
            "ssp server {}: done, {} increments applied",
            a.index, served.summary.applied
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs a worker process: its client and worker threads, until they are
/// done and the servers have closed.
pub fn worker(a: WorkerArgs) -> miette::Result<ExitCode> {
    let shape = a.shape.shape(&a.model);
    shape.check_worker(&a.servers, a.client).map_err(lib_err)?;
    let setup = WorkerSetup {
        servers: &a.servers,
        client: a.client,
        resume: a.resume,
        delay: Duration::from_millis(a.delay_ms),
        comm: CommConfig {
            bandwidth: a.bandwidth,
            priority: a.priority,
            seed: a.seed,
            ..CommConfig::default()
        },
    };
    let worked = work(&shape, setup, mf_input(&a, &shape)?).map_err(lib_err)?;
    eprintln!("ssp worker {}: done from clock {}", a.client, worked.start);
    if let Some(app) = &worked.mf {
        print_mf(&a, app, worked.run, worked.start)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The MF run of `--app mf` (its ratings loaded), `None` for the counter.
fn mf_input(a: &WorkerArgs, shape: &RunShape) -> miette::Result<Option<MfInput>> {
    if a.shape.app != App::Mf {
        return Ok(None);
    }
    let cfg = shape.mf_config(a.epochs, a.run.clocks_per_epoch, a.seed);
    let (data, train, test) = load_movielens(a.run.data.as_deref(), a.seed)?;
    Ok(Some(MfInput {
        cfg,
        data,
        train,
        test,
        placement: placement_policy(a.run.placement),
    }))
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
    let summary = MfSummary {
        report: &report,
        adarevision: a.model.adarevision,
        bandwidth: a.bandwidth,
        client: Some(a.client),
        clients: a.shape.clients,
        resumed_at: Some(start),
        shards: a.shape.num_servers * a.shape.shards_per_server,
        staleness: a.shape.staleness,
        workers: cfg.workers,
    };
    print_summary(&summary, a.json)
}
