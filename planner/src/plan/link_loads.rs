//! The per-link loads of one operator input or output at cluster scale,
//! without walking every transfer (issue 44).
//!
//! Takes a cost model, one (operator, slot, choices, splits) pair and a
//! [`Topology`]; gives the same [`LinkLoad`] as adding every piece of
//! [`super::transfer`] to a [`Tally`] one by one ([`super::topology`]'s
//! piecewise path), in time about linear in the workers instead of
//! quadratic. Workers that receive the same thing from the same senders
//! (the same needed region and the same canonical owners; the replica
//! group of a gathered chunk; the owners of tiles meeting one produced box)
//! are one fan of the [`Tally`], and the pairs a fan must not hold (a worker
//! to itself, a worker's own result) are taken out again, so every
//! worker's sent and received bytes per level are the exact integers of the
//! piecewise sum and the estimate is the same float.

use rustc_hash::FxHashMap as HashMap;

use super::cluster::{LinkLoad, Topology};
use super::cost::CostModel;
use super::decisions::OpChoice;
use super::link_tally::Tally;
use super::tile::Region;
use crate::graph::OpId;

/// Elements of the output pieces and of the gather pieces of one output.
pub(crate) type Volumes = (u64, u64);

impl CostModel<'_> {
    /// [`CostModel::input_load`] by fans (see the module doc).
    pub(crate) fn input_load_fans(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
        topo: &Topology,
    ) -> LinkLoad {
        let workers = self.workers();
        let mut tally = Tally::new(topo, workers);
        if workers <= 1 || splits.iter().all(Option::is_none) {
            return tally.finish();
        }
        let t = self.graph.op(op).inputs[slot];
        let tensor = self.graph.tensor(t);
        let elem = tensor.dtype.size_bytes();
        let access = &self.model.op(op).access;
        let tiles = self.all_tiles(&tensor.shape, splits);
        let boxes = self.all_boxes(op, choices);
        // Receivers of one needed region whose canonical owners agree: by
        // (the need's index, the worker's digits at the replicated levels
        // as one mixed-radix number).
        let mut index: HashMap<(usize, usize), usize> = HashMap::default();
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        // The canonical owners' tiles partition the tensor when every level
        // cuts a dim of it or is replicated: then a worker whose tile holds
        // all it needs fetches nothing.
        let partition = splits.len() == self.factors.len()
            && splits
                .iter()
                .all(|s| s.is_none_or(|d| (d as usize) < tensor.shape.len()));
        // Workers with one box need one region: computed once per box.
        let mut by_box: HashMap<&[(i64, i64)], usize> = HashMap::default();
        let mut needs: Vec<(Region, u64)> = Vec::new();
        for w in 0..workers {
            let n = *by_box.entry(&boxes[w]).or_insert_with(|| {
                let need = access.input_region(slot, &boxes[w]);
                let volume = need.volume();
                needs.push((need, volume));
                needs.len() - 1
            });
            let (need, volume) = &needs[n];
            if *volume == 0 || (partition && need.overlap(&tiles[w]) == *volume) {
                continue;
            }
            let dw = &self.digits[w];
            let replicated = (0..splits.len())
                .filter(|&l| splits[l].is_none())
                .fold(0, |code, l| code * self.factors[l] + dw[l]);
            let g = *index.entry((n, replicated)).or_insert_with(|| {
                groups.push((n, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push(w);
        }
        let mut owners = Vec::new();
        for (n, members) in &groups {
            let need = &needs[*n].0;
            owners.clear();
            self.owners(need, &tensor.shape, splits, members[0], &mut owners);
            let owners: Vec<(usize, u64)> = owners
                .iter()
                .map(|&u| (u, need.overlap(&tiles[u])))
                .filter(|&(_, v)| v > 0)
                .collect();
            tally.fan_by_sender(&owners, members, elem);
            // Nobody fetches from itself.
            for &w in members {
                let v = need.overlap(&tiles[w]);
                if v > 0 {
                    tally.remove(w, w, v * elem);
                }
            }
        }
        tally.finish()
    }

    /// The canonical owners of `need` for worker `w` (the workers agreeing
    /// with `w` at every replicated level, [`super::transfer`]) whose tile
    /// may meet it, in rank order: the levels walked outermost first, a
    /// sub-tree left out when its box misses `need`.
    fn owners(
        &self,
        need: &Region,
        shape: &[usize],
        splits: &[Option<u32>],
        w: usize,
        out: &mut Vec<usize>,
    ) {
        fn walk(
            cm: &CostModel<'_>,
            (need, splits, dw): (&Region, &[Option<u32>], &[usize]),
            level: usize,
            (rank, region): (usize, &mut Region),
            out: &mut Vec<usize>,
        ) {
            let factors = cm.factors;
            if level == factors.len() {
                out.push(rank);
                return;
            }
            let f = factors[level];
            let split = splits.get(level).copied();
            let mut digits = match split {
                Some(None) => dw[level]..dw[level] + 1,
                _ => 0..f,
            };
            let cut = match split {
                Some(Some(d)) if (d as usize) < region.0.len() => Some(d as usize),
                _ => None,
            };
            let Some(d) = cut else {
                for i in digits {
                    walk(
                        cm,
                        (need, splits, dw),
                        level + 1,
                        (rank * f + i, region),
                        out,
                    );
                }
                return;
            };
            // Cut dim d in place, restored after the sub-trees; only the
            // parts meeting the need are walked.
            let (lo, hi) = region.0[d];
            let (n_lo, n_hi) = need.0[d];
            let meeting = super::tile::parts_meeting((lo, hi), f, (n_lo, n_hi));
            digits = digits.start.max(meeting.start)..digits.end.min(meeting.end);
            for i in digits {
                let (a, b) = super::tile::part((lo, hi), f, i);
                if b.min(n_hi) <= a.max(n_lo) {
                    continue;
                }
                region.0[d] = (a, b);
                if need.overlap(region) > 0 {
                    walk(
                        cm,
                        (need, splits, dw),
                        level + 1,
                        (rank * f + i, region),
                        out,
                    );
                }
            }
            region.0[d] = (lo, hi);
        }
        let mut whole = Region::whole(shape);
        walk(
            self,
            (need, splits, &self.digits[w]),
            0,
            (0, &mut whole),
            out,
        );
    }

    /// [`CostModel::output_load`] by fans (see the module doc): the load
    /// and the elements of the output and gather pieces (for the ring test).
    pub(crate) fn output_load_fans(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
        topo: &Topology,
    ) -> (LinkLoad, Volumes) {
        let workers = self.workers();
        let mut tally = Tally::new(topo, workers);
        if workers <= 1 {
            return (tally.finish(), (0, 0));
        }
        let t = self.graph.op(op).outputs[slot];
        let tensor = self.graph.tensor(t);
        let (shape, elem) = (&tensor.shape, tensor.dtype.size_bytes());
        let access = &self.model.op(op).access;
        let out = &access.outputs[slot];
        let boxes = self.all_boxes(op, choices);
        // Distinct (contribution, box) entries in first-producer order, and
        // the entry of every worker's own result.
        let mut index: HashMap<(Vec<(i64, i64)>, Region), usize> = HashMap::default();
        let mut entries: Vec<(Region, usize)> = Vec::new();
        let mut own = Vec::with_capacity(workers);
        let mut keys = Vec::new();
        // Workers with one box produce one entry: looked up once per box.
        let mut by_box: HashMap<&[(i64, i64)], usize> = HashMap::default();
        for (w, b) in boxes.iter().enumerate() {
            if let Some(&e) = by_box.get(b.as_slice()) {
                own.push(e);
                continue;
            }
            let (region, _) = access.output_region(slot, b);
            let key: Vec<(i64, i64)> = out
                .reductions
                .iter()
                .map(|(v, _)| b[v.0 as usize])
                .collect();
            let e = *index
                .entry((key.clone(), region.clone()))
                .or_insert_with(|| {
                    entries.push((region, w));
                    keys.push(key);
                    entries.len() - 1
                });
            by_box.insert(b, e);
            own.push(e);
        }
        let contributions = {
            let mut k: Vec<&Vec<(i64, i64)>> = keys.iter().collect();
            k.sort();
            k.dedup();
            k.len()
        };
        let whole = Region::whole(shape);
        let everyone_has_all = contributions == 1 && own.iter().all(|&e| entries[e].0 == whole);
        let all_replicated = splits.iter().all(Option::is_none);
        if !all_replicated && !self.output_elems(op, slot, choices, splits).1 {
            let tiles = self.all_tiles(shape, splits);
            let outs = assemble(&mut tally, (&entries, &own), &tiles, (elem, contributions));
            return (tally.finish(), (outs, 0));
        }
        if everyone_has_all {
            return (tally.finish(), (0, 0));
        }
        if shape.is_empty() {
            // Reduced on rank 0 (one piece per other contribution), sent to all.
            let mut seen = vec![&keys[own[0]]];
            let mut outs = 0;
            for (k, (_, src)) in keys.iter().zip(&entries) {
                if !seen.contains(&k) {
                    seen.push(k);
                    tally.add(*src, 0, elem);
                    outs += 1;
                }
            }
            for u in 1..workers {
                tally.add(0, u, elem);
            }
            return (tally.finish(), (outs, workers as u64 - 1));
        }
        let virt = self.staged_splits(op, slot, choices, shape, splits);
        let chunks = self.all_tiles(shape, &virt);
        let outs = assemble(&mut tally, (&entries, &own), &chunks, (elem, contributions));
        // Replica groups: workers whose digits agree at every split level.
        let mut groups: HashMap<usize, Vec<usize>> = HashMap::default();
        for w in 0..workers {
            let d = &self.digits[w];
            let key = (0..splits.len())
                .filter(|&l| splits[l].is_some())
                .fold(0, |code, l| code * self.factors[l] + d[l]);
            groups.entry(key).or_default().push(w);
        }
        let mut gathers = 0;
        for members in groups.values() {
            let sizes: Vec<(usize, u64)> =
                members.iter().map(|&u| (u, chunks[u].volume())).collect();
            tally.fan_by_sender(&sizes, members, elem);
            for &(u, v) in &sizes {
                tally.remove(u, u, v * elem);
                gathers += v * (members.len() as u64 - 1);
            }
        }
        (tally.finish(), (outs, gathers))
    }
}

/// Add every output piece: the owner of each tile receives the part of it
/// in every distinct entry but its own (`entries`: (box, first producer);
/// `own`: every worker's entry; `contributions`: how many distinct
/// contribution keys the entries have). Gives the elements added.
///
/// With one contribution the distinct boxes are disjoint (each is one leaf
/// range per output coordinate of the levels' splits), so a tile inside
/// its owner's own box meets no other box: such owners are skipped.
fn assemble(
    tally: &mut Tally<'_>,
    (entries, own): (&[(Region, usize)], &[usize]),
    tiles: &[Region],
    (elem, contributions): (u64, usize),
) -> u64 {
    let skip: Vec<bool> = tiles
        .iter()
        .zip(own)
        .map(|(t, &e)| {
            let v = t.volume();
            v == 0 || (contributions == 1 && t.overlap(&entries[e].0) == v)
        })
        .collect();
    if skip.iter().all(|&s| s) {
        return 0;
    }
    // The distinct boxes, the producers of each, and per dim the distinct
    // ranges (a box is one range per dim).
    let mut box_index: HashMap<&Region, usize> = HashMap::default();
    let mut senders: Vec<Vec<(usize, u64)>> = Vec::new();
    let mut boxes: Vec<&Region> = Vec::new();
    for (b, src) in entries {
        let i = *box_index.entry(b).or_insert_with(|| {
            boxes.push(b);
            senders.push(Vec::new());
            boxes.len() - 1
        });
        senders[i].push((*src, 1));
    }
    let dims = tiles.first().map_or(0, |t| t.0.len());
    let mut ranges: Vec<Vec<(i64, i64)>> = vec![Vec::new(); dims];
    for b in &boxes {
        for (d, r) in b.0.iter().enumerate().take(dims) {
            ranges[d].push(*r);
        }
    }
    let ranges: Vec<Ranges> = ranges.into_iter().map(Ranges::new).collect();
    // Per box, the owners whose tile meets it and how much.
    let mut receivers: Vec<Vec<(usize, u64)>> = vec![Vec::new(); boxes.len()];
    let mut total = 0;
    for (w, tile) in tiles.iter().enumerate() {
        if skip[w] {
            continue;
        }
        for_meeting(tile, &ranges, &box_index, &mut |i| {
            let v = tile.overlap(boxes[i]);
            if v > 0 {
                receivers[i].push((w, v));
            }
        });
    }
    for (i, recv) in receivers.iter().enumerate() {
        if recv.is_empty() {
            continue;
        }
        let srcs: Vec<usize> = senders[i].iter().map(|s| s.0).collect();
        tally.fan_by_receiver(&srcs, recv, elem);
        total += recv.iter().map(|r| r.1).sum::<u64>() * srcs.len() as u64;
    }
    // Nobody receives its own result.
    for (w, tile) in tiles.iter().enumerate() {
        if skip[w] {
            continue;
        }
        let (b, src) = &entries[own[w]];
        let v = tile.overlap(b);
        if v > 0 {
            tally.remove(*src, w, v * elem);
            total -= v;
        }
    }
    total
}

/// The distinct ranges of one dim, sorted, and the longest one's length:
/// the ranges meeting `[a, b)` start in `(a − longest, b)`, found by binary
/// search instead of testing every range (a box per worker at a level of
/// many parts, issue 44).
struct Ranges {
    sorted: Vec<(i64, i64)>,
    longest: i64,
}

impl Ranges {
    fn new(mut sorted: Vec<(i64, i64)>) -> Self {
        sorted.sort_unstable();
        sorted.dedup();
        let longest = sorted.iter().map(|r| r.1 - r.0).max().unwrap_or(0);
        Ranges { sorted, longest }
    }

    /// The ranges meeting `t`, in order.
    fn meeting(&self, t: (i64, i64)) -> Vec<(i64, i64)> {
        let meets = |r: &(i64, i64)| r.1.min(t.1) > r.0.max(t.0);
        let from = self.sorted.partition_point(|r| r.0 <= t.0 - self.longest);
        let to = self.sorted.partition_point(|r| r.0 < t.1);
        self.sorted[from..to.max(from)]
            .iter()
            .copied()
            .filter(meets)
            .collect()
    }
}

/// Call `f` with every box of `index` (boxes named by their ranges, one of
/// `ranges[d]` per dim) that meets `tile` in every dim.
fn for_meeting(
    tile: &Region,
    ranges: &[Ranges],
    index: &HashMap<&Region, usize>,
    f: &mut dyn FnMut(usize),
) {
    let per_dim: Vec<Vec<(i64, i64)>> = ranges
        .iter()
        .zip(&tile.0)
        .map(|(rs, &t)| rs.meeting(t))
        .collect();
    if per_dim.iter().any(Vec::is_empty) {
        return;
    }
    let mut pick = vec![0usize; per_dim.len()];
    let mut b = Region(per_dim.iter().map(|r| r[0]).collect());
    loop {
        if let Some(&i) = index.get(&b) {
            f(i);
        }
        // Next combination (odometer, last dim fastest).
        let mut d = per_dim.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            pick[d] += 1;
            if pick[d] < per_dim[d].len() {
                b.0[d] = per_dim[d][pick[d]];
                break;
            }
            pick[d] = 0;
            b.0[d] = per_dim[d][0];
        }
    }
}
