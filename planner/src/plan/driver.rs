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
//! levels fixed and solves it with the chosen search; the baselines of Tofu
//! §6.3 run through the same code path with restricted layouts or another
//! solver.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rayon::prelude::*;
use rustc_hash::FxHashMap as HashMap;

use interval::cache::StrategyCache;
use tdl::Library;

use super::budget::{BudgetReport, MemoryPrice};
use super::coarsen::{coarsen, Cluster};
use super::cost::{CostMemo, CostModel};
use super::level::{Decisions, LayoutRule, LevelInput, LevelProblem};
use super::memory::{per_worker, WorkerMemory};
use super::model::{Model, ModelError};
use super::searches::Candidate;
pub use super::searches::SearchKind;
use super::topology::{self, LinkReport, Topology, TopologyError};
use crate::graph::{Graph, OpId};
use crate::search::{ProblemError, StopReason};

/// Why planning failed.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// k = 0.
    #[error("--workers must be at least 1")]
    NoWorkers,
    /// The graph's operators do not fit their specs.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// No plan the search found fits the device memory (`--device-memory`).
    #[error("no plan fits the device memory of {device_memory} bytes: the smallest peak found is {smallest} bytes per worker ({choice}); give more memory or more workers")]
    DoesNotFit {
        /// The limit (bytes per worker).
        device_memory: u64,
        /// The smallest largest-worker memory of any plan tried (bytes).
        smallest: u64,
        /// That plan's [`Planned::choice`].
        choice: String,
        /// That plan (for the summary: its memory report names the worst
        /// worker and tile).
        plan: Box<Planned>,
    },
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
    /// Why the search stopped: `optimal` only if every level was solved exactly.
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
/// Errors (besides those above): [`PlanError::DoesNotFit`] when no plan the
/// search finds fits `opts.device_memory`.
pub fn plan_with(
    graph: &Graph,
    lib: &Library,
    cache: &StrategyCache,
    workers: usize,
    search: SearchKind,
    opts: PlanOptions,
) -> Result<Planned, PlanError> {
    if let Some(t) = &opts.topology {
        t.check_workers(workers)?;
    }
    let start = Instant::now();
    let ctx = Candidates::new(graph, lib, cache, workers, search, &opts)?;
    let plans = ctx.plan_all(None)?;
    let free = plans
        .iter()
        .map(|b| &b.plan)
        .min_by_key(|p| p.comm_bytes)
        .map(|p| (p.choice.clone(), p.comm_bytes, max_memory(p)))
        .expect("at least one candidate");
    let mut best = choose(plans, opts.device_memory);
    if let Some(cap) = opts.device_memory {
        best = super::budget::fit(&ctx, best, free, cap).map_err(|e| match e {
            PlanError::DoesNotFit {
                device_memory,
                smallest,
                choice,
                mut plan,
            } => {
                plan.plan_seconds = start.elapsed().as_secs_f64();
                PlanError::DoesNotFit {
                    device_memory,
                    smallest,
                    choice,
                    plan,
                }
            }
            e => e,
        })?;
    }
    best.plan_seconds = start.elapsed().as_secs_f64();
    Ok(best)
}

/// The largest worker's memory of a plan (bytes).
pub fn max_memory(p: &Planned) -> u64 {
    p.memory.iter().map(|m| m.total()).max().unwrap_or(0)
}

/// One plan of [`Candidates::plan_all`]: kept only when it fits the device
/// memory when `only_if_fits` (see [`super::searches::Candidate`]).
pub(crate) struct Built {
    /// The candidate's flag.
    pub only_if_fits: bool,
    /// Its plan.
    pub plan: Planned,
}

/// A search's candidate plans for one graph and k, ready to be planned
/// (with or without a memory price).
pub(crate) struct Candidates<'a> {
    graph: &'a Graph,
    model: Model,
    clusters: Vec<Cluster>,
    candidates: Vec<Candidate>,
    search: SearchKind,
    workers: usize,
    /// Prices levels in estimated seconds ([`PlanOptions::topology`]).
    topology: Option<Topology>,
    /// Level problems built so far, by (candidate, level, outer decisions):
    /// a priced search whose outer levels decided as before reuses them.
    problems: ProblemMemo,
    /// Pair costs by op kind, shared by every level of every candidate.
    costs: CostMemo,
}

/// Level problems by (candidate index, level, the outer levels' decisions).
type ProblemMemo = Mutex<HashMap<(usize, usize, Decisions), Arc<LevelProblem>>>;

/// Most level problems [`Candidates`] keeps (it forgets them all past this).
const MEMO_LIMIT: usize = 64;

impl<'a> Candidates<'a> {
    /// Build the model and the coarsened graph, and ask `search` for its candidates.
    ///
    /// Errors: k = 0; an operator whose spec is missing or does not fit.
    pub fn new(
        graph: &'a Graph,
        lib: &Library,
        cache: &StrategyCache,
        workers: usize,
        search: SearchKind,
        opts: &PlanOptions,
    ) -> Result<Self, PlanError> {
        if workers == 0 {
            return Err(PlanError::NoWorkers);
        }
        let model = Model::new(graph, lib, cache)?;
        let clusters = ordered_clusters(graph, &model);
        let candidates = search.0.candidates(workers, opts);
        Ok(Candidates {
            graph,
            model,
            clusters,
            candidates,
            search,
            workers,
            topology: opts.topology,
            problems: Mutex::default(),
            costs: CostMemo::default(),
        })
    }

    /// The graph.
    pub fn graph(&self) -> &Graph {
        self.graph
    }

    /// Number of candidate plans.
    pub fn len(&self) -> usize {
        self.candidates.len()
    }

    /// Plan every candidate, each level's problem priced by `price` when
    /// given ([`super::budget::MemoryPrice`]), and label each plan.
    ///
    /// Errors: a level whose problem has no feasible assignment.
    ///
    /// The candidates are planned in parallel (rayon); the plans do not
    /// depend on the order (a reused prefix is the one a candidate would
    /// have solved itself).
    pub fn plan_all(&self, price: Option<&MemoryPrice>) -> Result<Vec<Built>, PlanError> {
        let workers = self.workers;
        // Outer levels solved by another candidate (same price): reused.
        let solved = Mutex::new(Prefixes::new());
        let plan_one = |(ci, cand): (usize, &Candidate)| -> Result<Built, PlanError> {
            let mut p = plan_levels(self, ci, cand.clone(), price, &solved)?;
            p.choice = if let Some(label) = &cand.label {
                label.clone()
            } else if p.factors.len() > 1 {
                format!(
                    "recursion {}",
                    p.factors
                        .iter()
                        .map(|f| f.to_string())
                        .collect::<Vec<_>>()
                        .join("·")
                )
            } else {
                format!("one {workers}-way level")
            };
            Ok(Built {
                only_if_fits: cand.only_if_fits,
                plan: p,
            })
        };
        self.candidates
            .par_iter()
            .enumerate()
            .map(plan_one)
            .collect()
    }
}

/// Keep the plan with the fewest bytes among those whose largest worker fits
/// `cap` (all of them when `None`; every plan not marked `only_if_fits` when
/// none fits), with the best plan not kept as its runner-up.
pub(crate) fn choose(plans: Vec<Built>, cap: Option<u64>) -> Planned {
    let fits = |p: &Planned| cap.is_none_or(|c| max_memory(p) <= c);
    // (fits, plan): a fitting plan beats any that does not; then fewer bytes.
    let mut best: Option<(bool, Planned)> = None;
    let mut others: Vec<(String, u64, u64)> = Vec::new();
    for Built {
        only_if_fits,
        plan: p,
    } in plans
    {
        let f = fits(&p);
        let summary = (p.choice.clone(), p.comm_bytes, max_memory(&p));
        // An alternative (data parallelism) only replaces the search's own
        // plans when it fits.
        if only_if_fits && !f {
            others.push(summary);
            continue;
        }
        let better = match &best {
            None => true,
            Some((bf, b)) => (f && !bf) || (f == *bf && p.objective() < b.objective()),
        };
        if better {
            if let Some((_, old)) = best.replace((f, p)) {
                others.push((old.choice.clone(), old.comm_bytes, max_memory(&old)));
            }
        } else {
            others.push(summary);
        }
    }
    let (_, mut best) = best.expect("at least one candidate");
    best.runner_up = others.into_iter().min_by_key(|o| o.1);
    best
}

/// Outer levels another candidate of the same [`Candidates::plan_all`] call
/// already solved: their factors and layout rules, and the decisions, level reports
/// and coarse picture after them. A level's problem depends only on these
/// (and the search), so candidates sharing outer levels (CriticalDP's
/// hybrids share their data-parallel levels with whole-model data
/// parallelism) solve them once and get the same plans.
type Prefixes = Vec<(
    Vec<usize>,
    Vec<LayoutRule>,
    Decisions,
    Vec<LevelReport>,
    CoarseGraph,
)>;

/// Plan one candidate of `search` (its factorisation of k and layout rules),
/// starting after the longest prefix of its levels in `solved` and adding
/// the levels it solves there.
fn plan_levels(
    ctx: &Candidates,
    ci: usize,
    cand: Candidate,
    price: Option<&MemoryPrice>,
    solved: &Mutex<Prefixes>,
) -> Result<Planned, PlanError> {
    let (graph, model, clusters) = (ctx.graph, &ctx.model, &ctx.clusters[..]);
    let (search, topology, memo) = (ctx.search, ctx.topology, &ctx.problems);
    let Candidate { factors, rules, .. } = cand;
    let rules: Vec<LayoutRule> = (0..factors.len())
        .map(|l| rules.get(l).copied().unwrap_or(LayoutRule::Free))
        .collect();
    let mut input = LevelInput {
        graph,
        model,
        clusters,
        factors: &factors,
        rule: LayoutRule::Free,
        topology: topology.as_ref(),
        memo: Some(&ctx.costs),
    };
    let mut decisions = Decisions::empty(graph);
    let mut levels = Vec::new();
    let mut coarse = CoarseGraph {
        names: clusters.iter().map(|c| c.name.clone()).collect(),
        sizes: clusters
            .iter()
            .map(|c| (c.ops().count(), c.tensors().count()))
            .collect(),
        ..CoarseGraph::default()
    };
    let first = {
        let solved = solved.lock().unwrap_or_else(|e| e.into_inner());
        let known = solved
            .iter()
            .filter(|(f, r, ..)| factors.starts_with(f) && rules.starts_with(r))
            .max_by_key(|(f, ..)| f.len());
        match known {
            Some((f, _, d, l, c)) => {
                (decisions, levels, coarse) = (d.clone(), l.clone(), c.clone());
                f.len()
            }
            None => 0,
        }
    };
    for (level, &factor) in factors.iter().enumerate().skip(first) {
        input.rule = rules[level];
        let key = (ci, level, decisions.clone());
        let hit = memo.lock().ok().and_then(|m| m.get(&key).cloned());
        let lp = hit.unwrap_or_else(|| {
            let lp = Arc::new(input.build(&decisions, level));
            if let Ok(mut m) = memo.lock() {
                if m.len() >= MEMO_LIMIT {
                    m.clear();
                }
                m.insert(key, lp.clone());
            }
            lp
        });
        let priced = price.map(|p| p.apply(&input, &lp, &decisions, level));
        let mut result = search
            .0
            .solve(priced.as_ref().unwrap_or(&lp.problem))
            .map_err(|source| PlanError::Search {
                level,
                factor,
                source,
            })?;
        if priced.is_some() {
            result.cost = lp.problem.cost(&result.assignment);
        }
        if level == 0 {
            coarse.edges = lp.problem.edges.iter().map(|e| (e.from, e.to)).collect();
            coarse.labels = result
                .assignment
                .iter()
                .enumerate()
                .map(|(n, &k)| describe(model, &lp.configs[n][k]))
                .collect();
        }
        for (node, &k) in result.assignment.iter().enumerate() {
            let cfg = &lp.configs[node][k];
            for (o, ch) in &cfg.ops {
                decisions.ops[o.index()].push(*ch);
            }
            for (t, l) in &cfg.tensors {
                decisions.tensors[t.index()].push(*l);
            }
        }
        // Anything no cluster decided (should not happen) stays replicated.
        for d in decisions.ops.iter_mut().filter(|d| d.len() == level) {
            d.push(super::cost::OpChoice::Replicate);
        }
        for d in decisions.tensors.iter_mut().filter(|d| d.len() == level) {
            d.push(None);
        }
        let comm_bytes = if topology.is_some() {
            exact_cost_memo(
                graph,
                model,
                &factors[..=level],
                &decisions,
                Some(&ctx.costs),
            )
            .0 as f64
        } else {
            result.cost
        };
        levels.push(LevelReport {
            factor,
            nodes: lp.problem.nodes.len(),
            edges: lp.problem.edges.len(),
            comm_bytes,
            stop_reason: result.stop_reason,
        });
        solved.lock().unwrap_or_else(|e| e.into_inner()).push((
            factors[..=level].to_vec(),
            rules[..=level].to_vec(),
            decisions.clone(),
            levels.clone(),
            coarse.clone(),
        ));
    }
    let (comm_bytes, op_comm_bytes) =
        exact_cost_memo(graph, model, &factors, &decisions, Some(&ctx.costs));
    let memory = per_worker(graph, &decisions.tensors, &factors);
    let links = topology.map(|t| topology::price(graph, model, &factors, &decisions, &t));
    let stop_reason = if levels.iter().all(|l| l.stop_reason == StopReason::Optimal) {
        StopReason::Optimal
    } else {
        StopReason::Completed
    };
    Ok(Planned {
        search,
        factors,
        decisions,
        comm_bytes,
        op_comm_bytes,
        memory,
        levels,
        stop_reason,
        plan_seconds: 0.0,
        coarse,
        choice: String::new(),
        runner_up: None,
        budget: None,
        links,
    })
}

/// A short description of a cluster configuration: its first tensor's split,
/// else its first operator's strategy.
fn describe(model: &Model, cfg: &super::level::ClusterConfig) -> String {
    if let Some((_, l)) = cfg.tensors.first() {
        return match l {
            Some(d) => format!("split dim {d}"),
            None => "replicated".to_string(),
        };
    }
    match cfg.ops.first() {
        Some((o, super::cost::OpChoice::Strategy(s))) => model
            .op(*o)
            .strategies
            .strategies
            .get(*s as usize)
            .map_or_else(|| format!("#{s}"), |st| st.name.clone()),
        _ => "replicate".to_string(),
    }
}

/// Clusters in topological order: by the first position of their ops (a
/// tensor-only cluster sits just before its first consumer).
fn ordered_clusters(graph: &Graph, model: &Model) -> Vec<Cluster> {
    let mut pos = vec![0usize; graph.ops().len()];
    for (i, o) in graph.topo_order().into_iter().enumerate() {
        pos[o.index()] = i;
    }
    let mut clusters = coarsen(graph, model);
    let key = |c: &Cluster| -> (usize, usize) {
        let op_pos = c.ops().map(|o| 2 * pos[o.index()] + 1).min();
        let t_pos = c
            .tensors()
            .flat_map(|t| {
                graph
                    .producer(t)
                    .map(|p| 2 * pos[p.index()] + 1)
                    .into_iter()
                    .chain(graph.consumers(t).iter().map(|o| 2 * pos[o.index()]))
            })
            .min();
        (op_pos.into_iter().chain(t_pos).min().unwrap_or(0), 0)
    };
    clusters.sort_by_key(key);
    clusters
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
    let cm = match memo {
        Some(m) => CostModel::with_memo(graph, model, factors, m),
        None => CostModel::new(graph, model, factors),
    };
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
