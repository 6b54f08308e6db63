//! The communication time of a plan on a cluster ([`super::cluster`]).
//!
//! Takes a [`Topology`] and a (partial) plan; gives the bytes and the
//! estimated seconds per link level that every operator's transfers cost
//! ([`LinkLoad`]), and a whole plan's [`LinkReport`]. With a topology the
//! searches minimise this estimate instead of bytes ([`super::level`]) and
//! the recursion's outer levels are the node levels ([`Topology::factors`]:
//! k = (prime factors of NODES) · (prime factors of GPUS), so the outermost
//! levels split the workers into groups of whole nodes and only they cross
//! the slow link).
//!
//! The estimate (seconds of one training step's communication):
//! * Links as [`super::cluster`] says: one per GPU and level, full duplex;
//!   a transfer inside a node uses the intra-node link of both ends, any
//!   other the inter-node link of both.
//! * One operator input or output is one communication phase: a level's time
//!   is the largest number of bytes any GPU sends or receives on that level
//!   divided by the level's bandwidth; the phase costs the sum over levels
//!   (no overlap between levels or with compute), and a plan the sum over
//!   phases. So the estimate is additive over operators, as the pairwise
//!   searches need.
//! * Transfers are [`super::transfer`]'s point-to-point pieces, except the
//!   reduction of a tensor replicated on every worker: codegen runs it as
//!   NCCL's ring collectives (`codegen::collectives`), so it is priced with
//!   the ring formulas of `comm::traffic` — rank r sends
//!   N − c_r (reduce-scatter) + N − c_{r+1} (all-gather) elements to rank
//!   r + 1, where c_r is rank r's block — whenever those move the same bytes
//!   as the pieces. A ring across nodes waits for its slowest edge.
//! * In a partial plan (the outer levels of k = p₀·…·p_{m−1}), worker v is the
//!   group of ranks [v·s, (v+1)·s), s = k / ∏ decided factors, and its
//!   bytes are spread over the group's s links: a transfer is intra-node when
//!   both groups lie inside one node.
//!
//! The cluster's types and default bandwidths are in [`super::cluster`].

/// Kept at their old paths (`plan::topology::Topology`, …).
pub use super::cluster::{Link, LinkLoad, LinkReport, Topology, TopologyError};
use super::cost::{CostMemo, CostModel};
use super::decisions::{Decisions, OpChoice};
use super::link_tally::Tally;
use super::model::Model;
use super::transfer::{Phase, Piece};
use crate::graph::{Graph, OpId};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether [`CostModel::input_load`] and [`CostModel::output_load`] add
/// every transfer piece by piece (the reference) instead of by fans
/// ([`super::link_loads`]); off unless a test turns it on.
static PIECEWISE: AtomicBool = AtomicBool::new(false);

/// Price link loads piece by piece (`true`) or by fans (`false`, the
/// default): both give the same loads, so the same plans; the piecewise
/// path is quadratic in the workers and kept as the reference that tests
/// compare the fast path with (issue 44). Process-wide.
#[doc(hidden)]
pub fn set_piecewise_loads(on: bool) {
    PIECEWISE.store(on, Ordering::Relaxed);
}

fn piecewise() -> bool {
    PIECEWISE.load(Ordering::Relaxed)
}

impl CostModel<'_> {
    /// `f()`, looked up in (and added to) the cost model's memo when it has
    /// one: the key is the pair's [`CostModel::key`] and the topology.
    fn load_memoized(
        &self,
        pair: (OpId, bool, usize),
        choices: &[OpChoice],
        splits: &[Option<u32>],
        topo: &Topology,
        f: impl FnOnce() -> LinkLoad,
    ) -> LinkLoad {
        let Some(memo) = self.memo() else {
            return f();
        };
        let mut key = self.key(pair, choices, splits);
        for w in [topo.intra_bytes_per_s, topo.inter_bytes_per_s] {
            key.extend([w as u32, (w >> 32) as u32]);
        }
        key.extend([topo.nodes as u32, topo.gpus_per_node as u32]);
        memo.load_or(key, f)
    }

    /// [`LinkLoad`] of fetching input `slot` of `op` (its `Input` transfers).
    pub fn input_load(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
        topo: &Topology,
    ) -> LinkLoad {
        self.load_memoized((op, true, slot), choices, splits, topo, || {
            if !piecewise() {
                return self.input_load_fans(op, slot, choices, splits, topo);
            }
            let t = self.graph.op(op).inputs[slot];
            let elem = self.graph.tensor(t).dtype.size_bytes();
            let mut m = Tally::new(topo, self.workers());
            self.input_pieces(op, slot, choices, splits, &mut |p| {
                m.add(p.src, p.dst, p.region.volume() * elem)
            });
            m.finish()
        })
    }

    /// [`LinkLoad`] of assembling output `slot` of `op` (its `Output` and
    /// `Gather` transfers; ring collectives for a tensor replicated on every
    /// worker, see the module doc).
    pub fn output_load(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
        topo: &Topology,
    ) -> LinkLoad {
        self.load_memoized((op, false, slot), choices, splits, topo, || {
            let t = self.graph.op(op).outputs[slot];
            let elem = self.graph.tensor(t).dtype.size_bytes();
            let workers = self.workers();
            let (pieces_load, volumes) = if piecewise() {
                let mut pieces: Vec<Piece> = Vec::new();
                self.output_pieces(op, slot, choices, splits, &mut |p| pieces.push(p));
                let volume = |phase: fn(&Phase) -> bool| -> u64 {
                    pieces
                        .iter()
                        .filter(|p| phase(&p.phase))
                        .map(|p| p.region.volume())
                        .sum()
                };
                let volumes = (
                    volume(|p| matches!(p, Phase::Output { .. })),
                    volume(|p| matches!(p, Phase::Gather { .. })),
                );
                let mut m = Tally::new(topo, workers);
                for p in &pieces {
                    m.add(p.src, p.dst, p.region.volume() * elem);
                }
                (m.finish(), volumes)
            } else {
                self.output_load_fans(op, slot, choices, splits, topo)
            };
            match self.ring(op, slot, choices, splits, volumes) {
                Some(ring) => {
                    let mut m = Tally::new(topo, workers);
                    for (r, sent) in ring.into_iter().enumerate() {
                        m.add(r, (r + 1) % workers, sent * elem);
                    }
                    m.finish()
                }
                None => pieces_load,
            }
        })
    }

    /// Elements each rank sends to the next in the ring collectives that
    /// replace the output's pieces (module doc; `(outs, gathers)`: the
    /// elements of its `Output` and `Gather` pieces), or `None` when the
    /// output is not replicated on every worker or the ring would move
    /// other bytes.
    fn ring(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
        (outs, gathers): (u64, u64),
    ) -> Option<Vec<u64>> {
        let shape = &self.graph.tensor(self.graph.op(op).outputs[slot]).shape;
        if shape.is_empty() || outs + gathers == 0 || splits.iter().any(Option::is_some) {
            return None;
        }
        let workers = self.workers();
        let n: u64 = shape.iter().map(|&d| d as u64).product();
        let blocks = self.staged_splits(op, slot, choices, shape, splits);
        let c: Vec<u64> = self
            .all_tiles(shape, &blocks)
            .iter()
            .map(|r| r.volume())
            .collect();
        let rs = |r: usize| if outs > 0 { n - c[r] } else { 0 };
        let ag = |r: usize| {
            if gathers > 0 {
                n - c[(r + 1) % workers]
            } else {
                0
            }
        };
        let ring: Vec<u64> = (0..workers).map(|r| rs(r) + ag(r)).collect();
        (ring.iter().sum::<u64>() == outs + gathers).then_some(ring)
    }
}

/// Price a whole plan (or its outer levels: `factors` are the decided levels,
/// outermost first) on `topo`: the [`LinkLoad`] of every operator's inputs
/// and outputs, summed.
pub fn price(
    graph: &Graph,
    model: &Model,
    factors: &[usize],
    d: &Decisions,
    topo: &Topology,
) -> LinkReport {
    price_memo(graph, model, factors, d, topo, None)
}

/// [`price`], looking pair loads up in `memo` when given.
pub(crate) fn price_memo(
    graph: &Graph,
    model: &Model,
    factors: &[usize],
    d: &Decisions,
    topo: &Topology,
    memo: Option<&CostMemo>,
) -> LinkReport {
    let cm = CostModel::with_memo(graph, model, factors, memo);
    let mut load = LinkLoad::default();
    for (i, op) in graph.ops().iter().enumerate() {
        let o = OpId(i as u32);
        let chs = &d.ops[i];
        for (j, t) in op.inputs.iter().enumerate() {
            load.add(&cm.input_load(o, j, chs, &d.tensors[t.index()], topo));
        }
        for (j, t) in op.outputs.iter().enumerate() {
            load.add(&cm.output_load(o, j, chs, &d.tensors[t.index()], topo));
        }
    }
    LinkReport {
        topology: *topo,
        load,
    }
}
