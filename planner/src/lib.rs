//! The planner: training graphs and the partition search (Tofu §4).
//!
//! * [`graph`], [`zoo`]: re-exports of the `graph` crate (the dataflow IR,
//!   training-graph construction, the graph file format, the model zoo),
//!   which the planner reads.
//! * [`search`]: the searches on an abstract pairwise problem (chain DP,
//!   CriticalDP, the exact ILP, brute force).
//! * [`plan`]: tiles, access model, cost model, levels and plans (Tofu §4).
#![warn(missing_docs)]

pub use ::graph;
pub use ::graph::zoo;
pub mod plan;
pub mod search;
