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

/// Every carry of `p` (an updated tensor's kept tile becoming next step's
/// tile of the tensor it replaces: optimizer outputs, batch norm's running
/// statistics) joins two tiles of one region, or neither side is on this
/// rank. The runner moves a kept tile only between equal regions, so a
/// carry that fails this would silently keep the old value.
/// Errors: the first carry that does not.
pub(super) fn check_carries(p: &Program) -> Result<(), String> {
    let name = |b: program::BufId| p.buffers[b as usize].region.0.clone();
    for c in &p.carries {
        let ok = match (c.from_buf, c.to_buf) {
            (Some(f), Some(t)) => p.buffers[f as usize].region == p.buffers[t as usize].region,
            (None, None) => true,
            _ => false,
        };
        if !ok {
            let tensor = |t: program::TensorId| {
                p.tensors
                    .iter()
                    .find(|i| i.id == t)
                    .map_or_else(|| format!("#{}", t.0), |i| i.name.clone())
            };
            return Err(format!(
                "the update `{}` (kept region {:?}) cannot replace `{}` (tile {:?}): an updated tensor must have the layout of the tensor it replaces",
                tensor(c.from),
                c.from_buf.map(name),
                tensor(c.to),
                c.to_buf.map(name)
            ));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{Buffer, Carry, TensorId, FORMAT, VERSION};

    /// A program with tiles of `w'` (tensor 1) and `w` (tensor 0) over
    /// `from` and `to`, and the carry `w' → w`.
    fn carrying(from: Region, to: Region) -> Program {
        let tile = |tensor: u32, region: Region| Buffer {
            tensor: TensorId(tensor),
            elems: region.volume(),
            region,
            tile: true,
        };
        Program {
            format: FORMAT.into(),
            version: VERSION,
            rank: 0,
            world: 2,
            tensors: Vec::new(),
            specs: Vec::new(),
            buffers: vec![tile(0, to), tile(1, from)],
            instrs: Vec::new(),
            keep: vec![1],
            carries: vec![Carry {
                from: TensorId(1),
                from_buf: Some(1),
                to: TensorId(0),
                to_buf: Some(0),
            }],
        }
    }

    #[test]
    fn a_carry_joins_tiles_of_one_region() {
        let half = Region(vec![(0, 4)]);
        assert!(check_carries(&carrying(half.clone(), half.clone())).is_ok());
        // The negative control: the update replicated, the state split.
        let err = check_carries(&carrying(Region(vec![(0, 8)]), half)).unwrap_err();
        assert!(err.contains("must have the layout"), "{err}");
    }
}
