//! The communication cost of partial-sum layouts (issue 41; only under
//! `PlanOptions::partial_sums`).
//!
//! Takes a pair (operator, input or output slot) whose tensor is
//! [`PARTIAL`] at some level or whose operator's choice is
//! [`OpChoice::Linear`] at some level; gives the elements moved, or
//! [`INFEASIBLE`] when the pair breaks the layout's rules:
//!
//! * **Input edge.** An input in the mask of a [`OpChoice::Linear`] choice
//!   at a level must be partial there (each worker applies the op to its own
//!   partials: free); any other consumer of a partial input reduces it
//!   first, over the partial levels it is not linear at (groups of G
//!   workers that differ only there, each holding a partial of the same
//!   tile), the cheaper of: *direct*, each worker receives the G − 1 other
//!   partials of the part of its need inside its tile and all G partials of
//!   the part outside (a reduce-scatter, (G − 1)·N, when the needs split
//!   the tile); *staged*, an all-reduce of every tile (2(G − 1)·N a group:
//!   ring all-reduce, as the output side's staged reduction), then the need
//!   outside the tile fetched once from the summed tensor.
//! * **Output edge.** An output partial at a level is valid, and free
//!   there, when the producer's strategy at that level cuts a `Sum`
//!   reduction variable of that output or one of its coordinates (a slice
//!   padded with zeros is a partial sum), or the producer is
//!   [`OpChoice::Linear`] there; a [`OpChoice::Linear`] producer must keep
//!   every output partial. The owner of a tile receives, as in
//!   [`CostModel::output_bytes`], every distinct contribution to it, but
//!   only from the workers whose digits agree with its own at every partial
//!   level.
//!
//! Geometry: a partial level is a replicated one ([`CostModel::all_tiles`]
//! ignores a split dim past the rank).

use super::cost::CostModel;
use super::decisions::{is_partial, OpChoice};
use super::model::Model;
use crate::graph::{DType, Graph, OpId, TensorId, TensorRole};

/// The element count of an infeasible pair (the level problem turns it
/// into `f64::INFINITY`).
pub const INFEASIBLE: u64 = u64::MAX;

/// Whether a pair involves partial sums: a partial level of its tensor or a
/// linear choice of its operator.
pub(crate) fn involved(choices: &[OpChoice], splits: &[Option<u32>]) -> bool {
    splits.iter().any(|s| is_partial(*s))
        || choices.iter().any(|c| matches!(c, OpChoice::Linear(_)))
}

/// Bytes of `elems` elements of `size` bytes; [`INFEASIBLE`] stays so.
pub(crate) fn to_bytes(elems: u64, size: u64) -> u64 {
    if elems == INFEASIBLE {
        INFEASIBLE
    } else {
        elems * size
    }
}

/// The layout with every partial level replicated (the summed tensor).
fn summed(splits: &[Option<u32>]) -> Vec<Option<u32>> {
    splits
        .iter()
        .map(|s| if is_partial(*s) { None } else { *s })
        .collect()
}

impl CostModel<'_> {
    /// Elements to bring input `slot` of `op` to its workers when the pair
    /// [`involved`] partial sums (see the module doc), or [`INFEASIBLE`].
    pub(crate) fn partial_input_elems(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
    ) -> u64 {
        let mut group = 1u64;
        for (l, s) in splits.iter().enumerate() {
            let linear =
                matches!(choices.get(l), Some(OpChoice::Linear(m)) if m & (1 << slot) != 0);
            match (linear, is_partial(*s)) {
                (true, false) => return INFEASIBLE,
                (false, true) => group *= self.factors[l] as u64,
                _ => {}
            }
        }
        let whole = summed(splits);
        if group == 1 {
            return if whole.iter().all(Option::is_none) {
                0
            } else {
                self.input_elems(op, slot, choices, &whole)
            };
        }
        // Direct: each worker sums the group's partials of what it needs
        // inside its tile (reduce-scatter when the needs are disjoint) and
        // takes every partial of what it needs outside; staged: all-reduce
        // every tile, then fetch the rest as from the summed tensor.
        let shape = &self.graph.tensor(self.graph.op(op).inputs[slot]).shape;
        let access = &self.model.op(op).access;
        let boxes = self.all_boxes(op, choices);
        let tiles = self.all_tiles(shape, &whole);
        let (mut inside, mut outside, mut held) = (0u64, 0u64, 0u64);
        for (b, tile) in boxes.iter().zip(tiles.iter()) {
            let need = access.input_region(slot, b);
            let own = need.overlap(tile);
            inside += own;
            outside += need.volume() - own;
            held += tile.volume();
        }
        let direct = (group - 1) * inside + group * outside;
        let staged = 2 * (group - 1) * held / group + outside;
        direct.min(staged)
    }

    /// Elements to bring output `slot` of `op` into its layout when the pair
    /// [`involved`] partial sums (see the module doc), or [`INFEASIBLE`].
    pub(crate) fn partial_output_elems(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
    ) -> u64 {
        let m = self.model.op(op);
        let mut partial_levels = Vec::new();
        let mut group = 1u64;
        for (l, s) in splits.iter().enumerate() {
            let partial = is_partial(*s);
            let ok = match choices.get(l) {
                Some(OpChoice::Linear(_)) => {
                    if !partial {
                        group *= self.factors[l] as u64;
                    }
                    true
                }
                Some(OpChoice::Strategy(st)) if partial => {
                    m.strategies.strategies.get(*st as usize).is_some_and(|st| {
                        st.splits.iter().any(|sv| {
                            sv.output as usize == slot
                                && matches!(
                                    sv.kind,
                                    interval::strategy::SplitKind::Output { .. }
                                        | interval::strategy::SplitKind::Reduction {
                                            reducer: tdl::Reducer::Sum
                                        }
                                )
                        })
                    })
                }
                _ => !partial,
            };
            if !ok {
                return INFEASIBLE;
            }
            if partial {
                partial_levels.push(l);
            }
        }
        if group > 1 {
            return self.reduced_linear_output(op, slot, choices, splits, group);
        }
        let o = self.graph.op(op);
        let shape = &self.graph.tensor(o.outputs[slot]).shape;
        let access = &m.access;
        let boxes = self.all_boxes(op, choices);
        // Each worker's contribution: its reduction ranges and its region.
        let produced: Vec<(Vec<(i64, i64)>, super::tile::Region)> = boxes
            .iter()
            .map(|b| {
                let key = access.outputs[slot]
                    .reductions
                    .iter()
                    .map(|(v, _)| b[v.0 as usize])
                    .collect();
                (key, access.output_region(slot, b).0)
            })
            .collect();
        let tiles = self.all_tiles(shape, &summed(splits));
        let mut total = 0u64;
        for (w, tile) in tiles.iter().enumerate() {
            let mut seen: Vec<usize> = Vec::new();
            for v in 0..tiles.len() {
                let agrees = partial_levels
                    .iter()
                    .all(|&l| self.digits[v][l] == self.digits[w][l]);
                if agrees && !seen.iter().any(|&u| produced[u] == produced[v]) {
                    seen.push(v);
                    total += produced[v].1.overlap(tile);
                }
            }
            total -= produced[w].1.overlap(tile);
        }
        total
    }

    /// Output elements of a [`OpChoice::Linear`] op whose output is not
    /// partial at some of its linear levels (groups of `group` workers that
    /// differ only there each hold a partial of their region): the cheaper
    /// of reducing every worker's tile directly from the group's other
    /// partials and a ring all-reduce of the group's regions (2(G − 1)·N),
    /// plus the output's cost with those levels replicated.
    fn reduced_linear_output(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
        group: u64,
    ) -> u64 {
        let replicated: Vec<OpChoice> = choices
            .iter()
            .zip(splits)
            .map(|(c, s)| match c {
                OpChoice::Linear(_) if !is_partial(*s) => OpChoice::Replicate,
                c => *c,
            })
            .collect();
        let rest = if involved(&replicated, splits) {
            self.partial_output_elems(op, slot, &replicated, splits)
        } else {
            self.output_elems(op, slot, &replicated, splits).0
        };
        if rest == INFEASIBLE {
            return INFEASIBLE;
        }
        let access = &self.model.op(op).access;
        let shape = &self.graph.tensor(self.graph.op(op).outputs[slot]).shape;
        let tiles = self.all_tiles(shape, &summed(splits));
        let boxes = self.all_boxes(op, choices);
        let (mut own, mut held) = (0u64, 0u64);
        for (b, tile) in boxes.iter().zip(tiles.iter()) {
            let region = access.output_region(slot, b).0;
            own += region.overlap(tile);
            held += region.volume();
        }
        let direct = (group - 1) * own;
        let staged = 2 * (group - 1) * held / group;
        rest + direct.min(staged)
    }
}

/// Whether tensor `t` may be held as partial sums: an f32 activation or
/// gradient that is neither weight-like (a weight, its gradient, optimizer
/// state), nor the loss, nor a named graph output.
pub fn eligible(graph: &Graph, t: TensorId) -> bool {
    let tensor = graph.tensor(t);
    matches!(tensor.role, TensorRole::Activation | TensorRole::Gradient)
        && tensor.dtype == DType::F32
        && !super::decisions::is_weight_like(graph, t)
        && graph.loss() != Some(t)
        && !graph.outputs().iter().any(|o| o.tensor == t)
}

/// The linear choices of `op` at a level: one per set of its inputs it is
/// linear in whose inputs and outputs may all be partial ([`eligible`]).
pub fn linear_choices(graph: &Graph, model: &Model, op: OpId) -> Vec<OpChoice> {
    let o = graph.op(op);
    if !o.outputs.iter().all(|t| eligible(graph, *t)) {
        return Vec::new();
    }
    model
        .op(op)
        .linear_sets
        .iter()
        .filter(|&&mask| {
            o.inputs
                .iter()
                .enumerate()
                .all(|(i, t)| mask & (1 << i) == 0 || eligible(graph, *t))
        })
        .map(|&mask| OpChoice::Linear(mask))
        .collect()
}

/// The choice of `op` in a cluster laid out partial: linear in the set of
/// its inputs in `partial` (the cluster's partial tensors) when there are
/// some, the op is linear in that set (else in its largest linear set
/// containing it); with none, the first of `strategies` (the op's candidate
/// choices at the level) that cuts a `Sum` reduction of its first output
/// (the producer of partial sums: a row-parallel matmul), else its largest
/// linear set (fed partial sums from outside); else `None`.
pub fn follow_partial(
    graph: &Graph,
    model: &Model,
    op: OpId,
    partial: impl Fn(TensorId) -> bool,
    strategies: &[OpChoice],
) -> Option<OpChoice> {
    let o = graph.op(op);
    let want = o
        .inputs
        .iter()
        .enumerate()
        .filter(|(_, t)| partial(**t))
        .fold(0u32, |m, (i, _)| m | (1 << i));
    let mask = |c: &OpChoice| match c {
        OpChoice::Linear(m) => *m,
        _ => 0,
    };
    if want == 0 {
        let sts = &model.op(op).strategies.strategies;
        let reduces = |c: &&OpChoice| match c {
            OpChoice::Strategy(s) => sts.get(*s as usize).is_some_and(|st| {
                st.splits.iter().any(|sv| {
                    sv.output == 0
                        && matches!(
                            sv.kind,
                            interval::strategy::SplitKind::Reduction {
                                reducer: tdl::Reducer::Sum
                            }
                        )
                })
            }),
            _ => false,
        };
        let reducing = strategies.iter().find(reduces).copied();
        return reducing.or_else(|| {
            // Fed partial sums from outside the cluster: the largest set.
            let choices = linear_choices(graph, model, op);
            choices.into_iter().max_by_key(|c| mask(c).count_ones())
        });
    }
    let choices = linear_choices(graph, model, op);
    choices
        .iter()
        .find(|c| mask(c) == want)
        .or_else(|| {
            choices
                .iter()
                .filter(|c| mask(c) & want == want)
                .max_by_key(|c| mask(c).count_ones())
        })
        .copied()
}
