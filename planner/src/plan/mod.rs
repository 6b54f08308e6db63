//! Plans: how every tensor and operator is partitioned over k workers, and
//! what that costs (Tofu §4).
//!
//! The files form layers; each imports only from the layers below it (no
//! cycles), and nothing below the entry points imports them:
//!
//! 1. Vocabulary, depending on no other file here:
//!    * [`tile`]: boxes, uneven splits, worker digits, factorisation of k.
//!    * [`decisions`]: a plan's decisions per level ([`Decisions`],
//!      [`OpChoice`]) and the layout rules that restrict them
//!      ([`decisions::LayoutRule`], Megatron-LM's weight splits).
//!    * [`coarse`]: the coarsened graph of a plan, for pictures.
//!    * [`op_groups`]: the operators that communicate most, time steps and
//!      layers folded; [`repeats`]: an export's repeated blocks (its
//!      numbered layers) for that list.
//! 2. The graph and the cluster:
//!    * [`access`]: which input elements a share of an operator reads.
//!    * [`model`]: per-operator access models and strategies for a graph.
//!    * [`coarsen`]: the coarsening rules of §4.2.1, one file each.
//!    * [`cluster`]: a cluster's nodes, GPUs and link levels
//!      ([`cluster::Topology`]) and the per-link reports
//!      ([`cluster::LinkLoad`], [`cluster::LinkReport`]).
//!    * [`options`]: what a planning call may be told ([`PlanOptions`]).
//! 3. Costs of a (partial) plan:
//!    * [`cost`]: the exact bytes per operator and tensor, and of a whole
//!      plan ([`exact_cost`]).
//!    * [`transfer`]: the point-to-point transfers behind every byte the
//!      cost model counts.
//!    * [`memory`]: per-worker memory of a plan.
//!    * [`topology`]: a plan's estimated communication time on a cluster.
//! 4. One level's problem and how to solve it:
//!    * [`level`]: one recursion level as a pairwise search problem.
//!    * [`memory_price`]: the memory price λ inside a level problem.
//!    * [`searches`]: the searches `--search` names, one file each, in one
//!      list.
//! 5. The result: [`planned`]: a finished plan ([`Planned`]), its reports
//!    and why planning failed ([`PlanError`]).
//! 6. Building plans: `candidates.rs` (a search's candidate plans, level by
//!    level, and the pick among them) and [`budget`] (the device memory
//!    limit inside the search: memory priced by bisection).
//! 7. Entry points, on top:
//!    * [`driver`]: the recursive planner ([`plan`], [`plan_with`],
//!      [`plan_with_model`]).
//!    * [`pareto`]: the frontier of bytes per step against memory per
//!      worker.
//!    * [`request`]: what `tofu plan` computes (the plan or the frontier,
//!      and the data-parallel comparison) from one bound model; it calls
//!      the driver and [`pareto`].
//!    * [`compare`]: every search side by side (the planner benchmark); it
//!      calls the driver.
//!
//! A finished plan's outputs sit beside the layers that make it: [`file`](mod@file)
//! (the versioned plan file, `tofu-plan` JSON), [`dot`] (a Graphviz
//! picture of the coarsened graph), [`summary`] (the `tofu plan --json`
//! values) and [`report`] (the `tofu plan` text).
//!
//! Types that moved keep their old paths through re-exports
//! (`driver::Planned`, `level::Decisions`, `cost::OpChoice`,
//! `topology::Topology`, `budget::MemoryPrice`, …); code in this module
//! imports them from where they live.
pub mod access;
pub mod bound;
pub mod budget;
pub(crate) mod candidates;
pub mod cluster;
pub mod coarse;
pub mod coarsen;
pub mod compare;
pub mod cost;
pub mod decisions;
pub mod dot;
pub mod driver;
pub mod file;
pub mod level;
mod link_loads;
mod link_tally;
pub mod memory;
pub mod memory_price;
pub mod model;
pub mod op_groups;
pub mod options;
pub mod pareto;
pub mod partial;
pub mod planned;
pub mod repeats;
pub mod report;
pub mod request;
pub mod searches;
mod shards;
pub mod specs;
pub mod summary;
pub mod tile;
pub mod topology;
pub mod transfer;

pub use bound::BoundPlan;
pub use coarse::CoarseGraph;
pub use cost::{exact_cost, exact_cost_in, CostModel};
pub use decisions::{Decisions, OpChoice};
pub use driver::{plan, plan_with, plan_with_model};
pub use file::PlanFile;
pub use options::PlanOptions;
pub use planned::{max_memory, MemoryFit, PlanError, Planned};
pub use searches::SearchKind;
pub use transfer::{transfers, transfers_in, Phase, Transfer};
