//! Heartbeats between the launchers of a multi-node run (issue 42, as
//! torchrun's agents keep theirs with the rendezvous): a node whose host
//! vanishes — a cut link, a powered-off machine, anything that closes no
//! socket — is declared lost after `--heartbeat-timeout` of silence, and
//! every surviving node stops its ranks instead of waiting on them forever.
//!
//! Takes the node [`Layout`] and the timeout; gives a [`Heartbeat`] whose
//! [`Heartbeat::lost`] says, once a node is lost, which node, its ranks and
//! why. Node 0's launcher listens on `MASTER_PORT + 1` of `MASTER_ADDR`
//! (rank 0's rendezvous holds `MASTER_PORT`); every other node's launcher
//! connects to it (retrying until it listens) and says its node index. Each
//! side writes a line (`beat`) every timeout / 8 and reads the other's:
//! * node 0 declares node k lost when k says nothing for the timeout, or
//!   its connection ends before k said `done`; it then tells every other
//!   node (`lost k`), so all stop;
//! * node k declares node 0 lost on the same terms, and obeys `lost j`.
//!
//! A node whose ranks all exit 0 says `done` and stops beating; nobody
//! declares it lost after that. One line per message, text: this is for a
//! handful of bytes a second per node, not for data.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::launcher::Layout;

/// A lost node: which, the global ranks it runs, and why it counts as lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lost {
    /// The node index.
    pub node: usize,
    /// Its first global rank and the number of ranks (`nproc_per_node`).
    pub ranks: (usize, usize),
    /// What was seen, e.g. `no heartbeat from 10.77.0.2 for 3.0 s`.
    pub why: String,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (first, n) = self.ranks;
        let ranks = if n == 1 {
            format!("rank {first}")
        } else {
            format!("ranks {first}–{}", first + n - 1)
        };
        write!(f, "node {} ({ranks}) was lost: {}", self.node, self.why)
    }
}

/// State shared by a launcher's heartbeat threads.
#[derive(Debug)]
struct Shared {
    layout: Layout,
    timeout: Duration,
    lost: Mutex<Option<Lost>>,
    stop: AtomicBool,
    /// This node's ranks all exited 0 and it said `done`.
    finished: AtomicBool,
    /// Node 0: the connection of each node that joined, its last message
    /// and whether it said `done`. Node k: one entry, node 0's.
    peers: Mutex<Vec<Peer>>,
}

#[derive(Debug)]
struct Peer {
    node: usize,
    addr: String,
    stream: TcpStream,
    last: Instant,
    /// The peer said `done`.
    done: bool,
    /// Its connection ended (seen by the reader).
    closed: bool,
}

impl Shared {
    fn interval(&self) -> Duration {
        (self.timeout / 8).max(Duration::from_millis(20))
    }

    /// Record `node` as lost (the first loss only) and, on node 0, tell
    /// every other node.
    fn declare(&self, node: usize, why: String) {
        let n = self.layout.nproc_per_node;
        {
            let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
            if lost.is_some() {
                return;
            }
            *lost = Some(Lost {
                node,
                ranks: (node * n, n),
                why,
            });
        }
        if self.layout.node_rank == 0 {
            self.send_all(&format!("lost {node}"));
        }
    }

    /// Write `line` to every peer still connected (errors ignored: a dead
    /// peer is found by its silence).
    fn send_all(&self, line: &str) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        for p in peers.iter_mut().filter(|p| !p.done) {
            let _ = writeln!(p.stream, "{line}");
        }
    }

    /// A line from `node`; `done` when it said `done`: then nothing more is
    /// written to it and its connection is half-closed (FIN after what was
    /// written), so it can close without unread data (no RST).
    fn heard(&self, node: usize, done: bool) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = peers.iter_mut().find(|p| p.node == node) {
            p.last = Instant::now();
            if done && !p.done {
                p.done = true;
                let _ = p.stream.shutdown(Shutdown::Write);
            }
        }
    }

    /// Read `node`'s lines until its connection ends or the launcher stops.
    fn read_from(self: &Arc<Self>, node: usize, mut reader: BufReader<TcpStream>, addr: String) {
        let _ = reader.get_ref().set_read_timeout(Some(self.interval()));
        let mut line = String::new();
        while !self.stop.load(Ordering::Relaxed) {
            // A read that times out keeps what it read of the line.
            match reader.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) if !line.ends_with('\n') => continue,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue
                }
                Err(_) => break,
            }
            let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
            line.clear();
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            match words.as_slice() {
                ["done"] => self.heard(node, true),
                ["lost", j] => {
                    self.heard(node, false);
                    if let Ok(j) = j.parse::<usize>() {
                        self.declare(j, "node 0's launcher declared it lost".into());
                    }
                }
                _ => self.heard(node, false),
            }
        }
        let done = {
            let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
            let p = peers.iter_mut().find(|p| p.node == node);
            p.map(|p| {
                p.closed = true;
                p.done
            })
            .unwrap_or(false)
        };
        if !done && !self.stop.load(Ordering::Relaxed) && !self.finished.load(Ordering::Relaxed) {
            self.declare(
                node,
                format!("the connection to its launcher at {addr} ended before its ranks finished"),
            );
        }
    }

    /// Beat every interval and declare lost every peer silent past the
    /// timeout, until the launcher stops.
    fn beat(self: &Arc<Self>) {
        while !self.stop.load(Ordering::Relaxed) && !self.finished.load(Ordering::Relaxed) {
            self.send_all("beat");
            let silent: Vec<(usize, String, Duration)> = {
                let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
                peers
                    .iter()
                    .filter(|p| !p.done && p.last.elapsed() > self.timeout)
                    .map(|p| (p.node, p.addr.clone(), p.last.elapsed()))
                    .collect()
            };
            for (node, addr, quiet) in silent {
                self.declare(
                    node,
                    format!(
                        "no heartbeat from its launcher at {addr} for {:.1} s (--heartbeat-timeout {} s)",
                        quiet.as_secs_f64(),
                        self.timeout.as_secs_f64()
                    ),
                );
            }
            thread::sleep(self.interval());
        }
    }

    /// Track `node` on `stream` and read it on a thread of its own, from
    /// `reader` (a reader of the same connection, maybe holding lines read
    /// already).
    fn add_peer(
        self: &Arc<Self>,
        node: usize,
        stream: TcpStream,
        reader: BufReader<TcpStream>,
        addr: String,
    ) {
        // A beat to a host behind a cut link must not block the others.
        let _ = stream.set_write_timeout(Some(self.interval()));
        {
            let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
            // Joined after this node finished: tell it at once.
            if self.finished.load(Ordering::Relaxed) {
                let _ = writeln!(&stream, "done");
                let _ = stream.shutdown(Shutdown::Write);
            }
            peers.push(Peer {
                node,
                addr: addr.clone(),
                stream,
                last: Instant::now(),
                done: false,
                closed: false,
            });
        }
        let me = Arc::clone(self);
        thread::spawn(move || me.read_from(node, reader, addr));
    }
}

/// A launcher's heartbeats (see the module doc); stops its threads when
/// dropped.
#[derive(Debug)]
pub struct Heartbeat {
    shared: Arc<Shared>,
}

/// The heartbeat port for a rendezvous on `master_port`: the next one (the
/// previous one for 65535).
pub fn port(master_port: u16) -> u16 {
    master_port.checked_add(1).unwrap_or(master_port - 1)
}

impl Heartbeat {
    /// Start this node's heartbeats for `layout` (nothing to do, and no
    /// thread, on a single node) with `timeout` of silence before a node is
    /// lost.
    ///
    /// Errors: node 0 cannot listen on `MASTER_ADDR:MASTER_PORT + 1` (the
    /// message names the address and the fix).
    pub fn start(layout: &Layout, timeout: Duration) -> Result<Heartbeat, String> {
        let shared = Arc::new(Shared {
            layout: layout.clone(),
            timeout,
            lost: Mutex::new(None),
            stop: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            peers: Mutex::new(Vec::new()),
        });
        if layout.nnodes > 1 {
            let addr = format!("{}:{}", layout.master_addr, port(layout.master_port));
            if layout.node_rank == 0 {
                let listener = TcpListener::bind(&addr).map_err(|e| {
                    format!("node 0 cannot listen for the other nodes' heartbeats on {addr}: {e} (the port after --master-port must be free too)")
                })?;
                let me = Arc::clone(&shared);
                thread::spawn(move || me.accept(listener));
            } else {
                let me = Arc::clone(&shared);
                thread::spawn(move || me.join_host(addr));
            }
            let me = Arc::clone(&shared);
            thread::spawn(move || me.beat());
        }
        Ok(Heartbeat { shared })
    }

    /// The first node declared lost, if any.
    pub fn lost(&self) -> Option<Lost> {
        self.shared
            .lost
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// This node's ranks all exited 0: say `done` to the peers, so that
    /// none declares this node lost when its launcher exits, and wait (at
    /// most the timeout) for each to close its side, so that this side
    /// closes with nothing unread.
    pub fn finish(&self) {
        let s = &self.shared;
        s.finished.store(true, Ordering::Relaxed);
        {
            let mut peers = s.peers.lock().unwrap_or_else(|e| e.into_inner());
            for p in peers.iter_mut() {
                let _ = writeln!(p.stream, "done");
                let _ = p.stream.shutdown(Shutdown::Write);
            }
        }
        let deadline = Instant::now() + s.timeout;
        while Instant::now() < deadline {
            let open = {
                let peers = s.peers.lock().unwrap_or_else(|e| e.into_inner());
                peers.iter().any(|p| !p.closed)
            };
            if !open {
                break;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Shared {
    /// Node 0: accept the other nodes' launchers until stopped.
    fn accept(self: Arc<Self>, listener: TcpListener) {
        if listener.set_nonblocking(true).is_err() {
            return;
        }
        while !self.stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((s, from)) => {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(self.timeout));
                    let Ok(r) = s.try_clone() else { continue };
                    // The same reader reads the rest: lines sent right
                    // after the first may be buffered with it.
                    let mut reader = BufReader::new(r);
                    let mut first = String::new();
                    if reader.read_line(&mut first).is_err() {
                        continue;
                    }
                    let node = first
                        .strip_prefix("node ")
                        .and_then(|n| n.trim().parse::<usize>().ok());
                    if let Some(node) = node.filter(|n| *n > 0 && *n < self.layout.nnodes) {
                        self.add_peer(node, s, reader, from.ip().to_string());
                    }
                }
                Err(_) => thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// Node k: connect to node 0's launcher (retrying until it listens),
    /// say who this is, then read its lines.
    fn join_host(self: Arc<Self>, addr: String) {
        while !self.stop.load(Ordering::Relaxed) {
            if let Ok(mut s) = TcpStream::connect(&addr) {
                let said = writeln!(s, "node {}", self.layout.node_rank);
                if let (Ok(()), Ok(r)) = (said, s.try_clone()) {
                    let master = self.layout.master_addr.clone();
                    self.add_peer(0, s, BufReader::new(r), master);
                    return;
                }
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let peers = self.shared.peers.lock().unwrap_or_else(|e| e.into_inner());
        for p in peers.iter() {
            let _ = p.stream.shutdown(Shutdown::Both);
        }
    }
}
