//! Ranks as threads of one process on loopback: they exchange rank 0's
//! payload, pass barriers and all-gather; every misconfiguration or absence
//! (a rank that never connects, skips a barrier, closes early, registers
//! twice or with another world size; no rank 0 at all; a busy port) fails
//! every rank with an error naming the culprit, within the timeout.

use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

use rendezvous::{join, Env, Failure, RendezvousError, Session};

/// A port nobody listens on now (bound to port 0, then released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn env(rank: usize, world_size: usize, port: u16) -> Env {
    Env {
        rank,
        local_rank: rank,
        world_size,
        master_addr: "127.0.0.1".into(),
        master_port: port,
    }
}

/// 128 bytes that differ from run to run, like NCCL's unique id.
use rendezvous::check::random_id as unique_id;

/// Run `body` on one thread per `(env, start delay)`; results in order,
/// with the seconds each rank took.
fn ranks<T: Send + 'static>(
    envs: Vec<(Env, Duration)>,
    timeout: Duration,
    body: impl Fn(Session) -> Result<T, RendezvousError> + Send + Sync + Copy + 'static,
) -> Vec<(Result<T, RendezvousError>, f64)> {
    let handles: Vec<_> = envs
        .into_iter()
        .map(|(e, delay)| {
            thread::spawn(move || {
                thread::sleep(delay);
                let t = Instant::now();
                let r = join(&e, unique_id, timeout).and_then(body);
                (r, t.elapsed().as_secs_f64())
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn all(world_size: usize, port: u16) -> Vec<(Env, Duration)> {
    (0..world_size)
        .map(|r| (env(r, world_size, port), Duration::ZERO))
        .collect()
}

/// Every rank failed with a session failure blaming exactly `blamed`,
/// within `limit` seconds.
fn all_fail_naming<T: std::fmt::Debug>(
    results: &[(Result<T, RendezvousError>, f64)],
    blamed: &[usize],
    limit: f64,
) -> Vec<Failure> {
    results
        .iter()
        .enumerate()
        .map(|(i, (r, secs))| {
            let e = r.as_ref().expect_err(&format!("thread {i} succeeded"));
            assert_eq!(e.blamed_ranks(), blamed, "thread {i}: {e}");
            for b in blamed {
                assert!(e.to_string().contains(&format!("{b}")), "{e}");
            }
            assert!(
                *secs < limit,
                "thread {i} took {secs:.2} s (limit {limit}): {e}"
            );
            match e {
                RendezvousError::Session(f) => f.clone(),
                other => panic!("thread {i}: not a session failure: {other}"),
            }
        })
        .collect()
}

#[test]
fn four_ranks_exchange_the_payload_and_pass_barriers() {
    let port = free_port();
    // Rank 0 starts last: the others retry until its host is up.
    let mut envs = all(4, port);
    envs[0].1 = Duration::from_millis(300);
    let out = ranks(envs, Duration::from_secs(10), |mut s| {
        let id = s.payload().to_vec();
        for _ in 0..3 {
            s.barrier()?;
        }
        let ids = s.all_gather_bytes(&id)?;
        let ranks = s.all_gather_bytes(&[s.rank() as u8; 3])?;
        s.barrier()?;
        s.close()?;
        Ok((id, ids, ranks))
    });
    let id0 = out[0].0.as_ref().unwrap().0.clone();
    assert_eq!(id0.len(), 128);
    for (r, (res, _)) in out.iter().enumerate() {
        let (id, ids, ranks) = res.as_ref().unwrap_or_else(|e| panic!("rank {r}: {e}"));
        assert_eq!(id, &id0, "rank {r} got another payload");
        assert!(ids.iter().all(|i| i == &id0));
        assert_eq!(ranks, &(0..4u8).map(|k| vec![k; 3]).collect::<Vec<_>>());
    }
}

#[test]
fn one_rank_alone() {
    let port = free_port();
    let mut s = join(&env(0, 1, port), || vec![7; 128], Duration::from_secs(5)).unwrap();
    assert_eq!(s.payload(), &[7; 128][..]);
    s.barrier().unwrap();
    assert_eq!(s.all_gather_bytes(b"x").unwrap(), vec![b"x".to_vec()]);
    s.close().unwrap();
}

/// World size 3, only ranks 0 and 1 start: both fail naming rank 2, within
/// the timeout (1 s) plus the margin.
#[test]
fn a_missing_peer_fails_the_others_naming_it() {
    let port = free_port();
    let envs = all(3, port).into_iter().take(2).collect();
    let out = ranks(envs, Duration::from_secs(1), |_s| Ok(()));
    for f in all_fail_naming(&out, &[2], 1.5) {
        assert!(
            matches!(&f, Failure::Missing { during, .. } if during == "join"),
            "{f}"
        );
        assert!(out[0].1 >= 0.9, "failed before the timeout");
    }
}

/// Rank 2 joins but never enters the barrier: the others fail naming it
/// within the timeout, and the message says which barrier.
#[test]
fn a_peer_that_skips_a_barrier_is_named() {
    let port = free_port();
    let out = ranks(all(3, port), Duration::from_secs(1), |mut s| {
        s.barrier()?;
        if s.rank() == 2 {
            thread::sleep(Duration::from_millis(2500));
            return Err(RendezvousError::InvalidEnv("rank 2 skipped".into()));
        }
        s.barrier()
    });
    let fails = all_fail_naming(&out[..2], &[2], 1.5);
    for f in fails {
        assert!(f.to_string().contains("barrier #2"), "{f}");
    }
}

/// Rank 1 closes its session while rank 0 waits in a barrier: rank 0 fails
/// at once naming rank 1.
#[test]
fn a_peer_that_closes_early_is_named() {
    let port = free_port();
    let out = ranks(all(2, port), Duration::from_secs(5), |mut s| {
        if s.rank() == 1 {
            s.close()?;
            return Err(RendezvousError::InvalidEnv("rank 1 closed".into()));
        }
        s.barrier()
    });
    let f = &all_fail_naming(&out[..1], &[1], 1.0)[0];
    assert!(matches!(f, Failure::PeerLeft { rank: 1, .. }), "{f}");
}

/// Rank 0 leaves: the others fail naming rank 0.
#[test]
fn rank_zero_leaving_is_named() {
    let port = free_port();
    let out = ranks(all(3, port), Duration::from_secs(5), |mut s| {
        if s.rank() == 0 {
            drop(s);
            return Err(RendezvousError::InvalidEnv("rank 0 left".into()));
        }
        s.barrier()
    });
    all_fail_naming(&out[1..], &[0], 1.0);
}

#[test]
fn a_duplicate_rank_fails_everyone_at_once() {
    let port = free_port();
    let envs = vec![
        (env(0, 3, port), Duration::ZERO),
        (env(1, 3, port), Duration::from_millis(100)),
        (env(1, 3, port), Duration::from_millis(200)),
    ];
    let out = ranks(envs, Duration::from_secs(5), |_s| Ok(()));
    for f in all_fail_naming(&out, &[1], 1.0) {
        assert_eq!(f, Failure::DuplicateRank { rank: 1 });
    }
}

#[test]
fn a_world_size_mismatch_names_the_rank() {
    let port = free_port();
    let envs = vec![
        (env(0, 2, port), Duration::ZERO),
        (env(1, 3, port), Duration::from_millis(100)),
    ];
    let out = ranks(envs, Duration::from_secs(5), |_s| Ok(()));
    for f in all_fail_naming(&out, &[1], 1.0) {
        assert_eq!(
            f,
            Failure::WorldSizeMismatch {
                rank: 1,
                theirs: 3,
                ours: 2
            }
        );
    }
}

/// Rank 1 calls an all-gather where rank 0 calls a barrier.
#[test]
fn ranks_out_of_step_are_named() {
    let port = free_port();
    let out = ranks(all(2, port), Duration::from_secs(5), |mut s| {
        if s.rank() == 0 {
            s.barrier()
        } else {
            thread::sleep(Duration::from_millis(100));
            s.all_gather_bytes(b"1").map(|_| ())
        }
    });
    for f in all_fail_naming(&out, &[1], 1.0) {
        assert!(matches!(f, Failure::OutOfStep { rank: 1, .. }), "{f}");
    }
}

/// No rank 0: rank 1 gives up after the timeout naming rank 0's address.
#[test]
fn no_host_is_unreachable_within_the_timeout() {
    let port = free_port();
    let t = Instant::now();
    let e = join(&env(1, 2, port), Vec::new, Duration::from_millis(500)).unwrap_err();
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    assert!(
        matches!(e, RendezvousError::Unreachable { rank: 1, .. }),
        "{e}"
    );
    assert_eq!(e.blamed_ranks(), vec![0]);
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
}

#[test]
fn a_busy_port_is_a_bind_error_naming_the_address() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let e = join(&env(0, 2, port), Vec::new, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, RendezvousError::Bind { .. }), "{e}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
}

#[test]
fn a_hand_built_env_out_of_range_is_refused() {
    let e = join(&env(3, 3, 1234), Vec::new, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, RendezvousError::InvalidEnv(_)), "{e}");
}

/// A failed session stays failed: later collectives return `Closed`.
#[test]
fn a_failed_session_stays_failed() {
    let port = free_port();
    let out = ranks(all(2, port), Duration::from_secs(5), |mut s| {
        if s.rank() == 1 {
            s.close()?;
            return Ok(None);
        }
        let first = s.barrier().unwrap_err();
        let second = s.barrier().unwrap_err();
        Ok(Some((first.to_string(), second)))
    });
    let (first, second) = out[0].0.as_ref().unwrap().as_ref().unwrap();
    assert!(
        matches!(second, RendezvousError::Closed { rank: 0, .. }),
        "{second}"
    );
    assert!(second.to_string().contains(first.as_str()), "{second}");
}

/// Rank 0 fails while rank 1 is hung (it keeps its session open and sends
/// nothing): `abandon` leaves at once, where `close` waits for rank 1 up to
/// the timeout (the control).
#[test]
fn a_failing_rank_zero_abandons_without_waiting_for_a_hung_peer() {
    for abandon in [true, false] {
        let port = free_port();
        let out = ranks(all(2, port), Duration::from_secs(3), move |s| {
            if s.rank() == 1 {
                thread::sleep(Duration::from_secs(4));
                return Ok(0.0);
            }
            let t = Instant::now();
            if abandon {
                s.abandon("rank 0 failed");
            } else {
                let _ = s.close();
            }
            Ok(t.elapsed().as_secs_f64())
        });
        let left = *out[0].0.as_ref().expect("rank 0");
        if abandon {
            assert!(left < 0.5, "abandon waited {left} s");
        } else {
            assert!(left > 2.5, "close waited only {left} s");
        }
    }
}
