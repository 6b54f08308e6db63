//! A search's candidate plans for one graph and k, planned level by level
//! (Tofu §4.4).
//!
//! Takes the graph, its [`Model`], the coarsened clusters and the search's
//! [`Candidate`]s (factorisations of k and a layout rule per level); gives
//! one [`Planned`] per candidate ([`Candidates::plan_all`], optionally with
//! memory priced, [`super::budget`]) and the driver's pick among them
//! ([`choose`]). Candidates are planned in parallel and share what they
//! can: the outer levels another candidate already solved, the level
//! problems of earlier memory prices, and the exact pair costs per op kind
//! ([`CostMemo`]).

use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use rustc_hash::FxHashMap as HashMap;

use super::cluster::Topology;
use super::coarse::CoarseGraph;
use super::coarsen::{coarsen, Cluster};
use super::cost::{exact_cost_memo, CostMemo};
use super::decisions::{has_tensor_parallel_weights, Decisions, LayoutRule, OpChoice};
use super::level::{ClusterConfig, LevelInput, LevelProblem};
use super::memory::per_worker;
use super::memory_price::MemoryPrice;
use super::model::Model;
use super::options::PlanOptions;
use super::planned::{max_memory, LevelReport, MemoryFit, PlanError, Planned};
use super::searches::{Candidate, SearchKind};
use super::topology;
use crate::graph::Graph;
use crate::search::{SearchLimits, StopReason};

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
    /// The budgets of the level searches ([`PlanOptions::limits`]).
    limits: SearchLimits,
    /// Level problems built so far, by (candidate, level, outer decisions):
    /// a priced search whose outer levels decided as before reuses them.
    problems: ProblemMemo,
    /// Pair costs by op kind, shared by every level of every candidate.
    costs: CostMemo,
    /// The graph has weights Megatron-LM splits
    /// ([`has_tensor_parallel_weights`]).
    tensor_parallel: bool,
    /// Offer partial-sum layouts ([`PlanOptions::partial_sums`]).
    partial_sums: bool,
}

/// Level problems by (candidate index, level, the outer levels' decisions).
type ProblemMemo = Mutex<HashMap<(usize, usize, Decisions), Arc<LevelProblem>>>;

/// Most level problems [`Candidates`] keeps (it forgets them all past this).
const MEMO_LIMIT: usize = 64;

impl<'a> Candidates<'a> {
    /// The bound model back.
    pub fn into_model(self) -> Model {
        self.model
    }

    /// Coarsen the graph of its bound model `model`, and ask `search` for
    /// its candidates.
    ///
    /// Errors: k = 0.
    pub fn with_model(
        graph: &'a Graph,
        model: Model,
        workers: usize,
        search: SearchKind,
        opts: &PlanOptions,
    ) -> Result<Self, PlanError> {
        if workers == 0 {
            return Err(PlanError::NoWorkers);
        }
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
            limits: opts.limits,
            problems: Mutex::default(),
            costs: CostMemo::default(),
            tensor_parallel: has_tensor_parallel_weights(graph),
            partial_sums: opts.partial_sums,
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
        tensor_parallel: ctx.tensor_parallel,
        topology: topology.as_ref(),
        memo: Some(&ctx.costs),
        partial_sums: ctx.partial_sums,
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
            .solve(priced.as_ref().unwrap_or(&lp.problem), &ctx.limits)
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
        push_level(&mut decisions, &lp.configs, &result.assignment, level);
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
    Ok(finish(ctx, factors, decisions, levels, coarse))
}

/// Add level `level`'s decisions to `decisions`: each cluster node's chosen
/// configuration (`assignment[node]` indexes `configs[node]`); anything no
/// cluster decided (should not happen) stays replicated.
fn push_level(
    decisions: &mut Decisions,
    configs: &[Vec<ClusterConfig>],
    assignment: &[usize],
    level: usize,
) {
    for (node, &k) in assignment.iter().enumerate() {
        let cfg = &configs[node][k];
        for (o, ch) in &cfg.ops {
            decisions.ops[o.index()].push(*ch);
        }
        for (t, l) in &cfg.tensors {
            decisions.tensors[t.index()].push(*l);
        }
    }
    for d in decisions.ops.iter_mut().filter(|d| d.len() == level) {
        d.push(OpChoice::Replicate);
    }
    for d in decisions.tensors.iter_mut().filter(|d| d.len() == level) {
        d.push(None);
    }
}

/// The finished plan of every level's decisions: its exact bytes (total and
/// per operator), per-worker memory, link prices (with a topology) and the
/// stop reasons.
fn finish(
    ctx: &Candidates,
    factors: Vec<usize>,
    decisions: Decisions,
    levels: Vec<LevelReport>,
    coarse: CoarseGraph,
) -> Planned {
    let (graph, model, search, topology) = (ctx.graph, &ctx.model, ctx.search, ctx.topology);
    let (comm_bytes, op_comm_bytes) =
        exact_cost_memo(graph, model, &factors, &decisions, Some(&ctx.costs));
    let memory = per_worker(graph, &decisions.tensors, &factors);
    let links = topology
        .map(|t| topology::price_memo(graph, model, &factors, &decisions, &t, Some(&ctx.costs)));
    let stop_reason = StopReason::overall(levels.iter().map(|l| l.stop_reason));
    Planned {
        search,
        factors,
        decisions,
        comm_bytes,
        op_comm_bytes,
        memory,
        levels,
        stop_reason,
        index_saturation: model
            .ops
            .iter()
            .map(|o| o.strategies.saturation)
            .max()
            .unwrap_or_default(),
        plan_seconds: 0.0,
        coarse,
        choice: String::new(),
        runner_up: None,
        budget: None,
        links,
        fit: MemoryFit::Unlimited,
    }
}

/// A short description of a cluster configuration: its first tensor's split,
/// else its first operator's strategy.
fn describe(model: &Model, cfg: &ClusterConfig) -> String {
    if let Some((_, l)) = cfg.tensors.first() {
        return match l {
            Some(d) => format!("split dim {d}"),
            None => "replicated".to_string(),
        };
    }
    match cfg.ops.first() {
        Some((o, OpChoice::Strategy(s))) => model
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
