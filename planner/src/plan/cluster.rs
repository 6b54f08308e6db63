//! A cluster: its nodes, GPUs and link levels, and a plan's communication
//! per link level.
//!
//! Takes `NODES×GPUS` (nodes of equal size, ranks numbered node by node:
//! rank r is on node ⌊r / GPUS⌋) and one bandwidth per link level (inside a
//! node, across nodes); gives the [`Topology`] (which link joins two
//! workers, the recursion levels it implies: [`Topology::factors`]) and the
//! types a plan's estimated communication is reported in: bytes and seconds
//! per link level of one phase or a sum of phases ([`LinkLoad`]), and of a
//! whole plan with the topology it was priced on ([`LinkReport`]). How a
//! plan's transfers are priced on it is [`super::topology`].
//!
//! Every GPU has one link per level, full duplex, of the level's bandwidth
//! per direction (NVLink to the node's switch; its own InfiniBand NIC across
//! nodes). A transfer between ranks on the same node uses the intra-node
//! link of both; any other the inter-node link of both.
//!
//! Default bandwidths (per GPU, per direction; override them with
//! [`Topology::with_bandwidths`]): NVLink 4 on an H100 SXM, 18 links ×
//! 25 GB/s = 450 GB/s (NVIDIA H100 datasheet: 900 GB/s bidirectional), and
//! one 400 Gb/s NDR InfiniBand NIC per GPU = 50 GB/s (DGX H100: eight
//! ConnectX-7 400 Gb/s ports for the compute fabric).

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
    /// Estimated seconds on the level (the estimate of [`super::topology`]).
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

    /// Add `o`'s bytes and seconds, level by level.
    pub(crate) fn add(&mut self, o: &LinkLoad) {
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
