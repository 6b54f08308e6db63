//! Ranks in separate processes: [`TcpCommunicator`], the in-process
//! communicator's message-passing algorithms (ring reduce-scatter /
//! all-gather / all-reduce, chain broadcast, pairwise all-to-all, grouped
//! send/recv) with each pair channel carried over one TCP connection — what
//! Gloo is to PyTorch, for CPU runs and tests; NCCL stays the engine for
//! GPUs.
//!
//! Takes this rank, a listener it bound and every rank's address (exchanged
//! by the caller, e.g. through the rendezvous of `tofu launch`); gives a
//! communicator with the same calls, counters and errors as
//! [`LocalCommunicator`]. Setup: rank i connects to every rank j > i and
//! sends a handshake (magic, its rank, the world size); it accepts one
//! connection from every rank j < i. Then, per peer, a writer thread moves
//! messages from the pair channel to the socket and a reader thread moves
//! them from the socket to the pair channel; sends never block.
//!
//! Frames: kind (1 byte), collective sequence number, size tag, total and
//! element count (8 bytes each, little-endian), then the f32 elements
//! little-endian. A peer whose process exits or is killed closes its
//! sockets: the reader's channel disconnects and this rank's next receive
//! from it fails at once with [`CommError::PeerGone`] naming it, never a
//! hang; a silent peer (a stopped process, a cut link that closes nothing)
//! fails with [`CommError::Timeout`] after the timeout. Both come wrapped in
//! [`CommError::Remote`], naming the peer's address, and tear the
//! communicator down: every socket is shut down, so no reader or writer
//! thread stays blocked on the lost link.
//!
//! Every socket has TCP keep-alive (probes after `min(timeout / 4, 60 s)`
//! idle, then every `min(timeout / 16, 10 s)`, 4 unanswered probes close it)
//! and `TCP_USER_TIMEOUT` = the timeout (data unacknowledged that long
//! fails the write), so the kernel too notices a link that went silent.
//! Dropping the communicator waits at most the timeout for the writers to
//! drain, then shuts the sockets down (issue 42: a writer blocked on a full
//! send buffer toward a lost host would otherwise hold the process).

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use socket2::{SockRef, TcpKeepalive};

use super::{Kind, LocalCommunicator, Msg};
use crate::{ByteCounters, Collectives, CommError, Communicator, HostMemory, P2p, Rank, ReduceOp};

/// First bytes of a handshake.
const MAGIC: u32 = 0x7f0f_7c9e;

/// Pause between two connection attempts to a rank that is not listening yet.
const RETRY: Duration = Duration::from_millis(20);

const KINDS: [Kind; 6] = [
    Kind::AllReduce,
    Kind::ReduceScatter,
    Kind::AllGather,
    Kind::AllToAll,
    Kind::Broadcast,
    Kind::P2p,
];

/// One rank of a communicator across processes (see the module doc).
///
/// Dropping it waits until every message it sent is written to its socket
/// (a process that returns right after its last collective still delivers
/// it), then closes the connections.
#[derive(Debug)]
pub struct TcpCommunicator {
    /// `None` only inside `drop`.
    inner: Option<LocalCommunicator>,
    writers: Vec<JoinHandle<()>>,
    /// A handle of every peer's socket (for tearing down), by peer rank.
    sockets: Vec<(usize, TcpStream)>,
    /// Every rank's address, by rank.
    addrs: Vec<SocketAddr>,
    /// The longest wait for one message, and for the writers at drop.
    timeout: Duration,
}

/// Keep-alive and `TCP_USER_TIMEOUT` on `s` for a communicator whose
/// timeout is `timeout` (see the module doc).
fn watch_link(s: &TcpStream, timeout: Duration) -> std::io::Result<()> {
    let sock = SockRef::from(s);
    let idle = (timeout / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
    let every = (timeout / 16).clamp(Duration::from_secs(1), Duration::from_secs(10));
    sock.set_tcp_keepalive(
        &TcpKeepalive::new()
            .with_time(idle)
            .with_interval(every)
            .with_retries(4),
    )?;
    sock.set_tcp_user_timeout(Some(timeout))
}

fn write_frame(w: &mut impl Write, m: &Msg) -> std::io::Result<()> {
    let kind = KINDS.iter().position(|k| *k == m.kind).unwrap_or(0) as u8;
    w.write_all(&[kind])?;
    for v in [m.seq, m.tag, m.total as u64, m.data.len() as u64] {
        w.write_all(&v.to_le_bytes())?;
    }
    let bytes: Vec<u8> = m.data.iter().flat_map(|x| x.to_le_bytes()).collect();
    w.write_all(&bytes)?;
    w.flush()
}

fn read_u64(r: &mut impl Read) -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn read_frame(r: &mut impl Read) -> std::io::Result<Msg> {
    let mut k = [0u8; 1];
    r.read_exact(&mut k)?;
    let kind = *KINDS.get(k[0] as usize).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, "unknown message kind")
    })?;
    let (seq, tag, total, n) = (read_u64(r)?, read_u64(r)?, read_u64(r)?, read_u64(r)?);
    let mut bytes = vec![0u8; (n as usize).saturating_mul(4)];
    r.read_exact(&mut bytes)?;
    let data = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(Msg {
        kind,
        seq,
        tag,
        total: total as usize,
        data,
    })
}

/// Carry one pair channel over `stream` in both directions: the writer
/// (joined when the communicator is dropped) ends when the communicator
/// drops its sender and then shuts the socket down; the reader (detached)
/// ends at the end of the stream.
fn bridge(
    stream: TcpStream,
    outgoing: Receiver<Msg>,
    incoming: Sender<Msg>,
) -> std::io::Result<JoinHandle<()>> {
    let reader = stream.try_clone()?;
    let writer = std::thread::Builder::new()
        .name("tcp-writer".into())
        .spawn(move || {
            let mut w = BufWriter::new(stream);
            for m in outgoing {
                if write_frame(&mut w, &m).is_err() {
                    break;
                }
            }
            // The communicator is gone (or the peer is): close both
            // directions, so the peer reads end-of-stream and our reader ends.
            let _ = w.get_ref().shutdown(Shutdown::Both);
        })?;
    std::thread::Builder::new()
        .name("tcp-reader".into())
        .spawn(move || {
            let mut r = BufReader::new(reader);
            while let Ok(m) = read_frame(&mut r) {
                if incoming.send(m).is_err() {
                    break;
                }
            }
        })?;
    Ok(writer)
}

fn handshake(rank: usize, world: usize) -> [u8; 20] {
    let mut h = [0u8; 20];
    h[..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..12].copy_from_slice(&(rank as u64).to_le_bytes());
    h[12..].copy_from_slice(&(world as u64).to_le_bytes());
    h
}

impl TcpCommunicator {
    /// Connect rank `rank` of `addrs.len()` ranks: `listener` is this rank's
    /// (bound to `addrs[rank]`), `addrs` every rank's address; `timeout`
    /// bounds the setup and, later, each wait for a message.
    ///
    /// Errors: [`CommError::Connect`] naming the rank that did not answer
    /// within the timeout or sent a bad handshake.
    pub fn connect(
        rank: usize,
        listener: TcpListener,
        addrs: &[SocketAddr],
        timeout: Duration,
    ) -> Result<TcpCommunicator, CommError> {
        let world = addrs.len();
        let deadline = Instant::now() + timeout;
        let fail = |peer: usize, message: String| CommError::Connect {
            rank: Rank(rank),
            peer: Rank(peer),
            message,
        };
        let mut streams: Vec<Option<TcpStream>> = (0..world).map(|_| None).collect();
        for (peer, addr) in addrs.iter().enumerate().skip(rank + 1) {
            let mut s = loop {
                match TcpStream::connect_timeout(addr, RETRY.max(Duration::from_millis(200))) {
                    Ok(s) => break s,
                    Err(e) if Instant::now() >= deadline => {
                        return Err(fail(peer, format!("{addr}: {e} (waited {timeout:?})")))
                    }
                    Err(_) => std::thread::sleep(RETRY),
                }
            };
            s.write_all(&handshake(rank, world))
                .map_err(|e| fail(peer, e.to_string()))?;
            streams[peer] = Some(s);
        }
        listener
            .set_nonblocking(true)
            .map_err(|e| fail(rank, e.to_string()))?;
        let mut waiting = rank;
        while waiting > 0 {
            let (mut s, from) = match listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let missing = streams[..rank]
                            .iter()
                            .position(Option::is_none)
                            .unwrap_or(0);
                        return Err(fail(missing, format!("no connection within {timeout:?}")));
                    }
                    std::thread::sleep(RETRY);
                    continue;
                }
                Err(e) => return Err(fail(rank, e.to_string())),
            };
            s.set_nonblocking(false)
                .map_err(|e| fail(rank, e.to_string()))?;
            s.set_read_timeout(Some(timeout))
                .map_err(|e| fail(rank, e.to_string()))?;
            let mut h = [0u8; 20];
            s.read_exact(&mut h)
                .map_err(|e| fail(rank, format!("handshake from {from}: {e}")))?;
            let magic = u32::from_le_bytes(h[..4].try_into().expect("4 bytes"));
            let peer = u64::from_le_bytes(h[4..12].try_into().expect("8 bytes")) as usize;
            let w = u64::from_le_bytes(h[12..].try_into().expect("8 bytes")) as usize;
            if magic != MAGIC || w != world || peer >= rank || streams[peer].is_some() {
                return Err(fail(
                    peer.min(world.saturating_sub(1)),
                    format!(
                        "bad handshake from {from} (rank {peer} of {w}): a process of another run?"
                    ),
                ));
            }
            s.set_read_timeout(None)
                .map_err(|e| fail(peer, e.to_string()))?;
            streams[peer] = Some(s);
            waiting -= 1;
        }
        let (mut to, mut from) = (Vec::with_capacity(world), Vec::with_capacity(world));
        let mut writers = Vec::with_capacity(world);
        let mut sockets = Vec::with_capacity(world);
        for (peer, s) in streams.into_iter().enumerate() {
            let (out_tx, out_rx) = unbounded();
            if peer == rank {
                to.push(out_tx);
                from.push(out_rx);
                continue;
            }
            let (in_tx, in_rx) = unbounded();
            let s = s.expect("every other rank connected");
            s.set_nodelay(true).map_err(|e| fail(peer, e.to_string()))?;
            watch_link(&s, timeout).map_err(|e| fail(peer, e.to_string()))?;
            sockets.push((peer, s.try_clone().map_err(|e| fail(peer, e.to_string()))?));
            writers.push(bridge(s, out_rx, in_tx).map_err(|e| fail(peer, e.to_string()))?);
            to.push(out_tx);
            from.push(in_rx);
        }
        Ok(TcpCommunicator {
            inner: Some(LocalCommunicator::from_channels(rank, to, from, timeout)),
            writers,
            sockets,
            addrs: addrs.to_vec(),
            timeout,
        })
    }

    /// Shut every socket down: the readers see end-of-stream, the writers
    /// fail their next (or blocked) write, and the peers see this rank hang
    /// up.
    fn tear_down(&self) {
        for (_, s) in &self.sockets {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// `r`, with a lost peer's error ([`CommError::PeerGone`],
    /// [`CommError::Timeout`]) wrapped in [`CommError::Remote`] naming its
    /// address, after tearing the communicator down.
    fn located<T>(&self, r: Result<T, CommError>) -> Result<T, CommError> {
        r.map_err(|e| match e {
            CommError::PeerGone { peer, .. } | CommError::Timeout { peer, .. } => {
                self.tear_down();
                CommError::Remote {
                    peer,
                    host: self.addrs[peer.0].to_string(),
                    cause: Box::new(e),
                }
            }
            e => e,
        })
    }

    fn inner(&self) -> &LocalCommunicator {
        self.inner.as_ref().expect("live until dropped")
    }

    fn inner_mut(&mut self) -> &mut LocalCommunicator {
        self.inner.as_mut().expect("live until dropped")
    }
}

impl Drop for TcpCommunicator {
    /// Close the pair channels, then wait (at most the timeout) for the
    /// writers to drain them; a writer still blocked then (its peer's host
    /// unreachable) is freed by shutting the sockets down.
    fn drop(&mut self) {
        drop(self.inner.take());
        let deadline = Instant::now() + self.timeout;
        while self.writers.iter().any(|w| !w.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        if self.writers.iter().any(|w| !w.is_finished()) {
            self.tear_down();
        }
        for w in self.writers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Communicator for TcpCommunicator {
    fn rank(&self) -> Rank {
        self.inner().rank()
    }

    fn world_size(&self) -> usize {
        self.inner().world_size()
    }

    fn counters(&self) -> ByteCounters {
        self.inner().counters()
    }

    fn reset_counters(&mut self) {
        self.inner_mut().reset_counters()
    }
}

/// Every host buffer type, as [`LocalCommunicator`].
impl<B: HostMemory + ?Sized> Collectives<B> for TcpCommunicator {
    fn all_reduce(&mut self, buf: &mut B, op: ReduceOp) -> Result<(), CommError> {
        let r = self.inner_mut().all_reduce(buf, op);
        self.located(r)
    }

    fn reduce_scatter(
        &mut self,
        send: &B,
        recv: &mut B,
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        let r = self.inner_mut().reduce_scatter(send, recv, counts, op);
        self.located(r)
    }

    fn all_gather(&mut self, send: &B, recv: &mut B, counts: &[usize]) -> Result<(), CommError> {
        let r = self.inner_mut().all_gather(send, recv, counts);
        self.located(r)
    }

    fn all_to_all(
        &mut self,
        send: &B,
        send_counts: &[usize],
        recv: &mut B,
        recv_counts: &[usize],
    ) -> Result<(), CommError> {
        let r = self
            .inner_mut()
            .all_to_all(send, send_counts, recv, recv_counts);
        self.located(r)
    }

    fn broadcast(&mut self, buf: &mut B, root: Rank) -> Result<(), CommError> {
        let r = self.inner_mut().broadcast(buf, root);
        self.located(r)
    }

    fn group(&mut self, ops: &mut [P2p<'_, B>]) -> Result<(), CommError> {
        let r = self.inner_mut().group(ops);
        self.located(r)
    }
}
