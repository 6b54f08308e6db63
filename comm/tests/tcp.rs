//! The communicator across processes over TCP (`TcpCommunicator`), on
//! loopback with one thread per rank (each rank has its own listener and
//! sockets, exactly as in separate processes): every collective and a
//! grouped exchange against naive oracles and the in-process communicator's
//! byte counts; a rank whose connections close (its process killed) is named
//! by the others at once; a rank that never comes is named after the timeout;
//! a peer that goes silent without closing anything (a stopped process, a
//! cut link) is named with its address after the timeout, and dropping the
//! communicator never waits longer than the timeout for it.

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
        errs.iter()
            .all(|e| matches!(e.root(), CommError::PeerGone { .. })),
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

/// A peer that completes the handshake and then neither reads nor writes
/// nor closes (a stopped process, a host behind a cut link): rank 1 of 2,
/// held open until the returned guard drops. Gives rank 0's listener and
/// both addresses.
fn silent_rank_1() -> (TcpListener, Vec<SocketAddr>, std::thread::JoinHandle<()>) {
    let (mut ls, addrs) = listeners(2);
    let l1 = ls.pop().unwrap();
    let held = std::thread::spawn(move || {
        let (s, _) = l1.accept().unwrap();
        std::thread::sleep(Duration::from_secs(8));
        drop(s);
    });
    (ls.pop().unwrap(), addrs, held)
}

#[test]
fn a_silent_peer_is_named_with_its_address_after_the_timeout() {
    let (l0, addrs, _held) = silent_rank_1();
    let timeout = Duration::from_millis(400);
    let mut c = TcpCommunicator::connect(0, l0, &addrs, timeout).unwrap();
    let t0 = Instant::now();
    let e = c
        .all_reduce(&mut vec![1.0f32; 8], ReduceOp::Sum)
        .unwrap_err();
    assert!(t0.elapsed() >= timeout, "{e}");
    assert!(
        matches!(e.root(), CommError::Timeout { peer: Rank(1), .. }),
        "{e}"
    );
    assert_eq!(e.culprit(), Some(Rank(1)));
    let text = e.to_string();
    assert!(
        text.contains(&addrs[1].to_string()) && text.contains("all_reduce"),
        "{text}"
    );
}

/// Two mechanisms free the blocked writer: the drop's deadline (then the
/// sockets are shut down) and `TCP_USER_TIMEOUT`. Negative control, checked
/// by hand: with both removed (the drop joining its writers without a
/// deadline, as before issue 42) this test fails after 5 s, the writer
/// blocked until the silent peer's guard closes its socket.
#[test]
fn dropping_a_communicator_whose_peer_reads_nothing_ends_within_the_timeout() {
    let (l0, addrs, _held) = silent_rank_1();
    let timeout = Duration::from_millis(500);
    let mut c = TcpCommunicator::connect(0, l0, &addrs, timeout).unwrap();
    // 64 MiB: far more than the socket buffers hold, so the writer thread
    // blocks in write() with the peer reading nothing.
    let big = vec![0.5f32; 16 << 20];
    let mut ops = [P2p::Send {
        peer: Rank(1),
        buf: &big[..],
    }];
    c.group(&mut ops).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        drop(c);
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(5))
        .expect("drop returned within the timeout (plus a margin), not when the peer closed");
    assert!(
        t0.elapsed() >= timeout,
        "the writer was given the timeout to drain"
    );
}
