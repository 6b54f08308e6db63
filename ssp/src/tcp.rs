//! The TCP transport: the same clients and shards, across processes.
//!
//! Takes addresses; gives [`Outbound`] links and inboxes that the client
//! ([`crate::Client::start`]) and shard ([`crate::server::run_shard`]) code
//! uses unchanged. Frames are length-delimited (tokio-util's
//! `LengthDelimitedCodec`) and each holds one postcard-encoded serde
//! message: [`ClientFrame`] from a client, [`ToClient`] from a server.
//! One connection per (client, server process); it carries the messages of
//! every shard that process hosts, in order.
//!
//! A peer that goes silent without closing its connection (a cut link, a
//! host gone: issue 42) is found by the kernel's heartbeats: every
//! connection has TCP keep-alive (probes after a quarter of the peer
//! timeout idle) and `TCP_USER_TIMEOUT` = the peer timeout, so a link with
//! no answer for that long fails its reads and writes. The failure then
//! takes the path of a closed connection: the client's reads fail naming
//! the server and the error, and the server's shards fail naming the client
//! (`ToClient::LinkClosed`, `ToServer::LinkLost`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use crossbeam_channel::Receiver;
use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use socket2::{SockRef, TcpKeepalive};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::mpsc;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use crate::error::SspError;
use crate::link::Outbound;
use crate::message::{ToClient, ToServer};
use crate::server::{run_shard, ClientLinks, ShardState};
use crate::types::{ClientId, ShardId};

/// What a client sends on a connection: first `Hello`, then messages for
/// the shards of that server process.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ClientFrame {
    /// The connecting client's id.
    Hello(ClientId),
    /// A message for one shard.
    Msg(ShardId, ToServer),
}

fn runtime() -> Result<Runtime, SspError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| SspError::Io {
            what: "starting the tokio runtime".into(),
            source: e,
        })
}

/// Keep-alive and `TCP_USER_TIMEOUT` on `s` for a peer timeout of
/// `timeout` (see the module doc).
fn watch_link(s: &TcpStream, timeout: Duration) -> std::io::Result<()> {
    let sock = SockRef::from(s);
    let idle = (timeout / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
    let every = (timeout / 16).clamp(Duration::from_secs(1), Duration::from_secs(10));
    let alive = TcpKeepalive::new()
        .with_time(idle)
        .with_interval(every)
        .with_retries(4);
    sock.set_tcp_keepalive(&alive)?;
    sock.set_tcp_user_timeout(Some(timeout))
}

fn encode<T: Serialize>(msg: &T) -> Bytes {
    // Serialising plain enums of numbers, vectors and maps into a Vec
    // cannot fail.
    Bytes::from(postcard::to_stdvec(msg).unwrap_or_default())
}

#[derive(Default)]
struct Registry {
    links: Mutex<HashMap<ClientId, mpsc::UnboundedSender<ToClient>>>,
}

impl ClientLinks for Registry {
    fn send(&self, client: ClientId, msg: ToClient) -> Result<(), SspError> {
        let links = crate::client::lock(&self.links);
        let tx = links.get(&client).ok_or_else(|| SspError::Disconnected {
            peer: format!("client {}", client.0),
            why: "not connected".into(),
        })?;
        tx.send(msg).map_err(|_| SspError::Disconnected {
            peer: format!("client {}", client.0),
            why: "connection closed".into(),
        })
    }
}

/// A server process: some shards behind one TCP listener.
pub struct TcpServer {
    addr: SocketAddr,
    shards: Vec<JoinHandle<Result<ShardState, SspError>>>,
    registry: Arc<Registry>,
    writers: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    rt: Runtime,
}

impl TcpServer {
    /// Listens on `addr` (e.g. `127.0.0.1:0`) and serves the shards
    /// `states` (each usually [`ShardState::new`], or restored from a
    /// checkpoint) for their clients; writes their checkpoints into
    /// `checkpoint_dir` when given. A client silent for `peer_timeout` on a
    /// connection that stays open counts as gone (see the module doc).
    ///
    /// # Errors
    /// [`SspError::Io`] when the address cannot be bound.
    pub fn start(
        addr: &str,
        states: Vec<ShardState>,
        checkpoint_dir: Option<PathBuf>,
        peer_timeout: Duration,
    ) -> Result<TcpServer, SspError> {
        let rt = runtime()?;
        let std_listener = std::net::TcpListener::bind(addr).map_err(|e| SspError::Io {
            what: format!("binding {addr} (is the port free?)"),
            source: e,
        })?;
        std_listener
            .set_nonblocking(true)
            .map_err(|e| SspError::Io {
                what: addr.into(),
                source: e,
            })?;
        let local = std_listener.local_addr().map_err(|e| SspError::Io {
            what: addr.into(),
            source: e,
        })?;
        let registry = Arc::new(Registry::default());
        let mut inboxes = HashMap::new();
        let mut shards = Vec::new();
        for state in states {
            let (tx, rx) = crossbeam_channel::unbounded();
            inboxes.insert(state.id(), tx);
            let reg = Arc::clone(&registry);
            let dir = checkpoint_dir.clone();
            let h = std::thread::Builder::new()
                .name(format!("ssp-shard{}", state.id().0))
                .spawn(move || run_shard(state, rx, reg.as_ref(), dir.as_deref()))
                .map_err(|e| SspError::Io {
                    what: "spawning a shard thread".into(),
                    source: e,
                })?;
            shards.push(h);
        }
        let writers = Arc::new(Mutex::new(Vec::new()));
        let (reg, ws) = (Arc::clone(&registry), Arc::clone(&writers));
        let listener = {
            let _guard = rt.enter();
            TcpListener::from_std(std_listener).map_err(|e| SspError::Io {
                what: addr.into(),
                source: e,
            })?
        };
        rt.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let _ = watch_link(&stream, peer_timeout);
                let (reg, inboxes, ws) = (Arc::clone(&reg), inboxes.clone(), Arc::clone(&ws));
                tokio::spawn(serve_connection(stream, reg, inboxes, ws));
            }
        });
        Ok(TcpServer {
            addr: local,
            shards,
            registry,
            writers,
            rt,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits until every client has said `Bye` to every shard, flushes the
    /// last messages, and returns the shards' final states.
    ///
    /// # Errors
    /// The first shard error.
    pub fn wait(self) -> Result<Vec<ShardState>, SspError> {
        let mut states = Vec::new();
        let mut first_err = None;
        for h in self.shards {
            match h.join() {
                Ok(Ok(s)) => states.push(s),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(SspError::Config("a shard thread panicked".into()));
                }
            }
        }
        // Closing the links lets each writer drain its queue and close.
        crate::client::lock(&self.registry.links).clear();
        let writers: Vec<_> = std::mem::take(&mut *crate::client::lock(&self.writers));
        self.rt.block_on(async {
            for w in writers {
                let _ = tokio::time::timeout(Duration::from_secs(5), w).await;
            }
        });
        self.rt.shutdown_timeout(Duration::from_millis(100));
        match first_err {
            Some(e) => Err(e),
            None => Ok(states),
        }
    }
}

async fn serve_connection(
    stream: TcpStream,
    registry: Arc<Registry>,
    inboxes: HashMap<ShardId, crossbeam_channel::Sender<ToServer>>,
    writers: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
) {
    let (mut sink, mut frames) = Framed::new(stream, LengthDelimitedCodec::new()).split();
    let Some(Ok(first)) = frames.next().await else {
        return;
    };
    let Ok(ClientFrame::Hello(client)) = postcard::from_bytes::<ClientFrame>(&first) else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<ToClient>();
    crate::client::lock(&registry.links).insert(client, tx);
    let writer = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            if sink.send(encode(&msg)).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    crate::client::lock(&writers).push(writer);
    let mut said_bye = std::collections::HashSet::new();
    while let Some(Ok(frame)) = frames.next().await {
        match postcard::from_bytes::<ClientFrame>(&frame) {
            Ok(ClientFrame::Msg(shard, msg)) => {
                if matches!(msg, ToServer::Bye { .. }) {
                    said_bye.insert(shard);
                }
                if let Some(inbox) = inboxes.get(&shard) {
                    let _ = inbox.send(msg);
                }
            }
            Ok(ClientFrame::Hello(_)) | Err(_) => break,
        }
    }
    // A client gone without its Bye (killed, or its server peers died):
    // its shards must stop, not wait for it forever.
    for (shard, inbox) in &inboxes {
        if !said_bye.contains(shard) {
            let _ = inbox.send(ToServer::LinkLost { client });
        }
    }
}

struct TcpLink {
    shard: ShardId,
    tx: mpsc::UnboundedSender<ClientFrame>,
    peer: String,
}

impl Outbound<ToServer> for TcpLink {
    fn send(&self, msg: ToServer) -> Result<(), SspError> {
        self.tx
            .send(ClientFrame::Msg(self.shard, msg))
            .map_err(|_| SspError::Disconnected {
                peer: self.peer.clone(),
                why: "connection closed".into(),
            })
    }
}

/// A client's connections to every server process; keep it alive until
/// the client has been joined.
pub struct TcpConnections {
    rt: Runtime,
}

impl TcpConnections {
    /// Connects client `client` to every server process. `servers[p]` hosts
    /// shards `p * shards_per_server .. (p + 1) * shards_per_server`.
    /// Retries each address for up to `patience` (servers may start late);
    /// a server silent for `peer_timeout` on a connection that stays open
    /// counts as gone (see the module doc).
    /// Returns the links to every shard (index = shard id) and the inbox of
    /// every server's messages, ready for [`crate::Client::start`].
    ///
    /// # Errors
    /// [`SspError::Io`] when a server cannot be reached in time.
    #[allow(clippy::type_complexity)]
    pub fn connect(
        client: ClientId,
        servers: &[String],
        shards_per_server: usize,
        (patience, peer_timeout): (Duration, Duration),
    ) -> Result<
        (
            TcpConnections,
            Vec<Arc<dyn Outbound<ToServer>>>,
            Receiver<ToClient>,
        ),
        SspError,
    > {
        let rt = runtime()?;
        let (in_tx, in_rx) = crossbeam_channel::unbounded();
        let mut links: Vec<Arc<dyn Outbound<ToServer>>> = Vec::new();
        for (p, addr) in servers.iter().enumerate() {
            let deadline = Instant::now() + patience;
            let stream = rt.block_on(async {
                loop {
                    match TcpStream::connect(addr.as_str()).await {
                        Ok(s) => return Ok(s),
                        Err(e) if Instant::now() >= deadline => return Err(e),
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                }
            });
            let stream = stream.map_err(|e| SspError::Io {
                what: format!("connecting to server {addr} (is `tofu ssp server` running there?)"),
                source: e,
            })?;
            let _ = stream.set_nodelay(true);
            let _ = watch_link(&stream, peer_timeout);
            let (tx, mut rx) = mpsc::unbounded_channel::<ClientFrame>();
            tx.send(ClientFrame::Hello(client))
                .map_err(|_| SspError::Disconnected {
                    peer: addr.clone(),
                    why: "hello".into(),
                })?;
            let in_tx = in_tx.clone();
            let peer = addr.clone();
            rt.spawn(async move {
                let (mut sink, mut frames) =
                    Framed::new(stream, LengthDelimitedCodec::new()).split();
                let writer = tokio::spawn(async move {
                    while let Some(frame) = rx.recv().await {
                        if sink.send(encode(&frame)).await.is_err() {
                            break;
                        }
                    }
                });
                let mut broken = None;
                while let Some(frame) = frames.next().await {
                    let frame = match frame {
                        Ok(f) => f,
                        Err(e) => {
                            broken = Some(e);
                            break;
                        }
                    };
                    match postcard::from_bytes::<ToClient>(&frame) {
                        Ok(msg) => {
                            if in_tx.send(msg).is_err() {
                                break;
                            }
                        }
                        Err(e) => {
                            eprintln!(
                                "ssp: {}",
                                SspError::Codec {
                                    peer: peer.clone(),
                                    why: e.to_string()
                                }
                            );
                            break;
                        }
                    }
                }
                // The server closed: no more messages to send either, and
                // reads still waiting on it must fail, not hang.
                writer.abort();
                let peer = match broken {
                    Some(e) => format!(
                        "{peer} ({e}: no answer within the peer timeout of {} s; a cut link or a host gone?)",
                        peer_timeout.as_secs_f64()
                    ),
                    None => peer,
                };
                let _ = in_tx.send(ToClient::LinkClosed { peer });
            });
            for k in 0..shards_per_server {
                links.push(Arc::new(TcpLink {
                    shard: ShardId((p * shards_per_server + k) as u32),
                    tx: tx.clone(),
                    peer: addr.clone(),
                }));
            }
        }
        Ok((TcpConnections { rt }, links, in_rx))
    }

    /// Closes the connections' runtime (after [`crate::Client::join`]).
    pub fn close(self) {
        self.rt.shutdown_timeout(Duration::from_millis(100));
    }
}
