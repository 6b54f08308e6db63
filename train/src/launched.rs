//! Joining the other processes of a launched run: on the CPU over TCP (the
//! rendezvous of `tofu launch`, torchrun's variables, exchanges every
//! rank's listening address, then `comm::TcpCommunicator` connects the
//! ranks pairwise); on CUDA over NCCL (rank 0's unique id handed out by the
//! rendezvous, `runner::choose::launched_cuda`). [`train_launched`] then
//! trains this process's rank ([`crate::rank_trainer`]).
//!
//! Takes the launcher's [`rendezvous::Env`] and a timeout; gives this
//! rank's communicator and the rendezvous session (kept open for the run:
//! the host notices a process that exits). Each rank listens on an
//! ephemeral port of the local address that routes to `MASTER_ADDR` (a
//! connected UDP socket's local address; no packet is sent), so the same
//! code serves one node (loopback) and several.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs, UdpSocket};
use std::time::Duration;

use std::sync::Mutex;

use comm::TcpCommunicator;
use rendezvous::{Env, Session};
use runner::choose::BackendKind;

use crate::prepare::Prepared;
use crate::rank_trainer::{train_rank, RankTrainReport};
use crate::samples::Samples;
use crate::trainer::{StepLog, TrainOptions};
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

/// Train this process's rank of `prep` in the launched run `env` on the
/// backend of `opts.exec` (the CPU over TCP, or CUDA device
/// `devices[local_rank]` over NCCL), then close the rendezvous session.
///
/// Errors: joining ([`TrainError::Model`] naming the rank,
/// [`TrainError::Backend`] for CUDA), and [`train_rank`]'s.
pub fn train_launched(
    prep: &Prepared,
    data: (&dyn Samples, Option<&dyn Samples>),
    env: &Env,
    opts: &TrainOptions,
    timeout: Duration,
    on_step: &(dyn Fn(&StepLog) + Sync),
) -> Result<RankTrainReport, TrainError> {
    let (report, session) = match opts.exec.backend {
        BackendKind::Cpu => {
            let (comm, session) = join_tcp(env, timeout)?;
            let session = Mutex::new(session);
            let ranks = (runner::CpuBackend::new(), comm);
            (
                train_rank(prep, data, ranks, opts, &session, on_step),
                session,
            )
        }
        BackendKind::Cuda => {
            let (backend, comm, session) = runner::choose::launched_cuda(&opts.exec, env, timeout)?;
            let session = Mutex::new(session);
            let ranks = (backend, comm);
            (
                train_rank(prep, data, ranks, opts, &session, on_step),
                session,
            )
        }
    };
    let session = session
        .into_inner()
        .map_err(|_| TrainError::Model("the rendezvous session was poisoned".into()))?;
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            // Failing: leave at once, not after the peers (maybe hung).
            session.abandon(&e.to_string());
            return Err(e);
        }
    };
    session
        .close()
        .map_err(|e| TrainError::Model(format!("rank {}: {e}", env.rank)))?;
    Ok(report)
}
