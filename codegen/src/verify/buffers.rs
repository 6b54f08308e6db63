//! Buffers: each declared region lies inside its tensor and has the
//! declared size, and a tile is the one the plan gives the rank; each buffer
//! is allocated once (filled, if at all, as the graph says), used only while
//! alive, freed once after its last use; exactly the kept buffers survive.
//! Copies lie inside both their buffers.

use planner::plan::cost::CostModel;
use planner::plan::tile::Region;
use planner::plan::Decisions;

use super::Walk;
use crate::program::{BufId, Init, Instr, Program};

/// Where a buffer is in its life.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Life {
    /// Not allocated yet.
    Unborn,
    /// Allocated, not freed.
    Alive,
    /// Freed.
    Dead,
}

/// Whether `inner` lies inside `outer` (an empty region lies anywhere of the
/// same rank).
pub(super) fn inside(inner: &Region, outer: &Region) -> bool {
    inner.0.len() == outer.0.len()
        && (inner.volume() == 0
            || inner
                .0
                .iter()
                .zip(&outer.0)
                .all(|(&(a, b), &(c, d))| a >= c && b <= d))
}

/// Every buffer `p` declares names a tensor of the graph, lies inside it,
/// has its region's element count and, if it is a tile, is the tile the
/// plan `d` gives the rank of digits `dig`. Errors: the first buffer that
/// does not.
pub(super) fn check_declarations(
    cm: &CostModel<'_>,
    d: &Decisions,
    p: &Program,
    dig: &[usize],
) -> Result<(), String> {
    let graph = cm.graph();
    for (i, b) in p.buffers.iter().enumerate() {
        if b.tensor.index() >= graph.tensors().len() {
            return Err(format!(
                "buffer {i} names tensor {} of {}",
                b.tensor.0,
                graph.tensors().len()
            ));
        }
        let t = graph.tensor(b.tensor);
        let whole = Region::whole(&t.shape);
        if b.region.0.len() != t.shape.len()
            || !inside(&b.region, &whole)
            || b.region.0.iter().any(|&(l, h)| h < l)
        {
            return Err(format!(
                "buffer {i} region {:?} is not inside `{}` {:?}",
                b.region.0, t.name, t.shape
            ));
        }
        if b.elems != b.region.volume() {
            return Err(format!(
                "buffer {i} of `{}` declares {} elements for a region of {}",
                t.name,
                b.elems,
                b.region.volume()
            ));
        }
        if b.tile {
            let tile = CostModel::tile(&t.shape, &d.tensors[b.tensor.index()], cm.factors(), dig);
            if tile != b.region {
                return Err(format!(
                    "tile of `{}` is {:?} but the plan gives this rank {:?}",
                    t.name, b.region.0, tile.0
                ));
            }
        }
    }
    Ok(())
}

/// The instruction's name in messages.
fn kind(i: &Instr) -> &'static str {
    match i {
        Instr::Alloc { .. } => "alloc",
        Instr::Exchange { .. } => "exchange",
        Instr::Copy { .. } => "copy",
        Instr::Compute { .. } => "compute",
        Instr::Free { .. } => "free",
        Instr::AllReduce { .. } => "all-reduce",
        Instr::ReduceScatter { .. } => "reduce-scatter",
        Instr::AllGather { .. } => "all-gather",
        Instr::AllToAll { .. } => "all-to-all",
        Instr::Broadcast { .. } => "broadcast",
    }
}

impl Walk<'_, '_> {
    /// Instruction `k` uses only declared buffers, each alive (an alloc:
    /// not yet born). Errors: the first buffer that is not.
    pub(super) fn check_uses(&self, k: usize, ins: &Instr) -> Result<(), String> {
        let n = self.p.buffers.len();
        for b in ins.buffers() {
            if b as usize >= n {
                return Err(format!("instruction {k} uses buffer {b} of {n}"));
            }
            let ok = match ins {
                Instr::Alloc { .. } => self.life[b as usize] == Life::Unborn,
                _ => self.life[b as usize] == Life::Alive,
            };
            if !ok {
                return Err(format!("instruction {k} ({}) uses buffer {b} of `{}` while it is not alive (or allocates it twice)", kind(ins), self.name(b)));
            }
        }
        Ok(())
    }

    /// Instruction `k` allocates `buf` with `init`: a fill is the one the
    /// graph gives its tensor.
    pub(super) fn alloc(&mut self, k: usize, buf: BufId, init: &Init) -> Result<(), String> {
        self.life[buf as usize] = Life::Alive;
        let b = &self.p.buffers[buf as usize];
        if let Init::Fill(f) = init {
            let t = self.graph().tensor(b.tensor);
            if Some(f.fill) != t.fill {
                return Err(format!(
                    "instruction {k} fills `{}` with {:?}; the graph says {:?}",
                    t.name, f.fill, t.fill
                ));
            }
        }
        self.flow.alloc(buf, b.elems, init);
        Ok(())
    }

    /// Instruction `k` copies (or with `reduce` combines) `region` of `src`
    /// into `dst`: both hold the same tensor and the region; then its data
    /// flow.
    pub(super) fn copy(
        &mut self,
        k: usize,
        src: BufId,
        dst: BufId,
        region: &Region,
        reduce: bool,
    ) -> Result<(), String> {
        let (s, t) = (&self.p.buffers[src as usize], &self.p.buffers[dst as usize]);
        if s.tensor != t.tensor || !inside(region, &s.region) || !inside(region, &t.region) {
            return Err(format!(
                "copy of {:?} from `{}` {:?} into `{}` {:?} is out of place",
                region.0,
                self.name(src),
                s.region.0,
                self.name(dst),
                t.region.0
            ));
        }
        self.flow
            .read(self.p, src, region)
            .map_err(|e| format!("instruction {k} (copy): {e}"))?;
        self.flow
            .write(self.p, dst, region, reduce)
            .map_err(|e| format!("instruction {k} (copy): {e}"))
    }

    /// At the program's end: every buffer was allocated, the kept ones are
    /// alive and fully written, all others freed. Frees come right after
    /// last use: no instruction after a free uses the buffer
    /// ([`Walk::check_uses`]).
    pub(super) fn check_end(&self) -> Result<(), String> {
        for (b, l) in self.life.iter().enumerate() {
            let kept = self.p.keep.contains(&(b as u32));
            let name = || self.name(b as u32);
            match (l, kept) {
                (Life::Alive, false) => {
                    return Err(format!("buffer {b} of `{}` is never freed", name()))
                }
                (Life::Dead, true) => {
                    return Err(format!("kept buffer {b} of `{}` is freed", name()))
                }
                (Life::Unborn, _) => {
                    return Err(format!("buffer {b} of `{}` is never allocated", name()))
                }
                _ => {}
            }
            if kept {
                let r = &self.p.buffers[b].region;
                self.flow
                    .read(self.p, b as u32, r)
                    .map_err(|e| format!("kept {e}"))?;
            }
        }
        Ok(())
    }
}
