//! Plans: how every tensor and operator is partitioned over k workers, and
//! what that costs (Tofu §4).
//!
//! * [`tile`]: boxes, uneven splits, worker digits, factorisation of k.
//! * [`access`]: which input elements a share of an operator reads.
//! * [`model`]: per-operator access models and strategies for a graph.
//! * [`cost`]: the exact bytes of a (partial) plan per operator and tensor.
//! * [`coarsen`]: the coarsening rules of §4.2.1, one file each.
//! * [`level`]: one recursion level as a pairwise search problem.
//! * [`memory`]: per-worker memory of a plan.
//! * [`topology`]: a cluster's link levels and a plan's estimated communication time on them.
//! * [`transfer`]: the point-to-point transfers behind every byte the cost model counts.
//! * [`searches`]: the searches `--search` names, one file each, in one list.
//! * [`driver`]: the recursive planner that runs them.
//! * [`budget`]: the device memory limit inside the search (memory priced by bisection).
//! * [`pareto`]: the frontier of bytes per step against memory per worker.
//! * [`request`]: what `tofu plan` computes (the plan and the data-parallel
//!   comparison) from one bound model.
//! * [`file`]: the versioned plan file (`tofu-plan` JSON).
//! * [`dot`]: a Graphviz picture of the coarsened graph.
//! * [`op_groups`]: the operators that communicate most, time steps and layers folded.
//! * [`compare`]: every search side by side (the planner benchmark).
pub mod access;
pub mod budget;
pub(crate) mod candidates;
pub mod coarsen;
pub mod compare;
pub mod cost;
pub mod dot;
pub mod driver;
pub mod file;
pub mod level;
pub mod memory;
pub mod model;
pub mod op_groups;
pub mod pareto;
pub mod request;
pub mod searches;
pub mod tile;
pub mod topology;
pub mod transfer;

pub use cost::OpChoice;
pub use driver::{
    max_memory, plan, plan_with, plan_with_model, CoarseGraph, MemoryFit, PlanError, PlanOptions,
    Planned, SearchKind,
};
pub use file::PlanFile;
pub use level::Decisions;
pub use transfer::{transfers, Phase, Transfer};
