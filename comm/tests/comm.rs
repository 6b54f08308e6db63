//! The in-process communicator against naive oracles: every collective on
//! 1..=8 ranks with uneven (and zero) counts, byte counters against the
//! documented formulas, grouped send/recv patterns that must not deadlock,
//! and the typed errors (size mismatch, bad peer, panicked or hung ranks).

use std::time::Duration;

use comm::traffic::{self, Traffic};
use comm::{
    run_ranks, Collectives, CommError, Communicator, LocalCommunicator, P2p, Rank, ReduceOp,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Short enough that a deadlock fails the test quickly.
const TIMEOUT: Duration = Duration::from_secs(20);

/// Small integers, so every reduction order gives exactly the same f32.
fn data(rng: &mut StdRng, n: usize, op: ReduceOp) -> Vec<f32> {
    (0..n)
        .map(|_| match op {
            ReduceOp::Prod => [-2.0, -1.0, 1.0, 2.0][rng.gen_range(0..4)],
            _ => rng.gen_range(-8i32..=8) as f32,
        })
        .collect()
}

fn counts(rng: &mut StdRng, p: usize) -> Vec<usize> {
    (0..p).map(|_| rng.gen_range(0..=5)).collect()
}

fn reduce_all(inputs: &[Vec<f32>], op: ReduceOp) -> Vec<f32> {
    let mut acc = inputs[0].clone();
    for x in &inputs[1..] {
        for (a, b) in acc.iter_mut().zip(x) {
            *a = op.apply(*a, *b);
        }
    }
    acc
}

fn traffic_of(c: &comm::ByteCounters) -> Traffic {
    Traffic {
        sent: c.sent,
        received: c.received,
    }
}

const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min];

#[test]
fn all_reduce_matches_oracle_and_traffic() {
    let mut rng = StdRng::seed_from_u64(1);
    for p in 1..=8 {
        for op in OPS {
            for n in [0, 1, p - 1, 3 * p + 2, 37usize] {
                let inputs: Vec<Vec<f32>> = (0..p).map(|_| data(&mut rng, n, op)).collect();
                let want = reduce_all(&inputs, op);
                let out = run_ranks(
                    LocalCommunicator::create_with_timeout(p, TIMEOUT),
                    |mut c| {
                        let mut buf = inputs[c.rank().0].clone();
                        c.all_reduce(&mut buf, op).unwrap();
                        (buf, c.counters())
                    },
                );
                for (r, o) in out.into_iter().enumerate() {
                    let (buf, cnt) = o.unwrap();
                    assert_eq!(buf, want, "p={p} n={n} {op:?} rank {r}");
                    assert_eq!(
                        traffic_of(&cnt),
                        traffic::all_reduce(n, p, r),
                        "p={p} n={n} rank {r}"
                    );
                    if n % p == 0 {
                        assert_eq!(
                            cnt.sent,
                            (2 * (p - 1) * n / p * 4) as u64,
                            "closed form 2(p-1)/p·N"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn reduce_scatter_matches_oracle_and_traffic() {
    let mut rng = StdRng::seed_from_u64(2);
    for p in 1..=8 {
        for op in OPS {
            for _ in 0..3 {
                let cnt = counts(&mut rng, p);
                let n: usize = cnt.iter().sum();
                let inputs: Vec<Vec<f32>> = (0..p).map(|_| data(&mut rng, n, op)).collect();
                let want = reduce_all(&inputs, op);
                let out = run_ranks(
                    LocalCommunicator::create_with_timeout(p, TIMEOUT),
                    |mut c| {
                        let r = c.rank().0;
                        let mut recv = vec![f32::NAN; cnt[r]];
                        c.reduce_scatter(&inputs[r], &mut recv, &cnt, op).unwrap();
                        (recv, c.counters())
                    },
                );
                let mut off = 0;
                for (r, o) in out.into_iter().enumerate() {
                    let (recv, bytes) = o.unwrap();
                    assert_eq!(
                        recv,
                        want[off..off + cnt[r]],
                        "p={p} counts={cnt:?} rank {r}"
                    );
                    off += cnt[r];
                    assert_eq!(traffic_of(&bytes), traffic::reduce_scatter(&cnt, r));
                }
            }
        }
    }
}

#[test]
fn all_gather_matches_oracle_and_traffic() {
    let mut rng = StdRng::seed_from_u64(3);
    for p in 1..=8 {
        for _ in 0..4 {
            let cnt = counts(&mut rng, p);
            let inputs: Vec<Vec<f32>> = (0..p)
                .map(|r| data(&mut rng, cnt[r], ReduceOp::Sum))
                .collect();
            let want: Vec<f32> = inputs.concat();
            let out = run_ranks(
                LocalCommunicator::create_with_timeout(p, TIMEOUT),
                |mut c| {
                    let r = c.rank().0;
                    let mut recv = vec![f32::NAN; want.len()];
                    c.all_gather(&inputs[r], &mut recv, &cnt).unwrap();
                    (recv, c.counters())
                },
            );
            for (r, o) in out.into_iter().enumerate() {
                let (recv, bytes) = o.unwrap();
                assert_eq!(recv, want, "p={p} counts={cnt:?} rank {r}");
                assert_eq!(traffic_of(&bytes), traffic::all_gather(&cnt, r));
                let n = want.len();
                if cnt.iter().all(|&c| c == cnt[0]) {
                    assert_eq!(
                        bytes.sent,
                        ((p - 1) * n / p * 4) as u64,
                        "closed form (p-1)/p·N"
                    );
                }
            }
        }
    }
}

#[test]
fn all_to_all_matches_oracle_and_traffic() {
    let mut rng = StdRng::seed_from_u64(4);
    for p in 1..=8 {
        // sizes[i][j]: elements rank i sends to rank j.
        let sizes: Vec<Vec<usize>> = (0..p).map(|_| counts(&mut rng, p)).collect();
        let inputs: Vec<Vec<f32>> = (0..p)
            .map(|i| data(&mut rng, sizes[i].iter().sum(), ReduceOp::Sum))
            .collect();
        let block = |i: usize, j: usize| -> &[f32] {
            let off: usize = sizes[i][..j].iter().sum();
            &inputs[i][off..off + sizes[i][j]]
        };
        let out = run_ranks(
            LocalCommunicator::create_with_timeout(p, TIMEOUT),
            |mut c| {
                let r = c.rank().0;
                let recv_counts: Vec<usize> = (0..p).map(|j| sizes[j][r]).collect();
                let mut recv = vec![f32::NAN; recv_counts.iter().sum()];
                c.all_to_all(&inputs[r], &sizes[r], &mut recv, &recv_counts)
                    .unwrap();
                (recv, recv_counts, c.counters())
            },
        );
        for (r, o) in out.into_iter().enumerate() {
            let (recv, recv_counts, bytes) = o.unwrap();
            let want: Vec<f32> = (0..p).flat_map(|j| block(j, r).to_vec()).collect();
            assert_eq!(recv, want, "p={p} rank {r}");
            assert_eq!(
                traffic_of(&bytes),
                traffic::all_to_all(&sizes[r], &recv_counts, r)
            );
        }
    }
}

/// Chain broadcast (`broadcast`) and flat broadcast (`flat_broadcast`, the
/// root sending to each rank): same result, each with its own traffic.
#[test]
fn broadcast_matches_oracle_and_traffic() {
    let mut rng = StdRng::seed_from_u64(5);
    for flat in [false, true] {
        for p in 1..=8 {
            for root in 0..p {
                let n = rng.gen_range(0..20);
                let src = data(&mut rng, n, ReduceOp::Sum);
                let out = run_ranks(
                    LocalCommunicator::create_with_timeout(p, TIMEOUT),
                    |mut c| {
                        let r = c.rank().0;
                        let mut buf = if r == root {
                            src.clone()
                        } else {
                            vec![f32::NAN; n]
                        };
                        if flat {
                            c.flat_broadcast(&mut buf, Rank(root)).unwrap();
                        } else {
                            c.broadcast(&mut buf, Rank(root)).unwrap();
                        }
                        (buf, c.counters())
                    },
                );
                for (r, o) in out.into_iter().enumerate() {
                    let (buf, bytes) = o.unwrap();
                    assert_eq!(buf, src, "flat={flat} p={p} root={root} rank {r}");
                    let want = if flat {
                        traffic::flat_broadcast(n, p, root, r)
                    } else {
                        traffic::broadcast(n, p, root, r)
                    };
                    assert_eq!(
                        traffic_of(&bytes),
                        want,
                        "flat={flat} p={p} root={root} rank {r}"
                    );
                }
            }
        }
    }
}

/// Every rank sends to and receives from its ring neighbours in one group,
/// in the order that deadlocks with blocking sends (everyone sends first).
#[test]
fn grouped_ring_exchange_does_not_deadlock() {
    for p in 1..=8 {
        let out = run_ranks(
            LocalCommunicator::create_with_timeout(p, TIMEOUT),
            |mut c| {
                let r = c.rank().0;
                let (next, prev) = ((r + 1) % p, (r + p - 1) % p);
                let mine = vec![r as f32; 1000 + r];
                let mut from_prev = vec![0.0; 1000 + prev];
                let mut from_next = vec![0.0; 1000 + next];
                let theirs_to_next = vec![r as f32 + 0.5; 3];
                let mut from_prev_small = vec![0.0; 3];
                c.group(&mut [
                    P2p::Send {
                        peer: Rank(next),
                        buf: &mine,
                    },
                    P2p::Send {
                        peer: Rank(prev),
                        buf: &mine,
                    },
                    P2p::Send {
                        peer: Rank(next),
                        buf: &theirs_to_next,
                    },
                    P2p::Recv {
                        peer: Rank(prev),
                        buf: &mut from_prev,
                    },
                    P2p::Recv {
                        peer: Rank(next),
                        buf: &mut from_next,
                    },
                    P2p::Recv {
                        peer: Rank(prev),
                        buf: &mut from_prev_small,
                    },
                ])
                .unwrap();
                assert!(from_prev.iter().all(|&x| x == prev as f32));
                assert!(from_next.iter().all(|&x| x == next as f32));
                assert!(from_prev_small.iter().all(|&x| x == prev as f32 + 0.5));
                c.counters()
            },
        );
        for (r, o) in out.into_iter().enumerate() {
            let bytes = o.unwrap();
            let (next, prev) = ((r + 1) % p, (r + p - 1) % p);
            let ops = [
                (next, 1000 + r, true),
                (prev, 1000 + r, true),
                (next, 3, true),
                (prev, 1000 + prev, false),
                (next, 1000 + next, false),
                (prev, 3, false),
            ];
            assert_eq!(
                traffic_of(&bytes),
                traffic::group(&ops, r),
                "p={p} rank {r}"
            );
        }
    }
}

/// All pairs exchange at once (including a rank with itself), twice, with
/// receives posted in the reverse order of the sends.
#[test]
fn grouped_all_pairs_exchange_does_not_deadlock() {
    for p in 1..=8 {
        let out = run_ranks(
            LocalCommunicator::create_with_timeout(p, TIMEOUT),
            |mut c| {
                let r = c.rank().0;
                for round in 0..2 {
                    let sends: Vec<Vec<f32>> = (0..p)
                        .map(|j| vec![(100 * r + j + round) as f32; j + r + 1])
                        .collect();
                    let mut recvs: Vec<Vec<f32>> = (0..p).map(|j| vec![0.0; j + r + 1]).collect();
                    let mut ops: Vec<P2p<'_, Vec<f32>>> = sends
                        .iter()
                        .enumerate()
                        .map(|(j, b)| P2p::Send {
                            peer: Rank(j),
                            buf: b,
                        })
                        .collect();
                    ops.extend(recvs.iter_mut().enumerate().rev().map(|(j, b)| P2p::Recv {
                        peer: Rank(j),
                        buf: b,
                    }));
                    c.group(&mut ops).unwrap();
                    drop(ops);
                    for (j, got) in recvs.iter().enumerate() {
                        assert!(
                            got.iter().all(|&x| x == (100 * j + r + round) as f32),
                            "p={p} {j}→{r}"
                        );
                    }
                }
                c.counters()
            },
        );
        for (r, o) in out.into_iter().enumerate() {
            let bytes = o.unwrap();
            let sent: usize = (0..p).filter(|&j| j != r).map(|j| j + r + 1).sum();
            assert_eq!(bytes.sent, 2 * 4 * sent as u64);
            assert_eq!(bytes.received, bytes.sent);
        }
    }
}

#[test]
fn mismatched_sizes_are_reported_with_the_peer() {
    let out = run_ranks(
        LocalCommunicator::create_with_timeout(3, TIMEOUT),
        |mut c| {
            let n = if c.rank().0 == 1 { 7 } else { 6 };
            let mut buf = vec![1.0; n];
            c.all_reduce(&mut buf, ReduceOp::Sum)
        },
    );
    let errs: Vec<CommError> = out.into_iter().map(|r| r.unwrap().unwrap_err()).collect();
    assert!(
        errs.iter()
            .any(|e| matches!(e, CommError::SizeMismatch { .. }) && e.culprit().is_some()),
        "{errs:?}"
    );
    // Everyone fails, and some error names rank 1 or a rank that saw it.
    assert!(errs.iter().all(|e| e.culprit().is_some()), "{errs:?}");

    // Different counts in a v-collective.
    let out = run_ranks(
        LocalCommunicator::create_with_timeout(2, TIMEOUT),
        |mut c| {
            let counts = if c.rank().0 == 0 { [2, 3] } else { [3, 2] };
            let send = vec![1.0; 5];
            let mut recv = vec![0.0; counts[c.rank().0]];
            c.reduce_scatter(&send, &mut recv, &counts, ReduceOp::Sum)
        },
    );
    for r in out {
        assert!(r.unwrap().is_err());
    }

    // A p2p message of the wrong length.
    let out = run_ranks(
        LocalCommunicator::create_with_timeout(2, TIMEOUT),
        |mut c| {
            if c.rank().0 == 0 {
                c.send(&[1.0, 2.0, 3.0], Rank(1))
            } else {
                c.recv(&mut [0.0; 2], Rank(0))
            }
        },
    );
    let e = out.into_iter().nth(1).unwrap().unwrap().unwrap_err();
    assert_eq!(
        e,
        CommError::SizeMismatch {
            rank: Rank(1),
            op: "send/recv",
            peer: Rank(0),
            expected: 2,
            got: 3
        }
    );
}

#[test]
fn different_collectives_are_a_call_mismatch() {
    let out = run_ranks(
        LocalCommunicator::create_with_timeout(2, TIMEOUT),
        |mut c| {
            let mut buf = vec![1.0; 4];
            if c.rank().0 == 0 {
                c.all_reduce(&mut buf, ReduceOp::Sum)
            } else {
                c.broadcast(&mut buf, Rank(0))
            }
        },
    );
    let errs: Vec<_> = out.into_iter().map(|r| r.unwrap()).collect();
    assert!(
        errs.iter()
            .any(|e| matches!(e, Err(CommError::CallMismatch { .. }))),
        "{errs:?}"
    );
}

#[test]
fn argument_errors_are_typed_and_leave_the_communicator_usable() {
    let mut comms = LocalCommunicator::create(2);
    let c = &mut comms[0];
    let e = c.send(&[1.0], Rank(5)).unwrap_err();
    assert_eq!(
        e,
        CommError::PeerOutOfRange {
            rank: Rank(0),
            op: "send/recv",
            peer: 5,
            world_size: 2
        }
    );
    let e = c.broadcast(&mut [0.0], Rank(2)).unwrap_err();
    assert!(matches!(e, CommError::PeerOutOfRange { peer: 2, .. }));
    let e = c
        .all_gather(&[1.0][..], &mut [0.0; 2][..], &[1])
        .unwrap_err();
    assert!(matches!(
        e,
        CommError::CountsLength {
            expected: 2,
            got: 1,
            ..
        }
    ));
    let e = c
        .all_gather(&[1.0, 2.0], &mut [0.0; 2], &[1, 1])
        .unwrap_err();
    assert!(matches!(
        e,
        CommError::BufferLength {
            buffer: "send",
            expected: 1,
            got: 2,
            ..
        }
    ));
    // Still usable: a self-exchange works.
    let mut got = [0.0; 2];
    c.group(&mut [
        P2p::Send {
            peer: Rank(0),
            buf: &[4.0, 5.0],
        },
        P2p::Recv {
            peer: Rank(0),
            buf: &mut got,
        },
    ])
    .unwrap();
    assert_eq!(got, [4.0, 5.0]);
    assert_eq!(c.counters().sent, 0, "self messages are local copies");
}

#[test]
fn a_panicking_rank_is_reported_not_waited_for() {
    let start = std::time::Instant::now();
    let out = run_ranks(
        LocalCommunicator::create_with_timeout(4, Duration::from_secs(60)),
        |mut c| {
            if c.rank().0 == 2 {
                panic!("rank 2 fails on purpose");
            }
            let mut buf = vec![1.0; 16];
            c.all_reduce(&mut buf, ReduceOp::Sum)
        },
    );
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "no waiting for the timeout"
    );
    for (r, o) in out.into_iter().enumerate() {
        if r == 2 {
            assert!(o.is_err(), "rank 2 panicked");
            continue;
        }
        let e = o.unwrap().unwrap_err();
        assert_eq!(e.culprit(), Some(Rank(2)), "rank {r}: {e}");
    }
}

#[test]
fn a_rank_that_hangs_up_or_hangs_is_named() {
    // Rank 1 returns without calling the collective: its communicator is dropped.
    let out = run_ranks(
        LocalCommunicator::create_with_timeout(2, Duration::from_secs(60)),
        |mut c| {
            if c.rank().0 == 1 {
                return Ok(());
            }
            c.all_reduce(&mut [1.0; 8], ReduceOp::Sum)
        },
    );
    let e = out.into_iter().next().unwrap().unwrap().unwrap_err();
    assert!(
        matches!(e, CommError::PeerGone { peer: Rank(1), .. }),
        "{e}"
    );

    // Rank 1 is stuck (holds its communicator, never calls): timeout.
    let out = run_ranks(
        LocalCommunicator::create_with_timeout(2, Duration::from_millis(200)),
        |mut c| {
            if c.rank().0 == 1 {
                std::thread::sleep(Duration::from_millis(600));
                return Ok(());
            }
            c.all_reduce(&mut [1.0; 8], ReduceOp::Sum)
        },
    );
    let e = out.into_iter().next().unwrap().unwrap().unwrap_err();
    assert!(matches!(e, CommError::Timeout { peer: Rank(1), .. }), "{e}");
}

#[test]
fn errors_poison_and_abort_the_clique() {
    // Rank 0's mismatch error aborts; later calls on every rank fail at once.
    let out = run_ranks(
        LocalCommunicator::create_with_timeout(3, TIMEOUT),
        |mut c| {
            let n = if c.rank().0 == 0 { 3 } else { 4 };
            let first = c.all_reduce(&mut vec![0.0; n], ReduceOp::Max);
            let second = c.all_reduce(&mut [0.0; 4], ReduceOp::Max);
            (first.is_err(), second.is_err())
        },
    );
    for o in out {
        assert_eq!(o.unwrap(), (true, true));
    }
}
