//! The point-to-point transfers of a plan: what codegen sends, and what the
//! cost model counts.
//!
//! Takes a graph, its model, the level factors and the decisions; gives every
//! [`Transfer`] of one training step: a region of a tensor sent from one rank
//! to another, in program order. [`CostModel::input_bytes`] and
//! [`CostModel::output_bytes`] are sums over exactly these transfers, so the
//! bytes a faithful executor sends equal the planner's prediction by
//! construction. The semantics are those of [`super::cost`]:
//!
//! * `Input`: before computing its share, a worker receives each piece of the
//!   input region it needs from the owner of that piece. An element owned by
//!   several workers (a tensor replicated at some level) is taken from the
//!   owner that agrees with the receiver at every replicated level, so each
//!   element is fetched once.
//! * `Output`: after computing, the owner of a tile receives every piece of
//!   it computed by others: one piece per distinct box of every distinct
//!   contribution (a contribution is a range of the reduction variables;
//!   duplicated computations are sent once, by the lowest rank). With
//!   `reduce` set, pieces are partial results the owner combines with the
//!   reducer into a tile it initialised with the reducer's identity and its
//!   own partial.
//! * `Gather`: a tensor replicated on every worker is first assembled into a
//!   virtual k-way split (the `Output` transfers target that split), then
//!   every worker receives every chunk it lacks. A tensor replicated at some
//!   levels and split at others, whose partials are reduced across workers,
//!   likewise when that is cheaper ([`CostModel::output_bytes`]): split virtually at its replicated levels, then gathered within
//!   each replica group. A scalar is reduced on rank 0 and sent to all others.

use serde::{Deserialize, Serialize};
use tdl::Reducer;

use super::cost::CostModel;
use super::decisions::{Decisions, OpChoice};
use super::model::Model;
use super::tile::{digits, Region};
use crate::graph::{Graph, OpId, TensorId};

pub use program::Phase;

/// One point-to-point transfer (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    /// The operator it belongs to.
    pub op: OpId,
    /// Before or after its compute.
    pub phase: Phase,
    /// The tensor a region of which moves.
    pub tensor: TensorId,
    /// Sending rank.
    pub src: usize,
    /// Receiving rank.
    pub dst: usize,
    /// The region, in global coordinates of the tensor (elements).
    pub region: Region,
    /// `Some(r)`: a partial result, combined into the receiver's tile with `r`.
    pub reduce: Option<Reducer>,
}

/// A distinct (contribution key, output box) pair and its first producer.
type Distinct<'r> = (&'r Vec<(i64, i64)>, &'r Region, usize);

/// One piece of a transfer before it is attached to an op and tensor.
pub(crate) struct Piece {
    pub phase: Phase,
    pub src: usize,
    pub dst: usize,
    pub region: Region,
    pub reduce: Option<Reducer>,
}

impl CostModel<'_> {
    /// Every piece of input `slot` of `op` that some worker must receive.
    pub(crate) fn input_pieces(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
        f: &mut dyn FnMut(Piece),
    ) {
        let workers = self.workers();
        if workers <= 1 || splits.iter().all(Option::is_none) {
            return;
        }
        let o = self.graph.op(op);
        let shape = &self.graph.tensor(o.inputs[slot]).shape;
        let access = &self.model.op(op).access;
        let tiles = self.all_tiles(shape, splits);
        let boxes = self.all_boxes(op, choices);
        for w in 0..workers {
            let dw = digits(w, self.factors);
            let need = access.input_region(slot, &boxes[w]);
            if need.volume() == 0 {
                continue;
            }
            for (u, tile) in tiles.iter().enumerate() {
                if u == w {
                    continue;
                }
                // The canonical owner agrees with w at every replicated level.
                let du = digits(u, self.factors);
                if splits
                    .iter()
                    .enumerate()
                    .any(|(l, s)| s.is_none() && du[l] != dw[l])
                {
                    continue;
                }
                let piece = need.intersect(tile);
                if piece.volume() > 0 {
                    f(Piece {
                        phase: Phase::Input { slot },
                        src: u,
                        dst: w,
                        region: piece,
                        reduce: None,
                    });
                }
            }
        }
    }

    /// Every piece that assembles output `slot` of `op` into its layout.
    pub(crate) fn output_pieces(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
        f: &mut dyn FnMut(Piece),
    ) {
        let workers = self.workers();
        if workers <= 1 {
            return;
        }
        let o = self.graph.op(op);
        let shape = self.graph.tensor(o.outputs[slot]).shape.clone();
        let access = &self.model.op(op).access;
        let out = &access.outputs[slot];
        let mut produced: Vec<(Region, Vec<(i64, i64)>)> = Vec::with_capacity(workers);
        let mut reducer = None;
        for w in 0..workers {
            let b = self.op_box(op, choices, &digits(w, self.factors));
            let (region, _) = access.output_region(slot, &b);
            let key: Vec<(i64, i64)> = out
                .reductions
                .iter()
                .map(|(v, _)| b[v.0 as usize])
                .collect();
            for (v, r) in &out.reductions {
                if b[v.0 as usize] != access.var_ranges[v.0 as usize] {
                    reducer.get_or_insert(*r);
                }
            }
            produced.push((region, key));
        }
        // Distinct (contribution, box) pairs with their first producer.
        let mut distinct: Vec<Distinct> = Vec::new();
        for (w, (r, k)) in produced.iter().enumerate() {
            if !distinct.iter().any(|(dk, dr, _)| *dk == k && *dr == r) {
                distinct.push((k, r, w));
            }
        }
        let contributions = {
            let mut keys: Vec<&Vec<(i64, i64)>> = distinct.iter().map(|d| d.0).collect();
            keys.sort();
            keys.dedup();
            keys.len()
        };
        let whole = Region::whole(&shape);
        let everyone_has_all = contributions == 1 && produced.iter().all(|(r, _)| *r == whole);
        let assemble = |tiles: &dyn Fn(usize) -> Region, f: &mut dyn FnMut(Piece)| {
            for (w, (own_box, own_key)) in produced.iter().enumerate() {
                let tile = tiles(w);
                if tile.volume() == 0 {
                    continue;
                }
                for (k, b, src) in &distinct {
                    if *k == own_key && *b == own_box {
                        continue; // w's own result
                    }
                    let piece = tile.intersect(b);
                    if piece.volume() > 0 {
                        f(Piece {
                            phase: Phase::Output { slot },
                            src: *src,
                            dst: w,
                            region: piece,
                            reduce: reducer,
                        });
                    }
                }
            }
        };
        let all_replicated = splits.iter().all(Option::is_none);
        if !all_replicated && !self.output_elems(op, slot, choices, splits).1 {
            let tiles =
                |w: usize| CostModel::tile(&shape, splits, self.factors, &digits(w, self.factors));
            assemble(&tiles, f);
            return;
        }
        if everyone_has_all {
            return;
        }
        if shape.is_empty() {
            // A scalar: every other contribution is reduced on rank 0, which sends the result to all.
            let mut seen: Vec<&Vec<(i64, i64)>> = vec![&produced[0].1];
            for (k, _, src) in &distinct {
                if !seen.contains(k) {
                    seen.push(k);
                    f(Piece {
                        phase: Phase::Output { slot },
                        src: *src,
                        dst: 0,
                        region: whole.clone(),
                        reduce: reducer,
                    });
                }
            }
            for u in 1..workers {
                f(Piece {
                    phase: Phase::Gather { slot },
                    src: 0,
                    dst: u,
                    region: whole.clone(),
                    reduce: None,
                });
            }
            return;
        }
        let virt = self.staged_splits(op, slot, choices, &shape, splits);
        let chunk =
            |w: usize| CostModel::tile(&shape, &virt, self.factors, &digits(w, self.factors));
        assemble(&chunk, f);
        // Replica groups: workers whose digits agree at every split level.
        let same_group = |w: usize, u: usize| {
            let (dw, du) = (digits(w, self.factors), digits(u, self.factors));
            splits
                .iter()
                .enumerate()
                .all(|(l, s)| s.is_none() || dw[l] == du[l])
        };
        for w in 0..workers {
            for u in 0..workers {
                let c = chunk(u);
                if u != w && same_group(w, u) && c.volume() > 0 {
                    f(Piece {
                        phase: Phase::Gather { slot },
                        src: u,
                        dst: w,
                        region: c,
                        reduce: None,
                    });
                }
            }
        }
    }
}

/// Every transfer of one training step, in program order: ops in graph
/// order; per op its `Input` transfers, then (after its compute) its `Output`
/// and `Gather` transfers, output by output.
pub fn transfers(graph: &Graph, model: &Model, factors: &[usize], d: &Decisions) -> Vec<Transfer> {
    transfers_in(&CostModel::new(graph, model, factors), d)
}

/// [`transfers`] from a cost model already built (its graph, bound
/// operators and factors are the plan's).
pub fn transfers_in(cm: &CostModel<'_>, d: &Decisions) -> Vec<Transfer> {
    let graph = cm.graph;
    let mut out = Vec::new();
    for (i, op) in graph.ops().iter().enumerate() {
        let o = OpId(i as u32);
        let chs = &d.ops[i];
        for (j, t) in op.inputs.iter().enumerate() {
            cm.input_pieces(o, j, chs, &d.tensors[t.index()], &mut |p| {
                out.push(attach(o, *t, p))
            });
        }
        for (j, t) in op.outputs.iter().enumerate() {
            let mut gathers = Vec::new();
            cm.output_pieces(o, j, chs, &d.tensors[t.index()], &mut |p| {
                if matches!(p.phase, Phase::Gather { .. }) {
                    gathers.push(attach(o, *t, p));
                } else {
                    out.push(attach(o, *t, p));
                }
            });
            out.extend(gathers);
        }
    }
    out
}

fn attach(op: OpId, tensor: TensorId, p: Piece) -> Transfer {
    Transfer {
        op,
        phase: p.phase,
        tensor,
        src: p.src,
        dst: p.dst,
        region: p.region,
        reduce: p.reduce,
    }
}
