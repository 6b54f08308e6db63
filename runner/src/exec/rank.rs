//! [`RankRunner`]: one rank's program on its own backend and communicator,
//! one training step at a time — the per-rank API the executor's threads
//! use and that another schedule (an SSP worker computing gradients, a test)
//! can drive directly.
//!
//! Takes a [`Program`] (self-contained: specs, shapes, fills), a backend, a
//! communicator whose rank and world size are the program's, and the seed of
//! the synthetic data; [`RankRunner::set`] replaces a tensor's fill by given
//! values, [`RankRunner::step`] runs the program once (every rank of the
//! communicator must step too, as in NCCL), [`RankRunner::get`] reads this
//! rank's kept tile of a tensor after the step.
//!
//! Keeps true: kernels are prepared once, at construction; the kept tile of
//! an updated tensor becomes, in place, the tile of the tensor it replaces
//! when both are the same region on this rank; otherwise the next step needs
//! the new tile [`RankRunner::set`] before it, or it fails naming the tensor
//! (the tile moved between steps, which only the caller can hand off).

use std::collections::HashMap;

use rayon::prelude::*;

use comm::{Collectives, CommError};
use program::{Instr, Program, Region, TensorId};

use super::ExecError;
use crate::backend::{Backend, BackendError};
use crate::region::{contains, copy_region, volume};

/// What one step of one rank measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepStats {
    /// Bytes this rank sent (the communicator's counter over the step).
    pub bytes_sent: u64,
    /// Seconds spent in exchanges and collectives.
    pub comm_seconds: f64,
}

/// Values given for (a box of) a tensor, replacing its fill.
pub(super) struct SetValue {
    pub(super) region: Region,
    pub(super) values: Vec<f32>,
    /// Steps completed when it was set (a carried tensor takes only a value
    /// set since the last step).
    pub(super) at: usize,
}

/// One rank's program, backend and communicator (see the module doc).
pub struct RankRunner<'p, B: Backend, C> {
    pub(super) p: &'p Program,
    pub(super) rank: usize,
    pub(super) seed: u64,
    pub(super) comm: C,
    pub(super) backend: B,
    /// Prepared kernels, by instruction index.
    pub(super) kernels: Vec<Option<B::Kernel>>,
    /// Live buffers, by [`program::BufId`].
    pub(super) bufs: Vec<Option<B::Buffer>>,
    /// Carried tiles for the next step, by the tensor they become.
    pub(super) carried: HashMap<TensorId, B::Buffer>,
    /// For each carried-to tensor, the tensor it is carried from.
    pub(super) carry_from: HashMap<TensorId, TensorId>,
    /// Device copies of the fills of step inputs (not carried), by buffer,
    /// so later steps copy on the device instead of uploading again.
    pub(super) fills: HashMap<u32, B::Buffer>,
    /// Values set by the caller, by tensor.
    pub(super) set: HashMap<TensorId, SetValue>,
    /// Steps completed.
    pub(super) steps: usize,
    pub(super) comm_seconds: f64,
    /// Seconds per operator spec, when profiling.
    pub(super) profile: Option<HashMap<String, f64>>,
    /// Per instruction: for an `Alloc`, whether the buffer's next use is as
    /// the output of a compute that does not also read it (so zeroing it is
    /// wasted: kernels overwrite their outputs).
    pub(super) overwritten: Vec<bool>,
    /// Host values of synthetic fills computed ahead of the first step
    /// ([`RankRunner::prefill`]), by buffer; each is used once.
    pub(super) prefilled: HashMap<u32, Vec<f32>>,
}

impl<'p, B: Backend, C: Collectives<B::Buffer>> RankRunner<'p, B, C> {
    /// Prepare `program`'s kernels on `backend` (see the module doc); `seed`
    /// seeds the synthetic fills.
    ///
    /// Errors: [`ExecError::Invalid`] when the communicator's rank or world
    /// size is not the program's, or a computation names a spec the program
    /// does not carry; [`ExecError::Backend`] when a kernel cannot be
    /// prepared.
    pub fn new(program: &'p Program, backend: B, comm: C, seed: u64) -> Result<Self, ExecError> {
        let p = program;
        let rank = p.rank;
        if comm.rank().0 != rank || comm.world_size() != p.world {
            return Err(ExecError::Invalid(format!(
                "the program of rank {rank} of {} runs on a communicator of rank {} of {}",
                p.world,
                comm.rank().0,
                comm.world_size()
            )));
        }
        let mut kernels = Vec::with_capacity(p.instrs.len());
        for ins in &p.instrs {
            let k = match super::instance::instance(p, ins)? {
                Some(i) => {
                    let k = match &i.window {
                        None => backend.prepare(i.spec, &i.shapes, i.attrs),
                        Some(w) => backend.prepare_window(i.spec, &i.shapes, i.attrs, w),
                    };
                    Some(k.map_err(|source| ExecError::Backend { rank, source })?)
                }
                None => None,
            };
            kernels.push(k);
        }
        let carry_from = p.carries.iter().map(|c| (c.to, c.from)).collect();
        Ok(RankRunner {
            p,
            rank,
            seed,
            comm,
            backend,
            kernels,
            bufs: (0..p.buffers.len()).map(|_| None).collect(),
            carried: HashMap::new(),
            carry_from,
            fills: HashMap::new(),
            set: HashMap::new(),
            steps: 0,
            comm_seconds: 0.0,
            profile: None,
            overwritten: overwritten_allocs(&p.instrs),
            prefilled: HashMap::new(),
        })
    }

    /// Compute the synthetic fills the first step will need (weights,
    /// optimizer state, inputs) now, in parallel, so that the first step
    /// times training rather than initialisation (PyTorch's first step does
    /// not include building the model either). Skips tensors given values
    /// with [`RankRunner::set`]; call it after those. Optional: a fill not
    /// computed here is computed when its buffer is first allocated.
    pub fn prefill(&mut self) {
        if self.steps > 0 {
            return;
        }
        let p = self.p;
        let todo: Vec<(u32, program::Synthetic)> = p
            .instrs
            .iter()
            .filter_map(|ins| match ins {
                Instr::Alloc {
                    buf,
                    init: program::Init::Fill(syn),
                } => Some((*buf, *syn)),
                _ => None,
            })
            .filter(|(buf, _)| {
                let t = p.buffers[*buf as usize].tensor;
                !self.set.contains_key(&t) && !self.prefilled.contains_key(buf)
            })
            .collect();
        let seed = self.seed;
        let filled: Vec<(u32, Vec<f32>)> = todo
            .into_par_iter()
            .filter_map(|(buf, syn)| {
                let decl = &p.buffers[buf as usize];
                let info = p.tensor(decl.tensor)?;
                // An error surfaces when the buffer is allocated (`fill`).
                let v = fill_host(&syn, info, seed, &decl.region.0).ok()?;
                Some((buf, v))
            })
            .collect();
        self.prefilled.extend(filled);
    }

    /// The program.
    pub fn program(&self) -> &'p Program {
        self.p
    }

    /// The backend (e.g. to read its memory statistics).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The communicator back, the backend and its buffers released.
    pub fn into_comm(self) -> C {
        self.comm
    }

    /// Peak bytes the backend held so far.
    pub fn peak_bytes(&self) -> u64 {
        self.backend.memory().peak
    }

    /// Time every kernel (synchronising around each) and sum the seconds
    /// per operator spec ([`RankRunner::op_seconds`]).
    pub fn set_profile(&mut self, on: bool) {
        self.profile = on.then(HashMap::new);
    }

    /// Seconds per operator spec over the steps so far, largest first
    /// (empty unless profiling).
    pub fn op_seconds(&self) -> Vec<(String, f64)> {
        let mut ops: Vec<(String, f64)> = self
            .profile
            .iter()
            .flat_map(|m| m.iter().map(|(k, v)| (k.clone(), *v)))
            .collect();
        ops.sort_by(|a, b| b.1.total_cmp(&a.1));
        ops
    }

    /// Use `values` (row-major over `region`, global coordinates) for
    /// `tensor` instead of its fill, from the next step on: every tile of the
    /// tensor this rank allocates must lie inside `region`. For a tensor
    /// carried from the previous step whose tile moved, a value set since
    /// the last step is the carried value.
    ///
    /// Errors: [`ExecError::Invalid`] for a tensor the program does not
    /// name, a region outside its shape, or a length that is not the
    /// region's volume.
    pub fn set(
        &mut self,
        tensor: TensorId,
        region: &Region,
        mut values: Vec<f32>,
    ) -> Result<(), ExecError> {
        let rank = self.rank;
        let info = self.p.tensor(tensor).ok_or_else(|| {
            ExecError::Invalid(format!(
                "rank {rank}: tensor {} is not in this rank's program",
                tensor.0
            ))
        })?;
        if !contains(&Region::whole(&info.shape).0, &region.0) || region.0.len() != info.shape.len()
        {
            return Err(ExecError::Invalid(format!(
                "rank {rank}: `{}` has shape {:?}; {:?} is not a box inside it",
                info.name, info.shape, region.0
            )));
        }
        if values.len() as u64 != region.volume() {
            return Err(ExecError::Invalid(format!(
                "rank {rank}: `{}`: {} values for a region of {} elements",
                info.name,
                values.len(),
                region.volume()
            )));
        }
        program::wire::round_to(info.dtype, &mut values);
        for (b, decl) in self.p.buffers.iter().enumerate() {
            if decl.tensor == tensor {
                if let Some(x) = self.fills.remove(&(b as u32)) {
                    self.backend.free(x);
                }
            }
        }
        self.set.insert(
            tensor,
            SetValue {
                region: region.clone(),
                values,
                at: self.steps,
            },
        );
        Ok(())
    }

    /// [`RankRunner::set`] every tensor of `given` (whole values, by id)
    /// that this rank's program names.
    ///
    /// Errors: as [`RankRunner::set`].
    pub fn set_given(&mut self, given: &crate::Given) -> Result<(), ExecError> {
        for (&t, v) in given {
            if let Some(info) = self.p.tensor(t) {
                let whole = Region::whole(&info.shape);
                self.set(t, &whole, v.clone())?;
            }
        }
        Ok(())
    }

    /// One step with `feed`'s values for step `step` set first and the
    /// watched tensors' kept tiles handed to [`super::StepFeed::observe`]
    /// after it.
    ///
    /// Errors: the feed's (as [`ExecError::Invalid`]), [`RankRunner::set`]'s,
    /// [`RankRunner::step`]'s.
    pub fn fed_step(
        &mut self,
        step: usize,
        feed: &dyn super::StepFeed,
    ) -> Result<StepStats, ExecError> {
        for (t, region, values) in feed.feed(step, self.p).map_err(ExecError::Invalid)? {
            self.set(t, &region, values)?;
        }
        let stats = self.step()?;
        for t in feed.watched(step) {
            if let Some((region, host)) = self.get(t)? {
                feed.observe(step, self.rank, t, &region, &host);
            }
        }
        Ok(stats)
    }

    /// Run the program once: every instruction in order, then wait for the
    /// backend and the communicator. Kept tiles stay readable by
    /// [`RankRunner::get`] until the next step.
    ///
    /// Errors: the first failing instruction's, naming this rank.
    pub fn step(&mut self) -> Result<StepStats, ExecError> {
        for &b in &self.p.keep {
            if let Some(x) = self.bufs[b as usize].take() {
                self.backend.free(x);
            }
        }
        self.comm.reset_counters();
        self.comm_seconds = 0.0;
        self.run_instrs()?;
        self.synchronize()?;
        // Kept tiles of updated tensors become, in place, next step's tiles.
        let p = self.p;
        for c in &p.carries {
            if let (Some(f), Some(t)) = (c.from_buf, c.to_buf) {
                if p.buffers[f as usize].region == p.buffers[t as usize].region {
                    if let Some(b) = self.bufs[f as usize].take() {
                        self.carried.insert(c.to, b);
                    }
                }
            }
        }
        self.steps += 1;
        Ok(StepStats {
            bytes_sent: self.comm.counters().sent,
            comm_seconds: self.comm_seconds,
        })
    }

    /// This rank's kept tile of `tensor` after the last step (its region and
    /// row-major values), `None` if this rank keeps none.
    ///
    /// Errors: [`ExecError::Backend`] when the download fails.
    pub fn get(&self, tensor: TensorId) -> Result<Option<(Region, Vec<f32>)>, ExecError> {
        let p = self.p;
        for &b in &p.keep {
            let decl = &p.buffers[b as usize];
            if decl.tensor != tensor {
                continue;
            }
            let buf = match self.bufs[b as usize].as_ref() {
                Some(x) => Some(x),
                None => p
                    .carries
                    .iter()
                    .find(|c| c.from_buf == Some(b))
                    .and_then(|c| self.carried.get(&c.to)),
            };
            if let Some(buf) = buf {
                let mut host = vec![0.0; self.backend.buffer_len(buf)];
                self.be(self.backend.download(buf, &mut host))?;
                return Ok(Some((decl.region.clone(), host)));
            }
        }
        Ok(None)
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

    /// Wait for the communicator's and the backend's queued work: the
    /// communicator's first, since a device communicator's wait has the
    /// time limit that turns a hung peer into an error (the NCCL watchdog);
    /// the backend's wait then finds its stream drained.
    fn synchronize(&mut self) -> Result<(), ExecError> {
        self.comm.synchronize().map_err(|e| self.comm_err(e))?;
        self.be(self.backend.synchronize())
    }
}

/// The error for a program that uses buffer `b` while it is not allocated.
fn dead_buffer(rank: usize, b: u32) -> ExecError {
    ExecError::Invalid(format!(
        "rank {rank}: buffer {b} is used while not allocated (run codegen::validate on the programs first)"
    ))
}

/// A leaf's first values over `region` (row-major over the region): the
/// tensor's known value where it has one, else its synthetic fill computed
/// in slabs of the first dim in parallel (the same values as
/// `tdl::fill::fill_region`: each element is addressed by its global index,
/// so slabs are independent); rounded to what its element type holds
/// ([`program::wire::round_to`]).
pub(crate) fn fill_host(
    syn: &program::Synthetic,
    info: &program::TensorInfo,
    seed: u64,
    region: &[(i64, i64)],
) -> Result<Vec<f32>, ExecError> {
    let mut v = match &info.value {
        Some(value) => value_region(value, info, region)?,
        None => synthetic(syn, &info.shape, seed, region),
    };
    program::wire::round_to(info.dtype, &mut v);
    Ok(v)
}

/// `region` of the known value of `info` (row-major over the whole tensor),
/// as f32.
///
/// Errors: [`ExecError::Invalid`] for a value whose length is not the
/// tensor's element count, or a region outside the tensor (an edited
/// program file).
fn value_region(
    value: &[f64],
    info: &program::TensorInfo,
    region: &[(i64, i64)],
) -> Result<Vec<f32>, ExecError> {
    let all = Region::whole(&info.shape);
    let bad = |why: String| ExecError::Invalid(format!("tensor `{}`: {why}", info.name));
    if value.len() as u64 != all.volume() {
        return Err(bad(format!(
            "{} values for shape {:?}",
            value.len(),
            info.shape
        )));
    }
    let whole: Vec<f32> = value.iter().map(|&x| x as f32).collect();
    let mut out = vec![0.0; volume(region) as usize];
    copy_region(&whole, &all.0, &mut out, region, region, None)
        .map_err(|e| bad(format!("tile {region:?}: {e}")))?;
    Ok(out)
}

/// The synthetic fill of `region` (see [`fill_host`]).
fn synthetic(
    syn: &program::Synthetic,
    shape: &[usize],
    seed: u64,
    region: &[(i64, i64)],
) -> Vec<f32> {
    let one = |r: &[(i64, i64)]| -> Vec<f32> {
        tdl::fill::fill_region(syn.fill, shape, seed, syn.offset, r)
            .into_iter()
            .map(|x| x as f32)
            .collect()
    };
    let Some(&(lo, hi)) = region.first() else {
        return one(region);
    };
    let per: u64 = region[1..]
        .iter()
        .map(|&(l, h)| (h - l).max(0) as u64)
        .product();
    // Slabs of at least ~64K elements.
    let rows = ((1u64 << 16) / per.max(1)).max(1) as i64;
    if hi - lo <= rows {
        return one(region);
    }
    let slabs: Vec<Vec<f32>> = (lo..hi)
        .step_by(rows as usize)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|a| {
            let mut r = region.to_vec();
            r[0] = (a, (a + rows).min(hi));
            one(&r)
        })
        .collect();
    slabs.concat()
}

/// Per instruction, for an `Alloc`: whether the buffer's next use is as an
/// output of a `Compute` that does not also read it (one backward pass).
fn overwritten_allocs(instrs: &[Instr]) -> Vec<bool> {
    let mut next_overwrites: HashMap<u32, bool> = HashMap::new();
    let mut out = vec![false; instrs.len()];
    for (k, ins) in instrs.iter().enumerate().rev() {
        match ins {
            Instr::Alloc { buf, .. } => {
                out[k] = next_overwrites.remove(buf).unwrap_or(false);
            }
            Instr::Compute {
                inputs, outputs, ..
            } => {
                for b in outputs {
                    next_overwrites.insert(*b, !inputs.contains(b));
                }
                for b in inputs {
                    next_overwrites.insert(*b, false);
                }
            }
            other => {
                for b in other.buffers() {
                    next_overwrites.insert(b, false);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use program::{Init, KernelMode, OpId};

    fn compute(inputs: Vec<u32>, outputs: Vec<u32>) -> Instr {
        Instr::Compute {
            op: OpId(0),
            spec: 0,
            attrs: Default::default(),
            shapes: vec![],
            var_box: vec![],
            inputs,
            outputs,
            mode: KernelMode::Local,
        }
    }

    #[test]
    fn only_an_allocation_first_written_whole_by_a_compute_skips_zeroing() {
        let alloc = |buf| Instr::Alloc {
            buf,
            init: Init::Zero,
        };
        let instrs = vec![
            alloc(0),
            alloc(1),
            alloc(2),
            alloc(3),
            // 0: read first (a zero operand); 1: written by the compute.
            compute(vec![0], vec![1]),
            // 2: read and written by one compute (accumulates).
            compute(vec![2], vec![2]),
            // 3: a copy lands in it first (the rest must stay zero).
            Instr::Copy {
                src: 1,
                dst: 3,
                region: Region(vec![(0, 1)]),
                reduce: None,
            },
            compute(vec![1], vec![3]),
            Instr::Free { buf: 1 },
            // 1 again: its next use after this allocation is an output.
            alloc(1),
            compute(vec![3], vec![1]),
        ];
        let got = overwritten_allocs(&instrs);
        let allocs: Vec<bool> = instrs
            .iter()
            .zip(&got)
            .filter(|(i, _)| matches!(i, Instr::Alloc { .. }))
            .map(|(_, &o)| o)
            .collect();
        assert_eq!(allocs, [false, true, false, false, true]);
    }
}
