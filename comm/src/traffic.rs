//! The byte-counting convention of tofu's communicators: how many bytes each
//! rank sends and receives in each call, as the algorithm moves them.
//!
//! Takes a call's sizes (elements), the world size p and a rank; gives that
//! rank's [`Traffic`] in bytes (4 per f32 element). Every [`crate::Communicator`]
//! counts exactly this, and the planner's cost model predicts exactly this,
//! so "bytes moved" means the same thing everywhere.
//!
//! The algorithms (NCCL's ring algorithms; chunk c of a v-collective is rank
//! c's block, of an all-reduce the c-th of p near-equal chunks from
//! [`balanced_counts`]):
//!
//! | call | rank r sends | rank r receives | even case, per rank |
//! | --- | --- | --- | --- |
//! | reduce-scatter (ring) | N − c_r | N − c_{r−1} | (p−1)/p·N |
//! | all-gather (ring) | N − c_{r+1} | N − c_r | (p−1)/p·N |
//! | all-reduce (ring RS + AG) | 2N − c_r − c_{r+1} | 2N − c_{r−1} − c_r | 2(p−1)/p·N |
//! | all-to-all | Σ_{j≠r} send_j | Σ_{j≠r} recv_j | (p−1)/p·N |
//! | broadcast (chain root → root+1 → …) | N unless r is the last of the chain | N unless r is the root | |
//! | flat (star) broadcast (root → each rank) | (p−1)·N if r is the root, else 0 | N unless r is the root | |
//! | send / recv | the message | the message | |
//!
//! (indices mod p; with p = 1 nothing moves). Messages from a rank to itself
//! are local copies and count nothing.

/// Bytes per element of the communicated buffers (f32).
pub const BYTES_PER_ELEMENT: u64 = 4;

/// Bytes one rank sends and receives in one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Bytes sent to other ranks.
    pub sent: u64,
    /// Bytes received from other ranks.
    pub received: u64,
}

impl std::ops::Add for Traffic {
    type Output = Traffic;
    fn add(self, o: Traffic) -> Traffic {
        Traffic {
            sent: self.sent + o.sent,
            received: self.received + o.received,
        }
    }
}

fn bytes(elems: usize) -> u64 {
    elems as u64 * BYTES_PER_ELEMENT
}

/// The p near-equal chunks of N elements that all-reduce works on: the first
/// N mod p chunks have ⌈N/p⌉ elements, the others ⌊N/p⌋.
pub fn balanced_counts(n: usize, p: usize) -> Vec<usize> {
    assert!(p > 0, "world size must be at least 1");
    (0..p).map(|i| n / p + usize::from(i < n % p)).collect()
}

/// Ring reduce-scatter of blocks `counts` (one per rank), for `rank`.
pub fn reduce_scatter(counts: &[usize], rank: usize) -> Traffic {
    let p = counts.len();
    if p <= 1 {
        return Traffic::default();
    }
    let n: usize = counts.iter().sum();
    Traffic {
        sent: bytes(n - counts[rank]),
        received: bytes(n - counts[(rank + p - 1) % p]),
    }
}

/// Ring all-gather of blocks `counts` (one per rank), for `rank`.
pub fn all_gather(counts: &[usize], rank: usize) -> Traffic {
    let p = counts.len();
    if p <= 1 {
        return Traffic::default();
    }
    let n: usize = counts.iter().sum();
    Traffic {
        sent: bytes(n - counts[(rank + 1) % p]),
        received: bytes(n - counts[rank]),
    }
}

/// Ring all-reduce of `n` elements on `p` ranks (a reduce-scatter and an
/// all-gather over [`balanced_counts`]), for `rank`.
pub fn all_reduce(n: usize, p: usize, rank: usize) -> Traffic {
    let c = balanced_counts(n, p);
    reduce_scatter(&c, rank) + all_gather(&c, rank)
}

/// All-to-all with this rank's `send_counts` and `recv_counts` (one per rank).
pub fn all_to_all(send_counts: &[usize], recv_counts: &[usize], rank: usize) -> Traffic {
    let others = |c: &[usize]| -> usize {
        c.iter()
            .enumerate()
            .filter(|(j, _)| *j != rank)
            .map(|(_, &x)| x)
            .sum()
    };
    Traffic {
        sent: bytes(others(send_counts)),
        received: bytes(others(recv_counts)),
    }
}

/// Chain broadcast of `n` elements from `root` on `p` ranks, for `rank`.
pub fn broadcast(n: usize, p: usize, root: usize, rank: usize) -> Traffic {
    let pos = (rank + p - root) % p;
    Traffic {
        sent: if pos + 1 < p { bytes(n) } else { 0 },
        received: if pos > 0 { bytes(n) } else { 0 },
    }
}

/// Flat (star) broadcast of `n` elements from `root` on `p` ranks, for
/// `rank`: the root sends the whole message to every other rank itself
/// ((p−1)·N sent by the root, N received by every other rank). This is what
/// the planner's transfers charge for one source feeding every rank; NCCL's
/// ring/chain broadcast ([`broadcast`]) moves the same total but spreads the
/// sending over the ranks.
pub fn flat_broadcast(n: usize, p: usize, root: usize, rank: usize) -> Traffic {
    if p <= 1 {
        return Traffic::default();
    }
    Traffic {
        sent: if rank == root {
            bytes(n) * (p as u64 - 1)
        } else {
            0
        },
        received: if rank == root { 0 } else { bytes(n) },
    }
}

/// A group of point-to-point operations of `rank`: `(peer, elements, is_send)`
/// per operation; messages to or from itself count nothing.
pub fn group(ops: &[(usize, usize, bool)], rank: usize) -> Traffic {
    let mut t = Traffic::default();
    for &(peer, n, is_send) in ops {
        if peer == rank {
            continue;
        }
        if is_send {
            t.sent += bytes(n);
        } else {
            t.received += bytes(n);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_sizes_match_the_closed_forms() {
        for p in 1..=8usize {
            let n = 24 * p;
            for r in 0..p {
                let ar = all_reduce(n, p, r);
                assert_eq!(ar.sent, (2 * (p - 1) * n / p) as u64 * 4);
                assert_eq!(ar.received, ar.sent);
                let c = balanced_counts(n, p);
                assert_eq!(reduce_scatter(&c, r).sent, ((p - 1) * n / p) as u64 * 4);
                assert_eq!(all_gather(&c, r).sent, ((p - 1) * n / p) as u64 * 4);
            }
        }
    }

    #[test]
    fn totals_sent_equal_totals_received() {
        let counts = [3usize, 0, 7, 1, 5];
        let p = counts.len();
        let n: usize = counts.iter().sum();
        for f in [reduce_scatter, all_gather] {
            let s: u64 = (0..p).map(|r| f(&counts, r).sent).sum();
            let q: u64 = (0..p).map(|r| f(&counts, r).received).sum();
            assert_eq!(s, q);
        }
        let s: u64 = (0..p).map(|r| all_reduce(n, p, r).sent).sum();
        assert_eq!(s, 2 * (p as u64 - 1) * n as u64 * 4);
        for root in 0..p {
            let flat: Vec<Traffic> = (0..p).map(|r| flat_broadcast(n, p, root, r)).collect();
            let chain: u64 = (0..p).map(|r| broadcast(n, p, root, r).sent).sum();
            let s: u64 = flat.iter().map(|t| t.sent).sum();
            assert_eq!(s, flat.iter().map(|t| t.received).sum::<u64>());
            // Same total as the chain, all of it sent by the root.
            assert_eq!(s, chain);
            assert_eq!(flat[root].sent, s);
        }
    }
}
