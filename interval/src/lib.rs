//! Symbolic interval analysis: every partition strategy of a TDL operator
//! (Tofu §3.2).
//!
//! Takes checked operator specs ([`tdl::OpSpec`]); gives, per op type and
//! ellipsis rank, its exact partition strategies ([`OpStrategies`]): split an
//! output dim (case 1) or a reduction variable with its reducer (case 2), the
//! symbolic region of every input each part reads, the rejected candidates
//! with reasons, and whether the op is elementwise. Results are shape-free,
//! cached ([`StrategyCache`]) and instantiated on concrete shapes cheaply
//! ([`OpStrategies::instantiate`], per-part regions in elements).
//!
//! Pipeline, one concept per module, in data-flow order:
//! [`rules`] (egg rewrite rules) → [`canon`] (index expression → affine
//! normal form [`affine::Poly`]) → [`analysis`] (symbolic execution) →
//! `candidates` (candidates and their verdict) using [`interval`] (per-dim symbolic regions and their join) →
//! [`strategy`] (results) → [`cache`] → [`instantiate`] → [`report`] (the
//! `tofu strategies` table and JSON).
//!
//! Invariant: an accepted strategy's regions are sound and exact, except
//! where a superset is stated (data-dependent reads,
//! [`InputRegion::data_dependent`]; a flattened index such as merge_heads'
//! `k // DH`, `k % DH` split off its block boundaries, or a block with gaps
//! such as a read of one of split_qkv's q, k, v slots, [`PartRegions::exact`]);
//! the soundness proptest (`tests/soundness.rs`) checks every shipped op
//! against the interpreter: soundness always, exactness where claimed.
#![warn(missing_docs)]

pub mod affine;
pub mod analysis;
pub mod cache;
mod candidates;
pub mod canon;
pub mod error;
pub mod instantiate;
pub mod interval;
pub use graph::region;
pub mod report;
pub mod rules;
pub mod strategy;

pub use analysis::{analyse, analyse_with};
pub use cache::StrategyCache;
pub use canon::{Canonicaliser, EggLimits, Saturation};
pub use error::{AnalysisError, InstantiateError};
pub use instantiate::{part_range, ConcreteStrategy, Instance, PartRegions, Region};
pub use interval::{DimRegion, WholeReason};
pub use strategy::{
    InputLayout, InputRegion, OpStrategies, OutputLayout, Rejected, SplitKind, SplitVar, Strategy,
};
