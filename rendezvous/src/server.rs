//! The rendezvous host, run by rank 0 on background threads: it accepts the
//! ranks' connections, registers them, hands out rank 0's payload, releases
//! collectives when every rank entered them, and decides every failure.
//!
//! Threads: one acceptor (a non-blocking listener polled every few ms, so it
//! can stop), one reader per connection (blocking reads, turned into
//! [`Event`]s on one channel) and the host loop, which owns all state and
//! waits on the channel with the current deadline. A dropped connection is
//! seen at once (end of stream) and fails the session naming its rank; a
//! deadline that passes fails it naming the ranks that did not arrive.
//!
//! Keeps true: the host ends (and so never hangs) after at most the timeout
//! in any join or collective; on failure every registered rank is sent the
//! same [`Failure`].

use std::collections::{BTreeMap, HashMap};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::wire::{incoming, send, Collective, ToHost, ToRank, PROTOCOL};
use crate::Failure;

/// How often the acceptor polls the listener and the host checks its stop
/// flag.
const POLL: Duration = Duration::from_millis(5);
const STOP_CHECK: Duration = Duration::from_millis(50);

/// A running host; dropping it does not stop it (see [`Host::stop`]).
pub(crate) struct Host {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<(), Failure>>,
}

impl Host {
    /// Serve `world_size` ranks on `listener` with rank 0's `payload`;
    /// `timeout` bounds the join and every collective.
    pub(crate) fn start(
        listener: TcpListener,
        world_size: usize,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> std::io::Result<Host> {
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = channel();
        let accept_stop = stop.clone();
        thread::Builder::new()
            .name("rendezvous-accept".into())
            .spawn(move || accept_loop(listener, tx, accept_stop))?;
        let host_stop = stop.clone();
        let thread = thread::Builder::new()
            .name("rendezvous-host".into())
            .spawn(move || {
                let mut state = State::new(world_size, payload, timeout);
                let result = state.run(&rx, &host_stop);
                host_stop.store(true, Ordering::SeqCst);
                state.finish(result.as_ref().err());
                result
            })?;
        Ok(Host { stop, thread })
    }

    /// Wait until the host ends by itself (every rank closed, or a
    /// failure), at most `limit`; then stop it. Gives the host's result.
    pub(crate) fn finish(self, limit: Duration) -> Result<(), Failure> {
        let deadline = Instant::now() + limit;
        while !self.thread.is_finished() && Instant::now() < deadline {
            thread::sleep(POLL);
        }
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap_or(Ok(()))
    }
}

/// What the threads tell the host loop.
enum Event {
    /// A new connection (id, a handle to write to it).
    Conn(usize, TcpStream),
    /// A message from connection `id`.
    Msg(usize, ToHost),
    /// Connection `id` ended (end of stream, reset, or undecodable bytes).
    Gone(usize),
}

fn accept_loop(listener: TcpListener, tx: Sender<Event>, stop: Arc<AtomicBool>) {
    let mut next = 0;
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let id = next;
                next += 1;
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_nodelay(true);
                let Ok(reader) = stream.try_clone() else {
                    continue;
                };
                if tx.send(Event::Conn(id, stream)).is_err() {
                    return;
                }
                let tx = tx.clone();
                let _ = thread::Builder::new()
                    .name(format!("rendezvous-conn-{id}"))
                    .spawn(move || {
                        for msg in incoming::<ToHost>(reader) {
                            match msg {
                                Ok(m) => {
                                    if tx.send(Event::Msg(id, m)).is_err() {
                                        return;
                                    }
                                }
                                Err(_) => break,
                            }
                        }
                        let _ = tx.send(Event::Gone(id));
                    });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => thread::sleep(POLL),
            Err(_) => thread::sleep(POLL),
        }
    }
}

/// A collective some ranks entered.
struct Pending {
    op: Collective,
    since: Instant,
    data: BTreeMap<usize, Vec<u8>>,
}

/// The host loop's state.
struct State {
    world_size: usize,
    payload: Vec<u8>,
    timeout: Duration,
    started: Instant,
    conns: HashMap<usize, TcpStream>,
    /// rank → connection id, once registered.
    rank_conn: Vec<Option<usize>>,
    /// connection id → rank.
    conn_rank: HashMap<usize, usize>,
    /// Ranks that sent `Close`.
    closed: Vec<bool>,
    /// All ranks registered and welcomed.
    joined: bool,
    pending: Option<Pending>,
    /// The last collective released (to name the step a failure happens in).
    last: Option<Collective>,
}

impl State {
    fn new(world_size: usize, payload: Vec<u8>, timeout: Duration) -> State {
        State {
            world_size,
            payload,
            timeout,
            started: Instant::now(),
            conns: HashMap::new(),
            rank_conn: vec![None; world_size],
            conn_rank: HashMap::new(),
            closed: vec![false; world_size],
            joined: false,
            pending: None,
            last: None,
        }
    }

    /// The step the session is in, for messages.
    fn during(&self) -> String {
        match (&self.pending, self.joined) {
            (Some(p), _) => p.op.to_string(),
            (None, false) => "join".into(),
            (None, true) => match self.last {
                Some(op) => format!("the work after {op}"),
                None => "the work after join".into(),
            },
        }
    }

    fn deadline(&self) -> Option<Instant> {
        match (&self.pending, self.joined) {
            (Some(p), _) => Some(p.since + self.timeout),
            (None, false) => Some(self.started + self.timeout),
            (None, true) => None,
        }
    }

    /// Serve until every rank closed (`Ok`) or the session fails.
    fn run(
        &mut self,
        rx: &std::sync::mpsc::Receiver<Event>,
        stop: &AtomicBool,
    ) -> Result<(), Failure> {
        loop {
            if self.joined && self.closed.iter().all(|c| *c) {
                return Ok(());
            }
            if stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            let wait = match self.deadline() {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(self.missing());
                    }
                    (d - now).min(STOP_CHECK)
                }
                None => STOP_CHECK,
            };
            match rx.recv_timeout(wait) {
                Ok(ev) => self.handle(ev)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
    }

    /// The ranks that did not arrive by the deadline.
    fn missing(&self) -> Failure {
        let ranks = match &self.pending {
            Some(p) => (0..self.world_size)
                .filter(|r| !p.data.contains_key(r))
                .collect(),
            None => (0..self.world_size)
                .filter(|r| self.rank_conn[*r].is_none())
                .collect(),
        };
        Failure::Missing {
            ranks,
            during: self.during(),
            timeout_s: self.timeout.as_secs_f64(),
        }
    }

    fn handle(&mut self, ev: Event) -> Result<(), Failure> {
        match ev {
            Event::Conn(id, stream) => {
                self.conns.insert(id, stream);
                Ok(())
            }
            Event::Gone(id) => {
                let Some(&rank) = self.conn_rank.get(&id) else {
                    // Never registered (or refused): forget it.
                    self.conns.remove(&id);
                    return Ok(());
                };
                if self.closed[rank] {
                    return Ok(());
                }
                Err(Failure::PeerLost {
                    rank,
                    during: self.during(),
                })
            }
            Event::Msg(id, msg) => match (self.conn_rank.get(&id).copied(), msg) {
                (
                    None,
                    ToHost::Hello {
                        protocol,
                        rank,
                        world_size,
                    },
                ) => self.hello(id, protocol, rank, world_size),
                (None, _) => {
                    // A stranger that skipped `Hello`: drop it.
                    if let Some(s) = self.conns.remove(&id) {
                        let _ = s.shutdown(Shutdown::Both);
                    }
                    Ok(())
                }
                (Some(rank), ToHost::Hello { .. }) => Err(Failure::DuplicateRank { rank }),
                (Some(rank), ToHost::Close) => {
                    self.closed[rank] = true;
                    match &self.pending {
                        Some(p) if !p.data.contains_key(&rank) => Err(Failure::PeerLeft {
                            rank,
                            during: p.op.to_string(),
                        }),
                        _ => Ok(()),
                    }
                }
                (Some(rank), ToHost::Enter { op, data }) => self.enter(rank, op, data),
            },
        }
    }

    fn hello(
        &mut self,
        id: usize,
        protocol: u32,
        rank: usize,
        world_size: usize,
    ) -> Result<(), Failure> {
        let refusal = if protocol != PROTOCOL {
            Some(Failure::Protocol {
                rank,
                theirs: protocol,
                ours: PROTOCOL,
            })
        } else if world_size != self.world_size {
            Some(Failure::WorldSizeMismatch {
                rank,
                theirs: world_size,
                ours: self.world_size,
            })
        } else if rank >= self.world_size {
            Some(Failure::RankOutOfRange {
                rank,
                world_size: self.world_size,
            })
        } else if self.rank_conn[rank].is_some() {
            Some(Failure::DuplicateRank { rank })
        } else {
            None
        };
        if let Some(f) = refusal {
            // Tell the newcomer too (it is not registered, so `finish` would
            // not). During the join this fails everyone: the run is
            // misconfigured. Once running, a stray process is only refused.
            if let Some(mut s) = self.conns.remove(&id) {
                let _ = send(&mut s, &ToRank::Abort(f.clone()));
                let _ = s.shutdown(Shutdown::Write);
            }
            return if self.joined { Ok(()) } else { Err(f) };
        }
        self.rank_conn[rank] = Some(id);
        self.conn_rank.insert(id, rank);
        if self.rank_conn.iter().all(Option::is_some) {
            self.joined = true;
            let msg = ToRank::Welcome {
                payload: self.payload.clone(),
            };
            self.broadcast(&msg);
        }
        Ok(())
    }

    fn enter(&mut self, rank: usize, op: Collective, data: Vec<u8>) -> Result<(), Failure> {
        if let Some(left) = (0..self.world_size).find(|r| self.closed[*r]) {
            return Err(Failure::PeerLeft {
                rank: left,
                during: op.to_string(),
            });
        }
        let p = self.pending.get_or_insert_with(|| Pending {
            op,
            since: Instant::now(),
            data: BTreeMap::new(),
        });
        if p.op != op || p.data.contains_key(&rank) {
            return Err(Failure::OutOfStep {
                rank,
                expected: p.op.to_string(),
                got: op.to_string(),
            });
        }
        p.data.insert(rank, data);
        if p.data.len() == self.world_size {
            let p = self.pending.take().expect("pending collective");
            let data = match p.op {
                Collective::Barrier(_) => Vec::new(),
                Collective::Gather(_) => p.data.into_values().collect(),
            };
            self.last = Some(p.op);
            self.broadcast(&ToRank::Done { op: p.op, data });
        }
        Ok(())
    }

    /// Send `msg` to every registered rank (errors are the readers' to see).
    fn broadcast(&mut self, msg: &ToRank) {
        for id in self.rank_conn.iter().flatten() {
            if let Some(s) = self.conns.get_mut(id) {
                let _ = send(s, msg);
            }
        }
    }

    /// Tell every registered rank about `failure`, then close our side of
    /// every connection (after the queued bytes: the readers keep draining,
    /// so nothing is reset).
    fn finish(&mut self, failure: Option<&Failure>) {
        if let Some(f) = failure {
            self.broadcast(&ToRank::Abort(f.clone()));
        }
        for s in self.conns.values() {
            let _ = s.shutdown(Shutdown::Write);
        }
    }
}
