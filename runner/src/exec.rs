//! The executor: runs per-worker [`codegen::Program`]s for N training steps,
//! one thread per rank, each with its own [`Backend`] and communicator
//! ([`Collectives`] on that backend's buffers) (Tofu §5). [`run_programs`]
//! runs on [`CpuBackend`]s and a [`LocalCommunicator`] clique;
//! [`run_programs_on`] on any backend × communicator pairs.
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
//! Exchanges: each message's region is packed into a work buffer on the
//! backend ([`Backend::copy_region`]), the grouped send/recv runs on those
//! buffers ([`Collectives::group`]), and received messages are unpacked (or
//! reduced) into their destination buffers on the backend: no host copies
//! unless the communicator itself stages through the host.
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

use comm::{Collectives, CommError, LocalCommunicator, P2p, Rank};

use crate::backend::{Backend, BackendError, CpuBackend, Window};
use crate::given::Given;
use crate::launch::on_threads;
use crate::region::{copy_region, reduce_op, slice};

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
    /// With `TOFU_PROFILE=1`: rank 0's seconds per operator spec over all
    /// steps (each kernel synchronised, so the run is slower), largest first.
    pub op_seconds: Vec<(String, f64)>,
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

/// Run `steps` training steps of the programs on CPU threads (see the
/// module doc).
///
/// Errors: [`ExecError`] naming the rank; the first failing rank's error.
pub fn run_programs(
    graph: &Graph,
    lib: &Library,
    progs: &Programs,
    opts: RunOptions,
    progress: Option<&(dyn Fn(usize) + Sync)>,
) -> Result<RunReport, ExecError> {
    let ranks = LocalCommunicator::create(progs.programs.len())
        .into_iter()
        .map(|c| (CpuBackend::new(), c))
        .collect();
    run_programs_on(graph, lib, progs, opts, progress, ranks)
}

/// Run `steps` training steps of the programs with one `(backend,
/// communicator)` pair per rank, in rank order (see the module doc).
///
/// Errors: [`ExecError`] naming the rank; the first failing rank's error;
/// [`ExecError::Invalid`] when there is not one pair per program.
pub fn run_programs_on<B, C>(
    graph: &Graph,
    lib: &Library,
    progs: &Programs,
    opts: RunOptions,
    progress: Option<&(dyn Fn(usize) + Sync)>,
    ranks: Vec<(B, C)>,
) -> Result<RunReport, ExecError>
where
    B: Backend,
    C: Collectives<B::Buffer>,
{
    run_programs_given(graph, lib, progs, opts, progress, ranks, &Given::new())
}

/// [`run_programs_on`] with `given` values for some leaf tensors (real
/// weights, a step's inputs; see [`crate::given`]) instead of their
/// synthetic fill.
///
/// Errors: as [`run_programs_on`]; [`ExecError::Invalid`] for a given value
/// whose length is not its tensor's element count.
pub fn run_programs_given<B, C>(
    graph: &Graph,
    lib: &Library,
    progs: &Programs,
    opts: RunOptions,
    progress: Option<&(dyn Fn(usize) + Sync)>,
    ranks: Vec<(B, C)>,
    given: &Given,
) -> Result<RunReport, ExecError>
where
    B: Backend,
    C: Collectives<B::Buffer>,
{
    let world = progs.programs.len();
    if ranks.len() != world {
        return Err(ExecError::Invalid(format!(
            "{} programs but {} (backend, communicator) pairs",
            world,
            ranks.len()
        )));
    }
    if world == 0 || opts.steps == 0 {
        return Err(ExecError::Invalid(
            "nothing to run: no ranks or no steps".into(),
        ));
    }
    // Synthetic data, once, shared by every rank.
    let values = planner::graph::execute::synthesize(graph, opts.seed);
    for (&t, v) in given {
        let want = graph.tensor(t).shape.iter().product::<usize>();
        if v.len() != want {
            return Err(ExecError::Invalid(format!(
                "`{}`: {} given values for {want} elements",
                graph.tensor(t).name,
                v.len()
            )));
        }
    }
    let data: Shared = Arc::new(
        graph
            .tensor_ids()
            .map(|t| match given.get(&t) {
                Some(v) => Some(v.clone()),
                None => values
                    .get(t)
                    .map(|v| v.data.iter().map(|&x| x as f32).collect()),
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
    type RankOut = (Vec<f64>, Vec<u64>, Vec<f64>, u64, Vec<(String, f64)>);
    let profile = std::env::var("TOFU_PROFILE").as_deref() == Ok("1");
    let results = on_threads(
        ranks,
        |rank, (backend, comm)| -> Result<RankOut, ExecError> {
            let p = &progs.programs[rank];
            let mut w = Worker::new(graph, lib, p, backend, comm, data.clone())?;
            w.profile = profile.then(HashMap::new);
            let mut times = Vec::new();
            let mut bytes = Vec::new();
            let mut comm_s = Vec::new();
            for step in 0..opts.steps {
                w.comm.reset_counters();
                w.comm_seconds = 0.0;
                let t0 = Instant::now();
                let r = w.step(step, &store).and_then(|()| w.synchronize());
                let elapsed = t0.elapsed().as_secs_f64();
                if let Err(e) = r {
                    // Release the peers (they fail with a named error).
                    drop(w);
                    return Err(e);
                }
                times.push(elapsed);
                bytes.push(w.comm.counters().sent);
                comm_s.push(w.comm_seconds);
                w.end_step(step, step + 1 == opts.steps, &store, &store_for, &outputs)?;
                barrier.wait();
                if rank == 0 {
                    if let Some(f) = progress {
                        f(step + 1);
                    }
                }
            }
            let mut ops: Vec<(String, f64)> =
                w.profile.take().unwrap_or_default().into_iter().collect();
            ops.sort_by(|a, b| b.1.total_cmp(&a.1));
            Ok((times, bytes, comm_s, w.backend.memory().peak, ops))
        },
    );
    let mut report = RunReport {
        step_seconds: vec![0.0; opts.steps],
        bytes_sent: vec![vec![0; world]; opts.steps],
        comm_seconds: vec![vec![0.0; world]; opts.steps],
        ..Default::default()
    };
    let mut first_err = None;
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok(Ok((times, bytes, comm_s, peak, ops))) => {
                if rank == 0 {
                    report.op_seconds = ops;
                }
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

struct Worker<'a, B: Backend, C> {
    graph: &'a Graph,
    p: &'a Program,
    rank: usize,
    comm: C,
    backend: B,
    data: Shared,
    kernels: Vec<Option<B::Kernel>>,
    bufs: Vec<Option<B::Buffer>>,
    /// Carried tiles for the next step, by the tensor they become.
    carried: HashMap<TensorId, B::Buffer>,
    carry_from: HashMap<TensorId, TensorId>,
    /// Device copies of the synthetic fills of step inputs (not carried),
    /// so later steps copy on the device instead of uploading again.
    fills: HashMap<u32, B::Buffer>,
    comm_seconds: f64,
    /// Seconds per operator spec, when profiling.
    profile: Option<HashMap<String, f64>>,
}

impl<'a, B: Backend, C: Collectives<B::Buffer>> Worker<'a, B, C> {
    fn new(
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

    fn be<T>(&self, r: Result<T, BackendError>) -> Result<T, ExecError> {
        r.map_err(|source| ExecError::Backend {
            rank: self.rank,
            source,
        })
    }

    /// Buffer `b`, or [`ExecError::Invalid`] when the program uses it while it
    /// is not allocated (programs that skipped `codegen::validate`).
    fn buf(&self, b: u32) -> Result<&B::Buffer, ExecError> {
        self.bufs
            .get(b as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| dead_buffer(self.rank, b))
    }

    /// Take buffer `b` out for writing (see [`Self::buf`]).
    fn take_buf(&mut self, b: u32) -> Result<B::Buffer, ExecError> {
        self.bufs
            .get_mut(b as usize)
            .and_then(Option::take)
            .ok_or_else(|| dead_buffer(self.rank, b))
    }

    fn comm_err(&self, source: CommError) -> ExecError {
        ExecError::Comm {
            rank: self.rank,
            source,
        }
    }

    /// Wait for the backend's and the communicator's queued work.
    fn synchronize(&mut self) -> Result<(), ExecError> {
        self.be(self.backend.synchronize())?;
        self.comm.synchronize().map_err(|e| self.comm_err(e))
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

    /// [`Instr::AllReduce`]: `dst` (taken out, holding `region`) gets `src`'s
    /// region, then the all-reduce runs on it in place.
    fn all_reduce(
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
    fn pack(&self, b: u32, region: &Region) -> Result<B::Buffer, ExecError> {
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
    fn reduce_scatter(
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
            let mut d = self.take_buf(dst)?;
            let r = self.backend.copy_region(
                &recv,
                &mine.0,
                &mut d,
                &self.p.buffers[dst as usize].region.0,
                &mine.0,
                None,
            );
            self.bufs[dst as usize] = Some(d);
            self.be(r)?;
        }
        Ok(())
    }

    /// [`Instr::AllGather`]: this rank's block of `buf` all-gathered, every
    /// other block written into `buf`.
    fn all_gather(&mut self, buf: u32, blocks: &[Region]) -> Result<(), ExecError> {
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

    /// Hand kept tiles to the next step (and, after the last, to the report).
    fn end_step(
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
