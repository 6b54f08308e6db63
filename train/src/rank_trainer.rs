//! One rank per process: the training loop of one rank of a [`Prepared`]
//! model on its backend, over a communicator that reaches the other
//! processes (`comm::TcpCommunicator` on the CPU, NCCL on CUDA, joined
//! through `tofu launch`'s rendezvous, [`crate::launched`]).
//!
//! Takes the prepared model (every process prepares the same programs: plan
//! and code generation are deterministic), this rank's communicator, the
//! data set and [`TrainOptions`]; runs only this rank's program, fed only
//! its own tiles of every batch; gives the losses this rank observed (the
//! ranks that keep the loss see it) and, on rank 0, the trained weights and
//! the held-out evaluation: after the last step every rank's kept tiles are
//! downloaded and all-gathered through the rendezvous (values only: every process knows every rank's kept regions
//! from the programs) and assembled on rank 0. Checkpoints: each process
//! writes its own shard, rank 0 commits after a barrier.

use std::sync::Mutex;

use codegen::Region;
use comm::Collectives;
use rendezvous::Session;
use runner::{run_rank_fed, Backend, Given, RunOptions};

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

/// Train rank `comm.rank()` of `prep` (see the module doc) on `backend`;
/// `on_step` is called after each step completes on this rank.
///
/// With `opts.checkpoint`, every rank writes its own shard after a
/// checkpoint step ([`checkpoint::write_shard`]), all pass a barrier of
/// the launcher's rendezvous `session`, and rank 0 commits the checkpoint.
/// The kept tiles are gathered through the same session.
///
/// Errors: [`TrainError::Model`] when the communicator's world size is not
/// the plan's; [`TrainError::Run`] when a step or the final gather fails (a
/// peer that died is named); a checkpoint that cannot be written.
pub fn train_rank<B, C>(
    prep: &Prepared,
    (train, test): (&dyn Samples, Option<&dyn Samples>),
    (backend, comm): (B, C),
    opts: &TrainOptions,
    session: &Mutex<Session>,
    on_step: &(dyn Fn(&StepLog) + Sync),
) -> Result<RankTrainReport, TrainError>
where
    B: Backend,
    C: Collectives<B::Buffer>,
{
    let (rank, world) = (comm.rank().0, comm.world_size());
    if world != prep.world() {
        return Err(TrainError::Model(format!(
            "the launcher started {world} processes for a plan of {} ranks: use --nproc-per-node {} (or plan for {world} workers)",
            prep.world(),
            prep.world()
        )));
    }
    let barrier = || -> Result<(), String> {
        let mut s = session
            .lock()
            .map_err(|_| "the rendezvous session was poisoned".to_string())?;
        s.barrier().map_err(|e| e.to_string())
    };
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
        // The step's time ends here, before its checkpoint.
        let log = clock.log(step, per_epoch, prep.batch, feed.loss(done - 1));
        if let Some(c) = capture.as_ref().filter(|c| c.checkpoint_due(step)) {
            if let Err(e) = checkpoint_rank(prep, c, (rank, world), opts.seed, step + 1, &barrier) {
                c.fail(format!("checkpoint after step {step}: {e}"));
            }
        }
        clock.resume();
        on_step(&log);
    };
    let run_opts = RunOptions {
        steps: run_steps,
        seed: opts.seed,
    };
    let program = &prep.programs.programs[rank];
    let (report, _comm) = run_rank_fed(
        program,
        backend,
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
    let tiles = gather_kept(prep, &report.kept, session, rank)?;
    let (weights, test) = match (rank, tiles) {
        (0, Some(tiles)) => {
            let w = checkpoint::assemble(&prep.graph, &prep.programs, &tiles)
                .map_err(TrainError::Data)?;
            let e = match test {
                Some(t) if !t.is_empty() => {
                    Some(prep.evaluate(&w, t, opts.eval_samples, &opts.exec)?)
                }
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

/// All-gather every rank's kept tiles of the carried tensors through the
/// rendezvous `session` (host values, whatever the backend): each rank
/// sends the values of its kept buffers in its program's `keep` order (zeros
/// for one it does not hold; little-endian f32), so every process decodes
/// every rank's part from the programs alone. Gives the tiles on rank 0,
/// `None` elsewhere.
fn gather_kept(
    prep: &Prepared,
    kept: &[(codegen::TensorId, Region, Vec<f32>)],
    session: &Mutex<Session>,
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
    let bytes: Vec<u8> = send.iter().flat_map(|v| v.to_le_bytes()).collect();
    let fail =
        |e: String| TrainError::Model(format!("rank {rank}: gathering the trained weights: {e}"));
    let all = session
        .lock()
        .map_err(|_| fail("the rendezvous session was poisoned".into()))?
        .all_gather_bytes(&bytes)
        .map_err(|e| fail(e.to_string()))?;
    let mut recv = Vec::with_capacity(counts.iter().sum());
    for (r, (b, &n)) in all.iter().zip(&counts).enumerate() {
        if b.len() != 4 * n {
            return Err(fail(format!(
                "rank {r} sent {} bytes for {n} values",
                b.len()
            )));
        }
        recv.extend(
            b.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
    }
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
