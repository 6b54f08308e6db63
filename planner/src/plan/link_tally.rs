//! Bytes each worker sends and receives per link level, added one transfer
//! at a time or a whole fan of like transfers at once.
//!
//! Takes a [`Topology`] and the workers of a (partial) plan (each the group
//! of `topology.workers() / workers` consecutive ranks); gives the
//! [`LinkLoad`] of the transfers added ([`super::topology`]'s estimate: a
//! level's seconds are the busiest worker's sent or received bytes on it
//! over the level's bandwidth, spread over the group's links).
//!
//! A fan (every source sends to every destination, the bytes depending on
//! only one end) is added in O(sources + destinations) by counting the
//! other end per node: the pair (a, b) is intra-node exactly when both
//! workers lie inside one node and it is the same node
//! ([`Topology::link`]). The per-worker sums are integers, so a fan gives
//! exactly the sums of its pairs added one by one; pairs a fan must not
//! hold (a worker to itself, a worker's own result) are taken out with
//! [`Tally::remove`].

use super::cluster::{Link, LinkLoad, Topology};

const INTER: usize = Link::InterNode as usize;
const INTRA: usize = Link::IntraNode as usize;

/// Per worker and link level, (sent, received) bytes (see the module doc).
pub(crate) struct Tally<'t> {
    topo: &'t Topology,
    /// The node every worker lies inside, `None` when its ranks span nodes.
    node: Vec<Option<usize>>,
    /// Per worker, per level: (sent, received) bytes.
    per: Vec<[(u64, u64); 2]>,
    /// Per node, a fan's sum (zero between fans).
    scratch: Vec<u64>,
    /// The nodes whose scratch is not zero.
    touched: Vec<usize>,
}

impl<'t> Tally<'t> {
    /// No transfers yet among `workers` workers on `topo`.
    pub(crate) fn new(topo: &'t Topology, workers: usize) -> Self {
        let s = (topo.workers() / workers.max(1)).max(1);
        let g = topo.gpus_per_node;
        let node = (0..workers)
            .map(|v| {
                let (first, last) = (v * s / g, (v * s + s - 1) / g);
                (first == last).then_some(first)
            })
            .collect::<Vec<_>>();
        let nodes = node.iter().flatten().max().map_or(0, |n| n + 1);
        Tally {
            topo,
            scratch: vec![0; nodes],
            node,
            per: vec![[(0, 0); 2]; workers],
            touched: Vec::new(),
        }
    }

    /// The level of the link between workers `a` and `b` (as [`Topology::link`]).
    fn level(&self, a: usize, b: usize) -> usize {
        match (self.node[a], self.node[b]) {
            (Some(x), Some(y)) if x == y => INTRA,
            _ => INTER,
        }
    }

    /// One transfer of `bytes` from `src` to `dst` (nothing when `src == dst`).
    pub(crate) fn add(&mut self, src: usize, dst: usize, bytes: u64) {
        if src == dst || bytes == 0 {
            return;
        }
        let l = self.level(src, dst);
        self.per[src][l].0 += bytes;
        self.per[dst][l].1 += bytes;
    }

    /// Take out a transfer a fan added (also `src == dst`, which a fan adds
    /// on the level [`Tally::level`] gives it).
    pub(crate) fn remove(&mut self, src: usize, dst: usize, bytes: u64) {
        let l = self.level(src, dst);
        self.per[src][l].0 -= bytes;
        self.per[dst][l].1 -= bytes;
    }

    /// Per node, the sum of the weights of `items` (into `self.scratch`,
    /// the nodes touched listed in `self.touched`), and the sum over all.
    fn per_node(&mut self, items: impl Iterator<Item = (usize, u64)>) -> u64 {
        let mut all = 0;
        for (w, x) in items {
            if let Some(n) = self.node[w] {
                if self.scratch[n] == 0 {
                    self.touched.push(n);
                }
                self.scratch[n] += x;
            }
            all += x;
        }
        all
    }

    /// Zero what [`Tally::per_node`] left in the scratch.
    fn clear_scratch(&mut self) {
        for n in self.touched.drain(..) {
            self.scratch[n] = 0;
        }
    }

    /// Add `(bytes, total)` split by whether `w`'s node holds `bytes` of it
    /// (the per-node sums of [`Tally::per_node`]).
    fn split(&mut self, w: usize, all: u64, sent: bool, mul: u64) {
        let intra = self.node[w].map_or(0, |n| self.scratch[n]);
        let p = &mut self.per[w];
        let (a, b) = ((all - intra) * mul, intra * mul);
        if sent {
            p[INTER].0 += a;
            p[INTRA].0 += b;
        } else {
            p[INTER].1 += a;
            p[INTRA].1 += b;
        }
    }

    /// Every `(src, n)` of `srcs` sends `n · elem` bytes to every worker of
    /// `dsts`, itself included (take such pairs out with [`Tally::remove`]).
    pub(crate) fn fan_by_sender(&mut self, srcs: &[(usize, u64)], dsts: &[usize], elem: u64) {
        let n = self.per_node(dsts.iter().map(|&d| (d, 1)));
        for &(u, x) in srcs {
            self.split(u, n, true, x * elem);
        }
        self.clear_scratch();
        let total = self.per_node(srcs.iter().copied());
        for &d in dsts {
            self.split(d, total, false, elem);
        }
        self.clear_scratch();
    }

    /// Every worker of `srcs` sends `n · elem` bytes to every `(dst, n)` of
    /// `dsts`, itself included (take such pairs out with [`Tally::remove`]).
    pub(crate) fn fan_by_receiver(&mut self, srcs: &[usize], dsts: &[(usize, u64)], elem: u64) {
        let n = self.per_node(srcs.iter().map(|&s| (s, 1)));
        for &(w, x) in dsts {
            self.split(w, n, false, x * elem);
        }
        self.clear_scratch();
        let total = self.per_node(dsts.iter().copied());
        for &s in srcs {
            self.split(s, total, true, elem);
        }
        self.clear_scratch();
    }

    /// The load of everything added: bytes per level (all receivers
    /// together) and the busiest worker's seconds per level.
    pub(crate) fn finish(self) -> LinkLoad {
        // Each worker stands for s ranks whose links share its bytes.
        let s = (self.topo.workers() / self.per.len().max(1)).max(1) as f64;
        let mut load = LinkLoad::default();
        for link in Link::ALL {
            let l = link as usize;
            load.bytes[l] = self.per.iter().map(|p| p[l].1).sum();
            let busiest = self
                .per
                .iter()
                .map(|p| p[l].0.max(p[l].1))
                .max()
                .unwrap_or(0);
            load.seconds[l] = busiest as f64 / (s * self.topo.bandwidth(link) as f64);
        }
        load
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fan gives the sums of its pairs added one by one.
    #[test]
    fn fans_equal_their_pairs() {
        for (topo, workers) in [
            (Topology::new(2, 4), 8),
            (Topology::new(3, 2), 3),
            (Topology::new(4, 4), 4),
        ] {
            let srcs: Vec<(usize, u64)> = (0..workers).map(|u| (u, 3 + u as u64)).collect();
            let dsts: Vec<usize> = (0..workers).filter(|d| d % 2 == 0).collect();
            let mut fan = Tally::new(&topo, workers);
            fan.fan_by_sender(&srcs, &dsts, 4);
            let mut pairs = Tally::new(&topo, workers);
            for &(u, x) in &srcs {
                for &d in &dsts {
                    pairs.add(u, d, x * 4);
                }
            }
            for &d in &dsts {
                fan.remove(d, d, (3 + d as u64) * 4);
            }
            assert_eq!(fan.per, pairs.per);
            let both = (fan.finish(), pairs.finish());
            assert_eq!(both.0, both.1);
            let weights: Vec<(usize, u64)> = dsts.iter().map(|&d| (d, 7 * d as u64 + 1)).collect();
            let srcs: Vec<usize> = (0..workers).collect();
            let mut fan = Tally::new(&topo, workers);
            fan.fan_by_receiver(&srcs, &weights, 2);
            let mut pairs = Tally::new(&topo, workers);
            for &s in &srcs {
                for &(d, x) in &weights {
                    pairs.add(s, d, x * 2);
                }
            }
            for &(d, x) in &weights {
                fan.remove(d, d, x * 2);
            }
            assert_eq!(fan.per, pairs.per);
        }
    }
}
