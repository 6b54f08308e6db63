//! The coarsened graph of a plan's first level, for pictures.
//!
//! Takes nothing; gives [`CoarseGraph`], which the planner fills
//! ([`super::Planned::coarse`]) and [`super::dot`] draws.

/// The coarsened graph and the first level's decision per node (for `--dot`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CoarseGraph {
    /// Node names (clusters).
    pub names: Vec<String>,
    /// Number of operators and tensors per node.
    pub sizes: Vec<(usize, usize)>,
    /// The decision per node at the first level, e.g. `split dim 0` or `reduce k (Sum)`.
    pub labels: Vec<String>,
    /// Edges between nodes.
    pub edges: Vec<(usize, usize)>,
}
