//! The instructions of a program on one rank: allocation with its initial
//! values (zeros, a reducer's identity, the synthetic fill of a leaf tile or
//! values the caller set, or last step's carried tile), region copies,
//! grouped exchanges, collectives (`collective.rs`, `exchange.rs`), compute
//! and frees.

use std::time::Instant;

use comm::{Collectives, P2p, Rank};
use program::{BufId, Init, Instr, Msg, Synthetic};

use super::rank::RankRunner;
use super::ExecError;
use crate::backend::Backend;
use crate::region::{contains, copy_region, reduce_op, volume};

impl<B: Backend, C: Collectives<B::Buffer>> RankRunner<'_, B, C> {
    /// Every instruction of the program, in order. Profiling
    /// ([`RankRunner::set_profile`]) synchronises the backend around each
    /// instruction and adds its seconds to its label: the operator spec's
    /// name for a kernel, `(alloc)`, `(free)`, `(region copy)` or
    /// `(communication)` for the rest.
    pub(super) fn run_instrs(&mut self) -> Result<(), ExecError> {
        let p = self.p;
        for (k, ins) in p.instrs.iter().enumerate() {
            if self.profile.is_none() {
                self.run_instr(k, ins)?;
                continue;
            }
            self.be(self.backend.synchronize())?;
            let t0 = Instant::now();
            self.run_instr(k, ins)?;
            self.be(self.backend.synchronize())?;
            let label = match ins {
                Instr::Compute { spec, .. } => p.specs[*spec as usize].name.as_str(),
                Instr::Alloc { .. } => "(alloc)",
                Instr::Free { .. } => "(free)",
                Instr::Copy { .. } => "(region copy)",
                _ => "(communication)",
            };
            if let Some(m) = self.profile.as_mut() {
                *m.entry(label.to_string()).or_default() += t0.elapsed().as_secs_f64();
            }
        }
        Ok(())
    }

    /// Instruction `k` of the program.
    fn run_instr(&mut self, k: usize, ins: &Instr) -> Result<(), ExecError> {
        let p = self.p;
        {
            match ins {
                Instr::Alloc { buf, init } => {
                    let b = self.alloc(k, *buf, init)?;
                    self.bufs[*buf as usize] = Some(b);
                }
                Instr::Free { buf } => {
                    if let Some(b) = self.bufs[*buf as usize].take() {
                        self.backend.free(b);
                    }
                }
                Instr::Copy {
                    src,
                    dst,
                    region,
                    reduce,
                } => {
                    let mut d = self.take_buf(*dst)?;
                    let r = self.buf(*src).and_then(|s| {
                        self.be(self.backend.copy_region(
                            s,
                            &p.buffers[*src as usize].region.0,
                            &mut d,
                            &p.buffers[*dst as usize].region.0,
                            &region.0,
                            reduce.map(reduce_op),
                        ))
                    });
                    self.bufs[*dst as usize] = Some(d);
                    r?;
                }
                Instr::Exchange { sends, recvs, .. } => self.exchange(sends, recvs)?,
                Instr::AllReduce {
                    src,
                    dst,
                    region,
                    reduce,
                    ..
                } => {
                    let t0 = Instant::now();
                    let mut d = self.take_buf(*dst)?;
                    let r = self.all_reduce(*src, *dst, &mut d, region, reduce_op(*reduce));
                    self.bufs[*dst as usize] = Some(d);
                    r?;
                    self.comm_seconds += t0.elapsed().as_secs_f64();
                }
                Instr::ReduceScatter {
                    src,
                    dst,
                    blocks,
                    reduce,
                    ..
                } => {
                    let t0 = Instant::now();
                    self.reduce_scatter(*src, *dst, blocks, reduce_op(*reduce))?;
                    self.comm_seconds += t0.elapsed().as_secs_f64();
                }
                Instr::AllGather { buf, blocks, .. } => {
                    let t0 = Instant::now();
                    self.all_gather(*buf, blocks)?;
                    self.comm_seconds += t0.elapsed().as_secs_f64();
                }
                Instr::AllToAll { sends, recvs, .. } => {
                    let t0 = Instant::now();
                    self.all_to_all(sends, recvs)?;
                    self.comm_seconds += t0.elapsed().as_secs_f64();
                }
                Instr::Broadcast {
                    root,
                    buf,
                    region,
                    reduce,
                    ..
                } => {
                    let t0 = Instant::now();
                    self.flat_broadcast(*root, *buf, region, reduce.map(reduce_op))?;
                    self.comm_seconds += t0.elapsed().as_secs_f64();
                }
                Instr::Compute {
                    inputs, outputs, ..
                } => self.compute(k, inputs, outputs)?,
            }
        }
        Ok(())
    }

    /// A grouped send/recv: pack each sent region at its type's wire size,
    /// exchange, unpack each received one into its buffer (combining with
    /// the message's reducer, if any); adds the time to the comm seconds.
    fn exchange(&mut self, sends: &[Msg], recvs: &[Msg]) -> Result<(), ExecError> {
        let t0 = Instant::now();
        let packed = sends
            .iter()
            .map(|m| self.pack_wire(m.buf, &m.region))
            .collect::<Result<Vec<_>, _>>()?;
        let mut staged = recvs
            .iter()
            .map(|m| {
                let words = self.wire_words(m.buf, &m.region);
                self.be(self.backend.alloc_workspace(words))
            })
            .collect::<Result<Vec<_>, _>>()?;
        {
            let mut ops: Vec<P2p<'_, B::Buffer>> = sends
                .iter()
                .zip(&packed)
                .map(|(m, v)| P2p::Send {
                    peer: Rank(m.peer),
                    buf: v,
                })
                .collect();
            ops.extend(recvs.iter().zip(staged.iter_mut()).map(|(m, v)| P2p::Recv {
                peer: Rank(m.peer),
                buf: v,
            }));
            let r = self.comm.group(&mut ops);
            drop(ops);
            r.map_err(|e| self.comm_err(e))?;
        }
        for (m, v) in recvs.iter().zip(&staged) {
            self.unpack_wire(v, m.buf, &m.region, m.reduce.map(reduce_op))?;
        }
        self.comm_seconds += t0.elapsed().as_secs_f64();
        Ok(())
    }

    /// Run the prepared kernel of instruction `k` on its input buffers,
    /// writing its output buffers.
    fn compute(&mut self, k: usize, inputs: &[BufId], outputs: &[BufId]) -> Result<(), ExecError> {
        let mut outs: Vec<B::Buffer> = outputs
            .iter()
            .map(|&b| self.take_buf(b))
            .collect::<Result<_, _>>()?;
        let r = {
            let ins: Vec<&B::Buffer> = inputs
                .iter()
                .map(|&b| self.buf(b))
                .collect::<Result<_, _>>()?;
            let mut o: Vec<&mut B::Buffer> = outs.iter_mut().collect();
            self.backend
                .launch(self.kernels[k].as_ref().expect("prepared"), &ins, &mut o)
        };
        for (&b, v) in outputs.iter().zip(outs) {
            self.bufs[b as usize] = Some(v);
        }
        self.be(r)?;
        Ok(())
    }

    /// A leaf tile's first values: at a later step the carried tile (or the
    /// value set for it since the last step); else a value the caller set,
    /// the device copy of an earlier step's fill, or the synthetic fill.
    fn fill(&mut self, buf: u32, syn: &Synthetic) -> Result<B::Buffer, ExecError> {
        let p = self.p;
        let decl = &p.buffers[buf as usize];
        let (t, n, r) = (decl.tensor, decl.elems as usize, &decl.region.0);
        let info = p.tensor(t).ok_or_else(|| {
            ExecError::Invalid(format!(
                "rank {}: buffer {buf} holds tensor {}, which the program does not name",
                self.rank, t.0
            ))
        })?;
        if self.steps > 0 {
            if let Some(&from) = self.carry_from.get(&t) {
                if let Some(b) = self.carried.remove(&t) {
                    if self.backend.buffer_len(&b) == n {
                        return Ok(b);
                    }
                    self.backend.free(b);
                }
                return match self.set.get(&t).filter(|s| s.at == self.steps) {
                    Some(_) => self.upload_set(t, r),
                    None => Err(ExecError::Invalid(format!(
                        "rank {}: the tile of `{}` moved between steps: set it from `{}` (RankRunner::set) before the step",
                        self.rank,
                        info.name,
                        p.tensor(from).map_or("?", |i| i.name.as_str())
                    ))),
                };
            }
        }
        if let Some(c) = self.fills.get(&buf) {
            // The copy below writes every element.
            let mut b = self.be(self.backend.alloc_for_output(n))?;
            self.be(self.backend.copy_region(c, r, &mut b, r, r, None))?;
            return Ok(b);
        }
        let b = if self.set.contains_key(&t) {
            self.upload_set(t, r)?
        } else {
            let host = match self.prefilled.remove(&buf) {
                Some(h) => h,
                None => super::rank::fill_host(syn, info, self.seed, r)?,
            };
            self.be(self.backend.upload_owned(host))?
        };
        if !self.carry_from.contains_key(&t) {
            let mut keep = self.be(self.backend.alloc_workspace(n))?;
            self.be(self.backend.copy_region(&b, r, &mut keep, r, r, None))?;
            self.fills.insert(buf, keep);
        }
        Ok(b)
    }

    /// Upload `region` of the value set for `t`.
    fn upload_set(
        &self,
        t: program::TensorId,
        region: &[(i64, i64)],
    ) -> Result<B::Buffer, ExecError> {
        let s = &self.set[&t];
        if !contains(&s.region.0, region) {
            return Err(ExecError::Invalid(format!(
                "rank {}: a tile {region:?} of tensor {} is not inside the region {:?} set for it",
                self.rank, t.0, s.region.0
            )));
        }
        let mut host = vec![0.0; volume(region) as usize];
        self.be(copy_region(
            &s.values,
            &s.region.0,
            &mut host,
            region,
            region,
            None,
        ))?;
        self.be(self.backend.upload(&host))
    }

    /// Buffer `buf` of instruction `k`, an `Alloc`, initialised as `init`.
    ///
    /// Errors: [`ExecError::Alloc`] naming the tensor and the bytes.
    fn alloc(&mut self, k: usize, buf: u32, init: &Init) -> Result<B::Buffer, ExecError> {
        let n = self.p.buffers[buf as usize].elems as usize;
        let b = match init {
            Init::Zero if self.overwritten[k] => self.be(self.backend.alloc_for_output(n)),
            Init::Zero => self.be(self.backend.alloc(n)),
            Init::Identity(r) => self.be(self.backend.upload(&vec![r.identity() as f32; n])),
            Init::Fill(syn) => self.fill(buf, syn),
        };
        b.map_err(|e| self.alloc_err(buf, e))
    }

    /// A backend failure while allocating (or filling) buffer `b`, as
    /// [`ExecError::Alloc`] naming its tensor and bytes; other errors as
    /// they are.
    fn alloc_err(&self, b: u32, e: ExecError) -> ExecError {
        match e {
            ExecError::Backend { rank, source } => {
                let decl = &self.p.buffers[b as usize];
                ExecError::Alloc {
                    rank,
                    tensor: self
                        .p
                        .tensor(decl.tensor)
                        .map_or_else(|| format!("tensor {}", decl.tensor.0), |i| i.name.clone()),
                    bytes: decl.elems * 4,
                    source: Box::new(source),
                }
            }
            e => e,
        }
    }
}
