//! Managed communication (Bösen, thesis §3.2): a bandwidth budget and the
//! order in which buffered updates spend it.
//!
//! Takes the client's buffered row updates and a budget in bytes per
//! second; gives which of them to send now. [`LeakyBucket`] enforces the
//! budget (bytes in any window of `w` seconds stay within
//! `rate · w + capacity`, for messages no larger than `capacity`);
//! [`rank`] orders candidates by a [`Priority`] and [`select`] takes a
//! prefix of that order that fits the bucket and the queue size, so no
//! update sent ranks below one held back. Sending early never weakens SSP:
//! the clock-end flush still sends every remaining update before the clock
//! message.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::types::RowKey;

/// How buffered updates are ordered for early sending (thesis §3.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// Uniformly random order.
    Random,
    /// Cyclic order over row keys, starting after the last row sent.
    RoundRobin,
    /// Largest absolute magnitude first (sum of |δ| over the row).
    Magnitude,
    /// Largest relative magnitude first (sum of |δ / a| over the row, where
    /// a is the cached parameter value; |a| below 1e-3 counts as 1e-3).
    RelativeMagnitude,
}

impl Priority {
    /// The spelling [`str::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Priority::Random => "random",
            Priority::RoundRobin => "round-robin",
            Priority::Magnitude => "magnitude",
            Priority::RelativeMagnitude => "relative-magnitude",
        }
    }
}

impl std::str::FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Priority, String> {
        match s {
            "random" => Ok(Priority::Random),
            "round-robin" => Ok(Priority::RoundRobin),
            "magnitude" => Ok(Priority::Magnitude),
            "relative-magnitude" => Ok(Priority::RelativeMagnitude),
            _ => Err(format!(
                "unknown priority `{s}`: use random, round-robin, magnitude or relative-magnitude"
            )),
        }
    }
}

/// A buffered update that may be sent early.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The row.
    pub key: RowKey,
    /// Bytes it takes on the wire.
    pub bytes: u64,
    /// Sum of |δ| over the row's columns.
    pub magnitude: f64,
    /// Sum of |δ / a| over the row's columns.
    pub relative: f64,
}

/// Candidate indices in the policy's order (first = send first).
/// `cursor` is the last row key sent (round-robin resumes after it); `rng`
/// shuffles for [`Priority::Random`].
pub fn rank(
    cands: &[Candidate],
    policy: Priority,
    cursor: Option<RowKey>,
    rng: &mut StdRng,
) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..cands.len()).collect();
    match policy {
        Priority::Random => idx.shuffle(rng),
        Priority::RoundRobin => {
            // Keys after the cursor first (ascending), then wrap around.
            idx.sort_by_key(|&i| (cursor.is_some_and(|c| cands[i].key <= c), cands[i].key));
        }
        Priority::Magnitude => idx.sort_by(|&a, &b| {
            cands[b]
                .magnitude
                .total_cmp(&cands[a].magnitude)
                .then(cands[a].key.cmp(&cands[b].key))
        }),
        Priority::RelativeMagnitude => idx.sort_by(|&a, &b| {
            cands[b]
                .relative
                .total_cmp(&cands[a].relative)
                .then(cands[a].key.cmp(&cands[b].key))
        }),
    }
    idx
}

/// The longest prefix of `order` whose bytes fit in `tokens` and whose
/// length is at most `queue_rows`.
pub fn select(cands: &[Candidate], order: &[usize], tokens: u64, queue_rows: usize) -> Vec<usize> {
    let mut left = tokens;
    let mut out = Vec::new();
    for &i in order.iter().take(queue_rows) {
        if cands[i].bytes > left {
            break;
        }
        left -= cands[i].bytes;
        out.push(i);
    }
    out
}

/// A leaky bucket of bytes: fills at `rate` bytes per second up to
/// `capacity` bytes; a send of `n` bytes spends `n`.
#[derive(Clone, Debug)]
pub struct LeakyBucket {
    rate: f64,
    capacity: f64,
    tokens: f64,
    last: Instant,
}

impl LeakyBucket {
    /// A full bucket of `capacity` bytes filling at `rate` bytes/second.
    pub fn new(rate: u64, capacity: u64) -> LeakyBucket {
        LeakyBucket {
            rate: rate as f64,
            capacity: capacity as f64,
            tokens: capacity as f64,
            last: Instant::now(),
        }
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate).min(self.capacity);
        self.last = now;
    }

    /// Whole bytes available now.
    pub fn available(&mut self) -> u64 {
        self.refill(Instant::now());
        self.tokens.max(0.0) as u64
    }

    /// Spends `n` bytes (after checking [`LeakyBucket::available`]).
    pub fn spend(&mut self, n: u64) {
        self.refill(Instant::now());
        self.tokens -= n as f64;
    }

    /// Sleeps until `min(n, capacity)` bytes are available, then spends `n`.
    pub fn wait_spend(&mut self, n: u64) {
        let need = (n as f64).min(self.capacity);
        loop {
            self.refill(Instant::now());
            if self.tokens >= need {
                self.tokens -= n as f64;
                return;
            }
            let secs = (need - self.tokens) / self.rate.max(1e-9);
            std::thread::sleep(Duration::from_secs_f64(secs.clamp(1e-4, 0.05)));
        }
    }
}
