//! One rank of a run in its own process ([`run_rank_fed`]): what each
//! process of `tofu launch` runs, over a communicator that reaches the
//! other processes (`comm::TcpCommunicator`, NCCL).
//!
//! Takes this rank's program, a backend, a communicator whose rank and world
//! size are the program's, the run options, given values and a
//! [`StepFeed`]; gives this rank's step times, bytes sent and peak memory,
//! and its kept tiles after the last step. Carried tiles that move between
//! steps (a hand-off through the host, which the threaded runner does with
//! every rank's tiles in one process) are refused here, naming the tensor.

use std::time::Instant;

use comm::Collectives;
use program::{Program, Region, TensorId};

use super::{ExecError, RankRunner, RunOptions, StepFeed};
use crate::backend::Backend;
use crate::given::Given;

/// What one rank's run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankReport {
    /// Wall time of each step (seconds).
    pub step_seconds: Vec<f64>,
    /// Bytes this rank sent, per step.
    pub bytes_sent: Vec<u64>,
    /// Peak bytes held by this rank's backend.
    pub peak_bytes: u64,
    /// This rank's kept tiles after the last step: (tensor, region, values).
    pub kept: Vec<(TensorId, Region, Vec<f32>)>,
}

/// Run `opts.steps` steps of `program` as its rank (see the module doc);
/// `progress(s)` is called after step `s` (1-based count) completes here.
/// Gives the report and the communicator back (for a gather after the run).
///
/// Errors: [`ExecError::Invalid`] for a carry whose tile moves between
/// steps or a communicator of another rank or world size; the rank's first
/// failing step's error.
pub fn run_rank_fed<B, C>(
    program: &Program,
    backend: B,
    comm: C,
    opts: RunOptions,
    progress: Option<&(dyn Fn(usize) + Sync)>,
    given: &Given,
    feed: &dyn StepFeed,
) -> Result<(RankReport, C), ExecError>
where
    B: Backend,
    C: Collectives<B::Buffer>,
{
    for c in &program.carries {
        let moves = match (c.from_buf, c.to_buf) {
            (Some(f), Some(t)) => {
                program.buffers[f as usize].region != program.buffers[t as usize].region
            }
            (None, Some(_)) => true,
            (_, None) => false,
        };
        if moves {
            let name = program.tensor(c.to).map_or("?", |i| i.name.as_str());
            return Err(ExecError::Invalid(format!(
                "rank {}: the tile of `{name}` moves between steps, which needs every rank's tiles in one process: run this plan without a launcher",
                program.rank
            )));
        }
    }
    let mut w = RankRunner::new(program, backend, comm, opts.seed)?;
    w.set_given(given)?;
    w.prefill();
    let mut report = RankReport::default();
    for step in 0..opts.steps {
        let t0 = Instant::now();
        let stats = w.fed_step(step, feed)?;
        report.step_seconds.push(t0.elapsed().as_secs_f64());
        report.bytes_sent.push(stats.bytes_sent);
        if let Some(f) = progress {
            f(step + 1);
        }
    }
    report.peak_bytes = w.peak_bytes();
    for &b in &program.keep {
        let t = program.buffers[b as usize].tensor;
        if let Some((region, values)) = w.get(t)? {
            report.kept.push((t, region, values));
        }
    }
    Ok((report, w.into_comm()))
}
