//! The communicator across processes over TCP (`TcpCommunicator`), on
//! loopback with one thread per rank (each rank has its own listener and
//! sockets, exactly as in separate processes): every collective and a
//! grouped exchange against naive oracles and the in-process communicator's
//! byte counts; a rank whose connections close (its process killed) is named
//! by the others at once; a rank that never comes is named after the timeout.

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use comm::traffic;
use comm::{Collectives, CommError, Communicator, P2p, Rank, ReduceOp, TcpCommunicator};

const TIMEOUT: Duration = Duration::from_secs(20);

/// One listener per rank on loopback and their addresses.
fn listeners(p: usize) -> (Vec<TcpListener>, Vec<SocketAddr>) {
    let l: Vec<TcpListener> = (0..p)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let a = l.iter().map(|x| x.local_addr().unwrap()).collect();
    (l, a)
}

/// `f(rank, comm)` on every rank of a TCP clique of `p`, in rank order.
fn on_ranks<T: Send>(p: usize, f: impl Fn(usize, TcpCommunicator) -> T + Sync) -> Vec<T> {
    let (ls, addrs) = listeners(p);
    std::thread::scope(|s| {
        let hs: Vec<_> = ls
            .into_iter()
            .enumerate()
            .map(|(r, l)| {
                let (f, addrs) = (&f, &addrs);
                s.spawn(move || f(r, TcpCommunicator::connect(r, l, addrs, TIMEOUT).unwrap()))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn input(r: usize, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((r * 31 + i * 7) % 17) as f32 - 8.0)
        .collect()
}

#[test]
fn collectives_over_tcp_match_the_oracles_and_count_bytes_as_in_process() {
    for p in [1, 2, 3, 4] {
        let n = 3 * p + 2;
        let want: Vec<f32> = (0..n)
            .map(|i| (0..p).map(|r| input(r, n)[i]).sum())
            .collect();
        let out = on_ranks(p, |r, mut c| {
            let mut buf = input(r, n);
            c.all_reduce(&mut buf, ReduceOp::Sum).unwrap();
            let sent = c.counters().sent;
            let counts: Vec<usize> = (0..p).map(|q| q + 1).collect();
            let mut gathered = vec![0.0; counts.iter().sum()];
            c.all_gather(&vec![r as f32; r + 1], &mut gathered, &counts)
                .unwrap();
            let mut b = if r == p - 1 {
                input(r, n)
            } else {
                vec![0.0; n]
            };
            c.broadcast(&mut b, Rank(p - 1)).unwrap();
            (buf, sent, gathered, b)
        });
        let gathered_want: Vec<f32> = (0..p).flat_map(|q| vec![q as f32; q + 1]).collect();
        for (r, (buf, sent, g, b)) in out.into_iter().enumerate() {
            assert_eq!(buf, want, "p={p} rank {r}: all-reduce");
            assert_eq!(
                sent,
                traffic::all_reduce(n, p, r).sent,
                "p={p} rank {r}: bytes"
            );
            assert_eq!(g, gathered_want, "p={p} rank {r}: all-gather");
            assert_eq!(b, input(p - 1, n), "p={p} rank {r}: broadcast");
        }
    }
}

#[test]
fn a_grouped_ring_exchange_over_tcp_moves_every_message() {
    let p = 4;
    let out = on_ranks(p, |r, mut c| {
        let send = input(r, 1000);
        let mut recv = vec![0.0; 1000];
        let mut ops = [
            P2p::Send {
                peer: Rank((r + 1) % p),
                buf: &send[..],
            },
            P2p::Recv {
                peer: Rank((r + p - 1) % p),
                buf: &mut recv[..],
            },
        ];
        c.group(&mut ops).unwrap();
        recv
    });
    for (r, recv) in out.into_iter().enumerate() {
        assert_eq!(recv, input((r + p - 1) % p, 1000));
    }
}

#[test]
fn a_rank_whose_connections_close_is_named_at_once() {
    let p = 3;
    let t0 = Instant::now();
    let out = on_ranks(p, |r, mut c| {
        if r == 1 {
            drop(c); // as a killed process: its sockets close
            return None;
        }
        let mut buf = vec![1.0; 8];
        Some(c.all_reduce(&mut buf, ReduceOp::Sum).unwrap_err())
    });
    // Each survivor fails; the one waiting on rank 1 names it, the other
    // may name the survivor that failed first and hung up (no abort
    // crosses processes: a launcher names the first rank to exit).
    let errs: Vec<CommError> = out.into_iter().flatten().collect();
    assert_eq!(errs.len(), 2);
    assert!(
        errs.iter().all(|e| matches!(e, CommError::PeerGone { .. })),
        "{errs:?}"
    );
    assert!(
        errs.iter().any(|e| e.culprit() == Some(Rank(1))),
        "{errs:?}"
    );
    assert!(
        t0.elapsed() < TIMEOUT / 2,
        "noticed at once, not after the timeout"
    );
}

#[test]
fn a_rank_that_never_connects_is_named_after_the_timeout() {
    let (mut ls, addrs) = listeners(2);
    let l0 = ls.remove(0);
    drop(ls); // rank 1 never listens or connects
    let e = TcpCommunicator::connect(0, l0, &addrs, Duration::from_millis(300)).unwrap_err();
    assert!(matches!(e, CommError::Connect { peer: Rank(1), .. }), "{e}");
}
