//! Collectives (all-reduce, reduce-scatter, all-gather; all-to-all and
//! broadcast as collectives every rank calls): each names an operator of the
//! graph, comes after every exchange of earlier operators (the one global
//! order every rank follows), lies in its buffers, and every rank calls the
//! same collectives in the same order. Their data flow is checked with them.

use planner::graph::OpId;
use planner::plan::tile::Region;
use planner::plan::Phase;

use super::buffers::inside;
use super::messages::phase_key;
use super::Walk;
use crate::error::CodegenError;
use crate::program::{BufId, Instr, Program};

/// A collective as every rank must call it: (operator, kind, counts).
pub(super) type Call = (u32, &'static str, Vec<u64>);

/// Program `p`'s collectives, in program order.
pub(super) fn calls(p: &Program) -> Vec<Call> {
    p.instrs.iter().filter_map(call).collect()
}

/// The collective `i` calls, if it is one.
fn call(i: &Instr) -> Option<Call> {
    match i {
        Instr::AllReduce { op, region, .. } => Some((op.0, "all-reduce", vec![region.volume()])),
        Instr::ReduceScatter { op, blocks, .. } => Some((
            op.0,
            "reduce-scatter",
            blocks.iter().map(Region::volume).collect(),
        )),
        Instr::AllGather { op, blocks, .. } => Some((
            op.0,
            "all-gather",
            blocks.iter().map(Region::volume).collect(),
        )),
        Instr::AllToAll { op, phase, .. } => {
            Some((op.0, "all-to-all", vec![phase_key(op.0, *phase)]))
        }
        Instr::Broadcast {
            op,
            phase,
            root,
            region,
            ..
        } => Some((
            op.0,
            "broadcast",
            vec![phase_key(op.0, *phase), *root as u64, region.volume()],
        )),
        _ => None,
    }
}

/// Every rank's collectives (`calls[r]`, from [`calls`]) are rank 0's.
///
/// Errors: [`CodegenError::Invalid`] at the first rank whose differ.
pub(super) fn check_same_calls(calls: &[Vec<Call>]) -> Result<(), CodegenError> {
    if let Some(r) = (1..calls.len()).find(|&r| calls[r] != calls[0]) {
        return Err(CodegenError::Invalid {
            rank: r,
            message: format!(
                "its collectives {:?} differ from rank 0's {:?} (every rank must call the same collectives in the same order)",
                calls[r], calls[0]
            ),
        });
    }
    Ok(())
}

impl Walk<'_, '_> {
    /// A collective of `op` names an op of the graph and comes after every
    /// exchange of earlier ops (the one global order every rank follows).
    fn check_order(&mut self, op: OpId) -> Result<(), String> {
        let graph = self.graph();
        if op.index() >= graph.ops().len() {
            return Err(format!(
                "collective of op {} of {}",
                op.0,
                graph.ops().len()
            ));
        }
        let first = phase_key(op.0, Phase::Input { slot: 0 });
        let next_op = phase_key(op.0 + 1, Phase::Input { slot: 0 });
        if self.last_key.is_some_and(|l| l >= next_op) {
            return Err(format!(
                "collective of op `{}` is out of the global order",
                graph.op(op).name
            ));
        }
        self.last_key = Some(self.last_key.map_or(first, |l| l.max(first)));
        Ok(())
    }

    /// Instruction `k`, an all-reduce of `op`'s `region` from `src` into
    /// `dst`: in order, `src` holds the region and `dst` exactly it, of the
    /// same tensor; then its data flow.
    pub(super) fn all_reduce(
        &mut self,
        k: usize,
        op: OpId,
        src: BufId,
        dst: BufId,
        region: &Region,
    ) -> Result<(), String> {
        self.check_order(op)?;
        let p = self.p;
        let (s, t) = (&p.buffers[src as usize], &p.buffers[dst as usize]);
        if s.tensor != t.tensor || !inside(region, &s.region) || t.region != *region {
            return Err(format!(
                "all-reduce of {:?} from `{}` {:?} into {:?} is out of place",
                region.0,
                self.name(src),
                s.region.0,
                t.region.0
            ));
        }
        let at = |e: String| format!("instruction {k} (all-reduce): {e}");
        self.flow.read(p, src, region).map_err(at)?;
        self.flow.write(p, dst, region, false).map_err(at)
    }

    /// Instruction `k`, a reduce-scatter of `op`'s `blocks` (one per rank)
    /// from `src` into `dst`: in order, `src` holds every block and `dst`
    /// this rank's, of the same tensor; then its data flow.
    pub(super) fn reduce_scatter(
        &mut self,
        k: usize,
        op: OpId,
        src: BufId,
        dst: BufId,
        blocks: &[Region],
    ) -> Result<(), String> {
        self.check_order(op)?;
        let p = self.p;
        let (s, t) = (&p.buffers[src as usize], &p.buffers[dst as usize]);
        let mine = blocks
            .get(p.rank)
            .ok_or("reduce-scatter without this rank's block")?;
        if s.tensor != t.tensor
            || blocks.len() != p.world
            || blocks
                .iter()
                .any(|b| b.volume() > 0 && !inside(b, &s.region))
            || (mine.volume() > 0 && !inside(mine, &t.region))
        {
            return Err(format!(
                "reduce-scatter of blocks {blocks:?} from `{}` {:?} into {:?} is out of place",
                self.name(src),
                s.region.0,
                t.region.0
            ));
        }
        let at = |e: String| format!("instruction {k} (reduce-scatter): {e}");
        for b in blocks.iter().filter(|b| b.volume() > 0) {
            self.flow.read(p, src, b).map_err(at)?;
        }
        if mine.volume() > 0 {
            self.flow.write(p, dst, mine, false).map_err(at)?;
        }
        Ok(())
    }

    /// Instruction `k`, an all-gather of `op`'s `blocks` (one per rank) in
    /// `buf`: in order, `buf` holds every block; then its data flow (this
    /// rank's block read, the others written).
    pub(super) fn all_gather(
        &mut self,
        k: usize,
        op: OpId,
        buf: BufId,
        blocks: &[Region],
    ) -> Result<(), String> {
        self.check_order(op)?;
        let p = self.p;
        let b = &p.buffers[buf as usize];
        if blocks.len() != p.world
            || blocks
                .iter()
                .any(|x| x.volume() > 0 && !inside(x, &b.region))
        {
            return Err(format!(
                "all-gather of blocks {blocks:?} into `{}` {:?} is out of place",
                self.name(buf),
                b.region.0
            ));
        }
        let at = |e: String| format!("instruction {k} (all-gather): {e}");
        for (j, x) in blocks.iter().enumerate().filter(|(_, x)| x.volume() > 0) {
            if j == p.rank {
                self.flow.read(p, buf, x).map_err(at)?;
            } else {
                self.flow.write(p, buf, x, false).map_err(at)?;
            }
        }
        Ok(())
    }
}
