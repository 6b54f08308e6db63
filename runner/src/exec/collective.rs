//! The collective instructions of a program on one rank: buffers packed on
//! the backend into the communicator's contiguous layout (blocks in rank
//! order), the collective, and the result unpacked into the program's
//! buffers.

use comm::Collectives;
use program::{wire, DType, Region};

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
        self.reducible(dst)?;
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

    /// Words the message `region` of buffer `b` takes on the wire (its
    /// elements at their type's size, [`program::wire::words`]).
    pub(super) fn wire_words(&self, b: u32, region: &Region) -> usize {
        wire::words(region.volume(), self.p.buffer_dtype(b)) as usize
    }

    /// A work buffer holding `region` of `b` in wire form: packed on the
    /// backend (row-major), and for a tensor that is not f32 encoded at its
    /// element type's size ([`program::wire::encode`]).
    pub(super) fn pack_wire(&self, b: u32, region: &Region) -> Result<B::Buffer, ExecError> {
        let part = self.pack(b, region)?;
        let dtype = self.p.buffer_dtype(b);
        if dtype == DType::F32 {
            return Ok(part);
        }
        let mut host = vec![0.0; region.volume() as usize];
        self.be(self.backend.download(&part, &mut host))?;
        self.be(self.backend.upload_workspace(&wire::encode(&host, dtype)))
    }

    /// Copy (or reduce) a wire-form message of `region` ([`Self::pack_wire`])
    /// into `buf`.
    pub(super) fn unpack_wire(
        &mut self,
        msg: &B::Buffer,
        buf: u32,
        region: &Region,
        reduce: Option<comm::ReduceOp>,
    ) -> Result<(), ExecError> {
        let dtype = self.p.buffer_dtype(buf);
        if dtype == DType::F32 {
            return self.unpack(msg, buf, region, reduce);
        }
        let mut host = vec![0.0; self.wire_words(buf, region)];
        self.be(self.backend.download(msg, &mut host))?;
        let values = wire::decode(&host, region.volume() as usize, dtype);
        let part = self.be(self.backend.upload_workspace(&values))?;
        self.unpack(&part, buf, region, reduce)
    }

    /// An error unless buffer `b` holds f32 (a collective that reduces
    /// cannot sum packed words; codegen lowers none of another type).
    fn reducible(&self, b: u32) -> Result<(), ExecError> {
        let dtype = self.p.buffer_dtype(b);
        if dtype == DType::F32 {
            return Ok(());
        }
        Err(ExecError::Invalid(format!(
            "rank {}: a reducing collective on buffer {b} of element type {dtype} (only f32 is reduced in a collective)",
            self.rank
        )))
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
        self.reducible(src)?;
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

    /// [`Instr::AllGather`]: this rank's block of `buf` all-gathered (in
    /// wire form), every other block written into `buf`.
    pub(super) fn all_gather(&mut self, buf: u32, blocks: &[Region]) -> Result<(), ExecError> {
        let counts: Vec<usize> = blocks.iter().map(|b| self.wire_words(buf, b)).collect();
        let n: usize = counts.iter().sum();
        let send = self.pack_wire(buf, &blocks[self.rank])?;
        let mut all = self.be(self.backend.alloc_workspace(n))?;
        self.comm
            .all_gather(&send, &mut all, &counts)
            .map_err(|e| self.comm_err(e))?;
        let mut off = 0i64;
        for (j, (b, &c)) in blocks.iter().zip(&counts).enumerate() {
            if c == 0 {
                continue;
            }
            let at = [(off, off + c as i64)];
            off += c as i64;
            if j == self.rank {
                continue;
            }
            let mut part = self.be(self.backend.alloc_workspace(c))?;
            self.be(self
                .backend
                .copy_region(&all, &[(0, n as i64)], &mut part, &at, &at, None))?;
            self.unpack_wire(&part, buf, b, None)?;
        }
        Ok(())
    }
}
