//! One rank's state while it runs its program: its backend, communicator,
//! live buffers and prepared kernels; executes one step's instructions in
//! order (allocations with their fills, copies, exchanges, collectives,
//! compute, frees) and hands kept tiles to the next step.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use codegen::{Init, Instr, KernelMode, Program};
use planner::graph::{Graph, TensorId};
use planner::plan::tile::Region;
use tdl::Library;

use comm::{Collectives, CommError, P2p, Rank};

use super::{ExecError, Shared};
use crate::backend::{Backend, BackendError, Window};
use crate::region::{copy_region, reduce_op, slice};

pub(super) struct Worker<'a, B: Backend, C> {
    pub(super) graph: &'a Graph,
    pub(super) p: &'a Program,
    pub(super) rank: usize,
    pub(super) comm: C,
    pub(super) backend: B,
    pub(super) data: Shared,
    pub(super) kernels: Vec<Option<B::Kernel>>,
    pub(super) bufs: Vec<Option<B::Buffer>>,
    /// Carried tiles for the next step, by the tensor they become.
    pub(super) carried: HashMap<TensorId, B::Buffer>,
    pub(super) carry_from: HashMap<TensorId, TensorId>,
    /// Device copies of the synthetic fills of step inputs (not carried),
    /// so later steps copy on the device instead of uploading again.
    pub(super) fills: HashMap<u32, B::Buffer>,
    pub(super) comm_seconds: f64,
    /// Seconds per operator spec, when profiling.
    pub(super) profile: Option<HashMap<String, f64>>,
}

impl<'a, B: Backend, C: Collectives<B::Buffer>> Worker<'a, B, C> {
    pub(super) fn new(
        graph: &'a Graph,
        lib: &Library,
        p: &'a Program,
        backend: B,
        comm: C,
        data: Shared,
    ) -> Result<Self, ExecError> {
        let rank = p.rank;
        let mut kernels = Vec::with_capacity(p.instrs.len());
        for ins in &p.instrs {
            let k = match ins {
                Instr::Compute {
                    op,
                    var_box,
                    inputs,
                    mode,
                    ..
                } => {
                    let o = graph.op(*op);
                    let spec = lib.get(&o.spec).ok_or_else(|| {
                        ExecError::Invalid(format!("op `{}`: no spec `{}`", o.name, o.spec))
                    })?;
                    let regions: Vec<Vec<(i64, i64)>> = inputs
                        .iter()
                        .map(|&b| p.buffers[b as usize].region.0.clone())
                        .collect();
                    let k = match mode {
                        KernelMode::Local => {
                            let shapes: Vec<Vec<usize>> = regions
                                .iter()
                                .map(|r| r.iter().map(|&(l, h)| (h - l) as usize).collect())
                                .collect();
                            backend.prepare(spec, &shapes, &o.attrs)
                        }
                        KernelMode::Window => {
                            let shapes: Vec<Vec<usize>> = o
                                .inputs
                                .iter()
                                .map(|t| graph.tensor(*t).shape.clone())
                                .collect();
                            backend.prepare_window(
                                spec,
                                &shapes,
                                &o.attrs,
                                &Window {
                                    vars: var_box.clone(),
                                    inputs: regions,
                                },
                            )
                        }
                    };
                    Some(k.map_err(|source| ExecError::Backend { rank, source })?)
                }
                _ => None,
            };
            kernels.push(k);
        }
        let carry_from = p.carries.iter().map(|c| (c.to, c.from)).collect();
        Ok(Worker {
            graph,
            p,
            rank,
            comm,
            backend,
            data,
            kernels,
            bufs: (0..p.buffers.len()).map(|_| None).collect(),
            carried: HashMap::new(),
            carry_from,
            fills: HashMap::new(),
            comm_seconds: 0.0,
            profile: None,
        })
    }

    pub(super) fn be<T>(&self, r: Result<T, BackendError>) -> Result<T, ExecError> {
        r.map_err(|source| ExecError::Backend {
            rank: self.rank,
            source,
        })
    }

    /// Buffer `b`, or [`ExecError::Invalid`] when the program uses it while it
    /// is not allocated (programs that skipped `codegen::validate`).
    pub(super) fn buf(&self, b: u32) -> Result<&B::Buffer, ExecError> {
        self.bufs
            .get(b as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| dead_buffer(self.rank, b))
    }

    /// Take buffer `b` out for writing (see [`Self::buf`]).
    pub(super) fn take_buf(&mut self, b: u32) -> Result<B::Buffer, ExecError> {
        self.bufs
            .get_mut(b as usize)
            .and_then(Option::take)
            .ok_or_else(|| dead_buffer(self.rank, b))
    }

    pub(super) fn comm_err(&self, source: CommError) -> ExecError {
        ExecError::Comm {
            rank: self.rank,
            source,
        }
    }

    /// Wait for the backend's and the communicator's queued work.
    pub(super) fn synchronize(&mut self) -> Result<(), ExecError> {
        self.be(self.backend.synchronize())?;
        self.comm.synchronize().map_err(|e| self.comm_err(e))
    }

    pub(super) fn step(
        &mut self,
        step: usize,
        store: &[Vec<Mutex<Vec<f32>>>; 2],
    ) -> Result<(), ExecError> {
        let p = self.p;
        for (k, ins) in p.instrs.iter().enumerate() {
            match ins {
                Instr::Alloc { buf, init } => {
                    let decl = &p.buffers[*buf as usize];
                    let n = decl.elems as usize;
                    let b = match init {
                        Init::Zero => self.be(self.backend.alloc(n))?,
                        Init::Identity(r) => {
                            self.be(self.backend.upload(&vec![r.identity() as f32; n]))?
                        }
                        Init::Fill => {
                            let t = decl.tensor;
                            match (step > 0)
                                .then(|| self.carry_from.get(&t).copied())
                                .flatten()
                            {
                                Some(from) => match self.carried.remove(&t) {
                                    Some(b) if self.backend.buffer_len(&b) == n => b,
                                    _ => {
                                        let g = store[(step - 1) % 2][from.index()]
                                            .lock()
                                            .expect("store");
                                        let host = self.be(slice(
                                            &g,
                                            &self.graph.tensor(t).shape,
                                            &decl.region.0,
                                        ))?;
                                        drop(g);
                                        self.be(self.backend.upload(&host))?
                                    }
                                },
                                None if self.fills.contains_key(buf) => {
                                    let mut b = self.be(self.backend.alloc(n))?;
                                    let r = &decl.region.0;
                                    self.be(self.backend.copy_region(
                                        &self.fills[buf],
                                        r,
                                        &mut b,
                                        r,
                                        r,
                                        None,
                                    ))?;
                                    b
                                }
                                None => {
                                    let all = self.data[t.index()].as_ref().ok_or_else(|| {
                                        ExecError::Invalid(format!(
                                            "`{}` has no fill",
                                            self.graph.tensor(t).name
                                        ))
                                    })?;
                                    let host = self.be(slice(
                                        all,
                                        &self.graph.tensor(t).shape,
                                        &decl.region.0,
                                    ))?;
                                    let b = self.be(self.backend.upload(&host))?;
                                    if !self.carry_from.contains_key(&t) {
                                        let mut keep = self.be(self.backend.alloc_workspace(n))?;
                                        let r = &decl.region.0;
                                        self.be(self
                                            .backend
                                            .copy_region(&b, r, &mut keep, r, r, None))?;
                                        self.fills.insert(*buf, keep);
                                    }
                                    b
                                }
                            }
                        }
                    };
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
                Instr::Exchange { sends, recvs, .. } => {
                    let t0 = Instant::now();
                    let mut packed = Vec::with_capacity(sends.len());
                    for m in sends {
                        let mut v =
                            self.be(self.backend.alloc_workspace(m.region.volume() as usize))?;
                        self.be(self.backend.copy_region(
                            self.buf(m.buf)?,
                            &p.buffers[m.buf as usize].region.0,
                            &mut v,
                            &m.region.0,
                            &m.region.0,
                            None,
                        ))?;
                        packed.push(v);
                    }
                    let mut staged = recvs
                        .iter()
                        .map(|m| self.be(self.backend.alloc_workspace(m.region.volume() as usize)))
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
                        let mut d = self.take_buf(m.buf)?;
                        let r = self.backend.copy_region(
                            v,
                            &m.region.0,
                            &mut d,
                            &p.buffers[m.buf as usize].region.0,
                            &m.region.0,
                            m.reduce.map(reduce_op),
                        );
                        self.bufs[m.buf as usize] = Some(d);
                        self.be(r)?;
                    }
                    self.comm_seconds += t0.elapsed().as_secs_f64();
                }
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
                Instr::Compute {
                    op,
                    inputs,
                    outputs,
                    ..
                } => {
                    let t0 = match self.profile {
                        Some(_) => {
                            self.be(self.backend.synchronize())?;
                            Some(Instant::now())
                        }
                        None => None,
                    };
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
                        self.backend.launch(
                            self.kernels[k].as_ref().expect("prepared"),
                            &ins,
                            &mut o,
                        )
                    };
                    for (&b, v) in outputs.iter().zip(outs) {
                        self.bufs[b as usize] = Some(v);
                    }
                    self.be(r)?;
                    if let Some(t0) = t0 {
                        self.be(self.backend.synchronize())?;
                        let spec = self.graph.op(*op).spec.clone();
                        if let Some(m) = self.profile.as_mut() {
                            *m.entry(spec).or_default() += t0.elapsed().as_secs_f64();
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Hand kept tiles to the next step (and, after the last, to the report).
    pub(super) fn end_step(
        &mut self,
        step: usize,
        last: bool,
        store: &[Vec<Mutex<Vec<f32>>>; 2],
        store_for: &[bool],
        outputs: &HashMap<TensorId, Mutex<Vec<f32>>>,
    ) -> Result<(), ExecError> {
        let p = self.p;
        for &b in &p.keep {
            let decl = &p.buffers[b as usize];
            let Some(buf) = self.bufs[b as usize].as_ref() else {
                continue;
            };
            if !last && !store_for[decl.tensor.index()] {
                continue;
            }
            let mut host = vec![0.0; self.backend.buffer_len(buf)];
            self.be(self.backend.download(buf, &mut host))?;
            let whole = Region::whole(&self.graph.tensor(decl.tensor).shape);
            if last {
                let mut g = outputs[&decl.tensor].lock().expect("output");
                self.be(copy_region(
                    &host,
                    &decl.region.0,
                    &mut g,
                    &whole.0,
                    &decl.region.0,
                    None,
                ))?;
            }
            if store_for[decl.tensor.index()] {
                let mut g = store[step % 2][decl.tensor.index()].lock().expect("store");
                self.be(copy_region(
                    &host,
                    &decl.region.0,
                    &mut g,
                    &whole.0,
                    &decl.region.0,
                    None,
                ))?;
            }
        }
        for c in &p.carries {
            if let (Some(f), Some(t)) = (c.from_buf, c.to_buf) {
                if p.buffers[f as usize].region == p.buffers[t as usize].region {
                    if let Some(b) = self.bufs[f as usize].take() {
                        self.carried.insert(c.to, b);
                    }
                }
            }
        }
        for &b in &p.keep {
            if let Some(x) = self.bufs[b as usize].take() {
                self.backend.free(x);
            }
        }
        Ok(())
    }
}

/// The error for a program that uses buffer `b` while it is not allocated.
fn dead_buffer(rank: usize, b: u32) -> ExecError {
    ExecError::Invalid(format!(
        "rank {rank}: buffer {b} is used while not allocated (run codegen::validate on the programs first)"
    ))
}
