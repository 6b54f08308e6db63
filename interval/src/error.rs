//! Errors of the analysis and of instantiation.
//!
//! Takes nothing; gives [`AnalysisError`] (a spec the analysis cannot handle:
//! malformed or unsupported constructs) and [`InstantiateError`] (concrete
//! shapes, attributes or part counts that do not fit a cached result). Every
//! variant names the operator and, for the analysis, the offending
//! expression. A candidate that is merely imprecise is not an error: it is
//! rejected with a reason ([`crate::Rejected`]).

use tdl::ShapeError;

/// Why an op's spec cannot be analysed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnalysisError {
    /// A construct the analysis does not support at this position.
    #[error("`{op}`: unsupported construct in `{expr}`: {what}")]
    Unsupported {
        /// Operator name.
        op: String,
        /// The expression, as written.
        expr: String,
        /// What is wrong with it.
        what: String,
    },
    /// The spec still has `...`: analyse [`tdl::OpSpec::expand_ellipsis`]'s result.
    #[error("`{op}`: spec still has an ellipsis in `{expr}`; expand it for a rank first")]
    Unexpanded {
        /// Operator name.
        op: String,
        /// The expression or declaration holding `...`.
        expr: String,
    },
    /// A temporary or output is read while it is being defined (a cycle).
    #[error("`{op}`: `{expr}` reads a tensor that depends on itself")]
    Cyclic {
        /// Operator name.
        op: String,
        /// The read.
        expr: String,
    },
    /// Inlining temporaries produced more reads than the analysis accepts.
    #[error("`{op}`: inlining temporaries in `{expr}` gives more than {limit} reads")]
    TooComplex {
        /// Operator name.
        op: String,
        /// The statement.
        expr: String,
        /// The limit.
        limit: usize,
    },
}

/// Why a cached result cannot be instantiated on concrete shapes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InstantiateError {
    /// Shapes or attributes do not fit the op.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// The number of parts must be at least 2.
    #[error("`{op}`: cannot split into {parts} part(s); need at least 2")]
    Parts {
        /// Operator name.
        op: String,
        /// The number asked for.
        parts: usize,
    },
    /// The shapes imply another ellipsis rank than the cached analysis.
    #[error("`{op}`: the shapes imply {got} ellipsis dim(s) but the strategies were analysed for {expected}")]
    Rank {
        /// Operator name.
        op: String,
        /// The analysed rank.
        expected: u32,
        /// The rank of the shapes.
        got: usize,
    },
    /// A dim or range expression could not be evaluated (division by zero).
    #[error("`{op}`: cannot evaluate `{expr}` for these shapes (division by zero)")]
    Eval {
        /// Operator name.
        op: String,
        /// The expression.
        expr: String,
    },
}
