//! The recursive planner (Tofu §4.4) and the searches it can run.
//!
//! Takes a training graph, the spec library, k workers and a
//! [`SearchKind`] (one of [`super::searches::SEARCHES`]); gives a [`Planned`]: every tensor's split dim and every
//! operator's strategy per recursion level, the exact communication bytes per
//! training step (total and per operator), per-worker memory, and why the
//! search stopped. The search says which factorisations of k
//! (k = p₀·p₁·…, prime factors, largest first, unless it says otherwise) and
//! layout rules to try and how to solve a level. Each level builds a
//! pairwise problem over the coarsened graph ([`super::level`]) with the outer
//! levels fixed and solves it with the chosen search
//! (`candidates.rs`); the baselines of Tofu §6.3 run through the same
//! code path with restricted layouts or another solver. This module keeps
//! the public types, the choice among candidates and the exact cost of a
//! finished plan.

use std::time::Instant;

use interval::cache::StrategyCache;
use tdl::Library;

use super::budget::BudgetReport;
use super::candidates::{choose, Candidates};
use super::cost::{CostMemo, CostModel};
use super::level::Decisions;
use super::memory::WorkerMemory;
use super::model::{Model, ModelError};
pub use super::searches::SearchKind;
use super::topology::{LinkReport, Topology, TopologyError};
use crate::graph::{Graph, OpId};
use crate::search::{ProblemError, SearchLimits, StopReason};

/// Why planning failed.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// k = 0.
    #[error("--workers must be at least 1")]
    NoWorkers,
    /// The graph's operators do not fit their specs.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The topology does not fit the workers.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A level's search failed.
    #[error("level {level} ({factor} groups): {source}")]
    Search {
        /// Level index.
        level: usize,
        /// Its worker factor.
        factor: usize,
        /// The cause.
        source: ProblemError,
    },
}

/// Whether a plan fits the device memory (`--device-memory`): a plan that
/// does not is a result, the smallest the search found, not an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "fit")]
pub enum MemoryFit {
    /// No limit was given.
    Unlimited,
    /// Every worker's peak fits the limit.
    Fits {
        /// The limit (bytes per worker).
        device_memory: u64,
    },
    /// No plan the search found fits the limit; this plan is the one whose
    /// largest worker is the smallest (its memory report names the worst
    /// worker and tile).
    DoesNotFit {
        /// The limit (bytes per worker).
        device_memory: u64,
        /// This plan's largest worker (bytes), the smallest of any plan tried.
        smallest: u64,
    },
}

impl MemoryFit {
    /// Whether the plan exceeds the limit.
    pub fn does_not_fit(self) -> bool {
        matches!(self, MemoryFit::DoesNotFit { .. })
    }
}

/// Statistics of one recursion level.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LevelReport {
    /// Worker factor of the level.
    pub factor: usize,
    /// Nodes of the coarsened problem.
    pub nodes: usize,
    /// Edges of the coarsened problem.
    pub edges: usize,
    /// Exact communication (bytes per step) of the plan made of the levels
    /// so far (what the search minimised, unless a topology priced it in time).
    pub comm_bytes: f64,
    /// Why this level's search stopped.
    pub stop_reason: StopReason,
}

/// A finished plan (see the module doc).
#[derive(Clone, Debug)]
pub struct Planned {
    /// The search that made it.
    pub search: SearchKind,
    /// Worker factor per level (outermost first); their product is k.
    pub factors: Vec<usize>,
    /// Decisions per tensor and operator, per level.
    pub decisions: Decisions,
    /// Bytes sent by all workers together in one training step.
    pub comm_bytes: u64,
    /// Bytes per step attributed to each operator (its fetches and output
    /// assembly), indexed by op id.
    pub op_comm_bytes: Vec<u64>,
    /// Memory per worker.
    pub memory: Vec<WorkerMemory>,
    /// Per level.
    pub levels: Vec<LevelReport>,
    /// Why the search stopped ([`StopReason::overall`] of the levels): the
    /// first limit that stopped a level; else `optimal` only if every level
    /// was solved exactly.
    pub stop_reason: StopReason,
    /// Search time in seconds (model building and search; not graph construction).
    pub plan_seconds: f64,
    /// The coarsened graph of the first level, for pictures.
    pub coarse: CoarseGraph,
    /// Which of the search's candidate plans was kept, e.g. `recursion 2·2·2`,
    /// `one 8-way level` or `data parallelism` (see [`plan_with`]).
    pub choice: String,
    /// The best candidate that was not kept, for the summary: its
    /// [`Planned::choice`] label, bytes per step and largest worker's memory
    /// (bytes). `None` when the search had one candidate.
    pub runner_up: Option<(String, u64, u64)>,
    /// How `--device-memory` shaped the search (`None` without a limit):
    /// whether it bound and what it traded ([`super::budget`]).
    pub budget: Option<BudgetReport>,
    /// With [`PlanOptions::topology`]: bytes and estimated seconds per link
    /// level, what the search minimised ([`super::topology`]).
    pub links: Option<LinkReport>,
    /// Whether it fits [`PlanOptions::device_memory`]: with a limit, the
    /// search keeps a fitting plan when it finds one, else the smallest plan
    /// it found, marked [`MemoryFit::DoesNotFit`].
    pub fit: MemoryFit,
}

impl Planned {
    /// What candidates are compared by: estimated seconds of communication
    /// on the topology when there is one, else bytes per step.
    pub fn objective(&self) -> f64 {
        self.links
            .as_ref()
            .map_or(self.comm_bytes as f64, LinkReport::seconds)
    }
}

/// Options of [`plan_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// Memory of one device (bytes): every worker's peak (training state and
    /// live activations) must fit it. The search prices memory when the
    /// plan with the fewest bytes does not fit ([`super::budget`]); `None`:
    /// no limit.
    pub device_memory: Option<u64>,
    /// The Megatron baseline's tensor-parallel group size t (a divisor of
    /// k); `None`: every divisor is tried and the best kept.
    pub tensor_parallel: Option<usize>,
    /// The cluster: outer recursion levels across nodes, levels priced in
    /// estimated seconds instead of bytes ([`super::topology`]); `None`:
    /// bytes, levels from k's prime factors.
    pub topology: Option<Topology>,
    /// The budgets of each level's search (CriticalDP's refinement rounds,
    /// the ILP's time limit); a limit that stops a level is the plan's
    /// [`Planned::stop_reason`].
    pub limits: SearchLimits,
}

impl PlanOptions {
    /// The recursion levels of `workers` (outermost first): the topology's
    /// [`Topology::factors`], else k's prime factors, largest first.
    pub fn factors(&self, workers: usize) -> Vec<usize> {
        self.topology
            .map_or_else(|| super::tile::factorize(workers), |t| t.factors())
    }
}

/// The coarsened graph and the first level's decision per node (for `--dot`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CoarseGraph {
    /// Node names (clusters).
    pub names: Vec<String>,
    /// Number of operators and tensors per node.
    pub sizes: Vec<(usize, usize)>,
    /// The decision per node at the first level, e.g. `split dim 0` or `reduce k (Sum)`.
    pub labels: Vec<String>,
    /// Edges between nodes.
    pub edges: Vec<(usize, usize)>,
}

/// Plan `graph` for `workers` workers with `search` and no device-memory
/// limit: [`plan_with`] with the default [`PlanOptions`].
///
/// Errors: as [`plan_with`].
pub fn plan(
    graph: &Graph,
    lib: &Library,
    cache: &StrategyCache,
    workers: usize,
    search: SearchKind,
) -> Result<Planned, PlanError> {
    plan_with(graph, lib, cache, workers, search, PlanOptions::default())
}

/// Plan `graph` for `workers` workers with `search` (see the module doc).
///
/// Errors: k = 0; a topology without k GPUs; an operator whose spec is
/// missing or does not fit; a level whose problem has no feasible assignment.
///
/// The search names its candidate plans ([`super::searches::Search::candidates`]);
/// the driver builds each and keeps the one with the fewest bytes (with a
/// topology: the least estimated time, [`Planned::objective`]) among
/// those whose largest worker fits `opts.device_memory` (all of them when no
/// limit is given). An alternative marked `only_if_fits` (CriticalDP's
/// whole-model data parallelism) is kept only when it fits. When none fits,
/// the levels are searched again with memory priced
/// ([`super::budget::fit`]), and [`Planned::budget`] says what the limit
/// traded.
///
/// When no plan the search finds fits `opts.device_memory`, the result is
/// the plan with the smallest largest worker, its [`Planned::fit`]
/// [`MemoryFit::DoesNotFit`].
pub fn plan_with(
    graph: &Graph,
    lib: &Library,
    cache: &StrategyCache,
    workers: usize,
    search: SearchKind,
    opts: PlanOptions,
) -> Result<Planned, PlanError> {
    let start = Instant::now();
    let model = Model::new(graph, lib, cache)?;
    let (mut best, _) = plan_with_model(graph, model, workers, search, opts)?;
    best.plan_seconds = start.elapsed().as_secs_f64();
    Ok(best)
}

/// [`plan_with`] with the graph's bound model (bound once by the caller);
/// gives the model back for code generation.
///
/// Errors: as [`plan_with`].
pub fn plan_with_model(
    graph: &Graph,
    model: Model,
    workers: usize,
    search: SearchKind,
    opts: PlanOptions,
) -> Result<(Planned, Model), PlanError> {
    if let Some(t) = &opts.topology {
        t.check_workers(workers)?;
    }
    let start = Instant::now();
    let ctx = Candidates::with_model(graph, model, workers, search, &opts)?;
    let plans = ctx.plan_all(None)?;
    let free = plans
        .iter()
        .map(|b| &b.plan)
        .min_by_key(|p| p.comm_bytes)
        .map(|p| (p.choice.clone(), p.comm_bytes, max_memory(p)))
        .expect("at least one candidate");
    let mut best = choose(plans, opts.device_memory);
    if let Some(cap) = opts.device_memory {
        best = super::budget::fit(&ctx, best, free, cap)?;
    }
    best.plan_seconds = start.elapsed().as_secs_f64();
    Ok((best, ctx.into_model()))
}

/// The largest worker's memory of a plan (bytes).
pub fn max_memory(p: &Planned) -> u64 {
    p.memory.iter().map(|m| m.total()).max().unwrap_or(0)
}

/// Exact bytes per step of a full plan, total and per operator.
pub fn exact_cost(
    graph: &Graph,
    model: &Model,
    factors: &[usize],
    d: &Decisions,
) -> (u64, Vec<u64>) {
    exact_cost_memo(graph, model, factors, d, None)
}

/// [`exact_cost`], looking pair costs up in `memo` when given.
pub(crate) fn exact_cost_memo(
    graph: &Graph,
    model: &Model,
    factors: &[usize],
    d: &Decisions,
    memo: Option<&CostMemo>,
) -> (u64, Vec<u64>) {
    let cm = CostModel::with_memo(graph, model, factors, memo);
    let mut per_op = vec![0u64; graph.ops().len()];
    for (i, op) in graph.ops().iter().enumerate() {
        let o = OpId(i as u32);
        let chs = &d.ops[i];
        for (j, t) in op.inputs.iter().enumerate() {
            per_op[i] += cm.input_bytes(o, j, chs, &d.tensors[t.index()]);
        }
        for (j, t) in op.outputs.iter().enumerate() {
            per_op[i] += cm.output_bytes(o, j, chs, &d.tensors[t.index()]);
        }
    }
    (per_op.iter().sum(), per_op)
}
