//! One rank per process: the training loop of one rank of a [`Prepared`]
//! model, over a communicator that reaches the other processes
//! (`comm::TcpCommunicator` joined through `tofu launch`'s rendezvous).
//!
//! Takes the prepared model (every process prepares the same programs: plan
//! and code generation are deterministic), this rank's communicator, the
//! data set and [`TrainOptions`]; runs only this rank's program, fed only
//! its own tiles of every batch; gives the losses this rank observed (the
//! ranks that keep the loss see it) and, on rank 0, the trained weights and
//! the held-out evaluation: after the last step every rank's kept tiles are
//! all-gathered (values only: every process knows every rank's kept regions
//! from the programs) and assembled on rank 0. Checkpoints: each process
//! writes its own shard, rank 0 commits after a barrier.

use codegen::Region;
use comm::Collectives;
use runner::{run_rank_fed, CpuBackend, CpuBuffer, Given, RunOptions};

use crate::checkpoint::{self, Capture, Tile};
use crate::evaluate::Evaluation;
use crate::feed::BatchFeed;
use crate::prepare::Prepared;
use crate::samples::Samples;
use crate::trainer::{batches, StepClock, StepLog, TrainOptions};
use crate::TrainError;

/// What one rank's run gave.
#[derive(Clone, Debug, PartialEq)]
pub struct RankTrainReport {
    /// This rank.
    pub rank: usize,
    /// Ranks.
    pub world: usize,
    /// The loss of each step run, where this rank keeps it.
    pub losses: Vec<Option<f32>>,
    /// Rank 0: the trained weights (whole tensors by graph id).
    pub weights: Option<Given>,
    /// Rank 0: the held-out evaluation of the trained weights.
    pub test: Option<Evaluation>,
    /// Wall seconds of the training steps.
    pub seconds: f64,
}

/// Train rank `comm.rank()` of `prep` (see the module doc); `on_step` is
/// called after each step completes on this rank.
///
/// With `opts.checkpoint`, every rank writes its own shard after a
/// checkpoint step ([`checkpoint::write_shard`]), all pass `barrier` (the
/// launcher's rendezvous), and rank 0 commits the checkpoint.
///
/// Errors: [`TrainError::Model`] when the communicator's world size is not
/// the plan's; [`TrainError::Run`] when a step or the final gather fails (a
/// peer that died is named); a checkpoint that cannot be written.
pub fn train_rank<C>(
    prep: &Prepared,
    (train, test): (&dyn Samples, Option<&dyn Samples>),
    comm: C,
    opts: &TrainOptions,
    barrier: &(dyn Fn() -> Result<(), String> + Sync),
    on_step: &(dyn Fn(&StepLog) + Sync),
) -> Result<RankTrainReport, TrainError>
where
    C: Collectives<CpuBuffer> + Collectives<Vec<f32>>,
{
    let (rank, world) = (comm.rank().0, comm.world_size());
    if world != prep.world() {
        return Err(TrainError::Model(format!(
            "the launcher started {world} processes for a plan of {} ranks: use --nproc-per-node {} (or plan for {world} workers)",
            prep.world(),
            prep.world()
        )));
    }
    let order = batches(prep, train, opts.seed)?;
    let per_epoch = order.per_epoch();
    let run_steps = opts.steps.saturating_sub(opts.start);
    let capture = opts
        .checkpoint
        .clone()
        .map(|c| Capture::new(Some(c), 0, &prep.programs));
    let feed = BatchFeed::new(
        train,
        order,
        &prep.tensors,
        (opts.start, run_steps),
        capture.as_ref(),
    );
    let clock = StepClock::new();
    let progress = |done: usize| {
        let step = opts.start + done - 1;
        if let Some(c) = capture.as_ref().filter(|c| c.checkpoint_due(step)) {
            if let Err(e) = checkpoint_rank(prep, c, (rank, world), opts.seed, step + 1, barrier) {
                c.fail(format!("checkpoint after step {step}: {e}"));
            }
        }
        on_step(&clock.log(step, per_epoch, prep.batch, feed.loss(done - 1)));
    };
    let run_opts = RunOptions {
        steps: run_steps,
        seed: opts.seed,
    };
    let program = &prep.programs.programs[rank];
    let (report, mut comm) = run_rank_fed(
        program,
        CpuBackend::new(),
        comm,
        run_opts,
        Some(&progress),
        &opts.given,
        &feed,
    )
    .map_err(TrainError::Run)?;
    if let Some(e) = capture.as_ref().and_then(Capture::failed) {
        return Err(TrainError::Data(e));
    }
    let seconds = clock.elapsed();
    let tiles = gather_kept(prep, &report.kept, &mut comm, rank)?;
    let (weights, test) = match (rank, tiles) {
        (0, Some(tiles)) => {
            let w = checkpoint::assemble(&prep.graph, &prep.programs, &tiles)
                .map_err(TrainError::Data)?;
            let e = match test {
                Some(t) if !t.is_empty() => Some(prep.evaluate(&w, t, opts.eval_samples)?),
                _ => None,
            };
            let weights = w
                .into_iter()
                .filter(|(t, _)| prep.graph.tensor(*t).role == planner::graph::TensorRole::Weight)
                .collect();
            (Some(weights), e)
        }
        _ => (None, None),
    };
    Ok(RankTrainReport {
        rank,
        world,
        losses: feed.losses(),
        weights,
        test,
        seconds,
    })
}

/// This rank's part of the checkpoint after `step` steps: its shard, the
/// barrier, and on rank 0 the commit.
fn checkpoint_rank(
    prep: &Prepared,
    c: &Capture,
    (rank, world): (usize, usize),
    seed: u64,
    step: usize,
    barrier: &(dyn Fn() -> Result<(), String> + Sync),
) -> Result<(), String> {
    let dir = &c.checkpoint.as_ref().expect("due only with a directory").0;
    let tiles = c.take();
    let mine: Vec<&Tile> = tiles.iter().collect();
    checkpoint::write_shard(dir, &prep.graph, step, rank, &mine).map_err(|e| e.to_string())?;
    barrier()?;
    if rank == 0 {
        checkpoint::commit(dir, &prep.graph, seed, world, step).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// All-gather every rank's kept tiles of the carried tensors: each rank
/// sends the values of its kept buffers in its program's `keep` order (zeros
/// for one it does not hold), so every process decodes every rank's part
/// from the programs alone. Gives the tiles on rank 0, `None` elsewhere.
fn gather_kept<C: Collectives<Vec<f32>>>(
    prep: &Prepared,
    kept: &[(codegen::TensorId, Region, Vec<f32>)],
    comm: &mut C,
    rank: usize,
) -> Result<Option<Vec<Tile>>, TrainError> {
    let carried = checkpoint::carried(&prep.programs);
    let parts = |p: &codegen::Program| -> Vec<(codegen::TensorId, Region)> {
        p.keep
            .iter()
            .map(|&b| &p.buffers[b as usize])
            .filter(|b| carried.iter().any(|(from, _)| *from == b.tensor))
            .map(|b| (b.tensor, b.region.clone()))
            .collect()
    };
    let counts: Vec<usize> = prep
        .programs
        .programs
        .iter()
        .map(|p| parts(p).iter().map(|(_, r)| r.volume() as usize).sum())
        .collect();
    let mut send = Vec::with_capacity(counts[rank]);
    for (t, r) in parts(&prep.programs.programs[rank]) {
        match kept.iter().find(|(kt, kr, _)| *kt == t && *kr == r) {
            Some((_, _, v)) => send.extend_from_slice(v),
            None => send.resize(send.len() + r.volume() as usize, 0.0),
        }
    }
    let mut recv = vec![0.0; counts.iter().sum()];
    comm.all_gather(&send, &mut recv, &counts)
        .map_err(|source| TrainError::Run(runner::ExecError::Comm { rank, source }))?;
    if rank != 0 {
        return Ok(None);
    }
    let mut tiles = Vec::new();
    let mut at = 0;
    for (r, p) in prep.programs.programs.iter().enumerate() {
        for (t, region) in parts(p) {
            let n = region.volume() as usize;
            let to = carried
                .iter()
                .find(|(f, _)| *f == t)
                .map(|&(_, to)| to)
                .expect("filtered");
            tiles.push(Tile {
                rank: r,
                tensor: to,
                region,
                values: recv[at..at + n].to_vec(),
            });
            at += n;
        }
    }
    Ok(Some(tiles))
}
