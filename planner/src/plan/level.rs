//! One recursion level as a pairwise [`Problem`] (Tofu §4.4).
//!
//! Takes the clusters (coarsened graph), the decisions of the outer levels and
//! the worker factor of this level; gives a `Problem` whose nodes are the
//! clusters (in topological order), whose configurations are the clusters'
//! joint choices at this level (operator strategies, tensor split dims), and
//! whose costs are the exact bytes of the plan made of the outer levels plus
//! this one ([`CostModel`]; with a topology, their estimated nanoseconds,
//! [`super::topology`]). Costs between an operator and a tensor of the
//! same cluster are node costs; across clusters they are edge costs.

use rustc_hash::FxHashMap as HashMap;

use super::cluster::Topology;
use super::coarsen::Cluster;
use super::cost::{CostMemo, CostModel};
use super::decisions::{is_gradient_contribution, OpChoice};
use super::decisions::{is_partial, PARTIAL};
/// Kept at their old paths (`plan::level::Decisions`, …).
pub use super::decisions::{Decisions, LayoutRule, REPLICATE_MAX_BYTES};
use super::model::Model;
use super::partial::{self, INFEASIBLE};
use crate::graph::{Graph, OpId, TensorId};
use crate::search::{Edge, Node, Problem};

/// One cluster configuration: the choice of each op and layout of each tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterConfig {
    /// Choice per op of the cluster.
    pub ops: Vec<(OpId, OpChoice)>,
    /// Split dim (or replication) per tensor of the cluster.
    pub tensors: Vec<(TensorId, Option<u32>)>,
}

/// A level's problem and what each configuration means.
pub struct LevelProblem {
    /// The pairwise problem (node i = cluster i).
    pub problem: Problem,
    /// Per node, per configuration: the decisions.
    pub configs: Vec<Vec<ClusterConfig>>,
}

/// Inputs shared by every level.
pub struct LevelInput<'a> {
    /// The graph.
    pub graph: &'a Graph,
    /// Its per-op model.
    pub model: &'a Model,
    /// Clusters in topological order.
    pub clusters: &'a [Cluster],
    /// Factors of every level (outermost first).
    pub factors: &'a [usize],
    /// Layout restriction.
    pub rule: LayoutRule,
    /// The graph has weights Megatron-LM splits
    /// ([`super::decisions::has_tensor_parallel_weights`]): under
    /// [`LayoutRule::TensorParallel`], activations may be replicated and
    /// operator clusters run replicated.
    pub tensor_parallel: bool,
    /// With a topology, costs are estimated nanoseconds of communication
    /// ([`super::topology`]) instead of bytes.
    pub topology: Option<&'a Topology>,
    /// Costs shared across levels and candidates ([`CostMemo`]); `None`:
    /// every level costs its pairs afresh (same results).
    pub memo: Option<&'a CostMemo>,
    /// Offer partial-sum layouts and linear choices at levels of factor > 1
    /// ([`super::options::PlanOptions::partial_sums`], issue 41).
    pub partial_sums: bool,
}

impl LevelInput<'_> {
    /// Local extent of a strategy's split variables after the outer levels.
    fn strategy_extent(&self, op: OpId, s: usize, d: &Decisions, level: usize) -> i64 {
        let m = self.model.op(op);
        let Some(st) = m.strategies.strategies.get(s) else {
            return 0;
        };
        let mut ranges = m.access.var_ranges.clone();
        for (l, c) in d.ops[op.index()].iter().enumerate().take(level) {
            if let OpChoice::Strategy(x) = c {
                if let Some(o) = m.strategies.strategies.get(*x as usize) {
                    for sv in &o.splits {
                        let r = &mut ranges[sv.var.0 as usize];
                        r.1 =
                            r.0 + (r.1 - r.0 + self.factors[l] as i64 - 1) / self.factors[l] as i64;
                    }
                }
            }
        }
        st.splits
            .iter()
            .map(|sv| ranges[sv.var.0 as usize].1 - ranges[sv.var.0 as usize].0)
            .min()
            .unwrap_or(0)
    }

    /// Candidate choices of an op at `level`: strategies whose split extent
    /// covers every part, else any strategy with a non-empty extent, else
    /// replication.
    fn choices(&self, op: OpId, d: &Decisions, level: usize) -> Vec<OpChoice> {
        let p = self.factors[level] as i64;
        let n = self.model.op(op).strategies.strategies.len();
        let ext: Vec<i64> = (0..n)
            .map(|s| self.strategy_extent(op, s, d, level))
            .collect();
        let mut out: Vec<OpChoice> = (0..n)
            .filter(|&s| ext[s] >= p)
            .map(|s| OpChoice::Strategy(s as u32))
            .collect();
        if out.is_empty() {
            out = (0..n)
                .filter(|&s| ext[s] >= 1)
                .map(|s| OpChoice::Strategy(s as u32))
                .collect();
        }
        if out.is_empty() {
            out.push(OpChoice::Replicate);
        }
        out
    }

    /// The choice of an op that follows a layout: split output `o` along the
    /// tensor's dim (or replicate with a replicated tensor).
    fn follow(&self, op: OpId, layout: Option<u32>, d: &Decisions, level: usize) -> OpChoice {
        let Some(dim) = layout else {
            return OpChoice::Replicate;
        };
        let candidates = self.choices(op, d, level);
        let m = self.model.op(op);
        candidates
            .iter()
            .copied()
            .find(|c| match c {
                OpChoice::Strategy(s) => m.strategies.strategies[*s as usize].splits.iter().all(|sv| {
                    matches!(sv.kind, interval::strategy::SplitKind::Output { axis } if axis == dim)
                }),
                OpChoice::Replicate | OpChoice::Linear(_) => false,
            })
            .unwrap_or(OpChoice::Replicate)
    }

    /// Whether an op cluster may run replicated at a tensor-parallel level:
    /// the only weight-like tensors (weights, their gradients, optimizer
    /// state) its ops touch are vectors of at most [`REPLICATE_MAX_BYTES`]
    /// (norm scales and shifts, biases). Norms, activation functions,
    /// residual adds and attention's weightless ops qualify; matmuls and
    /// convolutions, whose compute and weights are what tensor parallelism
    /// divides, never run whole on every worker of a group, however small
    /// their weights (else a small-weight CNN's tensor-parallel plan would
    /// be the whole model on every worker).
    fn replicable(&self, c: &Cluster) -> bool {
        c.ops().all(|o| {
            let op = self.graph.op(o);
            op.inputs.iter().chain(&op.outputs).all(|t| {
                let tensor = self.graph.tensor(*t);
                !super::decisions::is_weight_like(self.graph, *t)
                    || (tensor.shape.len() <= 1 && tensor.bytes() <= REPLICATE_MAX_BYTES)
            })
        })
    }

    /// At a data-parallel level of a tensor-parallel hybrid, the extra
    /// configurations of a weight's cluster in which the contributions to a
    /// tied weight's gradient ([`is_gradient_contribution`]) are split along
    /// a dim and the sums of them run split, while the weight, its summed
    /// gradient and its optimizer state stay as `configs` lay them out
    /// (replicated): each contribution is reduce-scattered, and only the sum
    /// is all-gathered. Empty for any other cluster or level.
    fn split_contributions(
        &self,
        c: &Cluster,
        d: &Decisions,
        level: usize,
        configs: &[ClusterConfig],
    ) -> Vec<ClusterConfig> {
        let contribution = |t: &TensorId| is_gradient_contribution(self.graph, *t);
        let Some(first) = c.tensors().find(contribution) else {
            return Vec::new();
        };
        if self.rule != LayoutRule::DataParallel || !self.tensor_parallel {
            return Vec::new();
        }
        let Some(base) = configs
            .iter()
            .find(|cfg| cfg.tensors.iter().all(|(_, l)| l.is_none()))
        else {
            return Vec::new();
        };
        let dims = self
            .rule
            .layouts(self.graph, self.factors, first, d, level, true);
        dims.into_iter()
            .flatten()
            .map(|dim| {
                let sums = |o: &OpId| self.graph.op(*o).inputs.iter().any(contribution);
                let mut ops = base.ops.clone();
                for s in c.op_slots.iter().filter(|s| s.iter().all(sums)) {
                    let ch = self.follow(s[0], Some(dim), d, level);
                    for (o, choice) in ops.iter_mut() {
                        if s.contains(o) {
                            *choice = ch;
                        }
                    }
                }
                let tensors = base
                    .tensors
                    .iter()
                    .map(|&(t, l)| (t, if contribution(&t) { Some(dim) } else { l }))
                    .collect();
                ClusterConfig { ops, tensors }
            })
            .collect()
    }

    /// Whether partial sums are offered at `level` (the option, a factor
    /// above 1, costs in bytes).
    fn partial_here(&self, level: usize) -> bool {
        self.partial_sums && self.factors[level] > 1 && self.topology.is_none()
    }

    /// The partial-sum variant of a tensor cluster's configuration `cfg`
    /// (issue 41): its eligible tensors that no op outside the cluster reads
    /// (the contributions to a summed gradient and the partial sums of
    /// them) held [`PARTIAL`], and the ops reading them linear in them
    /// ([`partial::follow_partial`]; the producers of the partial sums
    /// cutting a `Sum` reduction). `None` when no tensor qualifies.
    fn partial_variant(
        &self,
        c: &Cluster,
        d: &Decisions,
        level: usize,
        cfg: &ClusterConfig,
    ) -> Option<ClusterConfig> {
        let inside: Vec<TensorId> = c.tensors().collect();
        let ops: Vec<OpId> = c.ops().collect();
        let g = self.graph;
        let linear_reader = |o: &OpId, t: TensorId| {
            let masks = partial::linear_choices(g, self.model, *o);
            let mut slots = g.op(*o).inputs.iter().enumerate().filter(|(_, u)| **u == t);
            slots.all(|(i, _)| {
                masks
                    .iter()
                    .any(|c| matches!(c, OpChoice::Linear(m) if m & (1 << i) != 0))
            })
        };
        let internal = |t: TensorId| {
            let readers = g.consumers(t);
            partial::eligible(g, t)
                && !readers.is_empty()
                && readers
                    .iter()
                    .all(|o| ops.contains(o) && linear_reader(o, t))
        };
        let tensors: Vec<(TensorId, Option<u32>)> = cfg
            .tensors
            .iter()
            .map(|&(t, l)| (t, if internal(t) { Some(PARTIAL) } else { l }))
            .collect();
        if tensors == cfg.tensors {
            return None;
        }
        let partial = |t: TensorId| {
            inside.contains(&t) && tensors.iter().any(|(u, x)| *u == t && is_partial(*x))
        };
        let ops = cfg
            .ops
            .iter()
            .map(|&(o, ch)| {
                let op = self.graph.op(o);
                if op.inputs.iter().chain(&op.outputs).any(|t| partial(*t)) {
                    let strategies = self.choices(o, d, level);
                    let choice = partial::follow_partial(g, self.model, o, partial, &strategies);
                    (o, choice.unwrap_or(ch))
                } else {
                    (o, ch)
                }
            })
            .collect();
        Some(ClusterConfig { ops, tensors })
    }

    /// The configuration of a tensor cluster whose first tensor is held
    /// [`PARTIAL`] (when it may be): its other eligible tensors too, the
    /// rest as the rule's first layout, its ops as
    /// [`partial::follow_partial`] says (else replicated).
    fn partial_root(&self, c: &Cluster, d: &Decisions, level: usize) -> Option<ClusterConfig> {
        let g = self.graph;
        let root = c.tensor_slots.first()?[0];
        if !partial::eligible(g, root) {
            return None;
        }
        let tensors: Vec<(TensorId, Option<u32>)> = c
            .tensor_slots
            .iter()
            .flat_map(|s| {
                let l = if partial::eligible(g, s[0]) {
                    Some(PARTIAL)
                } else {
                    let layouts =
                        self.rule
                            .layouts(g, self.factors, s[0], d, level, self.tensor_parallel);
                    layouts[0]
                };
                s.iter().map(move |t| (*t, l))
            })
            .collect();
        let partial = |t: TensorId| tensors.iter().any(|(u, x)| *u == t && is_partial(*x));
        let ops = c
            .op_slots
            .iter()
            .flat_map(|s| {
                let strategies = self.choices(s[0], d, level);
                let ch = partial::follow_partial(g, self.model, s[0], partial, &strategies)
                    .unwrap_or(OpChoice::Replicate);
                s.iter().map(move |o| (*o, ch))
            })
            .collect();
        Some(ClusterConfig { ops, tensors })
    }

    /// Every configuration of a cluster at `level`.
    pub fn configs(&self, c: &Cluster, d: &Decisions, level: usize) -> Vec<ClusterConfig> {
        let all_tensors = |layouts: &[Option<u32>]| -> Vec<(TensorId, Option<u32>)> {
            c.tensor_slots
                .iter()
                .zip(layouts)
                .flat_map(|(s, l)| s.iter().map(move |t| (*t, *l)))
                .collect()
        };
        if c.tied_axis || !c.tensor_slots.is_empty() {
            // Enumerate the first tensor slot's layouts; other tensor slots and
            // every op follow that dim.
            let root: Vec<Option<u32>> = match c.tensor_slots.first() {
                Some(slot) => self.rule.layouts(
                    self.graph,
                    self.factors,
                    slot[0],
                    d,
                    level,
                    self.tensor_parallel,
                ),
                None => vec![None],
            };
            let mut configs: Vec<ClusterConfig> = root
                .into_iter()
                .map(|l| {
                    let layouts: Vec<Option<u32>> = c
                        .tensor_slots
                        .iter()
                        .map(|s| {
                            let opts = self.rule.layouts(
                                self.graph,
                                self.factors,
                                s[0],
                                d,
                                level,
                                self.tensor_parallel,
                            );
                            if opts.contains(&l) {
                                l
                            } else {
                                opts[0]
                            }
                        })
                        .collect();
                    let ops = c.op_slots.iter().flat_map(|s| {
                        let ch = self.follow(s[0], l, d, level);
                        s.iter().map(move |o| (*o, ch))
                    });
                    ClusterConfig {
                        ops: ops.collect(),
                        tensors: all_tensors(&layouts),
                    }
                })
                .collect();
            if self.partial_here(level) {
                let variants = configs
                    .iter()
                    .filter_map(|cfg| self.partial_variant(c, d, level, cfg))
                    .collect::<Vec<_>>();
                configs.extend(variants);
                configs.extend(self.partial_root(c, d, level));
            }
            configs.extend(self.split_contributions(c, d, level, &configs));
            return configs;
        }
        // An op cluster: the product of its slots' choices.
        let per_slot: Vec<Vec<OpChoice>> = c
            .op_slots
            .iter()
            .map(|s| {
                let mut ch = self.choices(s[0], d, level);
                if self.partial_here(level) {
                    ch.extend(partial::linear_choices(self.graph, self.model, s[0]));
                }
                ch
            })
            .collect();
        let mut configs: Vec<Vec<OpChoice>> = vec![Vec::new()];
        for (i, opts) in per_slot.iter().enumerate() {
            // Bound the product: past 1024 configurations, later slots keep their first choice.
            let opts: &[OpChoice] = if configs.len() * opts.len() > 1024 && i > 0 {
                &opts[..1]
            } else {
                opts
            };
            configs = configs
                .into_iter()
                .flat_map(|p| opts.iter().map(move |o| [p.clone(), vec![*o]].concat()))
                .collect();
        }
        if self.rule == LayoutRule::TensorParallel
            && self.tensor_parallel
            && !per_slot.is_empty()
            && self.replicable(c)
        {
            // The whole cluster (a forward op and its backward ops) computed
            // on every worker of the group, on replicated inputs: what
            // Megatron does with LayerNorm, residual adds and dropout.
            let all = vec![OpChoice::Replicate; per_slot.len()];
            if !configs.contains(&all) {
                configs.push(all);
            }
        }
        configs
            .into_iter()
            .map(|choice| ClusterConfig {
                ops: c
                    .op_slots
                    .iter()
                    .zip(&choice)
                    .flat_map(|(s, ch)| s.iter().map(move |o| (*o, *ch)))
                    .collect(),
                tensors: Vec::new(),
            })
            .collect()
    }

    /// The costs of one slot's distinct (choice, layout) pairs, choices
    /// major: the outer levels' decisions followed by each pair, priced by
    /// `cm` (bytes, or with a topology nanoseconds).
    fn slot_table(&self, cm: &CostModel<'_>, s: &SlotTable<'_>) -> Vec<f64> {
        let (o, (is_input, j)) = (s.op, s.pair);
        let (chs, lys) = s.cells;
        let mut oc = s.prefix.0.to_vec();
        oc.push(OpChoice::Replicate);
        let mut sp = s.prefix.1.to_vec();
        sp.push(None);
        let last = oc.len() - 1;
        let mut table = Vec::with_capacity(chs.len() * lys.len());
        for &ch in chs {
            oc[last] = ch;
            for &l in lys {
                sp[last] = l;
                table.push(match (self.topology, is_input) {
                    (Some(t), true) => cm.input_load(o, j, &oc, &sp, t).nanos(),
                    (Some(t), false) => cm.output_load(o, j, &oc, &sp, t).nanos(),
                    (None, true) => as_cost(cm.input_bytes(o, j, &oc, &sp)),
                    (None, false) => as_cost(cm.output_bytes(o, j, &oc, &sp)),
                });
            }
        }
        table
    }

    /// Build the problem of `level` given the outer levels' decisions.
    pub fn build(&self, d: &Decisions, level: usize) -> LevelProblem {
        let graph = self.graph;
        let factors = &self.factors[..=level];
        let cm = CostModel::with_memo(graph, self.model, factors, self.memo);
        let configs: Vec<Vec<ClusterConfig>> = self
            .clusters
            .iter()
            .map(|c| self.configs(c, d, level))
            .collect();
        // Where each op / tensor lives, and its decision per configuration.
        let mut op_home: Vec<Option<(usize, Vec<OpChoice>)>> = vec![None; graph.ops().len()];
        let mut t_home: Vec<Option<(usize, Vec<Option<u32>>)>> = vec![None; graph.tensors().len()];
        for (ci, cfgs) in configs.iter().enumerate() {
            for (k, cfg) in cfgs.iter().enumerate() {
                for (o, ch) in &cfg.ops {
                    let e = op_home[o.index()]
                        .get_or_insert_with(|| (ci, vec![OpChoice::Replicate; cfgs.len()]));
                    e.1[k] = *ch;
                }
                for (t, l) in &cfg.tensors {
                    let e = t_home[t.index()].get_or_insert_with(|| (ci, vec![None; cfgs.len()]));
                    e.1[k] = *l;
                }
            }
        }
        let mut nodes: Vec<Node> = self
            .clusters
            .iter()
            .zip(&configs)
            .map(|(c, cfgs)| Node {
                name: c.name.clone(),
                costs: vec![0.0; cfgs.len()],
                weight: c.tensors().map(|t| graph.tensor(t).bytes() as f64).sum(),
            })
            .collect();
        let mut edges: HashMap<(usize, usize), Vec<f64>> = HashMap::default();
        let mut tables: HashMap<Vec<u32>, std::rc::Rc<Vec<f64>>> = HashMap::default();
        for (oi, op) in graph.ops().iter().enumerate() {
            let o = OpId(oi as u32);
            let Some((a, ochoices)) = &op_home[oi] else {
                continue;
            };
            let slots = op
                .inputs
                .iter()
                .enumerate()
                .map(|(j, t)| (true, j, *t))
                .chain(op.outputs.iter().enumerate().map(|(j, t)| (false, j, *t)));
            for (is_input, j, t) in slots {
                let Some((b, layouts)) = &t_home[t.index()] else {
                    continue;
                };
                // The few distinct choices and layouts of this slot; each
                // pair costed once, and the table shared by every slot of
                // an operator of the same kind under the same decisions.
                let (chs, ch_idx) = distinct(ochoices);
                let (lys, ly_idx) = distinct(layouts);
                let slot = SlotTable {
                    op: o,
                    pair: (is_input, j),
                    prefix: (&d.ops[oi][..level], &d.tensors[t.index()][..level]),
                    cells: (&chs, &lys),
                };
                let table = match self.memo {
                    Some(_) => tables
                        .entry(slot.key(self.model.op(o).kind))
                        .or_insert_with(|| std::rc::Rc::new(self.slot_table(&cm, &slot)))
                        .clone(),
                    None => std::rc::Rc::new(self.slot_table(&cm, &slot)),
                };
                let nly = lys.len();
                if a == b {
                    for (k, (ci, li)) in ch_idx.iter().zip(&ly_idx).enumerate() {
                        nodes[*a].costs[k] += table[ci * nly + li];
                    }
                } else {
                    let (lo, hi) = (*a.min(b), *a.max(b));
                    let (nl, nh) = (configs[lo].len(), configs[hi].len());
                    let m = edges.entry((lo, hi)).or_insert_with(|| vec![0.0; nl * nh]);
                    for (ka, ci) in ch_idx.iter().enumerate() {
                        let row = &table[ci * nly..(ci + 1) * nly];
                        for (kb, li) in ly_idx.iter().enumerate() {
                            let (x, y) = if *a == lo { (ka, kb) } else { (kb, ka) };
                            m[x * nh + y] += row[*li];
                        }
                    }
                }
            }
        }
        let mut edges: Vec<Edge> = edges
            .into_iter()
            .map(|((from, to), cost)| Edge {
                from,
                to,
                cost,
                weight: 0.0,
            })
            .collect();
        edges.sort_by_key(|e| (e.from, e.to));
        for n in &mut nodes {
            if n.costs.is_empty() {
                n.costs.push(0.0);
            }
        }
        LevelProblem {
            problem: Problem { nodes, edges },
            configs,
        }
    }
}

/// One operator slot of a level problem: what [`LevelInput::slot_table`]
/// prices.
struct SlotTable<'s> {
    op: OpId,
    /// (input?, slot index).
    pair: (bool, usize),
    /// The operator's choices and the tensor's splits at the outer levels.
    prefix: (&'s [OpChoice], &'s [Option<u32>]),
    /// The slot's distinct choices and layouts at this level.
    cells: (&'s [OpChoice], &'s [Option<u32>]),
}

impl SlotTable<'_> {
    /// The words naming this table among the slots of one level problem
    /// (one graph, one [`Model`], one list of factors): with a
    /// [`CostMemo`], operators of one `kind` cost the same under the same
    /// decisions (the memo's own key, [`super::cost::memo_key`]), so every
    /// slot with these words has this table.
    fn key(&self, kind: u32) -> Vec<u32> {
        const NONE: u32 = u32::MAX;
        // Strategies and masks are small: the top bit tells them apart, and
        // a partial layout is not replication.
        let choice = |c: &OpChoice| match c {
            OpChoice::Strategy(s) => *s,
            OpChoice::Replicate => NONE,
            OpChoice::Linear(mask) => 0x8000_0000 | mask,
        };
        let split = |s: &Option<u32>| match s {
            None => NONE,
            Some(PARTIAL) => NONE - 1,
            Some(d) => *d,
        };
        let (oc, sp) = self.prefix;
        let (chs, lys) = self.cells;
        let mut k = Vec::with_capacity(5 + oc.len() + sp.len() + chs.len() + lys.len());
        k.extend([kind, u32::from(self.pair.0), self.pair.1 as u32]);
        k.extend(oc.iter().map(choice));
        k.extend(sp.iter().map(split));
        k.push(chs.len() as u32);
        k.extend(chs.iter().map(choice));
        k.extend(lys.iter().map(split));
        k
    }
}

/// A pair's bytes as a problem cost ([`INFEASIBLE`] is `f64::INFINITY`).
fn as_cost(bytes: u64) -> f64 {
    if bytes == INFEASIBLE {
        f64::INFINITY
    } else {
        bytes as f64
    }
}

/// The distinct values of `xs` (in first-seen order) and each element's
/// index among them.
fn distinct<T: Copy + PartialEq>(xs: &[T]) -> (Vec<T>, Vec<usize>) {
    let mut vals: Vec<T> = Vec::new();
    let idx = xs
        .iter()
        .map(|x| match vals.iter().position(|v| v == x) {
            Some(i) => i,
            None => {
                vals.push(*x);
                vals.len() - 1
            }
        })
        .collect();
    (vals, idx)
}
