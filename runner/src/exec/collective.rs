//! The collective instructions of a program on one rank: buffers packed on
//! the backend into the communicator's contiguous layout (blocks in rank
//! order), the collective, and the result unpacked into the program's
//! buffers.

use codegen::Region;
use comm::Collectives;

use super::rank::RankRunner;
use super::ExecError;
use crate::backend::Backend;

impl<B: Backend, C: Collectives<B::Buffer>> RankRunner<'_, B, C> {
    /// [`Instr::AllReduce`]: `dst` (taken out, holding `region`) gets `src`'s
    /// region, then the all-reduce runs on it in place.
    pub(super) fn all_reduce(
        &mut self,
        src: u32,
        dst: u32,
        d: &mut B::Buffer,
        region: &Region,
        op: comm::ReduceOp,
    ) -> Result<(), ExecError> {
        let p = self.p;
        if src != dst {
            self.be(self.backend.copy_region(
                self.buf(src)?,
                &p.buffers[src as usize].region.0,
                d,
                &p.buffers[dst as usize].region.0,
                &region.0,
                None,
            ))?;
        }
        self.comm.all_reduce(d, op).map_err(|e| self.comm_err(e))
    }

    /// A work buffer holding `region` of `b` (row-major), packed on the backend.
    pub(super) fn pack(&self, b: u32, region: &Region) -> Result<B::Buffer, ExecError> {
        let mut w = self.be(self.backend.alloc_workspace(region.volume() as usize))?;
        self.be(self.backend.copy_region(
            self.buf(b)?,
            &self.p.buffers[b as usize].region.0,
            &mut w,
            &region.0,
            &region.0,
            None,
        ))?;
        Ok(w)
    }

    /// [`Instr::ReduceScatter`]: the blocks of `src` packed in rank order,
    /// reduce-scattered, this rank's block written into `dst`.
    pub(super) fn reduce_scatter(
        &mut self,
        src: u32,
        dst: u32,
        blocks: &[Region],
        op: comm::ReduceOp,
    ) -> Result<(), ExecError> {
        let counts: Vec<usize> = blocks.iter().map(|b| b.volume() as usize).collect();
        let n: usize = counts.iter().sum();
        let mut send = self.be(self.backend.alloc_workspace(n))?;
        let mut off = 0i64;
        for (b, &c) in blocks.iter().zip(&counts) {
            if c == 0 {
                continue;
            }
            let part = self.pack(src, b)?;
            let at = [(off, off + c as i64)];
            self.be(self
                .backend
                .copy_region(&part, &at, &mut send, &[(0, n as i64)], &at, None))?;
            off += c as i64;
        }
        let mine = &blocks[self.rank];
        let mut recv = self.be(self.backend.alloc_workspace(counts[self.rank]))?;
        self.comm
            .reduce_scatter(&send, &mut recv, &counts, op)
            .map_err(|e| self.comm_err(e))?;
        if mine.volume() > 0 {
            self.unpack(&recv, dst, mine, None)?;
        }
        Ok(())
    }

    /// [`Instr::AllGather`]: this rank's block of `buf` all-gathered, every
    /// other block written into `buf`.
    pub(super) fn all_gather(&mut self, buf: u32, blocks: &[Region]) -> Result<(), ExecError> {
        let counts: Vec<usize> = blocks.iter().map(|b| b.volume() as usize).collect();
        let n: usize = counts.iter().sum();
        let send = self.pack(buf, &blocks[self.rank])?;
        let mut all = self.be(self.backend.alloc_workspace(n))?;
        self.comm
            .all_gather(&send, &mut all, &counts)
            .map_err(|e| self.comm_err(e))?;
        let mut d = self.take_buf(buf)?;
        let held = &self.p.buffers[buf as usize].region.0;
        let mut off = 0i64;
        let mut r = Ok(());
        for (j, (b, &c)) in blocks.iter().zip(&counts).enumerate() {
            if c == 0 {
                continue;
            }
            let at = [(off, off + c as i64)];
            off += c as i64;
            if j == self.rank {
                continue;
            }
            r = self.backend.alloc_workspace(c).and_then(|mut part| {
                self.backend
                    .copy_region(&all, &[(0, n as i64)], &mut part, &at, &at, None)?;
                self.backend
                    .copy_region(&part, &b.0, &mut d, held, &b.0, None)
            });
            if r.is_err() {
                break;
            }
        }
        self.bufs[buf as usize] = Some(d);
        self.be(r)
    }
}
