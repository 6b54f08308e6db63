//! The pairwise strategy-selection problem.
//!
//! Minimise Σ_v node_cost[v][x_v] + Σ_e edge_cost[e][x_u][x_v] over one
//! configuration x_v per node. Costs are bytes communicated per training step
//! (any additive unit works); `f64::INFINITY` marks an infeasible
//! configuration or pair (e.g. one that does not fit device memory).

use serde::{Deserialize, Serialize};

/// A strategy-selection problem: nodes with configurations, edges with pairwise costs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    /// Nodes, in a topological order of the coarsened graph.
    pub nodes: Vec<Node>,
    /// Edges.
    pub edges: Vec<Edge>,
}

/// A node: a coarsened group of operators/tensors with its candidate configurations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Name for reports (e.g. the forward op of the group).
    pub name: String,
    /// Cost of each configuration (bytes; `INFINITY` = infeasible). Its length
    /// is the number of configurations (≥ 1).
    pub costs: Vec<f64>,
    /// Bytes of the tensors the node holds; counts toward critical-path length (§4.2.2).
    pub weight: f64,
}

/// An edge between two nodes with a cost per pair of configurations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// Producer-side node index.
    pub from: usize,
    /// Consumer-side node index.
    pub to: usize,
    /// Row-major `[configs(from)][configs(to)]` costs (bytes).
    pub cost: Vec<f64>,
    /// Bytes of the tensor(s) on this edge; counts toward critical-path length.
    pub weight: f64,
}

/// One configuration index per node.
pub type Assignment = Vec<usize>;

/// Why a problem is malformed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProblemError {
    /// A node has no configuration.
    #[error("node {node} (`{name}`) has no configuration")]
    EmptyNode {
        /// Node index.
        node: usize,
        /// Node name.
        name: String,
    },
    /// An edge refers to a node that does not exist, or to itself.
    #[error("edge {edge} connects {from} → {to}, but there are {nodes} nodes (and self-edges are not allowed)")]
    BadEdge {
        /// Edge index.
        edge: usize,
        /// Its `from`.
        from: usize,
        /// Its `to`.
        to: usize,
        /// Number of nodes.
        nodes: usize,
    },
    /// An edge's cost matrix has the wrong size.
    #[error("edge {edge} has {got} costs, expected {expected} ({rows} × {cols})")]
    EdgeSize {
        /// Edge index.
        edge: usize,
        /// Entries present.
        got: usize,
        /// Entries expected.
        expected: usize,
        /// Configurations of `from`.
        rows: usize,
        /// Configurations of `to`.
        cols: usize,
    },
    /// A cost is NaN or negative.
    #[error("a cost is NaN or negative ({what})")]
    BadCost {
        /// Where.
        what: String,
    },
    /// Every assignment has infinite cost.
    #[error("no feasible assignment: every choice has infinite cost")]
    Infeasible,
    /// The exact solver failed or the problem is too large for it.
    #[error("exact solver: {0}")]
    Solver(String),
}

/// Why a search stopped (a limit is a result, not an error): `Optimal` and
/// `Completed` only when no limit cut the search short; otherwise the limit
/// that did, with the best assignment found so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// Proven optimal (exact solver, or DP on a chain/path problem).
    Optimal,
    /// A heuristic ran to completion (every node fixed, refinement converged).
    Completed,
    /// CriticalDP's refinement was still improving the plan when it reached
    /// [`SearchLimits::refine_rounds`].
    RoundLimit,
    /// The exact solver reached [`SearchLimits::ilp_time_limit`] before it
    /// proved its assignment optimal.
    TimeLimit,
}

impl StopReason {
    /// Whether a limit stopped the search (not `Optimal` or `Completed`).
    pub fn is_limit(self) -> bool {
        matches!(self, StopReason::RoundLimit | StopReason::TimeLimit)
    }

    /// The reason of a search made of several (a plan's recursion levels,
    /// outermost first): the first limit that stopped one of them; else
    /// `Optimal` when every part was optimal (also when there is none); else
    /// `Completed`.
    pub fn overall(parts: impl IntoIterator<Item = StopReason>) -> StopReason {
        let mut overall = StopReason::Optimal;
        for r in parts {
            if r.is_limit() {
                return r;
            }
            if r == StopReason::Completed {
                overall = StopReason::Completed;
            }
        }
        overall
    }
}

/// The budgets of the searches that have one. Counts, not time, unless
/// asked: with the default limits a plan never depends on the machine's
/// speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SearchLimits {
    /// CriticalDP: most rounds of refinement (each visits every critical
    /// path, every adjacent pair and every node once); refinement still
    /// improving after them stops with [`StopReason::RoundLimit`].
    pub refine_rounds: usize,
    /// The ILP: wall-clock budget of one level's solve; `None` (default):
    /// solve to a proven optimum. A limited solve starts from CriticalDP's
    /// assignment, so it always has one to return
    /// ([`StopReason::TimeLimit`] when the budget ran out).
    pub ilp_time_limit: Option<std::time::Duration>,
}

impl SearchLimits {
    /// CriticalDP's default round limit.
    pub const REFINE_ROUNDS: usize = 8;
}

impl Default for SearchLimits {
    fn default() -> Self {
        SearchLimits {
            refine_rounds: Self::REFINE_ROUNDS,
            ilp_time_limit: None,
        }
    }
}

/// An assignment, its cost and why the search stopped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// One configuration per node.
    pub assignment: Assignment,
    /// Its total cost (bytes).
    pub cost: f64,
    /// Why the search stopped.
    pub stop_reason: StopReason,
}

impl Problem {
    /// Check sizes and costs.
    pub fn validate(&self) -> Result<(), ProblemError> {
        for (i, n) in self.nodes.iter().enumerate() {
            if n.costs.is_empty() {
                return Err(ProblemError::EmptyNode {
                    node: i,
                    name: n.name.clone(),
                });
            }
            if n.costs.iter().any(|c| c.is_nan() || *c < 0.0) {
                return Err(ProblemError::BadCost {
                    what: format!("node `{}`", n.name),
                });
            }
        }
        for (i, e) in self.edges.iter().enumerate() {
            let nodes = self.nodes.len();
            if e.from >= nodes || e.to >= nodes || e.from == e.to {
                return Err(ProblemError::BadEdge {
                    edge: i,
                    from: e.from,
                    to: e.to,
                    nodes,
                });
            }
            let (rows, cols) = (self.nodes[e.from].costs.len(), self.nodes[e.to].costs.len());
            if e.cost.len() != rows * cols {
                return Err(ProblemError::EdgeSize {
                    edge: i,
                    got: e.cost.len(),
                    expected: rows * cols,
                    rows,
                    cols,
                });
            }
            if e.cost.iter().any(|c| c.is_nan() || *c < 0.0) {
                return Err(ProblemError::BadCost {
                    what: format!("edge {i}"),
                });
            }
        }
        Ok(())
    }

    /// Number of configurations of node `v`.
    pub fn configs(&self, v: usize) -> usize {
        self.nodes[v].costs.len()
    }

    /// Cost of an edge under configurations `a` (of `from`) and `b` (of `to`).
    pub fn edge_cost(&self, e: &Edge, a: usize, b: usize) -> f64 {
        e.cost[a * self.nodes[e.to].costs.len() + b]
    }

    /// Total cost of an assignment (bytes).
    pub fn cost(&self, a: &[usize]) -> f64 {
        let nodes: f64 = self.nodes.iter().zip(a).map(|(n, &x)| n.costs[x]).sum();
        let edges: f64 = self
            .edges
            .iter()
            .map(|e| self.edge_cost(e, a[e.from], a[e.to]))
            .sum();
        nodes + edges
    }

    /// Edges incident to each node (indices into `edges`).
    pub fn incidence(&self) -> Vec<Vec<usize>> {
        let mut inc = vec![Vec::new(); self.nodes.len()];
        for (i, e) in self.edges.iter().enumerate() {
            inc[e.from].push(i);
            inc[e.to].push(i);
        }
        inc
    }
}
