//! Recognising collectives in the planner's transfers.
//!
//! Takes one operator output's `Output` and `Gather` transfers (the same
//! list on every rank), the region every rank's share writes, and the world
//! size; gives the [`Collective`] that moves the same data with the same
//! bytes per rank, or `None` (the transfers stay grouped send/recv).
//!
//! The pattern is the sum of partial results into a tensor replicated on
//! every worker (data parallelism's gradient sums, a reduction split across
//! all workers): every rank computes a partial result of the whole tensor,
//! the `Output` transfers reduce block j of a virtual k-way split onto rank
//! j, and the `Gather` transfers hand every block to every rank. Lowered:
//!
//! * blocks of exactly N/k elements each → one **all-reduce** (ring:
//!   2(k−1)/k·N per rank, what the transfers send);
//! * otherwise a **reduce-scatter** with the blocks as per-rank counts (ring:
//!   N − c_r per rank, exactly the `Output` transfers' bytes for any
//!   counts), then an **all-gather** when the blocks are equal (ring
//!   N − c_{r+1} = (k−1)·c_r) or the `Gather` transfers as send/recv when
//!   they are not (the ring would move different bytes per rank).
//!
//! Without `Output` transfers (every rank computed its own block, e.g. a
//! split optimizer update of a replicated weight), equal blocks become one
//! **all-gather**.
//!
//! So the bytes each rank sends still equal the planner's prediction
//! exactly ([`comm::traffic`] formulas), which `validate` checks.
//!
//! Exchanges that stay point-to-point get two more patterns
//! ([`recognise_exchange`], over one (operator, phase)'s transfers, the same
//! list on every rank): every ordered pair of ranks moving exactly one
//! message is an **all-to-all** (the same messages, so the same bytes per
//! rank), and one rank sending the same region to every other rank is a
//! **flat (star) broadcast** (the root sends (k−1)·N, what the transfers
//! charge; NCCL's ring broadcast would move the same total but spread over
//! the ranks, so it is not used).

use std::collections::HashSet;

use planner::plan::tile::Region;
use planner::plan::Transfer;
use tdl::Reducer;

/// How one output's transfers are carried out.
#[derive(Clone, Debug, PartialEq)]
pub enum Collective {
    /// One all-reduce of the whole tensor.
    AllReduce {
        /// The combination of partial results.
        reduce: Reducer,
    },
    /// A reduce-scatter onto the blocks, then the gather.
    ReduceScatter {
        /// One block per rank (rank order; empty where a rank has none).
        blocks: Vec<Region>,
        /// The combination of partial results.
        reduce: Reducer,
        /// Whether the gather is an all-gather (equal blocks) rather than
        /// the `Gather` transfers as send/recv.
        all_gather: bool,
    },
    /// Only the gather: each rank computed its block itself (an update
    /// split across workers whose result every worker needs).
    AllGather {
        /// One block per rank (rank order), all of the same size.
        blocks: Vec<Region>,
    },
}

/// The collective that carries `outs` and `gathers` (see the module doc):
/// `whole` is the tensor's region, `writes[r]` the region rank r's share
/// writes, `world` the number of ranks.
pub fn recognise(
    whole: &Region,
    writes: &[Region],
    outs: &[&Transfer],
    gathers: &[&Transfer],
    world: usize,
) -> Option<Collective> {
    if world < 2 || writes.len() != world || whole.0.is_empty() {
        return None;
    }
    if !outs.is_empty() && writes.iter().any(|w| w != whole) {
        return None;
    }
    // Blocks of the virtual split: what each rank gathers out.
    let empty = Region(
        whole
            .0
            .iter()
            .enumerate()
            .map(|(d, &(l, h))| if d == 0 { (l, l) } else { (l, h) })
            .collect(),
    );
    let mut blocks: Vec<Option<Region>> = vec![None; world];
    for g in gathers {
        match &blocks[g.src] {
            Some(b) if *b != g.region => return None,
            _ => blocks[g.src] = Some(g.region.clone()),
        }
    }
    let blocks: Vec<Region> = blocks
        .into_iter()
        .map(|b| b.unwrap_or_else(|| empty.clone()))
        .collect();
    let total: u64 = blocks.iter().map(Region::volume).sum();
    if total != whole.volume() || blocks.iter().any(|b| !inside(b, whole)) {
        return None;
    }
    for (i, a) in blocks.iter().enumerate() {
        for b in &blocks[i + 1..] {
            if a.intersect(b).volume() > 0 {
                return None;
            }
        }
    }
    let equal = blocks.iter().all(|b| b.volume() == blocks[0].volume());
    if outs.is_empty() {
        let own = writes.iter().zip(&blocks).all(|(w, b)| inside(b, w));
        return (own && equal && gathered(&blocks, gathers, world))
            .then_some(Collective::AllGather { blocks });
    }
    // Output: every rank sends its partial of block j to rank j, reduced.
    let reduce = outs[0].reduce?;
    let mut want: HashSet<(usize, usize)> = HashSet::new();
    for r in 0..world {
        for (j, b) in blocks.iter().enumerate() {
            if j != r && b.volume() > 0 {
                want.insert((r, j));
            }
        }
    }
    if outs.len() != want.len() {
        return None;
    }
    for t in outs {
        if t.reduce != Some(reduce) || t.region != blocks[t.dst] || !want.remove(&(t.src, t.dst)) {
            return None;
        }
    }
    if !gathered(&blocks, gathers, world) {
        return None;
    }
    let n = whole.volume();
    if equal && n.is_multiple_of(world as u64) {
        return Some(Collective::AllReduce { reduce });
    }
    Some(Collective::ReduceScatter {
        blocks,
        reduce,
        all_gather: equal,
    })
}

/// The all-gather that carries an operator input's `Input` transfers when
/// every rank's share reads the whole tensor (`needs[r] == whole`) and the
/// tiles (`tiles[r]`, one per rank) are equal blocks that the transfers hand
/// to every other rank: the blocks in rank order, or `None`.
pub fn recognise_input(
    whole: &Region,
    needs: &[Region],
    tiles: &[Region],
    transfers: &[&Transfer],
) -> Option<Vec<Region>> {
    let world = tiles.len();
    if world < 2 || transfers.is_empty() || needs.iter().any(|n| n != whole) {
        return None;
    }
    let total: u64 = tiles.iter().map(Region::volume).sum();
    let equal = tiles.iter().all(|t| t.volume() == tiles[0].volume());
    if !equal || total != whole.volume() || tiles.iter().any(|t| !inside(t, whole)) {
        return None;
    }
    for (i, a) in tiles.iter().enumerate() {
        if tiles[i + 1..].iter().any(|b| a.intersect(b).volume() > 0) {
            return None;
        }
    }
    gathered(tiles, transfers, world).then(|| tiles.to_vec())
}

/// Whether `gathers` hand every non-empty block to every other rank, once.
fn gathered(blocks: &[Region], gathers: &[&Transfer], world: usize) -> bool {
    let mut want: HashSet<(usize, usize)> = HashSet::new();
    for (j, b) in blocks.iter().enumerate() {
        if b.volume() > 0 {
            for r in (0..world).filter(|&r| r != j) {
                want.insert((j, r));
            }
        }
    }
    gathers.len() == want.len()
        && gathers.iter().all(|t| {
            t.reduce.is_none() && t.region == blocks[t.src] && want.remove(&(t.src, t.dst))
        })
}

fn inside(a: &Region, outer: &Region) -> bool {
    a.volume() == 0
        || a.0.len() == outer.0.len()
            && a.0
                .iter()
                .zip(&outer.0)
                .all(|(&(l, h), &(ol, oh))| l >= ol && h <= oh)
}

/// The collective that carries one (operator, phase)'s point-to-point
/// transfers (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExchangeCollective {
    /// Every ordered pair of ranks moves exactly one message.
    AllToAll,
    /// `root` sends the same region to every other rank.
    Broadcast {
        /// The sending rank.
        root: usize,
    },
}

/// The collective pattern of `ts` (every transfer of one operator's phase,
/// over all `world` ranks), or `None` when it is neither an all-to-all nor a
/// broadcast (or `world < 2`, or some transfer has the same source and
/// destination).
pub fn recognise_exchange(ts: &[&Transfer], world: usize) -> Option<ExchangeCollective> {
    if world < 2
        || ts.is_empty()
        || ts
            .iter()
            .any(|t| t.src == t.dst || t.src.max(t.dst) >= world)
    {
        return None;
    }
    let pairs: HashSet<(usize, usize)> = ts.iter().map(|t| (t.src, t.dst)).collect();
    if pairs.len() == ts.len() && ts.len() == world * (world - 1) {
        return Some(ExchangeCollective::AllToAll);
    }
    let root = ts[0].src;
    let dsts: HashSet<usize> = ts.iter().map(|t| t.dst).collect();
    let same = ts
        .iter()
        .all(|t| t.src == root && t.region == ts[0].region && t.reduce == ts[0].reduce);
    (same && ts.len() == world - 1 && dsts.len() == world - 1)
        .then_some(ExchangeCollective::Broadcast { root })
}
