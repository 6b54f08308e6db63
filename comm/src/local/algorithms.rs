//! The collective algorithms of [`LocalCommunicator`] over its pair channels:
//! ring reduce-scatter / all-gather / all-reduce, chain broadcast, pairwise
//! all-to-all and grouped send/recv, on host slices.
//!
//! Takes this rank's host elements and per-rank counts; gives the result of
//! the collective in place (or in `recv`), counting the bytes each message
//! really moved (which equal [`crate::traffic`]'s formulas).

use std::collections::VecDeque;

use crate::traffic::balanced_counts;
use crate::{CommError, P2p, Rank, ReduceOp};

use super::{Kind, LocalCommunicator};

/// Prefix sums: chunk c is `offs[c]..offs[c + 1]`.
fn offsets(counts: &[usize]) -> Vec<usize> {
    let mut o = Vec::with_capacity(counts.len() + 1);
    o.push(0);
    for c in counts {
        o.push(o.last().copied().unwrap_or(0) + c);
    }
    o
}

/// A digest of a counts array, so ranks with different counts notice.
fn digest(counts: &[usize]) -> u64 {
    counts.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| {
        (h ^ c as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

impl LocalCommunicator {
    pub(super) fn host_all_reduce(
        &mut self,
        buf: &mut [f32],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        let n = buf.len();
        let offs = offsets(&balanced_counts(n, self.world));
        self.call("all_reduce", true, |c| {
            if c.world == 1 {
                return Ok(());
            }
            c.ring_reduce_scatter(buf, &offs, op, Kind::AllReduce, n as u64)?;
            c.ring_all_gather(buf, &offs, Kind::AllReduce, n as u64)
        })
    }

    pub(super) fn host_reduce_scatter(
        &mut self,
        send: &[f32],
        recv: &mut [f32],
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        const OP: &str = "reduce_scatter";
        self.check_counts(OP, "counts", counts)?;
        let offs = offsets(counts);
        self.check_len(OP, "send", offs[self.world], send.len())?;
        self.check_len(OP, "recv", counts[self.rank], recv.len())?;
        self.call(OP, true, |c| {
            let mut work = send.to_vec();
            if c.world > 1 {
                c.ring_reduce_scatter(&mut work, &offs, op, Kind::ReduceScatter, digest(counts))?;
            }
            recv.copy_from_slice(&work[offs[c.rank]..offs[c.rank + 1]]);
            Ok(())
        })
    }

    pub(super) fn host_all_gather(
        &mut self,
        send: &[f32],
        recv: &mut [f32],
        counts: &[usize],
    ) -> Result<(), CommError> {
        const OP: &str = "all_gather";
        self.check_counts(OP, "counts", counts)?;
        let offs = offsets(counts);
        self.check_len(OP, "send", counts[self.rank], send.len())?;
        self.check_len(OP, "recv", offs[self.world], recv.len())?;
        self.call(OP, true, |c| {
            recv[offs[c.rank]..offs[c.rank + 1]].copy_from_slice(send);
            if c.world == 1 {
                return Ok(());
            }
            c.ring_all_gather(recv, &offs, Kind::AllGather, digest(counts))
        })
    }

    pub(super) fn host_all_to_all(
        &mut self,
        send: &[f32],
        send_counts: &[usize],
        recv: &mut [f32],
        recv_counts: &[usize],
    ) -> Result<(), CommError> {
        const OP: &str = "all_to_all";
        self.check_counts(OP, "send_counts", send_counts)?;
        self.check_counts(OP, "recv_counts", recv_counts)?;
        let so = offsets(send_counts);
        let ro = offsets(recv_counts);
        self.check_len(OP, "send", so[self.world], send.len())?;
        self.check_len(OP, "recv", ro[self.world], recv.len())?;
        self.call(OP, true, |c| {
            let (p, r) = (c.world, c.rank);
            // Post every send first (never blocks), then drain the receives.
            for s in 1..p {
                let j = (r + s) % p;
                c.post(j, Kind::AllToAll, 0, so[p], &send[so[j]..so[j + 1]])?;
            }
            recv[ro[r]..ro[r + 1]].copy_from_slice(&send[so[r]..so[r + 1]]);
            for s in 1..p {
                let j = (r + p - s) % p;
                let got = c.take(j, Kind::AllToAll, 0, ro[p], recv_counts[j])?;
                recv[ro[j]..ro[j + 1]].copy_from_slice(&got);
            }
            Ok(())
        })
    }

    pub(super) fn host_broadcast(&mut self, buf: &mut [f32], root: Rank) -> Result<(), CommError> {
        const OP: &str = "broadcast";
        self.check_peer(OP, root)?;
        let n = buf.len();
        let tag = ((n as u64) << 16) ^ root.0 as u64;
        self.call(OP, true, |c| {
            let p = c.world;
            let pos = (c.rank + p - root.0) % p;
            if pos > 0 {
                let got = c.take(c.prev(), Kind::Broadcast, tag, n, n)?;
                buf.copy_from_slice(&got);
            }
            if pos + 1 < p {
                let next = c.next();
                c.post(next, Kind::Broadcast, tag, n, buf)?;
            }
            Ok(())
        })
    }

    pub(super) fn host_group(&mut self, ops: &mut [P2p<'_, [f32]>]) -> Result<(), CommError> {
        const OP: &str = "send/recv";
        for o in ops.iter() {
            let (P2p::Send { peer, .. } | P2p::Recv { peer, .. }) = o;
            self.check_peer(OP, *peer)?;
        }
        self.call(OP, false, |c| {
            let mut to_self: VecDeque<Vec<f32>> = VecDeque::new();
            for o in ops.iter() {
                if let P2p::Send { peer, buf } = o {
                    if peer.0 == c.rank {
                        to_self.push_back(buf.to_vec());
                    } else {
                        c.post(peer.0, Kind::P2p, 0, buf.len(), buf)?;
                    }
                }
            }
            for o in ops.iter_mut() {
                if let P2p::Recv { peer, buf } = o {
                    let data = if peer.0 == c.rank {
                        let m = to_self.pop_front().ok_or(CommError::SizeMismatch {
                            rank: c.me(),
                            op: OP,
                            peer: *peer,
                            expected: buf.len(),
                            got: 0,
                        })?;
                        if m.len() != buf.len() {
                            return Err(CommError::SizeMismatch {
                                rank: c.me(),
                                op: OP,
                                peer: *peer,
                                expected: buf.len(),
                                got: m.len(),
                            });
                        }
                        m
                    } else {
                        c.take(peer.0, Kind::P2p, 0, buf.len(), buf.len())?
                    };
                    buf.copy_from_slice(&data);
                }
            }
            Ok(())
        })
    }

    /// Ring reduce-scatter in place over chunks `offs[c]..offs[c + 1]` of
    /// `work`: afterwards chunk `rank` holds the reduction over all ranks.
    fn ring_reduce_scatter(
        &mut self,
        work: &mut [f32],
        offs: &[usize],
        op: ReduceOp,
        kind: Kind,
        tag: u64,
    ) -> Result<(), CommError> {
        let p = self.world;
        let (r, next, prev) = (self.rank, self.next(), self.prev());
        for s in 0..p - 1 {
            let sc = (r + 2 * p - s - 1) % p;
            self.post(next, kind, tag, work.len(), &work[offs[sc]..offs[sc + 1]])?;
            let rc = (r + 2 * p - s - 2) % p;
            let got = self.take(prev, kind, tag, work.len(), offs[rc + 1] - offs[rc])?;
            op.accumulate(&mut work[offs[rc]..offs[rc + 1]], &got);
        }
        Ok(())
    }

    /// Ring all-gather in place: chunk `rank` of `work` is this rank's; after,
    /// every chunk holds its owner's.
    fn ring_all_gather(
        &mut self,
        work: &mut [f32],
        offs: &[usize],
        kind: Kind,
        tag: u64,
    ) -> Result<(), CommError> {
        let p = self.world;
        let (r, next, prev) = (self.rank, self.next(), self.prev());
        for s in 0..p - 1 {
            let sc = (r + p - s) % p;
            self.post(next, kind, tag, work.len(), &work[offs[sc]..offs[sc + 1]])?;
            let rc = (r + 2 * p - s - 1) % p;
            let got = self.take(prev, kind, tag, work.len(), offs[rc + 1] - offs[rc])?;
            work[offs[rc]..offs[rc + 1]].copy_from_slice(&got);
        }
        Ok(())
    }
}
