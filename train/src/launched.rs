//! Joining the other processes of a launched run over TCP: the rendezvous
//! of `tofu launch` (torchrun's variables) exchanges every rank's listening
//! address, then `comm::TcpCommunicator` connects the ranks pairwise.
//!
//! Takes the launcher's [`rendezvous::Env`] and a timeout; gives this
//! rank's communicator and the rendezvous session (kept open for the run:
//! the host notices a process that exits). Each rank listens on an
//! ephemeral port of the local address that routes to `MASTER_ADDR` (a
//! connected UDP socket's local address; no packet is sent), so the same
//! code serves one node (loopback) and several.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs, UdpSocket};
use std::time::Duration;

use comm::TcpCommunicator;
use rendezvous::{Env, Session};

use crate::TrainError;

/// The local IP address on the route to `MASTER_ADDR:MASTER_PORT`.
fn local_ip(env: &Env) -> Result<std::net::IpAddr, String> {
    let master = env.master();
    let to: SocketAddr = master
        .to_socket_addrs()
        .map_err(|e| format!("MASTER_ADDR {master}: {e}"))?
        .next()
        .ok_or_else(|| format!("MASTER_ADDR {master}: no address"))?;
    let bind = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let s = UdpSocket::bind(bind).map_err(|e| e.to_string())?;
    s.connect(to).map_err(|e| format!("route to {to}: {e}"))?;
    Ok(s.local_addr().map_err(|e| e.to_string())?.ip())
}

/// Join the launched run `env` and connect this rank to every other over
/// TCP (see the module doc).
///
/// Errors: [`TrainError::Model`] with the rendezvous's or the connection's
/// words (naming the rank that did not come).
pub fn join_tcp(env: &Env, timeout: Duration) -> Result<(TcpCommunicator, Session), TrainError> {
    let fail = |e: String| TrainError::Model(format!("rank {}: {e}", env.rank));
    let mut session = rendezvous::join(env, Vec::new, timeout).map_err(|e| fail(e.to_string()))?;
    let ip = local_ip(env).map_err(fail)?;
    let listener = TcpListener::bind((ip, 0)).map_err(|e| fail(format!("listen on {ip}: {e}")))?;
    let mine = listener.local_addr().map_err(|e| fail(e.to_string()))?;
    let all = session
        .all_gather_bytes(mine.to_string().as_bytes())
        .map_err(|e| fail(e.to_string()))?;
    let addrs = all
        .iter()
        .map(|b| {
            String::from_utf8_lossy(b)
                .parse::<SocketAddr>()
                .map_err(|e| {
                    fail(format!(
                        "a peer's address {:?}: {e}",
                        String::from_utf8_lossy(b)
                    ))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let comm = TcpCommunicator::connect(env.rank, listener, &addrs, timeout)
        .map_err(|e| fail(e.to_string()))?;
    Ok((comm, session))
}
