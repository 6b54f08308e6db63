//! The executor: runs per-worker [`codegen::Program`]s for N training steps,
//! one thread per rank, each with its own [`CpuBackend`] and
//! [`LocalCommunicator`] (Tofu §5).
//!
//! Takes the graph (for synthetic data and specs), the operator library and
//! the programs; gives per step its wall time, the bytes each rank sent
//! (from the communicator's counters), the time each rank spent in
//! exchanges, the peak bytes each rank's backend held, and the final values
//! of the kept tensors (loss, updated weights and state) assembled from the
//! ranks' tiles.
//!
//! Data: every tensor with a [`planner::graph::Fill`] gets the values of
//! [`planner::graph::execute::synthesize`] (same seed, same data, whatever
//! the partition); a tile is the slice of its region. After a step, the
//! kept tile of an updated tensor (`w'`) becomes the tile of the tensor it
//! replaces (`w`) for the next step: in place when both tiles are the same
//! region, else through a host-side hand-off (not counted as communication:
//! it is a change of layout between steps, not part of the plan's step).
//!
//! Memory: backend buffers only (tiles, assembled inputs, computed shares);
//! message staging and kernel workspace are not counted.

use std::collections::HashMap;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use codegen::{Init, Instr, KernelMode, Program, Programs};
use planner::graph::{Graph, TensorId};
use planner::plan::tile::Region;
use tdl::Library;

use crate::backend::{Backend, BackendError, CpuBackend, CpuBuffer};
use crate::comm::{run_ranks, CommError, Communicator, LocalCommunicator, P2p, Rank, ReduceOp};
use crate::kernels::compiled::Window;
use crate::kernels::OpKernel;

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExecError {
    /// A backend call (allocation, kernel) failed.
    #[error("rank {rank}: {source}")]
    Backend {
        /// The rank.
        rank: usize,
        /// The error.
        source: BackendError,
    },
    /// A communication call failed.
    #[error("rank {rank}: {source}")]
    Comm {
        /// The rank.
        rank: usize,
        /// The error.
        source: CommError,
    },
    /// The programs do not fit the graph or library.
    #[error("{0}")]
    Invalid(String),
    /// A rank's thread panicked.
    #[error("rank {0} panicked")]
    Panic(usize),
}

/// Options of a run.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// Training steps (≥ 1).
    pub steps: usize,
    /// Seed of the synthetic data.
    pub seed: u64,
}

/// What a run measured (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// Wall time of each step (seconds; the slowest rank).
    pub step_seconds: Vec<f64>,
    /// Bytes each rank sent, per step: `[step][rank]`.
    pub bytes_sent: Vec<Vec<u64>>,
    /// Seconds each rank spent in exchanges (packing, group send/recv,
    /// unpacking), per step: `[step][rank]`.
    pub comm_seconds: Vec<Vec<f64>>,
    /// Peak bytes held by each rank's backend over the run.
    pub peak_bytes_per_rank: Vec<u64>,
    /// Final values of the kept tensors (global, row-major f32).
    pub outputs: Vec<(TensorId, Vec<f32>)>,
}

impl RunReport {
    /// Bytes each rank sent, totals over all steps.
    pub fn bytes_sent_per_rank(&self) -> Vec<u64> {
        let n = self.bytes_sent.first().map_or(0, Vec::len);
        (0..n)
            .map(|r| self.bytes_sent.iter().map(|s| s[r]).sum())
            .collect()
    }
}

type Shared = Arc<Vec<Option<Vec<f32>>>>;

/// Run `steps` training steps of the programs (see the module doc).
///
/// Errors: [`ExecError`] naming the rank; the first failing rank's error.
pub fn run_programs(
    graph: &Graph,
    lib: &Library,
    progs: &Programs,
    opts: RunOptions,
    progress: Option<&(dyn Fn(usize) + Sync)>,
) -> Result<RunReport, ExecError> {
    let world = progs.programs.len();
    if world == 0 || opts.steps == 0 {
        return Err(ExecError::Invalid(
            "nothing to run: no ranks or no steps".into(),
        ));
    }
    // Synthetic data, once, shared by every rank.
    let values = planner::graph::execute::synthesize(graph, opts.seed);
    let data: Shared = Arc::new(
        graph
            .tensor_ids()
            .map(|t| {
                values
                    .get(t)
                    .map(|v| v.data.iter().map(|&x| x as f32).collect())
            })
            .collect(),
    );
    drop(values);
    // Carries that need the host hand-off (regions differ on some rank).
    let mut store_for: Vec<bool> = vec![false; graph.tensors().len()];
    for p in &progs.programs {
        for c in &p.carries {
            let same = match (c.from_buf, c.to_buf) {
                (Some(f), Some(t)) => p.buffers[f as usize].region == p.buffers[t as usize].region,
                (_, None) => true,
                (None, Some(_)) => false,
            };
            if !same {
                store_for[c.from.index()] = true;
            }
        }
    }
    let numel = |t: TensorId| graph.tensor(t).shape.iter().product::<usize>();
    let store: [Vec<Mutex<Vec<f32>>>; 2] = std::array::from_fn(|_| {
        graph
            .tensor_ids()
            .map(|t| {
                Mutex::new(if store_for[t.index()] {
                    vec![0.0; numel(t)]
                } else {
                    Vec::new()
                })
            })
            .collect()
    });
    let kept: Vec<TensorId> = {
        let mut k: Vec<TensorId> = progs
            .programs
            .iter()
            .flat_map(|p| p.keep.iter().map(|&b| p.buffers[b as usize].tensor))
            .collect();
        k.sort();
        k.dedup();
        k
    };
    let outputs: HashMap<TensorId, Mutex<Vec<f32>>> = kept
        .iter()
        .map(|&t| (t, Mutex::new(vec![0.0; numel(t)])))
        .collect();
    let barrier = Barrier::new(world);
    let comms = LocalCommunicator::create(world);
    type RankOut = (Vec<f64>, Vec<u64>, Vec<f64>, u64);
    let results = run_ranks(comms, |comm| -> Result<RankOut, ExecError> {
        let rank = comm.rank().index();
        let p = &progs.programs[rank];
        let mut w = Worker::new(graph, lib, p, comm, data.clone())?;
        let mut times = Vec::new();
        let mut bytes = Vec::new();
        let mut comm_s = Vec::new();
        for step in 0..opts.steps {
            w.comm.reset_counters();
            w.comm_seconds = 0.0;
            let t0 = Instant::now();
            let r = w.step(step, &store);
            let elapsed = t0.elapsed().as_secs_f64();
            if let Err(e) = r {
                // Release the peers (they fail with a named error).
                drop(w);
                return Err(e);
            }
            times.push(elapsed);
            bytes.push(w.comm.counters().sent);
            comm_s.push(w.comm_seconds);
            w.end_step(step, step + 1 == opts.steps, &store, &store_for, &outputs);
            barrier.wait();
            if rank == 0 {
                if let Some(f) = progress {
                    f(step + 1);
                }
            }
        }
        Ok((times, bytes, comm_s, w.backend.memory().peak))
    });
    let mut report = RunReport {
        step_seconds: vec![0.0; opts.steps],
        bytes_sent: vec![vec![0; world]; opts.steps],
        comm_seconds: vec![vec![0.0; world]; opts.steps],
        ..Default::default()
    };
    let mut first_err = None;
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok(Ok((times, bytes, comm_s, peak))) => {
                for s in 0..opts.steps {
                    report.step_seconds[s] = report.step_seconds[s].max(times[s]);
                    report.bytes_sent[s][rank] = bytes[s];
                    report.comm_seconds[s][rank] = comm_s[s];
                }
                report.peak_bytes_per_rank.push(peak);
            }
            Ok(Err(e)) => {
                // Prefer a root cause over a peer's "peer gone".
                if first_err.is_none() || matches!(first_err, Some(ExecError::Comm { .. })) {
                    first_err = Some(e);
                }
            }
            Err(_) => first_err = first_err.or(Some(ExecError::Panic(rank))),
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    report.outputs = kept
        .into_iter()
        .map(|t| (t, outputs[&t].lock().expect("no poisoned output").clone()))
        .collect();
    Ok(report)
}

struct Worker<'a> {
    graph: &'a Graph,
    p: &'a Program,
    rank: usize,
    comm: LocalCommunicator,
    backend: CpuBackend,
    data: Shared,
    kernels: Vec<Option<OpKernel>>,
    bufs: Vec<Option<CpuBuffer>>,
    /// Carried tiles for the next step, by the tensor they become.
    carried: HashMap<TensorId, CpuBuffer>,
    carry_from: HashMap<TensorId, TensorId>,
    comm_seconds: f64,
}

impl<'a> Worker<'a> {
    fn new(
        graph: &'a Graph,
        lib: &Library,
        p: &'a Program,
        comm: LocalCommunicator,
        data: Shared,
    ) -> Result<Self, ExecError> {
        let rank = p.rank;
        let backend = CpuBackend::new();
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
            comm_seconds: 0.0,
        })
    }

    fn be<T>(&self, r: Result<T, BackendError>) -> Result<T, ExecError> {
        r.map_err(|source| ExecError::Backend {
            rank: self.rank,
            source,
        })
    }

    /// Buffer `b`, or [`ExecError::Invalid`] when the program uses it while it
    /// is not allocated (programs that skipped `codegen::validate`).
    fn buf(&self, b: u32) -> Result<&CpuBuffer, ExecError> {
        self.bufs
            .get(b as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| dead_buffer(self.rank, b))
    }

    /// Take buffer `b` out for writing (see [`Self::buf`]).
    fn take_buf(&mut self, b: u32) -> Result<CpuBuffer, ExecError> {
        self.bufs
            .get_mut(b as usize)
            .and_then(Option::take)
            .ok_or_else(|| dead_buffer(self.rank, b))
    }

    fn step(&mut self, step: usize, store: &[Vec<Mutex<Vec<f32>>>; 2]) -> Result<(), ExecError> {
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
                                    Some(b) if b.len() == n => b,
                                    _ => {
                                        let g = store[(step - 1) % 2][from.index()]
                                            .lock()
                                            .expect("store");
                                        let host =
                                            slice(&g, &self.graph.tensor(t).shape, &decl.region);
                                        drop(g);
                                        self.be(self.backend.upload(&host))?
                                    }
                                },
                                None => {
                                    let all = self.data[t.index()].as_ref().ok_or_else(|| {
                                        ExecError::Invalid(format!(
                                            "`{}` has no fill",
                                            self.graph.tensor(t).name
                                        ))
                                    })?;
                                    let host =
                                        slice(all, &self.graph.tensor(t).shape, &decl.region);
                                    self.be(self.backend.upload(&host))?
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
                    let s = self.buf(*src)?;
                    copy_region(
                        s.as_slice(),
                        &p.buffers[*src as usize].region,
                        d.as_mut_slice(),
                        &p.buffers[*dst as usize].region,
                        region,
                        reduce.map(ReduceOp::from),
                    );
                    self.bufs[*dst as usize] = Some(d);
                }
                Instr::Exchange { sends, recvs, .. } => {
                    let t0 = Instant::now();
                    let packed: Vec<Vec<f32>> = sends
                        .iter()
                        .map(|m| {
                            let b = &p.buffers[m.buf as usize];
                            let mut v = vec![0.0; m.region.volume() as usize];
                            copy_region(
                                self.buf(m.buf)?.as_slice(),
                                &b.region,
                                &mut v,
                                &m.region,
                                &m.region,
                                None,
                            );
                            Ok(v)
                        })
                        .collect::<Result<_, ExecError>>()?;
                    let mut staged: Vec<Vec<f32>> = recvs
                        .iter()
                        .map(|m| vec![0.0; m.region.volume() as usize])
                        .collect();
                    {
                        let mut ops: Vec<P2p> = sends
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
                        self.comm
                            .group(&mut ops)
                            .map_err(|source| ExecError::Comm {
                                rank: self.rank,
                                source,
                            })?;
                    }
                    for (m, v) in recvs.iter().zip(&staged) {
                        let region = &p.buffers[m.buf as usize].region;
                        let rank = self.rank;
                        let d = self.bufs[m.buf as usize]
                            .as_mut()
                            .ok_or_else(|| dead_buffer(rank, m.buf))?;
                        copy_region(
                            v,
                            &m.region,
                            d.as_mut_slice(),
                            region,
                            &m.region,
                            m.reduce.map(ReduceOp::from),
                        );
                    }
                    self.comm_seconds += t0.elapsed().as_secs_f64();
                }
                Instr::Compute {
                    inputs, outputs, ..
                } => {
                    let mut outs: Vec<CpuBuffer> = outputs
                        .iter()
                        .map(|&b| self.take_buf(b))
                        .collect::<Result<_, _>>()?;
                    let r = {
                        let ins: Vec<&CpuBuffer> = inputs
                            .iter()
                            .map(|&b| self.buf(b))
                            .collect::<Result<_, _>>()?;
                        let mut o: Vec<&mut CpuBuffer> = outs.iter_mut().collect();
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
                }
            }
        }
        Ok(())
    }

    /// Hand kept tiles to the next step (and, after the last, to the report).
    fn end_step(
        &mut self,
        step: usize,
        last: bool,
        store: &[Vec<Mutex<Vec<f32>>>; 2],
        store_for: &[bool],
        outputs: &HashMap<TensorId, Mutex<Vec<f32>>>,
    ) {
        let p = self.p;
        for &b in &p.keep {
            let decl = &p.buffers[b as usize];
            let Some(buf) = self.bufs[b as usize].as_ref() else {
                continue;
            };
            let shape = &self.graph.tensor(decl.tensor).shape;
            if last {
                let mut g = outputs[&decl.tensor].lock().expect("output");
                copy_region(
                    buf.as_slice(),
                    &decl.region,
                    &mut g,
                    &Region::whole(shape),
                    &decl.region,
                    None,
                );
            }
            if store_for[decl.tensor.index()] {
                let mut g = store[step % 2][decl.tensor.index()].lock().expect("store");
                copy_region(
                    buf.as_slice(),
                    &decl.region,
                    &mut g,
                    &Region::whole(shape),
                    &decl.region,
                    None,
                );
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
    }
}

/// The elements of `region` of a whole row-major tensor of `shape`.
fn slice(all: &[f32], shape: &[usize], region: &Region) -> Vec<f32> {
    let mut v = vec![0.0; region.volume() as usize];
    copy_region(all, &Region::whole(shape), &mut v, region, region, None);
    v
}

/// Copy (or combine with `op`) the elements of `region` (global
/// coordinates) from a buffer holding `src_r` into one holding `dst_r`,
/// one contiguous run of the innermost dim at a time.
pub fn copy_region(
    src: &[f32],
    src_r: &Region,
    dst: &mut [f32],
    dst_r: &Region,
    region: &Region,
    op: Option<ReduceOp>,
) {
    if region.volume() == 0 {
        return;
    }
    let rank = region.0.len();
    if rank == 0 {
        match op {
            Some(o) => dst[0] = o.apply(dst[0], src[0]),
            None => dst[0] = src[0],
        }
        return;
    }
    let strides = |r: &Region| {
        let mut s = vec![1i64; rank];
        for d in (0..rank - 1).rev() {
            s[d] = s[d + 1] * (r.0[d + 1].1 - r.0[d + 1].0);
        }
        s
    };
    let (ss, ds) = (strides(src_r), strides(dst_r));
    let run = (region.0[rank - 1].1 - region.0[rank - 1].0) as usize;
    let mut idx: Vec<i64> = region.0.iter().map(|&(l, _)| l).collect();
    loop {
        let so: i64 = (0..rank).map(|d| (idx[d] - src_r.0[d].0) * ss[d]).sum();
        let dof: i64 = (0..rank).map(|d| (idx[d] - dst_r.0[d].0) * ds[d]).sum();
        let (s, t) = (
            &src[so as usize..so as usize + run],
            &mut dst[dof as usize..dof as usize + run],
        );
        match op {
            Some(o) => o.accumulate(t, s),
            None => t.copy_from_slice(s),
        }
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < region.0[d].1 {
                break;
            }
            idx[d] = region.0[d].0;
        }
    }
}

/// The error for a program that uses buffer `b` while it is not allocated.
fn dead_buffer(rank: usize, b: u32) -> ExecError {
    ExecError::Invalid(format!(
        "rank {rank}: buffer {b} is used while not allocated (run codegen::validate on the programs first)"
    ))
}
