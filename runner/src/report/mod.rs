//! What `tofu run` reports, as text ([`std::fmt::Display`]) and as the
//! JSON objects of `--json` (keys sorted): a run of the programs
//! ([`run::RunSummary`]), the `--verify` verdict ([`verdict::Verdict`]),
//! one launched rank ([`rank::RankSummary`]), the `--save-outputs` file
//! ([`saved::SavedSummary`]) and the `--estimate` cost model
//! ([`estimate::EstimateSummary`]).
//!
//! Takes the reports the runner gives ([`crate::RunReport`],
//! [`crate::Verification`], [`crate::RankReport`],
//! [`crate::forward_outputs::SavedOutputs`],
//! [`crate::backend::cuda::estimate::StepEstimate`]) with the programs
//! they ran; gives text lines and `serde_json` values. Units: seconds,
//! bytes.

pub mod estimate;
pub mod rank;
pub mod run;
pub mod saved;
pub mod verdict;
