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

use std::time::Instant;

use interval::cache::StrategyCache;
use tdl::Library;

use super::coarsen::{coarsen, Cluster};
use super::cost::CostModel;
use super::level::{Decisions, LayoutRule, LevelInput};
use super::memory::{per_worker, WorkerMemory};
use super::model::{Model, ModelError};
use super::searches::Candidate;
pub use super::searches::SearchKind;
use super::topology::{price, LinkReport, Topology, TopologyError};
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
    /// Memory of one device (bytes). CriticalDP keeps only candidate plans
    /// whose largest worker fits it; `None`: no limit.
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
/// limit is given; the search's own plans when none fits). An alternative
/// marked `only_if_fits` (CriticalDP's whole-model data parallelism) is kept
/// only when it fits.
pub fn plan_with(
    graph: &Graph,
    lib: &Library,
    cache: &StrategyCache,
    workers: usize,
    search: SearchKind,
    opts: PlanOptions,
) -> Result<Planned, PlanError> {
    if workers == 0 {
        return Err(PlanError::NoWorkers);
    }
    if let Some(t) = &opts.topology {
        t.check_workers(workers)?;
    }
    let start = Instant::now();
    let model = Model::new(graph, lib, cache)?;
    let clusters = ordered_clusters(graph, &model);
    let candidates = search.0.candidates(workers, &opts);
    let fits = |p: &Planned| {
        opts.device_memory
            .is_none_or(|cap| p.memory.iter().all(|m| m.total() <= cap))
    };
    // (fits, plan): a fitting plan beats any that does not; then fewer bytes.
    let mut best: Option<(bool, Planned)> = None;
    let mut others: Vec<(String, u64, u64)> = Vec::new();
    let max_mem = |p: &Planned| p.memory.iter().map(|m| m.total()).max().unwrap_or(0);
    let mut solved = Prefixes::new();
    for cand in candidates {
        let only_if_fits = cand.only_if_fits;
        let label = cand.label.clone();
        let mut p = plan_levels(
            graph,
            &model,
            &clusters,
            cand,
            search,
            opts.topology,
            &mut solved,
        )?;
        p.choice = if let Some(label) = label {
            label
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
        let f = fits(&p);
        let summary = (p.choice.clone(), p.comm_bytes, max_mem(&p));
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
                others.push((old.choice.clone(), old.comm_bytes, max_mem(&old)));
            }
        } else {
            others.push(summary);
        }
    }
    let (_, mut best) = best.expect("at least one candidate");
    best.runner_up = others.into_iter().min_by_key(|o| o.1);
    best.plan_seconds = start.elapsed().as_secs_f64();
    Ok(best)
}

/// Outer levels an earlier candidate of the same [`plan_with`] call already
/// solved: their factors and layout rules, and the decisions, level reports
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
    graph: &Graph,
    model: &Model,
    clusters: &[Cluster],
    cand: Candidate,
    search: SearchKind,
    topology: Option<Topology>,
    solved: &mut Prefixes,
) -> Result<Planned, PlanError> {
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
    let known = solved
        .iter()
        .filter(|(f, r, ..)| factors.starts_with(f) && rules.starts_with(r))
        .max_by_key(|(f, ..)| f.len());
    let first = match known {
        Some((f, _, d, l, c)) => {
            (decisions, levels, coarse) = (d.clone(), l.clone(), c.clone());
            f.len()
        }
        None => 0,
    };
    for (level, &factor) in factors.iter().enumerate().skip(first) {
        input.rule = rules[level];
        let lp = input.build(&decisions, level);
        let result = search
            .0
            .solve(&lp.problem)
            .map_err(|source| PlanError::Search {
                level,
                factor,
                source,
            })?;
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
            exact_cost(graph, model, &factors[..=level], &decisions).0 as f64
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
        solved.push((
            factors[..=level].to_vec(),
            rules[..=level].to_vec(),
            decisions.clone(),
            levels.clone(),
            coarse.clone(),
        ));
    }
    let (comm_bytes, op_comm_bytes) = exact_cost(graph, model, &factors, &decisions);
    let memory = per_worker(graph, &decisions.tensors, &factors);
    let links = topology.map(|t| price(graph, model, &factors, &decisions, &t));
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
    let cm = CostModel::new(graph, model, factors);
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
