//! Lowering: pest parse tree → name-resolved, type-checked [`OpSpec`]s.
//!
//! Takes the text of one `.tdl` file; gives its ops, or every mistake found
//! (not just the first) as [`Diagnostics`]. One pass does name resolution
//! (variables, dims, attributes, tensors), typing (integer vs real, index
//! positions), rank checks, range inference for reduction and `let`
//! variables, and the per-op structural checks (each output defined exactly
//! once, no read before definition). Cross-op checks (gradient ops exist and
//! fit) are in [`crate::library`].
//!
//! One file per thing lowered, each adding methods to the one [`Lowerer`]:
//! `syntax.rs` (pest errors in words, the nesting bound), `decl.rs` (the op
//! header: attributes, parameters, outputs, dims, index binders), `stmt.rs`
//! (statements, `let`, range inference), `expr.rs` (expressions and their
//! types), `grad.rs` (gradient declarations).

use std::collections::HashMap;
use std::sync::Arc;

use pest::iterators::Pair;
use pest::Parser;

use crate::ast::*;
use crate::diagnostic::{line_of, op_name_span, Diagnostic, Diagnostics};

mod grammar {
    #![allow(missing_docs)]
    /// The pest parser generated from `grammar.pest`.
    #[derive(pest_derive::Parser)]
    #[grammar = "grammar.pest"]
    pub struct TdlParser;
}
use grammar::{Rule, TdlParser};

mod decl;
mod expr;
mod grad;
mod stmt;
mod syntax;

use syntax::{syntax_error, too_deep};

/// Parse and check one TDL file. `file` is the name used in diagnostics.
///
/// Errors: every syntax or semantic mistake, with file, line, column and a hint.
pub fn parse_file(file: &str, text: &str) -> Result<Vec<OpSpec>, Diagnostics> {
    let src = Arc::new(text.to_string());
    if let Some(d) = too_deep(file, &src) {
        return Err(Diagnostics { errors: vec![d] });
    }
    let pairs = match TdlParser::parse(Rule::file, text) {
        Ok(p) => p,
        Err(e) => {
            return Err(Diagnostics {
                errors: vec![syntax_error(file, &src, e)],
            })
        }
    };
    let mut errors = Vec::new();
    let mut ops = Vec::new();
    let mut seen: HashMap<String, Span> = HashMap::new();
    for pair in pairs.flatten().filter(|p| p.as_rule() == Rule::op) {
        let mut lw = Lowerer::new(file, &src);
        if let Some(op) = lw.op(pair) {
            if let Some(first) = seen.get(&op.name) {
                let first_line = line_of(&src, op_name_span(&src, *first, &op.name).start);
                lw.err(
                    op_name_span(&src, op.span, &op.name),
                    format!(
                        "operator `{}` is defined twice in this file (first on line {first_line})",
                        op.name
                    ),
                    "second definition",
                    Some("operator names are global across the library; rename one of them".into()),
                );
            } else {
                seen.insert(op.name.clone(), op.span);
                if lw.errors.is_empty() {
                    ops.push(op);
                }
            }
        }
        errors.append(&mut lw.errors);
    }
    if errors.is_empty() {
        Ok(ops)
    } else {
        errors.sort_by_key(|d| (d.line, d.column));
        Err(Diagnostics { errors })
    }
}

/// Name resolution scope for index variables: innermost last.
#[derive(Default)]
struct Scope {
    vars: Vec<(String, VarId)>,
    /// Placeholder var of the innermost `...` binder.
    ellipsis: Vec<VarId>,
}

struct Lowerer<'a> {
    file: &'a str,
    src: &'a Arc<String>,
    errors: Vec<Diagnostic>,
    op: OpSpec,
    /// Which statement defined each output/local (for read-before-define checks).
    defined: Vec<TensorRef>,
    /// Outputs that have a defining statement, even one with mistakes (so a
    /// mistake in it is not also reported as "never defined"/"defined twice").
    assigned: Vec<TensorRef>,
    /// Names of every `let` temporary of the op's body (found before lowering it).
    lets: Vec<String>,
    /// `let` temporaries whose statement has been lowered (with or without mistakes).
    attempted_lets: Vec<String>,
    /// Mistakes not reported because an earlier diagnostic already covers them.
    quiet: usize,
    /// The output the statement being lowered defines.
    current: Option<TensorRef>,
    /// Vars whose range must be inferred from the body of the current statement.
    pending: Vec<VarId>,
}

fn span_of(p: &Pair<Rule>) -> Span {
    let s = p.as_span();
    Span::new(s.start(), s.end())
}

impl<'a> Lowerer<'a> {
    fn new(file: &'a str, src: &'a Arc<String>) -> Self {
        Lowerer {
            file,
            src,
            errors: Vec::new(),
            op: OpSpec {
                name: String::new(),
                doc: String::new(),
                file: file.to_string(),
                span: Span::default(),
                attrs: vec![],
                inputs: vec![],
                outputs: vec![],
                locals: vec![],
                dims: vec![],
                vars: vec![],
                stmts: vec![],
                grads: vec![],
                ellipsis_rank: None,
            },
            defined: vec![],
            assigned: vec![],
            lets: vec![],
            attempted_lets: vec![],
            current: None,
            quiet: 0,
            pending: vec![],
        }
    }

    fn err(
        &mut self,
        span: Span,
        msg: impl Into<String>,
        label: impl Into<String>,
        help: Option<String>,
    ) {
        self.errors
            .push(Diagnostic::new(self.file, self.src, span, msg, label, help));
    }

    /// Whether `name` is already taken by an attribute, dim or tensor of this op.
    fn global_kind(&self, name: &str) -> Option<&'static str> {
        if self.op.attrs.iter().any(|a| a.name == name) {
            Some("an attribute")
        } else if self.op.dims.iter().any(|d| d.name == name) {
            Some("a dimension")
        } else if self.op.inputs.iter().any(|t| t.name == name) {
            Some("an input")
        } else if self.op.outputs.iter().any(|t| t.name == name) {
            Some("an output")
        } else if self.op.locals.iter().any(|t| t.name == name) {
            Some("a temporary")
        } else {
            None
        }
    }
}

pub use crate::ast::visit;
