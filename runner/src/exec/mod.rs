//! The executor: runs per-worker [`program::Program`]s for N training steps,
//! one thread per rank, each with its own [`Backend`] and communicator
//! ([`Collectives`] on that backend's buffers) (Tofu §5). [`run_programs`]
//! runs on [`CpuBackend`]s and a [`LocalCommunicator`] clique;
//! [`run_programs_on`] on any backend × communicator pairs. Each rank is a
//! [`RankRunner`] (`rank.rs`), the per-rank API another schedule can drive
//! step by step (`set` values, `step`, `get` kept tiles).
//!
//! Takes the programs alone (they carry their specs, shapes and fills; no
//! graph, no operator library); gives per step its wall time, the bytes each
//! rank sent (from the communicator's counters), the time each rank spent
//! in exchanges, the peak bytes each rank's backend held, and the final
//! values of the kept tensors (loss, updated weights and state) assembled
//! from the ranks' tiles.
//!
//! Data: every leaf tile is allocated with its synthetic fill
//! ([`program::program::Synthetic`], generated for the tile alone: same
//! seed, same data, whatever the partition) unless a value is given. After a
//! step, the kept tile of an updated tensor (`w'`) becomes the tile of the
//! tensor it replaces (`w`) for the next step: in place when both tiles are
//! the same region (inside the [`RankRunner`]), else through a host-side
//! hand-off here (the kept tiles assembled on the host, the new tile
//! [`RankRunner::set`]; not counted as communication: it is a change of
//! layout between steps, not part of the plan's step).
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
use std::sync::{Barrier, Mutex};
use std::time::Instant;

use program::{Program, Region, TensorId};

use comm::{on_threads, Collectives, CommError, LocalCommunicator};

use crate::backend::{Backend, BackendError, CpuBackend};
use crate::given::Given;
use crate::region::{copy_region, slice};

mod collective;
mod exchange;
pub mod instance;
mod instr;
mod one_rank;
mod rank;

pub use one_rank::{run_rank_fed, RankReport};

pub(crate) use rank::fill_host;
pub use rank::{RankRunner, StepStats};

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
    /// Allocating (or filling) a tensor's tile failed: out of device
    /// memory, or the device's error.
    #[error("rank {rank}: allocating `{tensor}` ({bytes} bytes): {source}")]
    Alloc {
        /// The rank.
        rank: usize,
        /// The tensor whose tile was allocated.
        tensor: String,
        /// Bytes asked for.
        bytes: u64,
        /// The error (boxed: keeps `ExecError` small).
        source: Box<BackendError>,
    },
    /// A communication call failed (the [`CommError`] names the rank).
    #[error("{source}")]
    Comm {
        /// The rank.
        rank: usize,
        /// The error.
        source: CommError,
    },
    /// The programs are inconsistent, or a value does not fit its tensor.
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
    /// With `TOFU_PROFILE=1`: rank 0's seconds per operator spec, and per
    /// kind of other instruction (`(alloc)`, `(free)`, `(region copy)`,
    /// `(communication)`), largest first, over every step but the first
    /// when there are several (the first holds one-time start-up: first
    /// launches, library initialisation). Each instruction is synchronised,
    /// so the run is slower.
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

/// Run `steps` training steps of the programs (one per rank, in rank
/// order) on CPU threads (see the module doc).
///
/// Errors: [`ExecError`] naming the rank; the first failing rank's error.
pub fn run_programs(
    programs: &[Program],
    opts: RunOptions,
    progress: Option<&(dyn Fn(usize) + Sync)>,
) -> Result<RunReport, ExecError> {
    let ranks = LocalCommunicator::create(programs.len())
        .into_iter()
        .map(|c| (CpuBackend::new(), c))
        .collect();
    run_programs_on(programs, opts, progress, ranks)
}

/// Run `steps` training steps of the programs with one `(backend,
/// communicator)` pair per rank, in rank order (see the module doc).
///
/// Errors: [`ExecError`] naming the rank; the first failing rank's error;
/// [`ExecError::Invalid`] when there is not one pair per program.
pub fn run_programs_on<B, C>(
    programs: &[Program],
    opts: RunOptions,
    progress: Option<&(dyn Fn(usize) + Sync)>,
    ranks: Vec<(B, C)>,
) -> Result<RunReport, ExecError>
where
    B: Backend,
    C: Collectives<B::Buffer>,
{
    run_programs_given(programs, opts, progress, ranks, &Given::new())
}

/// Host copies of whole tensors, one per tensor that needs it.
type Store = HashMap<TensorId, Mutex<Vec<f32>>>;

/// Per-step values and observations of a run ([`run_programs_fed`]): what a
/// training loop gives each rank before a step (its tiles of the step's
/// batch) and reads back after it (the loss).
///
/// Called from every rank's thread; a rank is asked only about its own
/// program, so it reads only its own tiles (see [`program::Program::tile_region`]).
pub trait StepFeed: Sync {
    /// Values to set before step `step` (0-based) on the rank running
    /// `program`: `(tensor, region in global coordinates, row-major values)`,
    /// each region covering every tile of the tensor the rank allocates.
    ///
    /// Errors: a message (the data cannot be produced), which fails the run.
    fn feed(
        &self,
        step: usize,
        program: &Program,
    ) -> Result<Vec<(TensorId, Region, Vec<f32>)>, String>;

    /// Tensors whose kept tiles [`StepFeed::observe`] sees after step
    /// `step` (each one a download from the backend: the loss every step,
    /// the weights and optimizer state at a checkpoint).
    fn watched(&self, step: usize) -> Vec<TensorId>;

    /// A kept tile of a watched tensor on `rank` after step `step`
    /// (global region, row-major values).
    fn observe(&self, step: usize, rank: usize, tensor: TensorId, region: &Region, values: &[f32]);
}

/// The feed of a run whose inputs are fixed ([`run_programs_given`]): sets
/// nothing, watches nothing.
pub struct NoFeed;

impl StepFeed for NoFeed {
    fn feed(&self, _: usize, _: &Program) -> Result<Vec<(TensorId, Region, Vec<f32>)>, String> {
        Ok(Vec::new())
    }

    fn watched(&self, _: usize) -> Vec<TensorId> {
        Vec::new()
    }

    fn observe(&self, _: usize, _: usize, _: TensorId, _: &Region, _: &[f32]) {}
}

/// [`run_programs_on`] with `given` values for some leaf tensors (real
/// weights, a step's inputs; see [`crate::given`]) instead of their
/// synthetic fill.
///
/// Errors: as [`run_programs_on`]; [`ExecError::Invalid`] for a given value
/// whose length is not its tensor's element count.
pub fn run_programs_given<B, C>(
    programs: &[Program],
    opts: RunOptions,
    progress: Option<&(dyn Fn(usize) + Sync)>,
    ranks: Vec<(B, C)>,
    given: &Given,
) -> Result<RunReport, ExecError>
where
    B: Backend,
    C: Collectives<B::Buffer>,
{
    run_programs_fed(programs, opts, progress, ranks, given, &NoFeed)
}

/// [`run_programs_given`] with per-step values and observations (a training
/// loop's data, see [`StepFeed`]): before step `s` each rank sets the tiles
/// [`StepFeed::feed`] gives it; after the step each rank hands the kept tiles
/// of [`StepFeed::watched`] tensors to [`StepFeed::observe`].
///
/// Errors: as [`run_programs_given`]; [`ExecError::Invalid`] for a fed value
/// that does not fit its tensor, or the feed's own error.
pub fn run_programs_fed<B, C>(
    programs: &[Program],
    opts: RunOptions,
    progress: Option<&(dyn Fn(usize) + Sync)>,
    ranks: Vec<(B, C)>,
    given: &Given,
    feed: &dyn StepFeed,
) -> Result<RunReport, ExecError>
where
    B: Backend,
    C: Collectives<B::Buffer>,
{
    let world = programs.len();
    check_run(programs, opts, ranks.len(), given)?;
    let numel = |t: TensorId| numel_of(programs, t);
    let handed = handed_off(programs);
    let store: [Store; 2] = std::array::from_fn(|_| {
        handed
            .iter()
            .map(|&t| (t, Mutex::new(vec![0.0; numel(t)])))
            .collect()
    });
    let kept = kept_tensors(programs);
    let outputs: Store = kept
        .iter()
        .map(|&t| (t, Mutex::new(vec![0.0; numel(t)])))
        .collect();
    let barrier = Barrier::new(world);
    let profile = std::env::var("TOFU_PROFILE").as_deref() == Ok("1");
    let results = on_threads(
        ranks,
        |rank, (backend, comm)| -> Result<RankOut, ExecError> {
            let p = &programs[rank];
            let mut w = RankRunner::new(p, backend, comm, opts.seed)?;
            w.set_profile(profile);
            w.set_given(given)?;
            w.prefill();
            let mut times = Vec::new();
            let mut bytes = Vec::new();
            let mut comm_s = Vec::new();
            for step in 0..opts.steps {
                if step > 0 {
                    hand_off(&mut w, &store[(step - 1) % 2])?;
                }
                if step == 1 {
                    // The profile leaves out the first step's start-up.
                    w.set_profile(profile);
                }
                let t0 = Instant::now();
                let stats = w.fed_step(step, feed)?;
                times.push(t0.elapsed().as_secs_f64());
                bytes.push(stats.bytes_sent);
                comm_s.push(stats.comm_seconds);
                let last = step + 1 == opts.steps;
                for &b in &p.keep {
                    let t = p.buffers[b as usize].tensor;
                    let (into_out, into_store) = (last, store[step % 2].contains_key(&t));
                    if !into_out && !into_store {
                        continue;
                    }
                    let Some((region, host)) = w.get(t)? else {
                        continue;
                    };
                    let whole = Region::whole(tensor_shape(p, t)?);
                    for (on, s) in [(into_out, &outputs), (into_store, &store[step % 2])] {
                        if on {
                            let mut g = s[&t].lock().expect("no poisoned store");
                            copy_region(&host, &region.0, &mut g, &whole.0, &region.0, None)
                                .map_err(|source| ExecError::Backend { rank, source })?;
                        }
                    }
                }
                barrier.wait();
                if rank == 0 {
                    if let Some(f) = progress {
                        f(step + 1);
                    }
                }
            }
            Ok((times, bytes, comm_s, w.peak_bytes(), w.op_seconds()))
        },
    );
    let mut report = merge_ranks(results, opts.steps)?;
    report.outputs = kept
        .into_iter()
        .map(|t| (t, outputs[&t].lock().expect("no poisoned output").clone()))
        .collect();
    Ok(report)
}

/// What one rank's thread gives back: per step its seconds, bytes sent and
/// seconds in communication; its peak bytes; its per-op seconds.
type RankOut = (Vec<f64>, Vec<u64>, Vec<f64>, u64, Vec<(String, f64)>);

/// The checks before a run: one (backend, communicator) pair per program,
/// at least one rank and one step, and every given tensor whole.
fn check_run(
    programs: &[Program],
    opts: RunOptions,
    ranks: usize,
    given: &Given,
) -> Result<(), ExecError> {
    let world = programs.len();
    if ranks != world {
        return Err(ExecError::Invalid(format!(
            "{world} programs but {ranks} (backend, communicator) pairs"
        )));
    }
    if world == 0 || opts.steps == 0 {
        return Err(ExecError::Invalid(
            "nothing to run: no ranks or no steps".into(),
        ));
    }
    for (&t, v) in given {
        if let Some(info) = programs.iter().find_map(|p| p.tensor(t)) {
            let want = numel_of(programs, t);
            if v.len() != want {
                return Err(ExecError::Invalid(format!(
                    "`{}`: {} given values for {want} elements",
                    info.name,
                    v.len()
                )));
            }
        }
    }
    Ok(())
}

/// Elements of tensor `t` (global shape) as some program's table gives it;
/// 0 for a tensor no program names.
fn numel_of(programs: &[Program], t: TensorId) -> usize {
    programs
        .iter()
        .find_map(|p| p.tensor(t))
        .map_or(0, |i| i.shape.iter().product::<usize>())
}

/// Carries that need the host hand-off between steps (their regions differ
/// on some rank), sorted.
fn handed_off(programs: &[Program]) -> Vec<TensorId> {
    let mut handed: Vec<TensorId> = Vec::new();
    for p in programs {
        for c in &p.carries {
            let same = match (c.from_buf, c.to_buf) {
                (Some(f), Some(t)) => p.buffers[f as usize].region == p.buffers[t as usize].region,
                (_, None) => true,
                (None, Some(_)) => false,
            };
            if !same {
                handed.push(c.from);
            }
        }
    }
    handed.sort();
    handed.dedup();
    handed
}

/// The tensors some rank keeps past the step, sorted.
fn kept_tensors(programs: &[Program]) -> Vec<TensorId> {
    let mut k: Vec<TensorId> = programs
        .iter()
        .flat_map(|p| p.keep.iter().map(|&b| p.buffers[b as usize].tensor))
        .collect();
    k.sort();
    k.dedup();
    k
}

/// The ranks' results as one report (step time: the slowest rank's), or
/// the first error, preferring a root cause over a peer's "peer gone".
fn merge_ranks(
    results: Vec<std::thread::Result<Result<RankOut, ExecError>>>,
    steps: usize,
) -> Result<RunReport, ExecError> {
    let world = results.len();
    let mut report = RunReport {
        step_seconds: vec![0.0; steps],
        bytes_sent: vec![vec![0; world]; steps],
        comm_seconds: vec![vec![0.0; world]; steps],
        ..Default::default()
    };
    let mut first_err = None;
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok(Ok((times, bytes, comm_s, peak, ops))) => {
                if rank == 0 {
                    report.op_seconds = ops;
                }
                for s in 0..steps {
                    report.step_seconds[s] = report.step_seconds[s].max(times[s]);
                    report.bytes_sent[s][rank] = bytes[s];
                    report.comm_seconds[s][rank] = comm_s[s];
                }
                report.peak_bytes_per_rank.push(peak);
            }
            Ok(Err(e)) => {
                if first_err.is_none() || matches!(first_err, Some(ExecError::Comm { .. })) {
                    first_err = Some(e);
                }
            }
            Err(_) => first_err = first_err.or(Some(ExecError::Panic(rank))),
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// The global shape of `t` from `p`'s tensor table; a kept or carried
/// tensor missing there (a hand-edited program) is an error, not a panic.
fn tensor_shape(p: &Program, t: TensorId) -> Result<&[usize], ExecError> {
    p.tensor(t).map(|i| i.shape.as_slice()).ok_or_else(|| {
        ExecError::Invalid(format!(
            "rank {}: tensor {t:?} is kept or carried but missing from the program's tensor table",
            p.rank
        ))
    })
}

/// Before a step: the new tile of every carried tensor whose tile moved
/// between steps, from the host copy of the updated tensor (`store`).
fn hand_off<B: Backend, C: Collectives<B::Buffer>>(
    w: &mut RankRunner<'_, B, C>,
    store: &Store,
) -> Result<(), ExecError> {
    let p = w.program();
    for c in &p.carries {
        let (Some(to_buf), Some(all)) = (c.to_buf, store.get(&c.from)) else {
            continue;
        };
        let region = p.buffers[to_buf as usize].region.clone();
        let shape = tensor_shape(p, c.to)?;
        let host = {
            let g = all.lock().expect("no poisoned store");
            slice(&g, shape, &region.0).map_err(|source| ExecError::Backend {
                rank: p.rank,
                source,
            })?
        };
        w.set(c.to, &region, host)?;
    }
    Ok(())
}
