//! One call from a bound plan to verified programs (Cranelift's
//! `Context::compile` is the model).
//!
//! Takes a [`BoundPlan`] (graph, bound operators, factors, decisions, and
//! the plan file it came from, if any) and the operator library; gives the
//! per-rank [`Programs`] after every check: the plan file's recorded costs
//! against its decisions ([`BoundPlan::check_recorded`]), generation
//! ([`crate::generate::generate_in`]) and the program verifier
//! ([`crate::verify::validate_in`]). The cost model is built once and shared by all
//! three.

use planner::plan::file::RecordedError;
use planner::plan::BoundPlan;
use tdl::Library;

use crate::error::CodegenError;
use crate::generate::{generate_in, Programs};

/// Generate and verify every rank's program of `plan` (see the module doc).
///
/// Errors: [`CodegenError::Tampered`] / [`CodegenError::Mismatch`] for a
/// plan file whose recorded costs differ from its decisions (an edited
/// tile); as [`crate::generate()`] for decisions that do not fit or a
/// missing spec; [`CodegenError::PartialSums`] for a plan with partial-sum
/// layouts (checked first); [`CodegenError::Invalid`] naming the rank for programs the
/// verifier rejects.
pub fn compile(plan: &BoundPlan, lib: &Library) -> Result<Programs, CodegenError> {
    crate::generate::partial_free(&plan.graph, &plan.decisions)?;
    let cm = plan.cost();
    plan.check_recorded(&cm).map_err(|e| match e {
        RecordedError::Mismatch(m) => CodegenError::Mismatch(m),
        RecordedError::Tampered(m) => CodegenError::Tampered(m),
    })?;
    let progs = generate_in(&cm, lib, &plan.decisions)?;
    crate::verify::validate_in(&cm, &plan.decisions, &progs)?;
    Ok(progs)
}

/// The unpartitioned programs (one rank) of `plan`'s graph, with its bound
/// operators (not bound again): the reference of `tofu run --verify` and
/// the evaluation programs of `tofu train`.
///
/// Errors: as [`crate::generate()`].
pub fn compile_unpartitioned(plan: &BoundPlan, lib: &Library) -> Result<Programs, CodegenError> {
    crate::generate_unpartitioned(&plan.graph, lib, &plan.ops)
}
