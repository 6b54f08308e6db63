//! The exact communication cost of a (partial) plan, per operator and tensor.
//!
//! Takes the first L levels of a plan's decisions (worker factors
//! p₀·…·p_{L-1}, each tensor's split dim per level or replication, each
//! operator's choice per level); gives the bytes moved per training step, by
//! all workers together, for one (operator, input or output) pair. Units:
//! bytes (elements × dtype size).
//!
//! Semantics (codegen realises exactly these transfers):
//! * A worker's share of an operator is the box of index-variable ranges left
//!   after cutting, level by level, the chosen strategy's split variables
//!   (Tofu §4.4). A tensor's tile on a worker is its box after cutting, level
//!   by level, its split dim (nothing at a replicated level).
//! * **Input fetch**: a worker receives every element its share reads that
//!   its tile of the input does not hold: Σ_w |need_w| − |need_w ∩ tile_w|.
//! * **Output to a split tensor**: the owner of a tile receives, for every
//!   distinct contribution (a distinct range of the output's reduction
//!   variables; one contribution when nothing reduced was cut), the elements
//!   of its tile that other workers computed; it reduces partials on arrival
//!   (reduce-scatter when the pattern is one).
//! * **Output to a replicated tensor**: the result is first reduced/moved
//!   into a virtual k-way split (along the dim the operator splits, else the
//!   largest dim) as above, then all-gathered: + (k−1)·N elements. This is
//!   ring all-reduce's 2(k−1)·N for full partials (data-parallel gradients).
//!   A tensor replicated at some levels and split at others whose partials
//!   are reduced across workers is staged the same way: split virtually at
//!   its replicated levels, reduced into those chunks, then all-gathered
//!   within each replica group (+ Σ_w |tile_w| − |chunk_w|): hybrid data
//!   parallelism's gradient all-reduce over the replicas of each shard.
//!   A replicated scalar is reduced on rank 0 ((R−1) elements for R distinct
//!   contributions) and sent to the k−1 others. An operator computed whole
//!   on every worker costs nothing.
//!
//! Byte counts are sums over the transfers of [`super::transfer`], which
//! codegen executes, so predictions and measurements agree by construction.

use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::rc::Rc;

use super::cluster::LinkLoad;
use super::decisions::Decisions;
/// Kept at its old path (`plan::cost::OpChoice`).
pub use super::decisions::OpChoice;
use super::model::Model;
use super::partial::{self, to_bytes};
use super::shards::Shards;
use super::tile::{by_level, digits, part, Region};
use crate::graph::{Graph, OpId};

/// Every worker's box of index-variable ranges.
type Boxes = Vec<Vec<(i64, i64)>>;
/// An operator and its choice per level.
type BoxKey = (OpId, Vec<OpChoice>);
/// A tensor shape and its splits per level.
type TileKey = (Vec<usize>, Vec<Option<u32>>);

/// Exact costs for the first `factors.len()` levels (see the module doc).
pub struct CostModel<'a> {
    pub(crate) graph: &'a Graph,
    pub(crate) model: &'a Model,
    pub(crate) factors: &'a [usize],
    workers: usize,
    /// Digits of every worker.
    pub(crate) digits: Vec<Vec<usize>>,
    /// Every worker's box, per (op, choices).
    boxes: RefCell<HashMap<BoxKey, Rc<Boxes>>>,
    /// Every worker's tile, per (shape, splits).
    tiles: RefCell<HashMap<TileKey, Rc<Vec<Region>>>>,
    /// Costs shared with other cost models of the same graph, by op kind.
    memo: Option<&'a CostMemo>,
}

/// Exact element counts of (operator kind, slot, factors, choices, splits),
/// shared by every [`CostModel`] of one planning call (every level, every
/// candidate, every memory price): operators of one
/// [kind](super::model::OpModel::kind) move the same elements under the
/// same decisions, so an unrolled RNN's time steps or a transformer's layers
/// are costed once. Thread-safe; memory grows with the distinct keys met.
/// Kinds are numbered per [`Model`], so a memo must only ever serve cost
/// models of one `Model` (one graph and library).
#[derive(Debug, Default)]
pub struct CostMemo {
    /// [`memo_key`] → input elements fetched, or output elements and whether staged.
    elems: Shards<(u64, bool)>,
    /// [`memo_key`] followed by the topology's words → bytes and seconds per
    /// link level ([`super::topology`]'s `input_load`/`output_load`).
    loads: Shards<LinkLoad>,
}

impl CostMemo {
    /// The element count under `key`, computed by `f` the first time.
    fn elems_or(&self, key: Vec<u32>, f: impl FnOnce() -> (u64, bool)) -> (u64, bool) {
        self.elems.get_or(key, f)
    }

    /// The link load under `key`, computed by `f` the first time.
    pub(crate) fn load_or(&self, key: Vec<u32>, f: impl FnOnce() -> LinkLoad) -> LinkLoad {
        self.loads.get_or(key, f)
    }
}

/// One word list naming an (op kind, input?, slot, factors, choices, splits)
/// cost: no two different decisions share a key.
pub(crate) fn memo_key(
    kind: u32,
    input: bool,
    slot: usize,
    factors: &[usize],
    choices: &[OpChoice],
    splits: &[Option<u32>],
) -> Vec<u32> {
    const NONE: u32 = u32::MAX;
    let mut k = Vec::with_capacity(4 + factors.len() + choices.len() + splits.len());
    k.extend([kind, u32::from(input), slot as u32, factors.len() as u32]);
    k.extend(factors.iter().map(|f| *f as u32));
    k.push(choices.len() as u32);
    k.extend(choices.iter().map(|c| match c {
        OpChoice::Strategy(s) => *s,
        OpChoice::Replicate => NONE,
        OpChoice::Linear(mask) => 0xFFFF_0000 | mask,
    }));
    k.extend(splits.iter().map(|s| match s {
        Some(super::decisions::PARTIAL) => NONE - 1,
        s => s.unwrap_or(NONE),
    }));
    k
}

impl<'a> CostModel<'a> {
    /// A cost model over `factors` (the levels decided so far, outermost first).
    pub fn new(graph: &'a Graph, model: &'a Model, factors: &'a [usize]) -> Self {
        let workers = factors.iter().product();
        CostModel {
            graph,
            model,
            factors,
            workers,
            digits: (0..workers).map(|w| digits(w, factors)).collect(),
            boxes: RefCell::default(),
            tiles: RefCell::default(),
            memo: None,
        }
    }

    /// The graph it costs.
    pub fn graph(&self) -> &'a Graph {
        self.graph
    }

    /// The graph's bound operators.
    pub fn model(&self) -> &'a Model {
        self.model
    }

    /// Worker factor per recursion level.
    pub fn factors(&self) -> &'a [usize] {
        self.factors
    }

    /// [`CostModel::new`] whose input and output costs (and link loads) are
    /// looked up in, and added to, `memo` when given (same results, computed
    /// once per op kind). `memo` must serve only cost models of this `model`
    /// (see [`CostMemo`]).
    pub fn with_memo(
        graph: &'a Graph,
        model: &'a Model,
        factors: &'a [usize],
        memo: Option<&'a CostMemo>,
    ) -> Self {
        CostModel {
            memo,
            ..CostModel::new(graph, model, factors)
        }
    }

    /// Every worker's box of `op` (cached).
    pub(crate) fn all_boxes(&self, op: OpId, choices: &[OpChoice]) -> Rc<Vec<Vec<(i64, i64)>>> {
        let key = (op, choices.to_vec());
        if let Some(b) = self.boxes.borrow().get(&key) {
            return b.clone();
        }
        // The boxes of `op_box`, each group's cut once per sub-group.
        let m = self.model.op(op);
        let boxes = by_level(m.access.var_ranges.clone(), self.factors, |r, l, f, i| {
            if let Some(OpChoice::Strategy(s)) = choices.get(l) {
                for sv in m
                    .strategies
                    .strategies
                    .get(*s as usize)
                    .iter()
                    .flat_map(|st| &st.splits)
                {
                    let v = &mut r[sv.var.0 as usize];
                    *v = part(*v, f, i);
                }
            }
        });
        let b = Rc::new(boxes);
        self.boxes.borrow_mut().insert(key, b.clone());
        b
    }

    /// Every worker's tile of a tensor (cached).
    pub(crate) fn all_tiles(&self, shape: &[usize], splits: &[Option<u32>]) -> Rc<Vec<Region>> {
        let key = (shape.to_vec(), splits.to_vec());
        if let Some(t) = self.tiles.borrow().get(&key) {
            return t.clone();
        }
        // The tiles of `tile`, each group's cut once per sub-group.
        let tiles = by_level(Region::whole(shape), self.factors, |r, l, f, i| {
            if let Some(range) = splits
                .get(l)
                .copied()
                .flatten()
                .and_then(|d| r.0.get_mut(d as usize))
            {
                *range = part(*range, f, i);
            }
        });
        let t = Rc::new(tiles);
        self.tiles.borrow_mut().insert(key, t.clone());
        t
    }

    /// Number of workers ∏ factors.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The box of index-variable ranges of `op` on the worker with `digits`.
    pub fn op_box(&self, op: OpId, choices: &[OpChoice], digits: &[usize]) -> Vec<(i64, i64)> {
        let m = self.model.op(op);
        let mut ranges = m.access.var_ranges.clone();
        for (l, c) in choices.iter().enumerate() {
            if let OpChoice::Strategy(s) = c {
                if let Some(st) = m.strategies.strategies.get(*s as usize) {
                    for sv in &st.splits {
                        let r = &mut ranges[sv.var.0 as usize];
                        *r = part(*r, self.factors[l], digits[l]);
                    }
                }
            }
        }
        ranges
    }

    /// The tile of a tensor of `shape` on the worker with `digits`.
    pub fn tile(
        shape: &[usize],
        splits: &[Option<u32>],
        factors: &[usize],
        digits: &[usize],
    ) -> Region {
        // Cut in place: the same box as `Region::split` level by level.
        let mut r = Region::whole(shape);
        for (l, s) in splits.iter().enumerate() {
            if let Some(d) = s {
                if let Some(range) = r.0.get_mut(*d as usize) {
                    *range = part(*range, factors[l], digits[l]);
                }
            }
        }
        r
    }

    fn dtype_bytes(&self, op: OpId, slot: usize, input: bool) -> u64 {
        let o = self.graph.op(op);
        let t = if input {
            o.inputs[slot]
        } else {
            o.outputs[slot]
        };
        self.graph.tensor(t).dtype.size_bytes()
    }

    /// Bytes to fetch input `slot` of `op`: the sum of its
    /// [transfers](super::transfer), in closed form: Σ_w |need_w| − |need_w ∩ tile_w|
    /// (the canonical owners' tiles partition the tensor).
    pub fn input_bytes(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
    ) -> u64 {
        if self.workers <= 1 {
            return 0;
        }
        if partial::involved(choices, splits) {
            let e = self.memoized((op, true, slot), choices, splits, || {
                (self.partial_input_elems(op, slot, choices, splits), false)
            });
            return to_bytes(e.0, self.dtype_bytes(op, slot, true));
        }
        if splits.iter().all(Option::is_none) {
            return 0;
        }
        let elems = self.memoized((op, true, slot), choices, splits, || {
            (self.input_elems(op, slot, choices, splits), false)
        });
        elems.0 * self.dtype_bytes(op, slot, true)
    }

    /// Elements of [`CostModel::input_bytes`] (some split level assumed).
    pub(crate) fn input_elems(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
    ) -> u64 {
        let o = self.graph.op(op);
        let shape = &self.graph.tensor(o.inputs[slot]).shape;
        let access = &self.model.op(op).access;
        let boxes = self.all_boxes(op, choices);
        let tiles = self.all_tiles(shape, splits);
        boxes
            .iter()
            .zip(tiles.iter())
            .map(|(b, tile)| {
                let need = access.input_region(slot, b);
                need.volume() - need.overlap(tile)
            })
            .sum()
    }

    /// Bytes to bring output `slot` of `op` into its tensor's layout: the sum
    /// of its [transfers](super::transfer), in closed form. Per output, each
    /// level cuts either an output coordinate or a reduction variable, so the
    /// boxes of one contribution cover the output disjointly and the owner of
    /// tile t receives R·|t| − |t ∩ own box| elements for R contributions.
    pub fn output_bytes(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
    ) -> u64 {
        to_bytes(
            self.output_elems(op, slot, choices, splits).0,
            self.dtype_bytes(op, slot, false),
        )
    }

    /// Elements of [`CostModel::output_bytes`], and whether the output is
    /// staged (reduced into chunks of [`CostModel::staged_splits`], then
    /// gathered): always for a tensor replicated at every level that needs
    /// assembling; for one replicated at some levels and split at others
    /// with several contributions, when that is strictly cheaper than
    /// reducing into every replica's tile directly.
    pub(crate) fn output_elems(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
    ) -> (u64, bool) {
        if self.workers <= 1 {
            return (0, false);
        }
        self.memoized((op, false, slot), choices, splits, || {
            if partial::involved(choices, splits) {
                (self.partial_output_elems(op, slot, choices, splits), false)
            } else {
                self.output_elems_uncached(op, slot, choices, splits)
            }
        })
    }

    /// The memo this model shares, if any.
    pub(crate) fn memo(&self) -> Option<&'a CostMemo> {
        self.memo
    }

    /// The memo key of a pair of this model (see [`memo_key`]).
    pub(crate) fn key(
        &self,
        (op, input, slot): (OpId, bool, usize),
        choices: &[OpChoice],
        splits: &[Option<u32>],
    ) -> Vec<u32> {
        memo_key(
            self.model.op(op).kind,
            input,
            slot,
            self.factors,
            choices,
            splits,
        )
    }

    /// `f()`, looked up in (and added to) the [`CostMemo`] when there is one.
    fn memoized(
        &self,
        pair: (OpId, bool, usize),
        choices: &[OpChoice],
        splits: &[Option<u32>],
        f: impl FnOnce() -> (u64, bool),
    ) -> (u64, bool) {
        match self.memo {
            Some(memo) => memo.elems_or(self.key(pair, choices, splits), f),
            None => f(),
        }
    }

    /// [`CostModel::output_elems`] computed (k > 1).
    fn output_elems_uncached(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
    ) -> (u64, bool) {
        let o = self.graph.op(op);
        let shape = &self.graph.tensor(o.outputs[slot]).shape;
        let access = &self.model.op(op).access;
        let out = &access.outputs[slot];
        let boxes = self.all_boxes(op, choices);
        let produced: Vec<Region> = boxes
            .iter()
            .map(|b| access.output_region(slot, b).0)
            .collect();
        let mut keys: Vec<Vec<(i64, i64)>> = boxes
            .iter()
            .map(|b| {
                out.reductions
                    .iter()
                    .map(|(v, _)| b[v.0 as usize])
                    .collect()
            })
            .collect();
        keys.sort();
        keys.dedup();
        let r = keys.len() as u64;
        let whole = Region::whole(shape);
        let assemble = |tiles: &[Region]| -> u64 {
            tiles
                .iter()
                .zip(&produced)
                .map(|(t, own)| r * t.volume() - t.overlap(own))
                .sum()
        };
        let all_replicated = splits.iter().all(Option::is_none);
        // Reduce into the staged chunks, then all-gather within each replica
        // group: every worker receives its tile minus its chunk. Only when
        // every worker's chunk lies inside its own tile (an outer virtual
        // split of a dim split again inside can cut across the tiles; then
        // the replica group's chunks do not tile its tile): None otherwise.
        let staged = || -> Option<u64> {
            let staged = self.staged_splits(op, slot, choices, shape, splits);
            let chunks = self.all_tiles(shape, &staged);
            let tiles = self.all_tiles(shape, splits);
            if tiles
                .iter()
                .zip(chunks.iter())
                .any(|(t, c)| t.overlap(c) != c.volume())
            {
                return None;
            }
            let gather: u64 = tiles
                .iter()
                .zip(chunks.iter())
                .map(|(t, c)| t.volume() - c.volume())
                .sum();
            Some(assemble(&chunks) + gather)
        };
        if !all_replicated {
            let direct = assemble(&self.all_tiles(shape, splits));
            if r > 1 && splits.iter().any(Option::is_none) {
                if let Some(s) = staged().filter(|s| *s < direct) {
                    return (s, true);
                }
            }
            (direct, false)
        } else if r == 1 && produced.iter().all(|p| *p == whole) {
            (0, false)
        } else if shape.is_empty() {
            ((r - 1) + (self.workers as u64 - 1), false)
        } else {
            // Replicated at every level: every tile is the whole tensor, so
            // every chunk lies inside it.
            (staged().unwrap_or(0), true)
        }
    }

    /// The split used to stage an output replicated at some level and
    /// reduced across workers: the tensor's own split dim where it has one,
    /// else [`CostModel::virtual_splits`]' axis (partials are reduced into
    /// these chunks, which are then all-gathered within each replica group).
    /// A virtual axis that the tensor splits at another level is replaced by
    /// the largest dim it splits nowhere (when one is at least the level's
    /// factor): chunks of a dim split again at another level would cut
    /// across the replica group's tile, and the reduction would fall back to
    /// every owner gathering every partial (twice a ring all-reduce's bytes
    /// for a hybrid data-parallel gradient, e.g. a row-split weight under
    /// data parallelism).
    pub(crate) fn staged_splits(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        shape: &[usize],
        splits: &[Option<u32>],
    ) -> Vec<Option<u32>> {
        let own: Vec<u32> = splits.iter().flatten().copied().collect();
        let free = (0..shape.len() as u32)
            .filter(|d| !own.contains(d))
            .max_by_key(|&d| (shape[d as usize], u32::MAX - d));
        self.virtual_splits(op, slot, choices, shape)
            .into_iter()
            .zip(splits)
            .zip(&self.factors[..splits.len().min(self.factors.len())])
            .map(|((v, s), &p)| match (s, v, free) {
                (Some(s), ..) => Some(*s),
                (None, Some(v), Some(f)) if own.contains(&v) && shape[f as usize] >= p => Some(f),
                (None, v, _) => v,
            })
            .collect()
    }

    /// The split used to stage a replicated output: per level, the output axis
    /// the op splits there, else the largest dim.
    pub(crate) fn virtual_splits(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        shape: &[usize],
    ) -> Vec<Option<u32>> {
        let m = self.model.op(op);
        let largest = (0..shape.len())
            .max_by_key(|&d| (shape[d], usize::MAX - d))
            .unwrap_or(0) as u32;
        choices
            .iter()
            .map(|c| {
                let axis = match c {
                    OpChoice::Strategy(s) => {
                        m.strategies.strategies.get(*s as usize).and_then(|st| {
                            st.splits
                                .iter()
                                .find(|sv| sv.output as usize == slot)
                                .and_then(|sv| match sv.kind {
                                    interval::strategy::SplitKind::Output { axis } => Some(axis),
                                    _ => None,
                                })
                        })
                    }
                    OpChoice::Replicate | OpChoice::Linear(_) => None,
                };
                Some(axis.unwrap_or(largest))
            })
            .collect()
    }
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
    exact_cost_in(&CostModel::with_memo(graph, model, factors, memo), d)
}

/// [`exact_cost`] from a cost model already built (its graph, bound
/// operators and factors are the plan's).
pub fn exact_cost_in(cm: &CostModel<'_>, d: &Decisions) -> (u64, Vec<u64>) {
    let graph = cm.graph;
    let mut per_op = vec![0u64; graph.ops().len()];
    for (i, op) in graph.ops().iter().enumerate() {
        let o = OpId(i as u32);
        let chs = &d.ops[i];
        for (j, t) in op.inputs.iter().enumerate() {
            per_op[i] = per_op[i].saturating_add(cm.input_bytes(o, j, chs, &d.tensors[t.index()]));
        }
        for (j, t) in op.outputs.iter().enumerate() {
            per_op[i] = per_op[i].saturating_add(cm.output_bytes(o, j, chs, &d.tensors[t.index()]));
        }
    }
    (
        per_op.iter().fold(0u64, |a, b| a.saturating_add(*b)),
        per_op,
    )
}
