//! The planner: training graphs and the partition search (Tofu §4).
//!
//! * [`graph`]: the dataflow IR (petgraph inside, typed ids outside),
//!   training-graph construction from the specs' gradient declarations,
//!   memory accounting and the versioned graph JSON format.
//! * [`zoo`]: the benchmark models (MLP, WResNet, LSTM RNN, GPT).
//! * [`search`]: the searches on an abstract pairwise problem (chain DP,
//!   CriticalDP, the exact ILP, brute force).
//! * [`plan`]: tiles, access model, cost model, levels and plans (Tofu §4).
#![warn(missing_docs)]

pub mod graph;
pub mod plan;
pub mod search;
pub mod zoo;
