//! An in-process communicator: one [`LocalCommunicator`] per rank, ranks on
//! threads of one process (the CPU backend's transport).
//!
//! Takes a world size (and optionally a timeout); gives one communicator per
//! rank, connected pairwise by unbounded FIFO channels (crossbeam). Every
//! collective is a real message-passing algorithm over those channels (ring
//! reduce-scatter / all-gather / all-reduce, chain broadcast, pairwise
//! all-to-all), so results are what the algorithm computes and the byte
//! counters count the bytes it really moved ([`crate::traffic`]).
//!
//! Keeps true: sends never block (the channels are unbounded), so a group of
//! sends and receives posted together cannot deadlock; every message carries
//! its call's kind, collective sequence number and a size tag, so ranks in
//! different calls or with different sizes fail with an error naming the
//! peer; a rank waiting for a message gives up after the timeout
//! ([`CommError::Timeout`]), on the sender's hang-up ([`CommError::PeerGone`])
//! or when any rank aborted ([`CommError::Aborted`]: a failing call, or a
//! panicking thread dropping its communicator, aborts the whole clique).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};

use crate::traffic::BYTES_PER_ELEMENT;
use crate::{ByteCounters, Collectives, CommError, Communicator, HostMemory, P2p, Rank, ReduceOp};

mod algorithms;
pub mod tcp;

/// How long a rank waits for a message before [`CommError::Timeout`], unless
/// set with [`LocalCommunicator::create_with_timeout`]: 300 seconds (long
/// enough for a slow kernel on a peer, short enough that a hang ends).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// How often a waiting rank checks whether the clique was aborted.
const POLL: Duration = Duration::from_millis(20);

/// The kind of call a message belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    AllReduce,
    ReduceScatter,
    AllGather,
    AllToAll,
    Broadcast,
    P2p,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::AllReduce => "all_reduce",
            Kind::ReduceScatter => "reduce_scatter",
            Kind::AllGather => "all_gather",
            Kind::AllToAll => "all_to_all",
            Kind::Broadcast => "broadcast",
            Kind::P2p => "send/recv",
        }
    }
}

/// A message on a pair channel.
struct Msg {
    kind: Kind,
    /// Collective sequence number of the sender (0 for p2p).
    seq: u64,
    /// Size tag of the call: total elements (all-reduce, broadcast), a digest of
    /// the counts (v-collectives), 0 for p2p and all-to-all.
    tag: u64,
    /// Total elements of the sender's call, for error messages.
    total: usize,
    data: Vec<f32>,
}

/// State shared by all ranks of one clique: who aborted it, and why.
#[derive(Default)]
struct Shared {
    aborted: AtomicBool,
    reason: Mutex<Option<(Rank, String)>>,
}

impl Shared {
    fn abort(&self, origin: Rank, reason: String) {
        let mut r = self.reason.lock().unwrap_or_else(|e| e.into_inner());
        if r.is_none() {
            *r = Some((origin, reason));
            self.aborted.store(true, Ordering::SeqCst);
        }
    }

    fn reason(&self) -> Option<(Rank, String)> {
        if !self.aborted.load(Ordering::SeqCst) {
            return None;
        }
        self.reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// One rank of an in-process communicator (see the module doc).
pub struct LocalCommunicator {
    rank: usize,
    world: usize,
    /// `to[j]`: channel from this rank to rank j.
    to: Vec<Sender<Msg>>,
    /// `from[j]`: channel from rank j to this rank.
    from: Vec<Receiver<Msg>>,
    shared: Arc<Shared>,
    timeout: Duration,
    /// Number of collectives called so far.
    seq: u64,
    counters: ByteCounters,
    poisoned: Option<CommError>,
}

impl std::fmt::Debug for LocalCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCommunicator")
            .field("rank", &self.rank)
            .field("world_size", &self.world)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl LocalCommunicator {
    /// One communicator per rank of a clique of `world_size` ranks (index =
    /// rank), with [`DEFAULT_TIMEOUT`]. Move each to its own thread.
    ///
    /// Panics if `world_size` is 0.
    pub fn create(world_size: usize) -> Vec<LocalCommunicator> {
        Self::create_with_timeout(world_size, DEFAULT_TIMEOUT)
    }

    /// Like [`LocalCommunicator::create`], waiting at most `timeout` for any
    /// one message before failing with [`CommError::Timeout`].
    pub fn create_with_timeout(world_size: usize, timeout: Duration) -> Vec<LocalCommunicator> {
        assert!(world_size > 0, "a communicator needs at least one rank");
        let shared = Arc::new(Shared::default());
        // chans[i][j]: i → j.
        let mut senders: Vec<Vec<Option<Sender<Msg>>>> = (0..world_size)
            .map(|_| (0..world_size).map(|_| None).collect())
            .collect();
        let mut receivers: Vec<Vec<Option<Receiver<Msg>>>> = (0..world_size)
            .map(|_| (0..world_size).map(|_| None).collect())
            .collect();
        for i in 0..world_size {
            for j in 0..world_size {
                let (s, r) = unbounded();
                senders[i][j] = Some(s);
                receivers[j][i] = Some(r);
            }
        }
        senders
            .into_iter()
            .zip(receivers)
            .enumerate()
            .map(|(rank, (to, from))| LocalCommunicator {
                rank,
                world: world_size,
                to: to.into_iter().map(|s| s.expect("filled")).collect(),
                from: from.into_iter().map(|r| r.expect("filled")).collect(),
                shared: shared.clone(),
                timeout,
                seq: 0,
                counters: ByteCounters::new(world_size),
                poisoned: None,
            })
            .collect()
    }

    /// One rank over given pair channels (`to[j]`: to rank j, `from[j]`:
    /// from rank j), a clique of its own for aborts (the TCP bridge).
    fn from_channels(
        rank: usize,
        to: Vec<Sender<Msg>>,
        from: Vec<Receiver<Msg>>,
        timeout: Duration,
    ) -> LocalCommunicator {
        let world = to.len();
        LocalCommunicator {
            rank,
            world,
            to,
            from,
            shared: Arc::new(Shared::default()),
            timeout,
            seq: 0,
            counters: ByteCounters::new(world),
            poisoned: None,
        }
    }

    /// The timeout for one message.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn me(&self) -> Rank {
        Rank(self.rank)
    }

    fn next(&self) -> usize {
        (self.rank + 1) % self.world
    }

    fn prev(&self) -> usize {
        (self.rank + self.world - 1) % self.world
    }

    /// The error for an aborted clique, if it is aborted.
    fn aborted(&self, op: &'static str) -> Option<CommError> {
        self.shared
            .reason()
            .map(|(origin, reason)| CommError::Aborted {
                rank: self.me(),
                op,
                origin,
                reason,
            })
    }

    /// Fail fast if poisoned or aborted.
    fn check_alive(&mut self, op: &'static str) -> Result<(), CommError> {
        if let Some(e) = &self.poisoned {
            return Err(e.clone());
        }
        if let Some(e) = self.aborted(op) {
            self.poisoned = Some(e.clone());
            return Err(e);
        }
        Ok(())
    }

    /// Poison this communicator and abort the clique (unless the error is an
    /// abort by someone else).
    fn fail(&mut self, e: CommError) -> CommError {
        if !matches!(e, CommError::Aborted { .. }) {
            self.shared.abort(self.me(), e.to_string());
        }
        self.poisoned = Some(e.clone());
        e
    }

    fn check_peer(&self, op: &'static str, peer: Rank) -> Result<(), CommError> {
        if peer.0 >= self.world {
            return Err(CommError::PeerOutOfRange {
                rank: self.me(),
                op,
                peer: peer.0,
                world_size: self.world,
            });
        }
        Ok(())
    }

    fn check_counts(
        &self,
        op: &'static str,
        what: &'static str,
        c: &[usize],
    ) -> Result<(), CommError> {
        if c.len() != self.world {
            return Err(CommError::CountsLength {
                rank: self.me(),
                op,
                what,
                expected: self.world,
                got: c.len(),
            });
        }
        Ok(())
    }

    fn check_len(
        &self,
        op: &'static str,
        buffer: &'static str,
        expected: usize,
        got: usize,
    ) -> Result<(), CommError> {
        if expected != got {
            return Err(CommError::BufferLength {
                rank: self.me(),
                op,
                buffer,
                expected,
                got,
            });
        }
        Ok(())
    }

    /// Send `data` to `peer` (never blocks); counts the bytes.
    fn post(
        &mut self,
        peer: usize,
        kind: Kind,
        tag: u64,
        total: usize,
        data: &[f32],
    ) -> Result<(), CommError> {
        let msg = Msg {
            kind,
            seq: if kind == Kind::P2p { 0 } else { self.seq },
            tag,
            total,
            data: data.to_vec(),
        };
        if self.to[peer].send(msg).is_err() {
            if let Some(e) = self.aborted(kind.name()) {
                return Err(e);
            }
            return Err(CommError::PeerGone {
                rank: self.me(),
                op: kind.name(),
                peer: Rank(peer),
            });
        }
        let b = data.len() as u64 * BYTES_PER_ELEMENT;
        self.counters.sent += b;
        self.counters.sent_to[peer] += b;
        self.counters.messages_sent += 1;
        Ok(())
    }

    /// Receive the next message from `peer`, which must belong to the same
    /// call (`kind`, sequence number, `tag`) and have `len` elements.
    fn take(
        &mut self,
        peer: usize,
        kind: Kind,
        tag: u64,
        total: usize,
        len: usize,
    ) -> Result<Vec<f32>, CommError> {
        let op = kind.name();
        let start = Instant::now();
        let msg = loop {
            if let Some(e) = self.aborted(op) {
                return Err(e);
            }
            let waited = start.elapsed();
            if waited >= self.timeout {
                return Err(CommError::Timeout {
                    rank: self.me(),
                    op,
                    peer: Rank(peer),
                    waited,
                });
            }
            match self.from[peer].recv_timeout(POLL.min(self.timeout - waited)) {
                Ok(m) => break m,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    // A peer that hung up after an abort: report the root cause.
                    return Err(self.aborted(op).unwrap_or(CommError::PeerGone {
                        rank: self.me(),
                        op,
                        peer: Rank(peer),
                    }));
                }
            }
        };
        let seq = if kind == Kind::P2p { 0 } else { self.seq };
        if msg.kind != kind || msg.seq != seq {
            return Err(CommError::CallMismatch {
                rank: self.me(),
                op,
                seq,
                peer: Rank(peer),
                peer_op: msg.kind.name(),
                peer_seq: msg.seq,
            });
        }
        if msg.tag != tag || msg.data.len() != len {
            let (expected, got) = if msg.tag != tag {
                (total, msg.total)
            } else {
                (len, msg.data.len())
            };
            return Err(CommError::SizeMismatch {
                rank: self.me(),
                op,
                peer: Rank(peer),
                expected,
                got,
            });
        }
        let b = len as u64 * BYTES_PER_ELEMENT;
        self.counters.received += b;
        self.counters.received_from[peer] += b;
        Ok(msg.data)
    }

    /// Run a communicating body: check liveness, count the call, poison on error.
    fn call<T>(
        &mut self,
        op: &'static str,
        collective: bool,
        body: impl FnOnce(&mut Self) -> Result<T, CommError>,
    ) -> Result<T, CommError> {
        self.check_alive(op)?;
        if collective {
            self.seq += 1;
        }
        body(self).map_err(|e| self.fail(e))
    }
}

impl Communicator for LocalCommunicator {
    fn rank(&self) -> Rank {
        self.me()
    }

    fn world_size(&self) -> usize {
        self.world
    }

    fn counters(&self) -> ByteCounters {
        self.counters.clone()
    }

    fn reset_counters(&mut self) {
        self.counters = ByteCounters::new(self.world);
    }
}

/// Every host buffer type: the calls run on its elements.
impl<B: HostMemory + ?Sized> Collectives<B> for LocalCommunicator {
    fn all_reduce(&mut self, buf: &mut B, op: ReduceOp) -> Result<(), CommError> {
        self.host_all_reduce(buf.host_mut(), op)
    }

    fn reduce_scatter(
        &mut self,
        send: &B,
        recv: &mut B,
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        self.host_reduce_scatter(send.host(), recv.host_mut(), counts, op)
    }

    fn all_gather(&mut self, send: &B, recv: &mut B, counts: &[usize]) -> Result<(), CommError> {
        self.host_all_gather(send.host(), recv.host_mut(), counts)
    }

    fn all_to_all(
        &mut self,
        send: &B,
        send_counts: &[usize],
        recv: &mut B,
        recv_counts: &[usize],
    ) -> Result<(), CommError> {
        self.host_all_to_all(send.host(), send_counts, recv.host_mut(), recv_counts)
    }

    fn broadcast(&mut self, buf: &mut B, root: Rank) -> Result<(), CommError> {
        self.host_broadcast(buf.host_mut(), root)
    }

    fn group(&mut self, ops: &mut [P2p<'_, B>]) -> Result<(), CommError> {
        let mut host: Vec<P2p<'_, [f32]>> = ops
            .iter_mut()
            .map(|o| match o {
                P2p::Send { peer, buf } => P2p::Send {
                    peer: *peer,
                    buf: buf.host(),
                },
                P2p::Recv { peer, buf } => P2p::Recv {
                    peer: *peer,
                    buf: buf.host_mut(),
                },
            })
            .collect();
        self.host_group(&mut host)
    }
}

impl Drop for LocalCommunicator {
    /// A rank whose thread panics aborts the clique, so its peers fail at once
    /// with [`CommError::Aborted`] naming it instead of waiting for a timeout.
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.shared
                .abort(self.me(), format!("rank {} panicked", self.rank));
        }
    }
}

/// Run `f(comm)` for every communicator of a clique (in rank order), each
/// on its own scoped thread named `rank-{r}` ([`crate::on_threads`]); gives
/// the results in rank order, `Err` with the panic payload for a rank that
/// panicked.
pub fn run_ranks<T, F>(comms: Vec<LocalCommunicator>, f: F) -> Vec<std::thread::Result<T>>
where
    T: Send,
    F: Fn(LocalCommunicator) -> T + Sync,
{
    crate::on_threads(comms, |_, c| f(c))
}
