//! Strategy search (Tofu §4) on an abstract pairwise problem.
//!
//! Takes a [`Problem`]: nodes (coarsened groups of operators and tensors,
//! §4.2.1), each with candidate configurations and a cost per configuration,
//! and edges with a cost per pair of configurations (bytes moved when the two
//! ends are configured that way). Gives an [`Assignment`] of one configuration
//! per node from one of several searches:
//!
//! * [`path_dp`]: the dynamic program of §4.1, optimal on chains;
//! * [`critical_dp`]: CriticalDP (§4.2.2): DP along the critical path, fix,
//!   repeat on secondary paths;
//! * [`ilp`]: the exact pairwise MIP with marginal constraints (the reference);
//! * [`elimination`]: exact DP by variable elimination on small-treewidth graphs;
//! * [`greedy`]: Spartan-style greedy, heaviest node first (a baseline);
//! * [`brute`]: exhaustive enumeration (tests only; tiny problems).
//!
//! Building a `Problem` from a training graph (cost model, coarsening,
//! recursion over worker factors) happens upstream of this module; nothing
//! here knows about tensors or operators, only costs.

pub mod brute;
pub mod critical_dp;
pub mod elimination;
pub mod greedy;
pub mod ilp;
pub mod path_dp;
pub mod problem;

pub use problem::{
    Assignment, Edge, Node, Problem, ProblemError, SearchLimits, SearchResult, StopReason,
};
