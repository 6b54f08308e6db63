//! Dependence-aware parallel loops over DistArrays (Orion, Wei et al.
//! EuroSys '19; thesis ch. 5): declare the array subscripts of a loop body,
//! get its dependence vectors, a 1D / 2D / unordered-2D / unimodular
//! schedule whose concurrent iterations never conflict, and run it on worker
//! threads that share nothing mutable.
//!
//! Data flow: [`spec::LoopBuilder`] → [`depend::dependence_vectors`] →
//! [`schedule::plan`] (uses [`partition`] and [`unimodular`]) →
//! [`exec::run`] (peer to peer for barrier-free plans, through a
//! coordinator otherwise; the body sees a [`ctx::Ctx`]). Applications: [`apps::mf`]
//! (SGD matrix factorisation, MovieLens-100K) and [`apps::lr`] (sparse
//! logistic regression, a 1D loop with a buffer). This crate depends on no
//! other tofu crate: it sits beside the planner in the data flow.

#![warn(missing_docs)]

pub mod apps;
pub mod array;
pub mod ctx;
pub mod depend;
pub mod error;
pub mod exec;
pub mod partition;
mod peer;
pub mod schedule;
pub mod spec;
pub mod unimodular;

pub use array::{random_permutation, DistArray, IterSpace};
pub use ctx::Ctx;
pub use depend::{dependence_vectors, DepVec, Dist};
pub use error::LoopError;
pub use exec::{run, RunOutput};
pub use schedule::{plan, plan_all, Choice, Kind, Placement, Plan, PlanOptions, Task};
pub use spec::{AccessId, AccumId, BufferId, LoopBuilder, LoopSpec, Mode, Sub};
