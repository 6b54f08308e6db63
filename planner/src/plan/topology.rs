//! A cluster's topology and the communication time of a plan on it.
//!
//! Takes `NODES×GPUS` (nodes of equal size, ranks numbered node by node:
//! rank r is on node ⌊r / GPUS⌋), one bandwidth per link level (inside a
//! node, across nodes) and a (partial) plan; gives the bytes and the
//! estimated seconds per link level that every operator's transfers cost
//! ([`LinkLoad`]), and a whole plan's [`LinkReport`]. With a topology the
//! searches minimise this estimate instead of bytes ([`super::level`]) and
//! the recursion's outer levels are the node levels ([`Topology::factors`]:
//! k = (prime factors of NODES) · (prime factors of GPUS), so the outermost
//! levels split the workers into groups of whole nodes and only they cross
//! the slow link).
//!
//! The estimate (seconds of one training step's communication):
//! * Every GPU has one link per level, full duplex, of the level's bandwidth
//!   per direction (NVLink to the node's switch; its own InfiniBand NIC
//!   across nodes). A transfer between ranks on the same node uses the
//!   intra-node link of both; any other the inter-node link of both.
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
//! Default bandwidths (per GPU, per direction; override them with
//! [`Topology::with_bandwidths`]): NVLink 4 on an H100 SXM, 18 links ×
//! 25 GB/s = 450 GB/s (NVIDIA H100 datasheet: 900 GB/s bidirectional), and
//! one 400 Gb/s NDR InfiniBand NIC per GPU = 50 GB/s (DGX H100: eight
//! ConnectX-7 400 Gb/s ports for the compute fabric).

use super::cost::{CostMemo, CostModel, OpChoice};
use super::level::Decisions;
use super::model::Model;
use super::transfer::{Phase, Piece};
use crate::graph::{Graph, OpId};

/// A link level of a cluster, slowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Link {
    /// Between nodes (InfiniBand by default).
    InterNode,
    /// Inside a node (NVLink by default).
    IntraNode,
}

impl Link {
    /// Both levels, in the order of [`LinkLoad`]'s arrays (slowest first).
    pub const ALL: [Link; 2] = [Link::InterNode, Link::IntraNode];

    /// `inter-node` or `intra-node`.
    pub fn name(self) -> &'static str {
        match self {
            Link::InterNode => "inter-node",
            Link::IntraNode => "intra-node",
        }
    }
}

/// Why a topology or a bandwidth could not be read (CLI arguments).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// Not `NODESxGPUS`.
    #[error("`{0}` is not a topology; write NODESxGPUS with both at least 1, e.g. `2x8` (2 nodes of 8 GPUs)")]
    Shape(String),
    /// Not `intra=BW,inter=BW`.
    #[error("`{0}` is not a link bandwidth list; write e.g. `intra=450G,inter=50G` (bytes per second per GPU and direction; K, M, G, T = 10^3 … 10^12; a trailing `b` means bits)")]
    Bandwidth(String),
    /// The topology's GPUs are not the workers.
    #[error("--topology {nodes}x{gpus} has {} GPUs but --workers is {workers}; use -k {}", nodes * gpus, nodes * gpus)]
    Workers {
        /// Nodes.
        nodes: usize,
        /// GPUs per node.
        gpus: usize,
        /// The requested worker count.
        workers: usize,
    },
}

/// A cluster of `nodes` nodes of `gpus_per_node` GPUs each (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Topology {
    /// Number of nodes (≥ 1).
    pub nodes: usize,
    /// GPUs per node (≥ 1).
    pub gpus_per_node: usize,
    /// Bandwidth of one GPU's intra-node link, bytes per second per direction.
    pub intra_bytes_per_s: u64,
    /// Bandwidth of one GPU's inter-node link, bytes per second per direction.
    pub inter_bytes_per_s: u64,
}

impl Topology {
    /// NVLink 4 of an H100 SXM: 450 GB/s per direction (see the module doc).
    pub const NVLINK4_BYTES_PER_S: u64 = 450_000_000_000;
    /// One 400 Gb/s NDR InfiniBand NIC per GPU: 50 GB/s per direction.
    pub const NDR_BYTES_PER_S: u64 = 50_000_000_000;

    /// `nodes` × `gpus_per_node` GPUs with the default bandwidths.
    pub fn new(nodes: usize, gpus_per_node: usize) -> Self {
        Topology {
            nodes: nodes.max(1),
            gpus_per_node: gpus_per_node.max(1),
            intra_bytes_per_s: Self::NVLINK4_BYTES_PER_S,
            inter_bytes_per_s: Self::NDR_BYTES_PER_S,
        }
    }

    /// Read `NODESxGPUS`, e.g. `2x8` (`X` and `×` work too).
    ///
    /// Errors: [`TopologyError::Shape`].
    pub fn parse(s: &str) -> Result<Self, TopologyError> {
        let bad = || TopologyError::Shape(s.to_string());
        let t = s.trim().replace(['X', '×'], "x");
        let (a, b) = t.split_once('x').ok_or_else(bad)?;
        let n: usize = a.trim().parse().map_err(|_| bad())?;
        let g: usize = b.trim().parse().map_err(|_| bad())?;
        if n == 0 || g == 0 {
            return Err(bad());
        }
        Ok(Topology::new(n, g))
    }

    /// This topology with the bandwidths of a list `intra=BW,inter=BW`
    /// (either may be left out; BW in bytes per second per GPU and direction,
    /// `450G` = 450·10⁹, `400Gb` = 400·10⁹ bits = 50·10⁹ bytes).
    ///
    /// Errors: [`TopologyError::Bandwidth`].
    pub fn with_bandwidths(mut self, list: &str) -> Result<Self, TopologyError> {
        let bad = || TopologyError::Bandwidth(list.to_string());
        for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(bad)?;
            let bw = parse_rate(value.trim()).ok_or_else(bad)?;
            match key.trim() {
                "intra" => self.intra_bytes_per_s = bw,
                "inter" => self.inter_bytes_per_s = bw,
                _ => return Err(bad()),
            }
        }
        Ok(self)
    }

    /// Number of GPUs (the workers k).
    pub fn workers(&self) -> usize {
        self.nodes * self.gpus_per_node
    }

    /// Errors: [`TopologyError::Workers`] when the topology does not have `workers` GPUs.
    pub fn check_workers(&self, workers: usize) -> Result<(), TopologyError> {
        if self.workers() == workers {
            Ok(())
        } else {
            Err(TopologyError::Workers {
                nodes: self.nodes,
                gpus: self.gpus_per_node,
                workers,
            })
        }
    }

    /// The recursion's factors: the prime factors of the node count (largest
    /// first), then those of the GPUs per node; the first
    /// [`Topology::node_levels`] levels cross nodes.
    pub fn factors(&self) -> Vec<usize> {
        let mut f = super::tile::factorize(self.nodes);
        f.extend(super::tile::factorize(self.gpus_per_node));
        f
    }

    /// How many of [`Topology::factors`]' outer levels split between nodes.
    pub fn node_levels(&self) -> usize {
        super::tile::factorize(self.nodes).len()
    }

    /// Bandwidth of a link level (bytes per second per GPU and direction).
    pub fn bandwidth(&self, link: Link) -> u64 {
        match link {
            Link::InterNode => self.inter_bytes_per_s,
            Link::IntraNode => self.intra_bytes_per_s,
        }
    }

    /// The link between workers `a` and `b` of a plan with `workers`
    /// workers, each the group of `self.workers() / workers` consecutive
    /// ranks: intra-node when both groups lie inside one node.
    pub fn link(&self, a: usize, b: usize, workers: usize) -> Link {
        let s = (self.workers() / workers.max(1)).max(1);
        let g = self.gpus_per_node;
        let node = |v: usize| -> Option<usize> {
            let (first, last) = (v * s / g, (v * s + s - 1) / g);
            (first == last).then_some(first)
        };
        match (node(a), node(b)) {
            (Some(x), Some(y)) if x == y => Link::IntraNode,
            _ => Link::InterNode,
        }
    }
}

/// `450G`, `50000000000`, `400Gb` (bits) → bytes per second.
fn parse_rate(s: &str) -> Option<u64> {
    let (s, bits) = match s.strip_suffix('b') {
        Some(rest) => (rest, true),
        None => (s.strip_suffix('B').unwrap_or(s), false),
    };
    let (num, mul) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1e3),
        'M' => (&s[..s.len() - 1], 1e6),
        'G' | 'g' => (&s[..s.len() - 1], 1e9),
        'T' | 't' => (&s[..s.len() - 1], 1e12),
        _ => (s, 1.0),
    };
    let v: f64 = num.trim().parse().ok()?;
    let v = v * mul / if bits { 8.0 } else { 1.0 };
    (v.is_finite() && v >= 1.0).then_some(v as u64)
}

/// Bytes and estimated seconds of one communication phase (or a sum of
/// phases) per link level, indexed like [`Link::ALL`].
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkLoad {
    /// Bytes moved over the level by all workers together.
    pub bytes: [u64; 2],
    /// Estimated seconds on the level (see the module doc).
    pub seconds: [f64; 2],
}

impl LinkLoad {
    /// Estimated seconds over all levels.
    pub fn total_seconds(&self) -> f64 {
        self.seconds.iter().sum()
    }

    /// Estimated nanoseconds over all levels (the searches' cost unit:
    /// magnitudes like bytes', which the exact solver's tolerances expect).
    pub fn nanos(&self) -> f64 {
        self.total_seconds() * 1e9
    }

    /// Bytes over all levels.
    pub fn total_bytes(&self) -> u64 {
        self.bytes.iter().sum()
    }

    fn add(&mut self, o: &LinkLoad) {
        for i in 0..2 {
            self.bytes[i] += o.bytes[i];
            self.seconds[i] += o.seconds[i];
        }
    }
}

/// A plan's communication on a topology: [`LinkLoad`] summed over its
/// operators, with the topology it was priced on.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkReport {
    /// The cluster.
    pub topology: Topology,
    /// Bytes and seconds per link level.
    pub load: LinkLoad,
}

impl LinkReport {
    /// Estimated seconds of communication per training step.
    pub fn seconds(&self) -> f64 {
        self.load.total_seconds()
    }
}

/// Accumulates `(src, dst, bytes)` transfers into a [`LinkLoad`].
struct Meter<'t> {
    topo: &'t Topology,
    workers: usize,
    /// Per worker, per level: (sent, received) bytes.
    per: Vec<[(u64, u64); 2]>,
    bytes: [u64; 2],
}

impl<'t> Meter<'t> {
    fn new(topo: &'t Topology, workers: usize) -> Self {
        Meter {
            topo,
            workers,
            per: vec![[(0, 0); 2]; workers],
            bytes: [0; 2],
        }
    }

    fn add(&mut self, src: usize, dst: usize, bytes: u64) {
        if src == dst || bytes == 0 {
            return;
        }
        let l = self.topo.link(src, dst, self.workers) as usize;
        self.per[src][l].0 += bytes;
        self.per[dst][l].1 += bytes;
        self.bytes[l] += bytes;
    }

    fn finish(self) -> LinkLoad {
        // Each worker stands for s ranks whose links share its bytes.
        let s = (self.topo.workers() / self.workers.max(1)).max(1) as f64;
        let mut seconds = [0.0; 2];
        for link in Link::ALL {
            let l = link as usize;
            let busiest = self
                .per
                .iter()
                .map(|p| p[l].0.max(p[l].1))
                .max()
                .unwrap_or(0);
            seconds[l] = busiest as f64 / (s * self.topo.bandwidth(link) as f64);
        }
        LinkLoad {
            bytes: self.bytes,
            seconds,
        }
    }
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
            let t = self.graph.op(op).inputs[slot];
            let elem = self.graph.tensor(t).dtype.size_bytes();
            let mut m = Meter::new(topo, self.workers());
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
            let tensor = self.graph.tensor(t);
            let elem = tensor.dtype.size_bytes();
            let mut pieces: Vec<Piece> = Vec::new();
            self.output_pieces(op, slot, choices, splits, &mut |p| pieces.push(p));
            let workers = self.workers();
            let mut m = Meter::new(topo, workers);
            if let Some(ring) = self.ring(op, slot, choices, splits, &pieces) {
                for (r, sent) in ring.into_iter().enumerate() {
                    m.add(r, (r + 1) % workers, sent * elem);
                }
            } else {
                for p in &pieces {
                    m.add(p.src, p.dst, p.region.volume() * elem);
                }
            }
            m.finish()
        })
    }

    /// Elements each rank sends to the next in the ring collectives that
    /// replace `pieces` (module doc), or `None` when the output is not
    /// replicated on every worker or the ring would move other bytes.
    fn ring(
        &self,
        op: OpId,
        slot: usize,
        choices: &[OpChoice],
        splits: &[Option<u32>],
        pieces: &[Piece],
    ) -> Option<Vec<u64>> {
        let shape = &self.graph.tensor(self.graph.op(op).outputs[slot]).shape;
        if shape.is_empty() || pieces.is_empty() || splits.iter().any(Option::is_some) {
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
        let volume = |phase: fn(&Phase) -> bool| -> u64 {
            pieces
                .iter()
                .filter(|p| phase(&p.phase))
                .map(|p| p.region.volume())
                .sum()
        };
        let (outs, gathers) = (
            volume(|p| matches!(p, Phase::Output { .. })),
            volume(|p| matches!(p, Phase::Gather { .. })),
        );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_shapes_and_bandwidths() {
        let t = Topology::parse("2x8").unwrap();
        assert_eq!((t.nodes, t.gpus_per_node, t.workers()), (2, 8, 16));
        assert_eq!(t.factors(), vec![2, 2, 2, 2]);
        assert_eq!(t.node_levels(), 1);
        assert_eq!(Topology::parse("3X4").unwrap().factors(), vec![3, 2, 2]);
        assert_eq!(Topology::parse("2x3").unwrap().factors(), vec![2, 3]);
        for bad in ["", "2", "0x8", "2x", "ax8", "2x8x2"] {
            assert!(Topology::parse(bad).is_err(), "{bad}");
        }
        let t = t.with_bandwidths("intra=300G, inter=400Gb").unwrap();
        assert_eq!(t.intra_bytes_per_s, 300_000_000_000);
        assert_eq!(t.inter_bytes_per_s, 50_000_000_000);
        for bad in ["intra", "intra=", "intra=fast", "up=1G", "inter=0"] {
            assert!(t.with_bandwidths(bad).is_err(), "{bad}");
        }
        assert!(t.check_workers(16).is_ok());
        assert!(t.check_workers(8).is_err());
    }

    #[test]
    fn links_follow_node_boundaries() {
        let t = Topology::new(2, 4);
        // Ranks: node 0 = 0..4, node 1 = 4..8.
        assert_eq!(t.link(0, 3, 8), Link::IntraNode);
        assert_eq!(t.link(3, 4, 8), Link::InterNode);
        // Two workers of four ranks each: one per node.
        assert_eq!(t.link(0, 1, 2), Link::InterNode);
        // Four workers of two ranks: 0 and 1 share node 0.
        assert_eq!(t.link(0, 1, 4), Link::IntraNode);
        assert_eq!(t.link(1, 2, 4), Link::InterNode);
        // 2 nodes of 3 GPUs, 3 workers of 2 ranks: worker 1 (ranks 2, 3) spans both nodes.
        let t = Topology::new(2, 3);
        assert_eq!(t.link(0, 1, 3), Link::InterNode);
        assert_eq!(t.link(0, 1, 6), Link::IntraNode);
    }
}
