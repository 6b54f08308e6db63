//! What `tofu train` reports, as text ([`std::fmt::Display`]) and as the
//! JSON objects of `--json` (keys sorted): the first line
//! ([`header::Header`]), one line per step or evaluation ([`step`]), and
//! the summary at the end, in one process ([`summary::TrainSummary`]) or
//! on one launched rank ([`summary::RankSummary`]); and what `tofu ssp mlp`
//! prints of its run ([`ssp_mlp::SspMlpSummary`]).
//!
//! Takes what the trainer gives ([`crate::StepLog`],
//! [`crate::TrainReport`], [`crate::rank_trainer::RankTrainReport`],
//! [`crate::ssp_mlp::SspMlpRun`]);
//! gives text lines and `serde_json` values. Units: losses in nats,
//! accuracy as a fraction, seconds, samples per second.

pub mod header;
pub mod ssp_mlp;
pub mod step;
pub mod summary;
