//! What `tofu ssp server` / `worker` processes run, called as a library on
//! loopback: one server's shards from `shard_states`, two clients through
//! `run_client` with the counter app. Oracle: every counter column is
//! exactly 1 at the end (`ServerSummary`).

use std::sync::mpsc;
use std::time::Duration;

use ssp::counter::CounterSpec;
use ssp::processes::{run_client, shard_states, ClientSetup, CounterApp, ServerSummary};
use ssp::tcp::TcpServer;
use ssp::{CommConfig, ShardId};

/// Runs `f` on a thread, failing the test when it takes over a minute.
fn within_a_minute(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the run hung");
}

#[test]
fn counter_processes_apply_every_increment_once() {
    within_a_minute(|| {
        let (clients, workers) = (2usize, 2usize);
        let spec = CounterSpec {
            workers: (clients * workers) as u32,
            clocks: 5,
            rows: 4,
            staleness: 1,
        };
        let tables = [spec.table()];
        let ids = [ShardId(0), ShardId(1)];
        let states = shard_states(&ids, &tables, clients, None, 0).expect("fresh shards");
        let server = TcpServer::start("127.0.0.1:0", states, None, Duration::from_secs(60))
            .expect("listens");
        let servers = vec![server.local_addr().to_string()];
        let waiting = std::thread::spawn(move || server.wait().expect("the shards finish"));
        let runs: Vec<_> = (0..clients)
            .map(|client| {
                let (servers, tables) = (servers.clone(), tables.to_vec());
                std::thread::spawn(move || {
                    let mut app = CounterApp {
                        spec,
                        delay: Duration::ZERO,
                    };
                    let setup = ClientSetup {
                        client,
                        servers: &servers,
                        shards_per_server: ids.len(),
                        tables: &tables,
                        workers,
                        comm: CommConfig::default(),
                        start: 0,
                        peer_timeout: Duration::from_secs(60),
                    };
                    run_client(setup, &mut app).expect("the client runs")
                })
            })
            .collect();
        for r in runs {
            let run = r.join().expect("no panic");
            assert!(run.bytes_sent > 0, "updates were sent");
        }
        let states = waiting.join().expect("no panic");
        let row_len = spec.table().row_len as usize;
        let summary = ServerSummary::of(&states, Some(row_len));
        assert_eq!(summary.rows.len(), spec.rows as usize);
        for (row, values) in &summary.rows {
            assert!(
                values.iter().all(|&v| v == 1.0),
                "row {row}: an increment lost or applied twice: {values:?}"
            );
        }
        assert!(summary.applied > 0);
        let held: u64 = summary.rows_per_table.iter().map(|(_, t)| t[&0]).sum();
        assert_eq!(held, spec.rows);
    });
}
