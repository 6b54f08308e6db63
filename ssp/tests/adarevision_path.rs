//! AdaRevision through the real client/server path (issue 12, third
//! Done-when item): two client processes' caches, update buffers and
//! communication threads talk to a real [`ShardState`] whose message loop
//! is run here, one message at a time, so the order in which the shard
//! applies updates is known and pushes can be held back (a delayed client
//! keeps reading its stale cached version).
//!
//! Oracle: the per-coordinate formula on scalars, fed with the
//! gradients the workers sent and the versions their reads returned; it
//! keeps ḡ after every update, so the snapshot of version v is its own.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crossbeam_channel::{unbounded, Sender};
use ssp::link::{ChannelLink, Outbound};
use ssp::message::{ToClient, ToServer};
use ssp::server::ShardState;
use ssp::{Client, ClientId, CommConfig, RowKey, RowValues, ShardId, TableConfig, Worker};

/// One coordinate of the formula.
#[derive(Clone)]
struct Oracle {
    alpha: f32,
    x: f32,
    gbar: f32,
    z: f32,
    z_max: f32,
    /// ḡ after each number of updates (= at each version).
    history: Vec<f32>,
}

impl Oracle {
    fn new(alpha: f32) -> Oracle {
        Oracle {
            alpha,
            x: 0.0,
            gbar: 0.0,
            z: 1.0,
            z_max: 1.0,
            history: vec![0.0],
        }
    }
    fn update(&mut self, g: f32, v: u64) {
        let g_bck = self.gbar - self.history[v as usize];
        let eta_old = self.alpha / self.z_max.sqrt();
        self.z += g * g + 2.0 * g * g_bck;
        self.z_max = self.z_max.max(self.z);
        let eta = self.alpha / self.z_max.sqrt();
        self.x += -eta * g + (eta_old - eta) * g_bck;
        self.gbar += g;
        self.history.push(self.gbar);
    }
}

#[derive(Default)]
struct PumpState {
    /// Messages for clients held back: `(client, message)`.
    held: Vec<(ClientId, ToClient)>,
    /// Last `ClientClock` seen per client.
    clocks: Vec<u32>,
    /// Increments applied, in order: (client, version, gradient).
    applied: Vec<(u32, u64, Vec<f32>)>,
    /// Live snapshots after each message.
    live: Vec<usize>,
}

struct Pump {
    state: Mutex<PumpState>,
    cv: Condvar,
    /// Each client's inbox; emptied at the end so their receivers stop.
    clients: Mutex<Vec<Sender<ToClient>>>,
}

impl Pump {
    /// Waits until client `c` has said `ClientClock(clock)` (so every
    /// update it made before is applied).
    fn wait_clock(&self, c: usize, clock: u32) {
        let mut s = self.state.lock().unwrap();
        while s.clocks[c] < clock {
            let (g, t) = self.cv.wait_timeout(s, Duration::from_secs(10)).unwrap();
            assert!(!t.timed_out(), "client {c} never reached clock {clock}");
            s = g;
        }
    }

    /// Delivers every held-back message.
    fn deliver_held(&self) {
        let held = std::mem::take(&mut self.state.lock().unwrap().held);
        let clients = self.clients.lock().unwrap();
        for (c, m) in held {
            if let Some(tx) = clients.get(c.0 as usize) {
                let _ = tx.send(m);
            }
        }
    }
}

fn read(w: &Worker, key: RowKey) -> u64 {
    w.get_row_versioned(key).unwrap().2
}

#[test]
fn adarevision_through_clients_and_shard_matches_the_formula() {
    let alpha = 0.5;
    let table = TableConfig::dense(0, 2, 2).with_adarevision(alpha, 16);
    let key = RowKey::new(0, 0);
    let (shard_tx, shard_rx) = unbounded::<ToServer>();
    let (a_tx, a_rx) = unbounded::<ToClient>();
    let (b_tx, b_rx) = unbounded::<ToClient>();
    let pump = Arc::new(Pump {
        state: Mutex::new(PumpState {
            clocks: vec![0, 0],
            ..PumpState::default()
        }),
        cv: Condvar::new(),
        clients: Mutex::new(vec![a_tx, b_tx]),
    });
    let p = Arc::clone(&pump);
    let shard = std::thread::spawn(move || {
        let mut state = ShardState::new(ShardId(0), &[table], 2);
        while !state.finished() {
            let msg = shard_rx.recv().unwrap();
            let mut s = p.state.lock().unwrap();
            let read = matches!(msg, ToServer::Read { .. });
            match &msg {
                ToServer::ClientClock { client, clock } => s.clocks[client.0 as usize] = *clock,
                ToServer::Inc {
                    client,
                    version,
                    delta,
                    ..
                } => s.applied.push((client.0, *version, delta.to_dense(2))),
                _ => {}
            }
            let replies = state.handle(msg).unwrap();
            s.live.push(state.live_snapshots());
            if read {
                let clients = p.clients.lock().unwrap();
                for (c, m) in replies {
                    clients[c.0 as usize].send(m).unwrap();
                }
            } else {
                s.held.extend(replies);
            }
            drop(s);
            p.cv.notify_all();
        }
        state
    });
    let start = |id: u32, inbox| {
        let link: Arc<dyn Outbound<ToServer>> = Arc::new(ChannelLink {
            tx: shard_tx.clone(),
            peer: "shard 0".into(),
        });
        let (client, mut ws) = Client::start(
            ClientId(id),
            &[table],
            vec![link],
            inbox,
            1,
            CommConfig::default(),
        )
        .unwrap();
        (client, ws.remove(0))
    };
    let (client_a, mut a) = start(0, a_rx);
    let (client_b, mut b) = start(1, b_rx);
    let inc = |w: &Worker, g: [f32; 2]| w.inc_row(key, &RowValues::Dense(g.to_vec())).unwrap();

    // Clock 0: both read version 0; A's update is applied first.
    assert_eq!(read(&a, key), 0);
    assert_eq!(read(&b, key), 0);
    inc(&a, [1.0, -2.0]);
    a.clock().unwrap();
    pump.wait_clock(0, 1);
    // Clock 1 of A: no push yet, so A reads its cached version 0 again
    // and its update is one behind.
    assert_eq!(read(&a, key), 0, "A's cache still holds version 0");
    inc(&a, [0.5, 0.25]);
    a.clock().unwrap();
    pump.wait_clock(0, 2);
    // B's clock-0 update, computed from version 0, arrives two behind.
    inc(&b, [3.0, -1.0]);
    b.clock().unwrap();
    pump.wait_clock(1, 1);
    // The shard clock reached 1: pushes of version 3 go out now.
    pump.deliver_held();
    let vb = read(&b, key);
    inc(&b, [-4.0, 2.5]);
    b.clock().unwrap();
    pump.wait_clock(1, 2);
    let va = read(&a, key);
    inc(&a, [0.75, -0.5]);
    a.clock().unwrap();
    pump.wait_clock(0, 3);
    pump.deliver_held();
    drop((a, b));
    let state = shard.join().unwrap();
    pump.deliver_held();
    pump.clients.lock().unwrap().clear();
    drop(shard_tx);
    client_a.join().unwrap();
    client_b.join().unwrap();

    // The updates the shard applied: the gradients sent, each with the
    // version its worker read.
    let s = pump.state.lock().unwrap();
    let sent: Vec<(u32, u64, Vec<f32>)> = vec![
        (0, 0, vec![1.0, -2.0]),
        (0, 0, vec![0.5, 0.25]),
        (1, 0, vec![3.0, -1.0]),
        (1, vb, vec![-4.0, 2.5]),
        (0, va, vec![0.75, -0.5]),
    ];
    assert_eq!(s.applied, sent, "updates applied in the scripted order");
    let mut oracle = [Oracle::new(alpha), Oracle::new(alpha)];
    for (_, v, g) in &s.applied {
        for (j, o) in oracle.iter_mut().enumerate() {
            o.update(g[j], *v);
        }
    }
    let got = state.rows()[&key].to_dense(2);
    for (j, o) in oracle.iter().enumerate() {
        assert!(
            (got[j] - o.x).abs() <= 1e-6 * o.x.abs().max(1.0),
            "coordinate {j}: shard {} vs formula {}",
            got[j],
            o.x
        );
    }
    // Delayed updates were really delayed (the revision term mattered).
    assert!(s
        .applied
        .iter()
        .enumerate()
        .any(|(n, (_, v, _))| *v < n as u64));
    // Versions are kept apart (never more than the cap) and every snapshot
    // is released once the clients are done.
    assert!(s.live.iter().all(|&n| n <= 16));
    assert!(
        s.live.iter().any(|&n| n >= 2),
        "live snapshots {:?}",
        s.live
    );
    assert_eq!(state.live_snapshots(), 0);
}

#[test]
fn adarevision_increment_without_a_read_is_an_error() {
    let table = TableConfig::dense(0, 2, 0).with_adarevision(0.1, 4);
    let (shard_tx, _shard_rx) = unbounded::<ToServer>();
    let (_tx, rx) = unbounded::<ToClient>();
    let link: Arc<dyn Outbound<ToServer>> = Arc::new(ChannelLink {
        tx: shard_tx,
        peer: "shard 0".into(),
    });
    let (_client, ws) = Client::start(
        ClientId(0),
        &[table],
        vec![link],
        rx,
        1,
        CommConfig::default(),
    )
    .unwrap();
    let err = ws[0]
        .inc_row(RowKey::new(0, 0), &RowValues::Dense(vec![1.0, 1.0]))
        .unwrap_err();
    assert!(err.to_string().contains("not read this clock"), "{err}");
}
