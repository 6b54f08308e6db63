//! TDL, tofu's tensor description language (Tofu §3.1).
//!
//! Takes `.tdl` source text; gives checked, name-resolved operator specs
//! ([`OpSpec`]), shape inference ([`OpSpec::bind`]) and a reference
//! interpreter ([`interp::evaluate`]) that is the semantic ground truth for
//! the rest of tofu (interval analysis, planner, runner).
//!
//! Pipeline: [`lower::parse_file`] (pest grammar → typed AST, every mistake as
//! a [`Diagnostic`] with file, line, column, caret and hint) →
//! [`Library`] (cross-file checks: unique names, gradient declarations) →
//! [`OpSpec::expand_ellipsis`] / [`OpSpec::bind`] (concrete rank and shapes) →
//! [`interp`].
//!
//! The language reference is `docs/tdl.md`.
#![warn(missing_docs)]

pub mod ast;
pub mod bind;
pub mod builtin;
pub mod diagnostic;
mod expand;
pub mod fill;
pub mod interp;
pub mod library;
pub mod linearity;
pub mod lower;
pub mod multi_index;
pub mod opaque;
pub mod show;
pub mod tensor;

pub use ast::*;
pub use bind::{Attrs, Binding, ShapeError};
pub use builtin::Semantics;
pub use diagnostic::{Diagnostic, Diagnostics};
pub use fill::Fill;
pub use interp::{evaluate, evaluate_traced, EvalError, Tensor};
pub use library::{read_sources, shipped_sources, Library, LibraryError};
pub use linearity::{is_linear_in, linear_input_sets};
pub use lower::parse_file;
