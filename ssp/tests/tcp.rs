//! The same clients and shards over TCP on loopback: two server processes'
//! worth of shards, two clients of two workers each. Oracle: the final
//! state equals the sum of every increment, and every read holds every
//! update from clocks <= c - s - 1.

use std::sync::mpsc;
use std::time::Duration;

/// The peer timeout of these tests' connections.
const PEER: Duration = Duration::from_secs(60);

use ssp::server::ShardState;
use ssp::tcp::{TcpConnections, TcpServer};
use ssp::{Client, ClientId, CommConfig, RowKey, ShardId, TableConfig};

#[test]
fn tcp_run_applies_every_increment_once_and_keeps_the_bound() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        run();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("TCP run hung");
}

fn run() {
    let (clients, workers, clocks, s, shards_per_server) = (2usize, 2usize, 6u32, 1u32, 2usize);
    let n = (clients * workers) as u32;
    let tables = [TableConfig::dense(0, n * clocks, s)];
    let servers: Vec<TcpServer> = (0..2)
        .map(|p| {
            let states = (0..shards_per_server)
                .map(|k| {
                    ShardState::new(
                        ShardId((p * shards_per_server + k) as u32),
                        &tables,
                        clients,
                    )
                })
                .collect();
            TcpServer::start("127.0.0.1:0", states, None, PEER).unwrap()
        })
        .collect();
    let addrs: Vec<String> = servers.iter().map(|s| s.local_addr().to_string()).collect();
    let mut joins = Vec::new();
    for c in 0..clients {
        let (conns, links, inbox) = TcpConnections::connect(
            ClientId(c as u32),
            &addrs,
            shards_per_server,
            (Duration::from_secs(5), PEER),
        )
        .unwrap();
        let (client, ws) = Client::start(
            ClientId(c as u32),
            &tables,
            links,
            inbox,
            workers,
            CommConfig::default(),
        )
        .unwrap();
        let threads: Vec<_> = ws
            .into_iter()
            .enumerate()
            .map(|(wi, mut w)| {
                let id = (c * workers + wi) as u32;
                std::thread::spawn(move || {
                    for clock in 0..clocks {
                        for r in 0..3u64 {
                            let row = w
                                .get_row(RowKey::new(0, r))
                                .unwrap()
                                .to_dense((n * clocks) as usize);
                            for u in 0..n {
                                for cu in 0..clocks {
                                    if cu + s < clock {
                                        assert_eq!(
                                            row[(u * clocks + cu) as usize],
                                            1.0,
                                            "missing update"
                                        );
                                    }
                                }
                            }
                            w.inc(RowKey::new(0, r), id * clocks + clock, 1.0).unwrap();
                        }
                        std::thread::sleep(Duration::from_micros(300 * u64::from(id)));
                        w.clock().unwrap();
                    }
                })
            })
            .collect();
        joins.push((client, conns, threads));
    }
    // Servers end once every client has said Bye; clients end once their
    // servers close the connections: wait for both at once.
    let waits: Vec<_> = servers
        .into_iter()
        .map(|s| std::thread::spawn(move || s.wait().unwrap()))
        .collect();
    for (client, conns, threads) in joins {
        threads.into_iter().for_each(|t| t.join().unwrap());
        client.join().unwrap();
        conns.close();
    }
    let mut total = 0.0;
    for wait in waits {
        for state in wait.join().unwrap() {
            for (_, values) in state.rows() {
                let v = values.to_dense((n * clocks) as usize);
                assert!(
                    v.iter().all(|&x| x == 1.0),
                    "an increment lost or applied twice: {v:?}"
                );
                total += v.iter().sum::<f32>();
            }
        }
    }
    assert_eq!(total, (3 * n * clocks) as f32);
}

/// A client whose connection closes before it said `Bye` (its process was
/// killed) stops the shard with an error naming it, instead of leaving the
/// server waiting for it forever.
#[test]
fn a_client_gone_without_bye_stops_the_server_with_an_error() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let tables = [TableConfig::dense(0, 1, 0)];
        let server = TcpServer::start(
            "127.0.0.1:0",
            vec![ShardState::new(ShardId(0), &tables, 1)],
            None,
            PEER,
        )
        .unwrap();
        let addr = server.local_addr().to_string();
        let (conns, links, inbox) =
            TcpConnections::connect(ClientId(0), &[addr], 1, (Duration::from_secs(5), PEER))
                .unwrap();
        let (client, mut ws) =
            Client::start(ClientId(0), &tables, links, inbox, 1, CommConfig::default()).unwrap();
        // A read answered: the connection is up and the server knows us.
        ws[0].get_row(RowKey::new(0, 0)).unwrap();
        // "Killed": the connection closes, no Bye is ever sent.
        std::mem::forget(ws.pop());
        std::mem::forget(client);
        conns.close();
        let _ = tx.send(server.wait().err().map(|e| e.to_string()));
    });
    let err = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the server hung after its client vanished")
        .expect("the server ended without an error");
    assert!(
        err.contains("client 0") && err.contains("before it said Bye"),
        "{err}"
    );
}
