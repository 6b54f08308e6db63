//! [`join`] and [`Session`]: one rank's side of the rendezvous.
//!
//! Every rank, rank 0 included, connects to rank 0's host over TCP (rank 0
//! first starts the host, [`crate::server`], on `MASTER_ADDR:MASTER_PORT`),
//! registers, and receives rank 0's payload; then barriers and all-gathers go
//! through the host. Reads carry a deadline (the session's timeout plus a
//! margin that lets the host's own verdict, which names the late ranks,
//! arrive first), so no call blocks for longer than that.

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

use crate::server::Host;
use crate::wire::{incoming, send, Collective, Incoming, ToHost, ToRank, PROTOCOL};
use crate::{Env, RendezvousError};

/// Pause between two connection attempts to a host that is not up yet.
const RETRY: Duration = Duration::from_millis(50);

/// One rank's membership in a rendezvous session, from [`join`] until
/// [`Session::close`] (or drop).
pub struct Session {
    rank: usize,
    world_size: usize,
    addr: String,
    payload: Vec<u8>,
    timeout: Duration,
    stream: TcpStream,
    incoming: Incoming<ToRank>,
    /// Collectives entered so far.
    seq: u64,
    /// The first error; later calls fail with it.
    failed: Option<String>,
    /// Rank 0 only: the host it runs.
    host: Option<Host>,
}

/// Join the rendezvous described by `env`: rank 0 listens on
/// `MASTER_ADDR:MASTER_PORT`, calls `payload_from_rank0` (e.g. NCCL's
/// 128-byte unique id; called on rank 0 only) and serves; every rank
/// connects (retrying until rank 0 is up), registers its rank and receives
/// rank 0's payload ([`Session::payload`]).
///
/// `timeout` bounds this join (every rank must connect within it, counted
/// from rank 0's start) and, later, each collective (counted from the first
/// rank that enters it); a process exiting is noticed at once.
///
/// Errors: [`RendezvousError::Bind`] / [`RendezvousError::Resolve`] /
/// [`RendezvousError::Unreachable`] for the address;
/// [`RendezvousError::Session`] with a [`crate::Failure`] naming the
/// missing, duplicate, out-of-range or mismatched rank(s);
/// [`RendezvousError::HostLost`] / [`RendezvousError::NoReply`] when rank 0
/// is gone or silent.
pub fn join(
    env: &Env,
    payload_from_rank0: impl FnOnce() -> Vec<u8>,
    timeout: Duration,
) -> Result<Session, RendezvousError> {
    env.validate()?;
    let start = Instant::now();
    let addr_text = env.master();
    let (host, connect_to) = if env.rank == 0 {
        let listener =
            TcpListener::bind((env.master_addr.as_str(), env.master_port)).map_err(|source| {
                RendezvousError::Bind {
                    addr: addr_text.clone(),
                    source,
                }
            })?;
        let local = listener
            .local_addr()
            .map_err(|source| RendezvousError::Bind {
                addr: addr_text.clone(),
                source,
            })?;
        let payload = payload_from_rank0();
        let host = Host::start(listener, env.world_size, payload, timeout).map_err(|e| {
            RendezvousError::Io {
                rank: 0,
                during: "join".into(),
                reason: format!("cannot start the rendezvous host: {e}"),
            }
        })?;
        (Some(host), vec![local])
    } else {
        let addrs: Vec<SocketAddr> = (env.master_addr.as_str(), env.master_port)
            .to_socket_addrs()
            .map_err(|e| RendezvousError::Resolve {
                addr: addr_text.clone(),
                reason: e.to_string(),
            })?
            .collect();
        if addrs.is_empty() {
            return Err(RendezvousError::Resolve {
                addr: addr_text,
                reason: "no address".into(),
            });
        }
        (None, addrs)
    };
    let stream = connect(env.rank, &addr_text, &connect_to, start + timeout, timeout)?;
    let _ = stream.set_nodelay(true);
    let reader = stream.try_clone().map_err(|e| RendezvousError::Io {
        rank: env.rank,
        during: "join".into(),
        reason: e.to_string(),
    })?;
    let mut session = Session {
        rank: env.rank,
        world_size: env.world_size,
        addr: addr_text,
        payload: Vec::new(),
        timeout,
        stream,
        incoming: incoming(reader),
        seq: 0,
        failed: None,
        host,
    };
    let hello = ToHost::Hello {
        protocol: PROTOCOL,
        rank: env.rank,
        world_size: env.world_size,
    };
    let result = session.send(&hello, "join").and_then(|()| {
        match session.receive("join", Instant::now() + timeout)? {
            ToRank::Welcome { payload } => Ok(payload),
            other => Err(session.unexpected("join", &other)),
        }
    });
    match result {
        Ok(payload) => {
            session.payload = payload;
            Ok(session)
        }
        Err(e) => {
            session.fail(&e);
            Err(e)
        }
    }
}

/// Connect to one of `addrs`, retrying until `deadline`.
fn connect(
    rank: usize,
    addr_text: &str,
    addrs: &[SocketAddr],
    deadline: Instant,
    timeout: Duration,
) -> Result<TcpStream, RendezvousError> {
    let mut last_error = String::from("none");
    loop {
        for a in addrs {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match TcpStream::connect_timeout(a, left.min(Duration::from_secs(1))) {
                Ok(s) => return Ok(s),
                Err(e) => last_error = format!("{a}: {e}"),
            }
        }
        if Instant::now() + RETRY >= deadline {
            return Err(RendezvousError::Unreachable {
                rank,
                addr: addr_text.to_string(),
                timeout_s: timeout.as_secs_f64(),
                last_error,
            });
        }
        thread::sleep(RETRY);
    }
}

impl Session {
    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks in the session.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// Rank 0's payload, the same bytes on every rank.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The timeout of every collective (and of the join).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Wait until every rank entered this barrier. Errors name the rank(s)
    /// that did not enter within the timeout, that exited, or that closed
    /// their session; after an error the session is unusable.
    pub fn barrier(&mut self) -> Result<(), RendezvousError> {
        self.collective(false, Vec::new()).map(|_| ())
    }

    /// Every rank's `mine`, in rank order (an all-gather of byte strings of
    /// any length, e.g. host names or device ids). Errors as
    /// [`Session::barrier`].
    pub fn all_gather_bytes(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>, RendezvousError> {
        self.collective(true, mine.to_vec())
    }

    /// Leave the session cleanly. Ranks still waiting for this one in a
    /// collective fail with an error naming it. On rank 0, waits (at most
    /// the timeout) for the other ranks to close before stopping the host,
    /// and reports a failure the host saw meanwhile.
    pub fn close(mut self) -> Result<(), RendezvousError> {
        self.shut()
    }

    /// Leave the session after this rank failed (`reason`), without
    /// waiting for the other ranks: they may be hung (a stopped process
    /// closes no connection and would hold rank 0 here for the whole
    /// timeout); they see this rank gone and fail naming it.
    pub fn abandon(mut self, reason: &str) {
        self.fail_with(reason.to_string());
    }

    fn shut(&mut self) -> Result<(), RendezvousError> {
        if self.failed.is_none() {
            let _ = send(&mut self.stream, &ToHost::Close);
            self.failed = Some("closed".into());
        }
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
        match self.host.take() {
            Some(host) => host.finish(self.timeout).map_err(RendezvousError::from),
            None => Ok(()),
        }
    }

    fn collective(&mut self, gather: bool, data: Vec<u8>) -> Result<Vec<Vec<u8>>, RendezvousError> {
        if let Some(first) = &self.failed {
            return Err(RendezvousError::Closed {
                rank: self.rank,
                first: first.clone(),
            });
        }
        self.seq += 1;
        let op = if gather {
            Collective::Gather(self.seq)
        } else {
            Collective::Barrier(self.seq)
        };
        let during = op.to_string();
        let deadline = Instant::now() + self.timeout;
        let result = self
            .send(&ToHost::Enter { op, data }, &during)
            .and_then(|()| match self.receive(&during, deadline)? {
                ToRank::Done { op: done, data } if done == op => Ok(data),
                other => Err(self.unexpected(&during, &other)),
            });
        if let Err(e) = &result {
            self.fail(e);
        }
        result
    }

    fn send(&mut self, msg: &ToHost, during: &str) -> Result<(), RendezvousError> {
        send(&mut self.stream, msg).map_err(|_| self.host_lost(during))
    }

    /// The next message from the host, waiting until `deadline` plus the
    /// margin; an `Abort` becomes its error.
    fn receive(&mut self, during: &str, deadline: Instant) -> Result<ToRank, RendezvousError> {
        let end = deadline + margin(self.timeout);
        let waited_since = Instant::now();
        let left = end.saturating_duration_since(Instant::now());
        let _ = self
            .stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))));
        match self.incoming.next() {
            Some(Ok(ToRank::Abort(f))) => Err(RendezvousError::Session(f)),
            Some(Ok(msg)) => Ok(msg),
            Some(Err(e)) if e.is_io() && timed_out(&e) => Err(RendezvousError::NoReply {
                rank: self.rank,
                addr: self.addr.clone(),
                during: during.into(),
                waited_s: waited_since.elapsed().as_secs_f64(),
            }),
            Some(Err(e)) if e.is_io() || e.is_eof() => Err(self.host_lost(during)),
            Some(Err(e)) => Err(RendezvousError::Io {
                rank: self.rank,
                during: during.into(),
                reason: format!("undecodable message from rank 0's rendezvous: {e}"),
            }),
            None => Err(self.host_lost(during)),
        }
    }

    fn host_lost(&self, during: &str) -> RendezvousError {
        RendezvousError::HostLost {
            rank: self.rank,
            addr: self.addr.clone(),
            during: during.into(),
        }
    }

    fn unexpected(&self, during: &str, msg: &ToRank) -> RendezvousError {
        RendezvousError::Io {
            rank: self.rank,
            during: during.into(),
            reason: format!("unexpected message from rank 0's rendezvous: {msg:?}"),
        }
    }

    /// Remember the first error; later collectives fail at once.
    fn fail(&mut self, e: &RendezvousError) {
        self.fail_with(e.to_string());
    }

    /// [`Session::fail`] for a failure in words.
    fn fail_with(&mut self, reason: String) {
        if self.failed.is_none() {
            self.failed = Some(reason);
        }
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if let Some(host) = self.host.take() {
            // The host already ended or ends by itself: a failure is final.
            let _ = host.finish(Duration::ZERO);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.shut();
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("rank", &self.rank)
            .field("world_size", &self.world_size)
            .field("addr", &self.addr)
            .field("payload_len", &self.payload.len())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Extra wait of a rank beyond the timeout, so that the host's verdict
/// (which names the late ranks) arrives before the rank's own timeout.
fn margin(timeout: Duration) -> Duration {
    (timeout / 4).clamp(Duration::from_millis(250), Duration::from_secs(5))
}

fn timed_out(e: &serde_json::Error) -> bool {
    matches!(
        e.io_error_kind(),
        Some(std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
    )
}
