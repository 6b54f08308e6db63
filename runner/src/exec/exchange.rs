//! The exchange-shaped collectives of a program on one rank
//! ([`program::Instr::AllToAll`], [`program::Instr::Broadcast`]): the
//! messages packed on the backend into the communicator's contiguous layout
//! (blocks in rank order), the collective, and the received blocks unpacked
//! (copied or reduced) into the program's buffers.

use comm::{Collectives, Rank, ReduceOp};
use program::{Msg, Region};

use super::rank::RankRunner;
use super::ExecError;
use crate::backend::Backend;
use crate::region::reduce_op;

impl<B: Backend, C: Collectives<B::Buffer>> RankRunner<'_, B, C> {
    /// Wire words per rank of `msgs` (a peer outside the world is an error).
    fn counts(&self, msgs: &[Msg]) -> Result<Vec<usize>, ExecError> {
        let mut c = vec![0; self.p.world];
        for m in msgs {
            let Some(x) = c.get_mut(m.peer) else {
                return Err(self.comm_err(comm::CommError::PeerOutOfRange {
                    rank: Rank(self.rank),
                    op: "all_to_all",
                    peer: m.peer,
                    world_size: self.p.world,
                }));
            };
            *x += self.wire_words(m.buf, &m.region);
        }
        Ok(c)
    }

    /// [`program::Instr::AllToAll`]: every send's region packed in rank
    /// order into one buffer, one all-to-all, every receive's block copied
    /// (or reduced) into its buffer.
    pub(super) fn all_to_all(&mut self, sends: &[Msg], recvs: &[Msg]) -> Result<(), ExecError> {
        let (sc, rc) = (self.counts(sends)?, self.counts(recvs)?);
        let n: usize = sc.iter().sum();
        let mut send = self.be(self.backend.alloc_workspace(n))?;
        let mut off = 0i64;
        for m in sends {
            let c = self.wire_words(m.buf, &m.region) as i64;
            if c == 0 {
                continue;
            }
            let part = self.pack_wire(m.buf, &m.region)?;
            let at = [(off, off + c)];
            self.be(self
                .backend
                .copy_region(&part, &at, &mut send, &[(0, n as i64)], &at, None))?;
            off += c;
        }
        let total: usize = rc.iter().sum();
        let mut recv = self.be(self.backend.alloc_workspace(total))?;
        self.comm
            .all_to_all(&send, &sc, &mut recv, &rc)
            .map_err(|e| self.comm_err(e))?;
        let mut off = 0i64;
        for m in recvs {
            let c = self.wire_words(m.buf, &m.region) as i64;
            if c == 0 {
                continue;
            }
            let at = [(off, off + c)];
            off += c;
            let mut part = self.be(self.backend.alloc_workspace(c as usize))?;
            self.be(self.backend.copy_region(
                &recv,
                &[(0, total as i64)],
                &mut part,
                &at,
                &at,
                None,
            ))?;
            self.unpack_wire(&part, m.buf, &m.region, m.reduce.map(reduce_op))?;
        }
        Ok(())
    }

    /// [`program::Instr::Broadcast`]: the root's `region` of `buf` packed,
    /// one flat broadcast, and on every other rank the region copied (or
    /// reduced with `reduce`) into `buf`.
    pub(super) fn flat_broadcast(
        &mut self,
        root: usize,
        buf: u32,
        region: &Region,
        reduce: Option<ReduceOp>,
    ) -> Result<(), ExecError> {
        let mut w = if self.rank == root {
            self.pack_wire(buf, region)?
        } else {
            self.be(self.backend.alloc_workspace(self.wire_words(buf, region)))?
        };
        self.comm
            .flat_broadcast(&mut w, Rank(root))
            .map_err(|e| self.comm_err(e))?;
        if self.rank != root {
            self.unpack_wire(&w, buf, region, reduce)?;
        }
        Ok(())
    }

    /// Copy (or reduce) a packed `region` (row-major in `part`) into `buf`.
    pub(super) fn unpack(
        &mut self,
        part: &B::Buffer,
        buf: u32,
        region: &Region,
        reduce: Option<ReduceOp>,
    ) -> Result<(), ExecError> {
        let mut d = self.take_buf(buf)?;
        let r = self.backend.copy_region(
            part,
            &region.0,
            &mut d,
            &self.p.buffers[buf as usize].region.0,
            &region.0,
            reduce,
        );
        self.bufs[buf as usize] = Some(d);
        self.be(r)
    }
}
