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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};

use crate::traffic::{balanced_counts, BYTES_PER_ELEMENT};
use crate::{ByteCounters, Collectives, CommError, Communicator, HostMemory, P2p, Rank, ReduceOp};

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

    /// Ring reduce-scatter in place over chunks `offs[c]..offs[c + 1]` of
    /// `work`: afterwards chunk `rank` holds the reduction over all ranks.
    fn ring_reduce_scatter(
        &mut self,
        work: &mut [f32],
        offs: &[usize],
        op: ReduceOp,
        kind: Kind,
        tag: u64,
    ) -> Result<(), CommError> {
        let p = self.world;
        let (r, next, prev) = (self.rank, self.next(), self.prev());
        for s in 0..p - 1 {
            let sc = (r + 2 * p - s - 1) % p;
            self.post(next, kind, tag, work.len(), &work[offs[sc]..offs[sc + 1]])?;
            let rc = (r + 2 * p - s - 2) % p;
            let got = self.take(prev, kind, tag, work.len(), offs[rc + 1] - offs[rc])?;
            op.accumulate(&mut work[offs[rc]..offs[rc + 1]], &got);
        }
        Ok(())
    }

    /// Ring all-gather in place: chunk `rank` of `work` is this rank's; after,
    /// every chunk holds its owner's.
    fn ring_all_gather(
        &mut self,
        work: &mut [f32],
        offs: &[usize],
        kind: Kind,
        tag: u64,
    ) -> Result<(), CommError> {
        let p = self.world;
        let (r, next, prev) = (self.rank, self.next(), self.prev());
        for s in 0..p - 1 {
            let sc = (r + p - s) % p;
            self.post(next, kind, tag, work.len(), &work[offs[sc]..offs[sc + 1]])?;
            let rc = (r + 2 * p - s - 1) % p;
            let got = self.take(prev, kind, tag, work.len(), offs[rc + 1] - offs[rc])?;
            work[offs[rc]..offs[rc + 1]].copy_from_slice(&got);
        }
        Ok(())
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

/// Prefix sums: chunk c is `offs[c]..offs[c + 1]`.
fn offsets(counts: &[usize]) -> Vec<usize> {
    let mut o = Vec::with_capacity(counts.len() + 1);
    o.push(0);
    for c in counts {
        o.push(o.last().copied().unwrap_or(0) + c);
    }
    o
}

/// A digest of a counts array, so ranks with different counts notice.
fn digest(counts: &[usize]) -> u64 {
    counts.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| {
        (h ^ c as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

impl LocalCommunicator {
    fn host_all_reduce(&mut self, buf: &mut [f32], op: ReduceOp) -> Result<(), CommError> {
        let n = buf.len();
        let offs = offsets(&balanced_counts(n, self.world));
        self.call("all_reduce", true, |c| {
            if c.world == 1 {
                return Ok(());
            }
            c.ring_reduce_scatter(buf, &offs, op, Kind::AllReduce, n as u64)?;
            c.ring_all_gather(buf, &offs, Kind::AllReduce, n as u64)
        })
    }

    fn host_reduce_scatter(
        &mut self,
        send: &[f32],
        recv: &mut [f32],
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        const OP: &str = "reduce_scatter";
        self.check_counts(OP, "counts", counts)?;
        let offs = offsets(counts);
        self.check_len(OP, "send", offs[self.world], send.len())?;
        self.check_len(OP, "recv", counts[self.rank], recv.len())?;
        self.call(OP, true, |c| {
            let mut work = send.to_vec();
            if c.world > 1 {
                c.ring_reduce_scatter(&mut work, &offs, op, Kind::ReduceScatter, digest(counts))?;
            }
            recv.copy_from_slice(&work[offs[c.rank]..offs[c.rank + 1]]);
            Ok(())
        })
    }

    fn host_all_gather(
        &mut self,
        send: &[f32],
        recv: &mut [f32],
        counts: &[usize],
    ) -> Result<(), CommError> {
        const OP: &str = "all_gather";
        self.check_counts(OP, "counts", counts)?;
        let offs = offsets(counts);
        self.check_len(OP, "send", counts[self.rank], send.len())?;
        self.check_len(OP, "recv", offs[self.world], recv.len())?;
        self.call(OP, true, |c| {
            recv[offs[c.rank]..offs[c.rank + 1]].copy_from_slice(send);
            if c.world == 1 {
                return Ok(());
            }
            c.ring_all_gather(recv, &offs, Kind::AllGather, digest(counts))
        })
    }

    fn host_all_to_all(
        &mut self,
        send: &[f32],
        send_counts: &[usize],
        recv: &mut [f32],
        recv_counts: &[usize],
    ) -> Result<(), CommError> {
        const OP: &str = "all_to_all";
        self.check_counts(OP, "send_counts", send_counts)?;
        self.check_counts(OP, "recv_counts", recv_counts)?;
        let so = offsets(send_counts);
        let ro = offsets(recv_counts);
        self.check_len(OP, "send", so[self.world], send.len())?;
        self.check_len(OP, "recv", ro[self.world], recv.len())?;
        self.call(OP, true, |c| {
            let (p, r) = (c.world, c.rank);
            // Post every send first (never blocks), then drain the receives.
            for s in 1..p {
                let j = (r + s) % p;
                c.post(j, Kind::AllToAll, 0, so[p], &send[so[j]..so[j + 1]])?;
            }
            recv[ro[r]..ro[r + 1]].copy_from_slice(&send[so[r]..so[r + 1]]);
            for s in 1..p {
                let j = (r + p - s) % p;
                let got = c.take(j, Kind::AllToAll, 0, ro[p], recv_counts[j])?;
                recv[ro[j]..ro[j + 1]].copy_from_slice(&got);
            }
            Ok(())
        })
    }

    fn host_broadcast(&mut self, buf: &mut [f32], root: Rank) -> Result<(), CommError> {
        const OP: &str = "broadcast";
        self.check_peer(OP, root)?;
        let n = buf.len();
        let tag = ((n as u64) << 16) ^ root.0 as u64;
        self.call(OP, true, |c| {
            let p = c.world;
            let pos = (c.rank + p - root.0) % p;
            if pos > 0 {
                let got = c.take(c.prev(), Kind::Broadcast, tag, n, n)?;
                buf.copy_from_slice(&got);
            }
            if pos + 1 < p {
                let next = c.next();
                c.post(next, Kind::Broadcast, tag, n, buf)?;
            }
            Ok(())
        })
    }

    fn host_group(&mut self, ops: &mut [P2p<'_, [f32]>]) -> Result<(), CommError> {
        const OP: &str = "send/recv";
        for o in ops.iter() {
            let (P2p::Send { peer, .. } | P2p::Recv { peer, .. }) = o;
            self.check_peer(OP, *peer)?;
        }
        self.call(OP, false, |c| {
            let mut to_self: VecDeque<Vec<f32>> = VecDeque::new();
            for o in ops.iter() {
                if let P2p::Send { peer, buf } = o {
                    if peer.0 == c.rank {
                        to_self.push_back(buf.to_vec());
                    } else {
                        c.post(peer.0, Kind::P2p, 0, buf.len(), buf)?;
                    }
                }
            }
            for o in ops.iter_mut() {
                if let P2p::Recv { peer, buf } = o {
                    let data = if peer.0 == c.rank {
                        let m = to_self.pop_front().ok_or(CommError::SizeMismatch {
                            rank: c.me(),
                            op: OP,
                            peer: *peer,
                            expected: buf.len(),
                            got: 0,
                        })?;
                        if m.len() != buf.len() {
                            return Err(CommError::SizeMismatch {
                                rank: c.me(),
                                op: OP,
                                peer: *peer,
                                expected: buf.len(),
                                got: m.len(),
                            });
                        }
                        m
                    } else {
                        c.take(peer.0, Kind::P2p, 0, buf.len(), buf.len())?
                    };
                    buf.copy_from_slice(&data);
                }
            }
            Ok(())
        })
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

/// Run `f(comm)` for every communicator of a clique, each on its own scoped
/// thread named `rank-{r}`; gives the results in rank order, `Err` with the
/// panic payload for a rank that panicked.
pub fn run_ranks<T, F>(comms: Vec<LocalCommunicator>, f: F) -> Vec<std::thread::Result<T>>
where
    T: Send,
    F: Fn(LocalCommunicator) -> T + Sync,
{
    std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|c| {
                let f = &f;
                std::thread::Builder::new()
                    .name(format!("rank-{}", c.rank))
                    .spawn_scoped(s, move || f(c))
                    .expect("spawn a rank thread")
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    })
}
