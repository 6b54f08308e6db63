//! The launcher's self-check (`tofu rendezvous-check`, what the tests of
//! `tofu launch` run in each rank): join the rendezvous with a random
//! payload, pass barriers, check that every rank received rank 0's payload.
//!
//! Takes this process's [`Env`], a timeout and how many barriers to pass,
//! and two faults to inject (a rank that aborts, one that hangs); gives a
//! [`CheckReport`] (this rank's view: join and barrier times, the payload)
//! or the rendezvous error naming the rank.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::{join, Env, RendezvousError};

/// What one rank saw.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckReport {
    /// This rank.
    pub rank: usize,
    /// Its local rank.
    pub local_rank: usize,
    /// Ranks of the run.
    pub world_size: usize,
    /// Rank 0's payload, in hex.
    pub payload: String,
    /// Every rank received it (always true in a report: otherwise an error).
    pub same_payload: bool,
    /// Barriers passed.
    pub barriers: usize,
    /// Milliseconds the join took.
    pub join_ms: f64,
    /// Mean microseconds of barriers 2.. .
    pub barrier_us: f64,
}

/// Faults the check injects after the first barrier.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// This rank aborts (SIGABRT) without closing its session.
    pub kill_rank: Option<usize>,
    /// This rank sleeps for twice the timeout, ignoring the others.
    pub hang_rank: Option<usize>,
}

/// Why the check failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The rendezvous failed.
    #[error("rank {rank}: {source}")]
    Rendezvous {
        /// This rank.
        rank: usize,
        /// The cause.
        source: RendezvousError,
    },
    /// Another rank received another payload.
    #[error("rank {rank}: rank {other} received another payload than rank {rank}")]
    Payload {
        /// This rank.
        rank: usize,
        /// The rank whose payload differs.
        other: usize,
    },
}

/// Runs the check on this rank: join, `barriers` (at least 2) barriers,
/// compare payloads, close (see the module doc).
///
/// Errors: [`CheckError`], naming this rank.
pub fn check(
    env: &Env,
    timeout: Duration,
    barriers: usize,
    faults: Faults,
) -> Result<CheckReport, CheckError> {
    let barriers = barriers.max(2);
    let rank = env.rank;
    let fail = |source: RendezvousError| CheckError::Rendezvous { rank, source };
    let t = Instant::now();
    let mut s = join(env, random_id, timeout).map_err(fail)?;
    let join_ms = t.elapsed().as_secs_f64() * 1e3;
    s.barrier().map_err(fail)?;
    if faults.kill_rank == Some(rank) {
        eprintln!("rank {rank} aborts (--kill-rank {rank})");
        std::process::abort();
    }
    if faults.hang_rank == Some(rank) {
        eprintln!("rank {rank} hangs (--hang-rank {rank})");
        std::thread::sleep(2 * timeout);
    }
    let t = Instant::now();
    for _ in 1..barriers {
        s.barrier().map_err(fail)?;
    }
    let barrier_us = t.elapsed().as_secs_f64() * 1e6 / (barriers - 1) as f64;
    let payload = s.payload().to_vec();
    let all = s.all_gather_bytes(&payload).map_err(fail)?;
    if let Some(other) = all.iter().position(|p| p != &payload) {
        return Err(CheckError::Payload { rank, other });
    }
    s.close().map_err(fail)?;
    Ok(CheckReport {
        rank,
        local_rank: env.local_rank,
        world_size: env.world_size,
        payload: payload.iter().map(|b| format!("{b:02x}")).collect(),
        same_payload: true,
        barriers,
        join_ms,
        barrier_us,
    })
}

/// 128 bytes that differ from run to run, standing in for NCCL's unique id.
pub fn random_id() -> Vec<u8> {
    use std::hash::{BuildHasher, Hasher};
    let state = std::collections::hash_map::RandomState::new();
    (0..128u64)
        .map(|i| {
            let mut h = state.build_hasher();
            h.write_u64(i);
            h.finish() as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// Two draws differ (a fixed id would let two runs join each other).
    #[test]
    fn random_ids_differ() {
        let (a, b) = (super::random_id(), super::random_id());
        assert_eq!(a.len(), 128);
        assert_ne!(a, b);
    }
}
