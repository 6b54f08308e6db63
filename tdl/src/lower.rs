//! Lowering: pest parse tree → name-resolved, type-checked [`OpSpec`]s.
//!
//! Takes the text of one `.tdl` file; gives its ops, or every mistake found
//! (not just the first) as [`Diagnostics`]. One pass does name resolution
//! (variables, dims, attributes, tensors), typing (integer vs real, index
//! positions), rank checks, range inference for reduction and `let`
//! variables, and the per-op structural checks (each output defined exactly
//! once, no read before definition). Cross-op checks (gradient ops exist and
//! fit) are in [`crate::library`].

use std::collections::HashMap;
use std::sync::Arc;

use pest::iterators::Pair;
use pest::Parser;

use crate::ast::*;
use crate::diagnostic::{closest, line_of, op_name_span, Diagnostic, Diagnostics};
use crate::opaque;

mod grammar {
    #![allow(missing_docs)]
    /// The pest parser generated from `grammar.pest`.
    #[derive(pest_derive::Parser)]
    #[grammar = "grammar.pest"]
    pub struct TdlParser;
}
use grammar::{Rule, TdlParser};

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

fn rule_name(r: &Rule) -> &'static str {
    match r {
        Rule::op | Rule::kw_op => "`op`",
        Rule::ident => "a name",
        Rule::expr | Rule::primary | Rule::or_expr | Rule::unary | Rule::postfix => "an expression",
        Rule::number | Rule::number_lit | Rule::signed_number => "a number",
        Rule::stmt => "a statement `t[i, ...] = expr;`",
        Rule::grad => "a gradient declaration `grad x = op(...);`",
        Rule::attr_type => "`int` or `float`",
        Rule::binder => "an index variable",
        Rule::EOI => "end of file",
        Rule::cmp_op | Rule::add_op | Rule::mul_op | Rule::or_op | Rule::and_op => {
            "a binary operator"
        }
        Rule::read_index | Rule::slice_index => "an index",
        Rule::dim_decl => "a dimension name",
        _ => "something else",
    }
}

/// Deepest nesting of `(`, `[` and `{` a file may have. Lowering is
/// recursive; this bound keeps it (and pest) far from the stack limit.
const MAX_NESTING: usize = 64;

/// A diagnostic if brackets nest deeper than [`MAX_NESTING`] (comments skipped).
fn too_deep(file: &str, src: &Arc<String>) -> Option<Diagnostic> {
    let mut depth = 0usize;
    let mut comment = false;
    for (i, c) in src.char_indices() {
        match c {
            '\n' => comment = false,
            _ if comment => {}
            '#' => comment = true,
            '/' if src[i..].starts_with("///") => comment = true,
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(Diagnostic::new(
                        file,
                        src,
                        Span::new(i, i + 1),
                        format!("brackets nest more than {MAX_NESTING} deep"),
                        "too deep",
                        Some("split the expression with `let` temporaries".into()),
                    ));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Literal tokens pest expected at the furthest position it reached, and
/// that position (re-parses with pest's error detail switched on; nothing
/// if that gives no detail).
fn expected_literals(src: &str) -> (Vec<String>, Option<usize>) {
    pest::set_error_detail(true);
    let res = TdlParser::parse(Rule::file, src);
    pest::set_error_detail(false);
    let Err(e) = res else { return (vec![], None) };
    let Some(attempts) = e.parse_attempts() else {
        return (vec![], None);
    };
    let mut out: Vec<String> = attempts
        .expected_tokens()
        .into_iter()
        .map(|t| t.to_string())
        // Keep literal strings; drop character ranges (`a..z`) and built-in rules.
        .filter(|t| {
            let c: Vec<char> = t.chars().collect();
            // `#` (comments) and `_` (a name's first char) may go anywhere; not useful.
            let range = c.len() == 4 && c[1] == '.' && c[2] == '.';
            !(t.trim().is_empty() || range || ["BUILTIN_RULE", "#", "_"].contains(&t.as_str()))
        })
        .collect();
    out.sort();
    out.dedup();
    (out, Some(attempts.max_position))
}

/// Binary operators, summarised as "a binary operator" in "expected ..." lists.
const BIN_OPS: &[&str] = &[
    "+", "-", "*", "/", "//", "%", "<", "<=", ">", ">=", "==", "!=", "&&", "||",
];

/// Byte range of the last non-blank character before `pos`, skipping `#` comments.
fn prev_token_end(src: &str, pos: usize) -> Option<(usize, usize)> {
    let mut before = &src[..pos];
    loop {
        let trimmed = before.trim_end();
        let line_start = trimmed.rfind('\n').map_or(0, |i| i + 1);
        let line = &trimmed[line_start..];
        match line.find('#') {
            Some(h) if !line.starts_with("///") && !line[..h].contains("///") => {
                before = &trimmed[..line_start + h];
            }
            _ => {
                let c = trimmed.chars().next_back()?;
                return Some((trimmed.len() - c.len_utf8(), trimmed.len()));
            }
        }
    }
}

fn syntax_error(file: &str, src: &Arc<String>, e: pest::error::Error<Rule>) -> Diagnostic {
    use pest::error::{ErrorVariant, InputLocation};
    let pest_pos = match e.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    }
    .min(src.len());
    let (literals, furthest) = expected_literals(src);
    // pest reports the furthest *rule* attempt; a literal (`->`, `{`, `;`)
    // expected further on is the better place to point at.
    let pos = match furthest {
        Some(f) if f > pest_pos && f <= src.len() && src.is_char_boundary(f) => f,
        _ => pest_pos,
    };
    let names: Vec<&str> = match &e.variant {
        _ if pos != pest_pos => vec![],
        ErrorVariant::ParsingError { positives, .. } => {
            let mut names: Vec<&str> = positives
                .iter()
                .map(rule_name)
                .filter(|n| *n != "something else")
                .collect();
            names.sort();
            names.dedup();
            names
        }
        ErrorVariant::CustomError { .. } => vec![],
    };
    let has = |t: &str| literals.iter().any(|l| l == t);
    // Rule names whose words are all listed as literals add nothing.
    let names: Vec<&str> = names
        .into_iter()
        .filter(|n| !(n.contains('`') && n.split('`').skip(1).step_by(2).all(&has)))
        .collect();
    let rest = &src[pos..];
    // The offending token: up to the next blank, at least one character.
    let tok_len = rest
        .find(char::is_whitespace)
        .unwrap_or(rest.len())
        .max(rest.chars().next().map_or(0, char::len_utf8));
    let at = Span::new(pos, pos + tok_len);
    let found = if rest.is_empty() {
        "the end of the file".to_string()
    } else {
        let t: String = rest[..tok_len].chars().take(20).collect();
        format!("`{t}`")
    };
    let prev = prev_token_end(src, pos);
    let new_line = prev.is_some_and(|(_, e)| src[e..pos].contains('\n'));
    let expected = {
        let ops = literals
            .iter()
            .filter(|l| BIN_OPS.contains(&l.as_str()))
            .count();
        let mut all: Vec<String> = literals
            .iter()
            .filter(|l| ops < 3 || !BIN_OPS.contains(&l.as_str()))
            .map(|l| format!("`{l}`"))
            .collect();
        all.extend(
            names
                .iter()
                .filter(|n| ops < 3 || **n != "a binary operator")
                .map(|n| n.to_string()),
        );
        if ops >= 3 {
            all.push("a binary operator".into());
        }
        match all.len() {
            0 => None,
            1..=6 => Some(all.join(" or ")),
            _ => Some(format!("{} or …", all[..6].join(", "))),
        }
    };
    let generic = || -> (String, Span, &'static str, String) {
        let msg = match &expected {
            Some(x) => format!("syntax error: expected {x}, found {found}"),
            None => format!("syntax error: unexpected {found}"),
        };
        (
            msg,
            at,
            "unexpected here",
            "see docs/tdl.md for the syntax of ops, statements and expressions".into(),
        )
    };
    let (msg, span, label, help) = if rest.starts_with("//") && !rest.starts_with("///") {
        (
            "syntax error: `//` does not start a comment".to_string(),
            Span::new(pos, pos + 2),
            "not a comment",
            "comments start with `#`; `//` is floor division and `///` documents an op".to_string(),
        )
    } else if has(";") && (new_line || rest.starts_with('}') || rest.is_empty()) && prev.is_some() {
        let (ps, pe) = prev.unwrap_or((pos, pos));
        (
            "syntax error: missing `;` at the end of the statement".to_string(),
            Span::new(ps, pe),
            "expected `;` after this",
            "every statement `t[i] = ...;` and gradient declaration `grad x = ...;` ends with `;`"
                .to_string(),
        )
    } else if has("->") {
        (
            format!("syntax error: expected `->` and the outputs after the inputs, found {found}"),
            at,
            "expected `->` here",
            "an op is declared `op name(x[N]) -> y[N] { ... }`".to_string(),
        )
    } else if has("{") && !has(";") && !has("]") && !has(")") {
        let span = match prev {
            Some((s, e)) if new_line => Span::new(s, e),
            _ => at,
        };
        (
            format!("syntax error: missing `{{` to open the op's body, found {found}"),
            span,
            if new_line {
                "expected `{` after this"
            } else {
                "expected `{` here"
            },
            "an op is declared `op name(x[N]) -> y[N] { ... }`".to_string(),
        )
    } else if has("int") && has("float") {
        let (m, s, l, _) = generic();
        (
            m,
            s,
            l,
            "attribute types are `int` and `float`: `<name: int = 1>`".to_string(),
        )
    } else if has("]") || has(")") {
        let (m, s, l, _) = generic();
        let which = if has("]") { "[" } else { "(" };
        (
            m,
            s,
            l,
            format!("check the brackets: a `{which}` before this is not closed"),
        )
    } else if rest.is_empty() {
        let (m, _, _, _) = generic();
        let span = prev.map_or(at, |(s, e)| Span::new(s, e));
        (
            m,
            span,
            "the file ends after this",
            "an op, bracket or statement is not closed".to_string(),
        )
    } else if rest.starts_with('[') {
        let (m, s, l, _) = generic();
        (
            m,
            s,
            l,
            "check the brackets: indices are written `t[i, j]`".to_string(),
        )
    } else {
        generic()
    };
    Diagnostic::new(file, src, span, msg, label, Some(help))
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

    fn op(&mut self, pair: Pair<Rule>) -> Option<OpSpec> {
        self.op.span = span_of(&pair);
        let mut docs = Vec::new();
        let mut name_span = self.op.span;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::doc_line => {
                    docs.push(p.as_str().trim_start_matches("///").trim().to_string())
                }
                Rule::kw_op => {}
                Rule::ident => {
                    self.op.name = p.as_str().to_string();
                    name_span = span_of(&p);
                }
                Rule::attr_list => self.attr_list(p),
                Rule::params => {
                    for q in p.into_inner() {
                        self.param(q);
                    }
                }
                Rule::outputs => {
                    for q in p.into_inner() {
                        self.output_decl(q);
                    }
                }
                Rule::body => {
                    self.lets = p
                        .clone()
                        .into_inner()
                        .filter(|q| q.as_rule() == Rule::stmt)
                        .filter_map(|q| {
                            let mut it = q.into_inner();
                            (it.next()?.as_rule() == Rule::let_kw)
                                .then(|| it.next().map(|n| n.as_str().to_string()))?
                        })
                        .collect();
                    for q in p.into_inner() {
                        match q.as_rule() {
                            Rule::stmt => {
                                let (errs, stmts, quiet, span) = (
                                    self.errors.len(),
                                    self.op.stmts.len(),
                                    self.quiet,
                                    span_of(&q),
                                );
                                self.stmt(q);
                                self.current = None;
                                if self.errors.len() == errs
                                    && self.op.stmts.len() == stmts
                                    && self.quiet == quiet
                                {
                                    // Safety net: a statement is never dropped silently.
                                    self.err(
                                        span,
                                        "this statement could not be checked",
                                        "here",
                                        Some("see docs/tdl.md for the form of statements".into()),
                                    );
                                }
                            }
                            Rule::grad => self.grad(q),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        self.op.doc = docs.join("\n");
        // Every output defined exactly once.
        for (i, o) in self.op.outputs.clone().iter().enumerate() {
            if !self.assigned.contains(&TensorRef::Output(i as u32)) {
                self.err(
                    o.span,
                    format!("output `{}` of `{}` is never defined", o.name, self.op.name),
                    "declared here",
                    Some(format!(
                        "add a statement `{}[...] = ...;` to the body",
                        o.name
                    )),
                );
            }
        }
        if self.op.outputs.is_empty() {
            self.err(
                name_span,
                format!("operator `{}` has no outputs", self.op.name),
                "here",
                None,
            );
        }
        Some(std::mem::replace(
            &mut self.op,
            Lowerer::new(self.file, self.src).op,
        ))
    }

    fn attr_list(&mut self, pair: Pair<Rule>) {
        for d in pair.into_inner() {
            let span = span_of(&d);
            let mut it = d.into_inner();
            let (Some(name), Some(ty)) = (it.next(), it.next()) else {
                continue;
            };
            let name_s = name.as_str().to_string();
            let ty = if ty.as_str() == "int" {
                AttrType::Int
            } else {
                AttrType::Float
            };
            let default = it.next().map(|v| {
                let text = v.as_str();
                match ty {
                    AttrType::Int => match text.parse::<i64>() {
                        Ok(i) => AttrValue::Int(i),
                        Err(_) => {
                            self.err(
                                span_of(&v),
                                format!("default `{text}` of int attribute `{name_s}` is not an integer"),
                                "not an integer",
                                Some(format!("write an integer, or declare `{name_s}: float`")),
                            );
                            AttrValue::Int(0)
                        }
                    },
                    AttrType::Float => AttrValue::Float(text.parse::<f64>().unwrap_or(0.0)),
                }
            });
            if let Some(kind) = self.global_kind(&name_s) {
                self.err(
                    span_of(&name),
                    format!("`{name_s}` is already {kind}"),
                    "duplicate name",
                    Some("rename the attribute".into()),
                );
                continue;
            }
            self.op.attrs.push(AttrDecl {
                name: name_s,
                ty,
                default,
                span,
            });
        }
    }

    fn param(&mut self, pair: Pair<Rule>) {
        let span = span_of(&pair);
        let mut padded = false;
        let mut name = None;
        let mut dims = Vec::new();
        let idx = self.op.inputs.len() as u32;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::padded => padded = true,
                Rule::ident => name = Some((p.as_str().to_string(), span_of(&p))),
                Rule::dim_decl => {
                    let Some(d) = p.into_inner().next() else {
                        continue;
                    };
                    if d.as_rule() == Rule::ellipsis {
                        if dims.iter().any(|e| matches!(e, DimEntry::Ellipsis)) {
                            self.err(
                                span_of(&d),
                                "a tensor can have at most one `...`",
                                "second ellipsis",
                                Some("merge the batch dims into one `...`".into()),
                            );
                        }
                        dims.push(DimEntry::Ellipsis);
                        continue;
                    }
                    let dname = d.as_str();
                    let axis = dims.len() as u32;
                    if let Some(pos) = self.op.dims.iter().position(|x| x.name == dname) {
                        dims.push(DimEntry::Dim(DimExpr::Dim(DimId(pos as u32))));
                    } else {
                        if let Some(kind) = self.global_kind(dname) {
                            self.err(
                                span_of(&d),
                                format!("dimension name `{dname}` is already {kind}"),
                                "duplicate name",
                                Some("use distinct names for dims, attributes and tensors".into()),
                            );
                        }
                        self.op.dims.push(DimInfo {
                            name: dname.to_string(),
                            input: idx,
                            axis,
                        });
                        dims.push(DimEntry::Dim(DimExpr::Dim(DimId(
                            self.op.dims.len() as u32 - 1,
                        ))));
                    }
                }
                _ => {}
            }
        }
        let Some((name, nspan)) = name else { return };
        if let Some(kind) = self.global_kind(&name) {
            self.err(
                nspan,
                format!("`{name}` is already {kind}"),
                "duplicate name",
                Some("rename the input".into()),
            );
        }
        self.op.inputs.push(InputDecl {
            name,
            dims,
            padded,
            span,
        });
    }

    fn has_input_ellipsis(&self) -> bool {
        self.op
            .inputs
            .iter()
            .any(|t| t.dims.iter().any(|d| matches!(d, DimEntry::Ellipsis)))
    }

    fn output_decl(&mut self, pair: Pair<Rule>) {
        let span = span_of(&pair);
        let mut it = pair.into_inner();
        let Some(name) = it.next() else { return };
        let mut dims = Vec::new();
        for od in it {
            let Some(d) = od.into_inner().next() else {
                continue;
            };
            if d.as_rule() == Rule::ellipsis {
                if !self.has_input_ellipsis() {
                    self.err(
                        span_of(&d),
                        "output uses `...` but no input declares one",
                        "unbound ellipsis",
                        Some("declare the batch dims on an input, e.g. `x[..., N]`".into()),
                    );
                }
                dims.push(DimEntry::Ellipsis);
            } else {
                // A wrong dim is reported; a placeholder keeps the rank, so
                // statements are not also reported as rank mismatches.
                let e = self.dim_expr(d).unwrap_or(DimExpr::Const(0));
                dims.push(DimEntry::Dim(e));
            }
        }
        let n = name.as_str().to_string();
        if let Some(kind) = self.global_kind(&n) {
            self.err(
                span_of(&name),
                format!("`{n}` is already {kind}"),
                "duplicate name",
                Some("rename the output".into()),
            );
        }
        self.op.outputs.push(OutputDecl {
            name: n,
            dims,
            span,
        });
    }

    /// Lower an expression that must be an integer over dims and int attrs.
    fn dim_expr(&mut self, pair: Pair<Rule>) -> Option<DimExpr> {
        let scope = Scope::default();
        let e = self.expr(pair, &scope)?;
        self.to_dim_expr(&e)
    }

    #[allow(clippy::wrong_self_convention)]
    fn to_dim_expr(&mut self, e: &Expr) -> Option<DimExpr> {
        let b = |s: &mut Self, a: &Expr, c: &Expr| {
            Some((Box::new(s.to_dim_expr(a)?), Box::new(s.to_dim_expr(c)?)))
        };
        Some(match &e.kind {
            ExprKind::Int(i) => DimExpr::Const(*i),
            ExprKind::Dim(d) => DimExpr::Dim(*d),
            ExprKind::Attr(a) if self.op.attrs[a.0 as usize].ty == AttrType::Int => {
                DimExpr::Attr(*a)
            }
            ExprKind::Binary(op, x, y) => {
                let (x, y) = b(self, x, y)?;
                match op {
                    BinOp::Add => DimExpr::Add(x, y),
                    BinOp::Sub => DimExpr::Sub(x, y),
                    BinOp::Mul => DimExpr::Mul(x, y),
                    BinOp::FloorDiv => DimExpr::FloorDiv(x, y),
                    BinOp::Mod => DimExpr::Mod(x, y),
                    _ => return self.not_dim(e),
                }
            }
            ExprKind::Unary(UnOp::Neg, x) => {
                DimExpr::Sub(Box::new(DimExpr::Const(0)), Box::new(self.to_dim_expr(x)?))
            }
            ExprKind::Call(Builtin::Min, args) | ExprKind::Call(Builtin::Max, args) => {
                let (x, y) = b(self, &args[0], &args[1])?;
                if matches!(e.kind, ExprKind::Call(Builtin::Min, _)) {
                    DimExpr::Min(x, y)
                } else {
                    DimExpr::Max(x, y)
                }
            }
            _ => return self.not_dim(e),
        })
    }

    fn not_dim(&mut self, e: &Expr) -> Option<DimExpr> {
        let hint = if matches!(e.kind, ExprKind::Binary(BinOp::Div, _, _)) {
            "`/` is real division; use `//` for integer division"
        } else {
            "a shape is an integer expression of input dims and int attributes (+ - * // % min max)"
        };
        self.err(
            e.span,
            "not an integer expression of dims and attributes",
            "not a shape",
            Some(hint.into()),
        );
        None
    }

    fn lookup_tensor(&self, name: &str) -> Option<TensorRef> {
        if let Some(i) = self.op.inputs.iter().position(|t| t.name == name) {
            return Some(TensorRef::Input(i as u32));
        }
        if let Some(i) = self.op.outputs.iter().position(|t| t.name == name) {
            return Some(TensorRef::Output(i as u32));
        }
        if let Some(i) = self.op.locals.iter().position(|t| t.name == name) {
            return Some(TensorRef::Local(i as u32));
        }
        None
    }

    fn new_var(
        &mut self,
        name: &str,
        range: Option<DimExpr>,
        reduction: bool,
        span: Span,
        group: bool,
    ) -> VarId {
        let id = VarId(self.op.vars.len() as u32);
        if range.is_none() && !group {
            self.pending.push(id);
        }
        self.op.vars.push(VarInfo {
            name: name.to_string(),
            range: range.unwrap_or(DimExpr::Const(0)),
            reduction,
            ellipsis: None,
            ellipsis_group: group,
            span,
        });
        id
    }

    /// Bind a binder (`i`, `i in N` or `...`) into `scope`.
    fn binder(
        &mut self,
        b: Pair<Rule>,
        scope: &mut Scope,
        reduction: bool,
        declared: Option<&DimEntry>,
    ) -> Option<VarId> {
        let span = span_of(&b);
        let mut it = b.into_inner();
        let first = it.next()?;
        if first.as_rule() == Rule::ellipsis {
            if !self.has_input_ellipsis() {
                self.err(
                    span,
                    "`...` binds the ellipsis dims, but no input declares `...`",
                    "unbound ellipsis",
                    Some("declare the batch dims on an input, e.g. `x[..., N]`".into()),
                );
                return None;
            }
            let v = self.new_var("...", None, reduction, span, true);
            scope.ellipsis.push(v);
            return Some(v);
        }
        let name = first.as_str().to_string();
        if let Some((_, _)) = scope.vars.iter().rev().find(|(n, _)| *n == name) {
            let what = if reduction {
                "reduction variable"
            } else {
                "index variable"
            };
            self.err(
                span_of(&first),
                format!("{what} `{name}` shadows the variable `{name}` already bound here"),
                "shadows an outer variable",
                Some(format!(
                    "rename the inner `{name}`; each variable of an op needs its own name"
                )),
            );
            return None;
        }
        if let Some(kind) = self.global_kind(&name) {
            self.err(
                span_of(&first),
                format!("index variable `{name}` has the same name as {kind}"),
                "name clash",
                Some(
                    "use lower-case names for index variables and upper-case names for dims".into(),
                ),
            );
            return None;
        }
        let explicit = it.nth(1).and_then(|r| self.dim_expr(r));
        let range = match (explicit, declared) {
            (Some(r), _) => Some(r),
            (None, Some(DimEntry::Dim(d))) => Some(d.clone()),
            _ => None,
        };
        let v = self.new_var(&name, range, reduction, span_of(&first), false);
        scope.vars.push((name, v));
        Some(v)
    }

    fn stmt(&mut self, pair: Pair<Rule>) {
        let span = span_of(&pair);
        let mut it = pair.into_inner().peekable();
        let is_let = it
            .peek()
            .map(|p| p.as_rule() == Rule::let_kw)
            .unwrap_or(false);
        if is_let {
            it.next();
        }
        let Some(name) = it.next() else { return };
        let tname = name.as_str().to_string();
        let tspan = span_of(&name);
        let mut binders = Vec::new();
        let mut body = None;
        for p in it {
            match p.as_rule() {
                Rule::binder => binders.push(p),
                Rule::expr => body = Some(p),
                _ => {}
            }
        }
        let target = if is_let {
            self.attempted_lets.push(tname.clone());
            if let Some(kind) = self.global_kind(&tname) {
                self.err(
                    tspan,
                    format!("temporary `{tname}` has the same name as {kind}"),
                    "name clash",
                    Some("rename the temporary".into()),
                );
                return;
            }
            TensorRef::Local(self.op.locals.len() as u32)
        } else {
            match self.lookup_tensor(&tname) {
                Some(t @ TensorRef::Output(_)) => {
                    if self.assigned.contains(&t) {
                        self.err(
                            tspan,
                            format!("output `{tname}` is defined twice"),
                            "second definition",
                            Some("each output is defined by exactly one statement".into()),
                        );
                        return;
                    }
                    self.assigned.push(t);
                    self.current = Some(t);
                    t
                }
                Some(TensorRef::Input(_)) => {
                    self.err(
                        tspan,
                        format!("`{tname}` is an input and cannot be assigned"),
                        "input",
                        Some("assign to an output, or declare a temporary with `let`".into()),
                    );
                    return;
                }
                _ => {
                    self.err(tspan, format!("unknown output `{tname}`"), "not declared", Some(format!("declare it after `->`, or write `let {tname}[...] = ...;` for a temporary")));
                    return;
                }
            }
        };
        let declared: Vec<DimEntry> = match target {
            TensorRef::Output(i) => self.op.outputs[i as usize].dims.clone(),
            _ => vec![],
        };
        if !is_let && declared.len() != binders.len() {
            self.err(span_of_binders(&binders, tspan), format!("rank mismatch: output `{tname}` has {} dims but the statement binds {} variables", declared.len(), binders.len()), "wrong number of variables", Some(format!("bind one variable per dim of `{tname}` (`...` counts as one)")));
            return;
        }
        let mut scope = Scope::default();
        let mut vars = Vec::new();
        let mut local_dims = Vec::new();
        self.pending.clear();
        for (i, b) in binders.into_iter().enumerate() {
            let decl = declared.get(i);
            let is_ell = b.as_str().trim() == "...";
            if !is_let && is_ell != matches!(decl, Some(DimEntry::Ellipsis)) {
                self.err(
                    span_of(&b),
                    format!(
                        "position {i} of output `{tname}` is {} in its declaration",
                        if is_ell { "not `...`" } else { "`...`" }
                    ),
                    "does not match the declaration",
                    Some(
                        "write the statement's variables in the same layout as the output's dims"
                            .into(),
                    ),
                );
                return;
            }
            let Some(v) = self.binder(b, &mut scope, false, decl) else {
                return;
            };
            vars.push(v);
            local_dims.push(if is_ell {
                DimEntry::Ellipsis
            } else {
                DimEntry::Dim(DimExpr::Const(0))
            });
        }
        let Some(body) = body else { return };
        let Some(body) = self.expr(body, &scope) else {
            return;
        };
        let pending = std::mem::take(&mut self.pending);
        for v in pending {
            if let Some(r) = self.infer_range(v, &body) {
                self.op.vars[v.0 as usize].range = r;
            } else {
                let info = &self.op.vars[v.0 as usize];
                let (n, s) = (info.name.clone(), info.span);
                self.err(s, format!("cannot infer the range of variable `{n}`: it is never used alone as an index"), "range unknown", Some(format!("give the range explicitly: `{n} in N`")));
                return;
            }
        }
        if is_let {
            for (d, v) in local_dims.iter_mut().zip(&vars) {
                if let DimEntry::Dim(r) = d {
                    *r = self.op.vars[v.0 as usize].range.clone();
                }
            }
            self.op.locals.push(OutputDecl {
                name: tname,
                dims: local_dims,
                span: tspan,
            });
        }
        self.defined.push(target);
        self.op.stmts.push(Stmt {
            target,
            vars,
            body,
            span,
        });
    }

    /// The range of `v`: the dim of the first read where it is a bare index.
    fn infer_range(&self, v: VarId, e: &Expr) -> Option<DimExpr> {
        match &e.kind {
            ExprKind::Read { tensor, indices } => {
                for (pos, ix) in indices.iter().enumerate() {
                    if let Index::Expr(Expr {
                        kind: ExprKind::Var(w),
                        ..
                    }) = ix
                    {
                        if *w == v {
                            if let Some(DimEntry::Dim(d)) = self.op_tensor_dims(*tensor).get(pos) {
                                return Some(d.clone());
                            }
                        }
                    }
                }
                indices.iter().find_map(|ix| match ix {
                    Index::Expr(x) => self.infer_range(v, x),
                    _ => None,
                })
            }
            ExprKind::Unary(_, a) => self.infer_range(v, a),
            ExprKind::Binary(_, a, b) => self.infer_range(v, a).or_else(|| self.infer_range(v, b)),
            ExprKind::Call(_, args) => args.iter().find_map(|a| self.infer_range(v, a)),
            ExprKind::Reduce { body, .. } => self.infer_range(v, body),
            ExprKind::Opaque { args, index, .. } => args
                .iter()
                .chain(index)
                .find_map(|a| self.infer_range(v, a)),
            _ => None,
        }
    }

    fn op_tensor_dims(&self, t: TensorRef) -> &[DimEntry] {
        match t {
            TensorRef::Input(i) => &self.op.inputs[i as usize].dims,
            TensorRef::Output(i) => &self.op.outputs[i as usize].dims,
            TensorRef::Local(i) => self
                .op
                .locals
                .get(i as usize)
                .map(|l| &l.dims[..])
                .unwrap_or(&[]),
        }
    }

    fn grad(&mut self, pair: Pair<Rule>) {
        let span = span_of(&pair);
        let mut wrt = Vec::new();
        let mut op = None;
        let mut args = Vec::new();
        let mut attrs = Vec::new();
        let mut names = Vec::new();
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::ident => names.push(p),
                Rule::grad_args => {
                    for a in p.into_inner() {
                        let Some(a) = a.into_inner().next() else {
                            continue;
                        };
                        let aspan = span_of(&a);
                        if a.as_rule() == Rule::grad_of {
                            let Some(n) = a.into_inner().find(|x| x.as_rule() == Rule::ident)
                            else {
                                continue;
                            };
                            match self.op.outputs.iter().position(|o| o.name == n.as_str()) {
                                Some(i) => args.push(GradArg::OutputGrad(i as u32)),
                                None => self.err(
                                    aspan,
                                    format!(
                                        "`grad({})`: `{}` is not an output of `{}`",
                                        n.as_str(),
                                        n.as_str(),
                                        self.op.name
                                    ),
                                    "not an output",
                                    Some("`grad(y)` names the gradient of an output `y`".into()),
                                ),
                            }
                        } else {
                            match self.lookup_tensor(a.as_str()) {
                                Some(TensorRef::Local(_)) | None => self.err(aspan, format!("unknown tensor `{}` in gradient arguments", a.as_str()), "not an input or output", Some("gradient ops take this op's inputs, outputs and `grad(output)`".into())),
                                Some(t) => args.push(GradArg::Tensor(t)),
                            }
                        }
                    }
                }
                Rule::attr_assigns => {
                    for a in p.into_inner() {
                        let mut it = a.into_inner();
                        let (Some(n), Some(v)) = (it.next(), it.next()) else {
                            continue;
                        };
                        if let Some(e) = self.expr(v, &Scope::default()) {
                            attrs.push((n.as_str().to_string(), e));
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(last) = names.pop() {
            op = Some(last.as_str().to_string());
        }
        for n in names {
            match self.op.inputs.iter().position(|t| t.name == n.as_str()) {
                Some(i) => wrt.push(i as u32),
                None => self.err(
                    span_of(&n),
                    format!(
                        "`grad {}`: `{}` is not an input of `{}`",
                        n.as_str(),
                        n.as_str(),
                        self.op.name
                    ),
                    "not an input",
                    Some("gradients are declared for inputs".into()),
                ),
            }
        }
        if let Some(op) = op {
            self.op.grads.push(GradDecl {
                wrt,
                op,
                args,
                attrs,
                span,
            });
        }
    }

    // ---------------------------------------------------------------- expressions

    fn mk(kind: ExprKind, span: Span, ty: Type) -> Expr {
        Expr { kind, span, ty }
    }

    fn expr(&mut self, pair: Pair<Rule>, scope: &Scope) -> Option<Expr> {
        let span = span_of(&pair);
        match pair.as_rule() {
            Rule::expr => self.expr(pair.into_inner().next()?, scope),
            Rule::or_expr | Rule::and_expr | Rule::add_expr | Rule::mul_expr | Rule::cmp_expr => {
                let mut it = pair.into_inner();
                let mut lhs = self.expr(it.next()?, scope);
                while let Some(op) = it.next() {
                    let rhs = self.expr(it.next()?, scope);
                    let bop = match op.as_str() {
                        "+" => BinOp::Add,
                        "-" => BinOp::Sub,
                        "*" => BinOp::Mul,
                        "/" => BinOp::Div,
                        "//" => BinOp::FloorDiv,
                        "%" => BinOp::Mod,
                        "<" => BinOp::Lt,
                        "<=" => BinOp::Le,
                        ">" => BinOp::Gt,
                        ">=" => BinOp::Ge,
                        "==" => BinOp::Eq,
                        "!=" => BinOp::Ne,
                        "&&" => BinOp::And,
                        _ => BinOp::Or,
                    };
                    let (l, r) = (lhs?, rhs?);
                    let ty = match bop {
                        BinOp::Div => Type::Real,
                        BinOp::Lt
                        | BinOp::Le
                        | BinOp::Gt
                        | BinOp::Ge
                        | BinOp::Eq
                        | BinOp::Ne
                        | BinOp::And
                        | BinOp::Or => Type::Int,
                        _ if l.ty == Type::Int && r.ty == Type::Int => Type::Int,
                        _ => Type::Real,
                    };
                    let sp = Span::new(l.span.start, r.span.end);
                    lhs = Some(Self::mk(
                        ExprKind::Binary(bop, Box::new(l), Box::new(r)),
                        sp,
                        ty,
                    ));
                }
                lhs
            }
            Rule::unary => {
                let mut ops = Vec::new();
                let mut inner = None;
                for p in pair.into_inner() {
                    if p.as_rule() == Rule::neg_op {
                        ops.push(p.as_str() == "-");
                    } else {
                        inner = Some(p);
                    }
                }
                let mut e = self.expr(inner?, scope)?;
                for neg in ops.into_iter().rev() {
                    e = if neg {
                        match e.kind {
                            ExprKind::Int(i) => Self::mk(ExprKind::Int(-i), span, Type::Int),
                            ExprKind::Real(r) => Self::mk(ExprKind::Real(-r), span, Type::Real),
                            _ => {
                                let ty = e.ty;
                                Self::mk(ExprKind::Unary(UnOp::Neg, Box::new(e)), span, ty)
                            }
                        }
                    } else {
                        Self::mk(ExprKind::Unary(UnOp::Not, Box::new(e)), span, Type::Int)
                    };
                }
                Some(e)
            }
            Rule::postfix => {
                let mut it = pair.into_inner();
                let prim = it.next()?;
                match it.next() {
                    None => self.expr(prim, scope),
                    Some(ix) => {
                        // Only an opaque call can be indexed.
                        let inner = prim.clone().into_inner().next();
                        match inner {
                            Some(c) if c.as_rule() == Rule::call => self.call(c, Some(ix), scope),
                            _ => {
                                self.err(
                                    span_of(&ix),
                                    "only the result of an opaque function can be indexed here",
                                    "unexpected index",
                                    Some(
                                        "index a tensor directly: `x[i, j]`, not `x[i][j]`".into(),
                                    ),
                                );
                                None
                            }
                        }
                    }
                }
            }
            Rule::primary => {
                let inner = pair.into_inner().next()?;
                self.expr(inner, scope)
            }
            Rule::number => {
                let t = pair.as_str();
                if t.contains(['.', 'e', 'E']) {
                    match t.parse::<f64>() {
                        Ok(v) => Some(Self::mk(ExprKind::Real(v), span, Type::Real)),
                        Err(_) => {
                            self.err(span, format!("bad number `{t}`"), "not a number", None);
                            None
                        }
                    }
                } else {
                    match t.parse::<i64>() {
                        Ok(v) => Some(Self::mk(ExprKind::Int(v), span, Type::Int)),
                        Err(_) => {
                            self.err(
                                span,
                                format!("integer `{t}` is too large"),
                                "overflows i64",
                                None,
                            );
                            None
                        }
                    }
                }
            }
            Rule::ident => self.ident(pair.as_str(), span, scope),
            Rule::reduce => self.reduce(pair, scope),
            Rule::call => self.call(pair, None, scope),
            Rule::tensor_read => self.read(pair, scope, false),
            _ => {
                self.err(span, "unsupported expression", "here", None);
                None
            }
        }
    }

    fn ident(&mut self, name: &str, span: Span, scope: &Scope) -> Option<Expr> {
        if let Some((_, v)) = scope.vars.iter().rev().find(|(n, _)| n == name) {
            return Some(Self::mk(ExprKind::Var(*v), span, Type::Int));
        }
        if let Some(d) = self.op.dims.iter().position(|d| d.name == name) {
            return Some(Self::mk(ExprKind::Dim(DimId(d as u32)), span, Type::Int));
        }
        if let Some(a) = self.op.attrs.iter().position(|a| a.name == name) {
            let ty = if self.op.attrs[a].ty == AttrType::Int {
                Type::Int
            } else {
                Type::Real
            };
            return Some(Self::mk(ExprKind::Attr(AttrId(a as u32)), span, ty));
        }
        if self.lookup_tensor(name).is_some() {
            self.err(
                span,
                format!("tensor `{name}` is used without indices"),
                "needs indices",
                Some(format!(
                    "read an element: `{name}[...]` (a scalar tensor is read as `{name}[]`)"
                )),
            );
            return None;
        }
        let mut known: Vec<&str> = scope.vars.iter().map(|(n, _)| n.as_str()).collect();
        known.extend(self.op.dims.iter().map(|d| d.name.as_str()));
        known.extend(self.op.attrs.iter().map(|a| a.name.as_str()));
        let help = if let Some(c) = closest(name, known.iter().copied()) {
            format!("did you mean `{c}`? Otherwise bind `{name}` on the left-hand side or in a reducer `Sum({name}: ...)`")
        } else if known.is_empty() {
            "bind it on the left-hand side, in a reducer `Sum(k: ...)`, or declare it as a dim or attribute".to_string()
        } else {
            format!("names in scope here: {}; bind `{name}` on the left-hand side or in a reducer `Sum({name}: ...)`", known.join(", "))
        };
        self.err(
            span,
            format!("unbound name `{name}`"),
            "not bound",
            Some(help),
        );
        None
    }

    fn reduce(&mut self, pair: Pair<Rule>, scope: &Scope) -> Option<Expr> {
        let span = span_of(&pair);
        let mut it = pair.into_inner();
        let reducer = match it.next()?.as_str() {
            "Sum" => Reducer::Sum,
            "Max" => Reducer::Max,
            "Min" => Reducer::Min,
            _ => Reducer::Prod,
        };
        let mut inner = Scope {
            vars: scope.vars.clone(),
            ellipsis: scope.ellipsis.clone(),
        };
        let mut vars = Vec::new();
        let mut body = None;
        for p in it {
            match p.as_rule() {
                Rule::binder => vars.push(self.binder(p, &mut inner, true, None)?),
                _ => body = Some(p),
            }
        }
        let body = self.expr(body?, &inner)?;
        for v in &vars {
            let info = &self.op.vars[v.0 as usize];
            if !info.ellipsis_group && !uses_var(&body, *v) {
                let (n, s) = (info.name.clone(), info.span);
                self.err(
                    s,
                    format!("reduction variable `{n}` is not used in the reduced expression"),
                    "unused",
                    Some(format!("remove `{n}` from the reducer")),
                );
                return None;
            }
        }
        Some(Self::mk(
            ExprKind::Reduce {
                reducer,
                vars,
                body: Box::new(body),
            },
            span,
            Type::Real,
        ))
    }

    fn call(&mut self, pair: Pair<Rule>, index: Option<Pair<Rule>>, scope: &Scope) -> Option<Expr> {
        let span = span_of(&pair);
        let mut it = pair.into_inner();
        let name = it.next()?;
        let fname = name.as_str().to_string();
        let args: Vec<Pair<Rule>> = it.map(|a| a.into_inner().next()).collect::<Option<_>>()?;
        if let Some((b, arity)) = Builtin::lookup(&fname) {
            if index.is_some() {
                self.err(
                    span,
                    format!("`{fname}` is a scalar function and cannot be indexed"),
                    "scalar",
                    None,
                );
                return None;
            }
            if args.len() != arity {
                self.err(
                    span,
                    format!(
                        "wrong arity: `{fname}` takes {arity} argument(s), got {}",
                        args.len()
                    ),
                    "wrong number of arguments",
                    Some(format!(
                        "call it as `{fname}({})`",
                        (0..arity)
                            .map(|i| format!("a{i}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                );
                return None;
            }
            let mut out = Vec::new();
            let mut ok = true;
            for a in args {
                let e = if a.as_rule() == Rule::slice_read {
                    self.read(a, scope, false)
                } else {
                    self.expr(a, scope)
                };
                match e {
                    Some(e) => out.push(e),
                    None => ok = false,
                }
            }
            if !ok {
                return None;
            }
            let ty = match b {
                Builtin::Max | Builtin::Min if out.iter().all(|e| e.ty == Type::Int) => Type::Int,
                Builtin::Select if out[1].ty == Type::Int && out[2].ty == Type::Int => Type::Int,
                _ => Type::Real,
            };
            return Some(Self::mk(ExprKind::Call(b, out), span, ty));
        }
        let Some(info) = opaque::lookup(&fname) else {
            let builtins: Vec<&str> = Builtin::ALL.iter().map(|(_, n, _)| *n).collect();
            let opaques: Vec<&str> = opaque::KNOWN.iter().map(|o| o.name).collect();
            let all = builtins.iter().chain(&opaques).copied();
            let hint = match closest(&fname, all) {
                Some(c) => format!(
                    "did you mean `{c}`? Built-ins: {}; opaque functions: {}",
                    builtins.join(", "),
                    opaques.join(", ")
                ),
                None => format!(
                    "built-ins: {}; opaque functions: {}",
                    builtins.join(", "),
                    opaques.join(", ")
                ),
            };
            self.err(
                span_of(&name),
                format!("unknown function `{fname}`"),
                "not a built-in or opaque function",
                Some(hint),
            );
            return None;
        };
        if args.len() != info.arity {
            self.err(
                span,
                format!(
                    "wrong arity: opaque function `{fname}` takes {} argument(s), got {}",
                    info.arity,
                    args.len()
                ),
                "wrong number of arguments",
                None,
            );
            return None;
        }
        let mut out = Vec::new();
        let mut slice_ranks = Vec::new();
        for a in args {
            let e = if a.as_rule() == Rule::slice_read {
                self.read(a, scope, true)?
            } else {
                self.expr(a, scope)?
            };
            let rank = match &e.kind {
                ExprKind::Read { indices, .. } => {
                    indices.iter().filter(|i| matches!(i, Index::Full)).count()
                }
                _ => 0,
            };
            slice_ranks.push(rank);
            out.push(e);
        }
        let want = (info.result_rank)(&slice_ranks);
        let mut idx = Vec::new();
        if let Some(ix) = index {
            for r in ix.into_inner() {
                let rspan = span_of(&r);
                let Some(e) = r.into_inner().next() else {
                    continue;
                };
                if e.as_rule() == Rule::ellipsis {
                    self.err(
                        rspan,
                        "`...` cannot index the result of an opaque function",
                        "here",
                        None,
                    );
                    return None;
                }
                let e = self.expr(e, scope)?;
                self.check_index(&e);
                idx.push(e);
            }
        }
        if idx.len() != want {
            self.err(span, format!("rank mismatch: `{fname}` returns a rank-{want} result here but is indexed with {} indices", idx.len()), "wrong number of indices", Some(format!("index the result with {want} indices: `{fname}(...)[i, j]`")));
            return None;
        }
        Some(Self::mk(
            ExprKind::Opaque {
                name: fname,
                args: out,
                index: idx,
            },
            span,
            Type::Real,
        ))
    }

    fn check_index(&mut self, e: &Expr) {
        if e.ty == Type::Real && !contains_read(e) {
            let hint = if has_real_div(e) {
                "`/` is real division; use `//` for integer division"
            } else {
                "indices are integers: index variables, dims, int attributes and integer literals"
            };
            self.err(
                e.span,
                "index is not an integer",
                "real-valued index",
                Some(hint.into()),
            );
        }
    }

    fn read(&mut self, pair: Pair<Rule>, scope: &Scope, allow_full: bool) -> Option<Expr> {
        let span = span_of(&pair);
        let mut it = pair.into_inner();
        let name = it.next()?;
        let tname = name.as_str();
        let Some(t) = self.lookup_tensor(tname) else {
            if self.lets.iter().any(|l| l == tname) {
                // A temporary whose `let` is later in the body, or whose `let` had a mistake (already reported).
                if self.attempted_lets.iter().any(|l| l == tname) {
                    self.quiet += 1;
                } else {
                    self.err(
                        span_of(&name),
                        format!("temporary `{tname}` is read before it is defined"),
                        "not yet defined",
                        Some(format!(
                            "move `let {tname}[...] = ...;` above the statement that reads it"
                        )),
                    );
                }
                return None;
            }
            let known: Vec<String> = self
                .op
                .inputs
                .iter()
                .map(|t| t.name.clone())
                .chain(self.op.locals.iter().map(|t| t.name.clone()))
                .collect();
            let help = match closest(tname, known.iter().map(String::as_str)) {
                Some(c) => format!("did you mean `{c}`? Tensors here: {}", known.join(", ")),
                None => format!("tensors here: {}", known.join(", ")),
            };
            self.err(
                span_of(&name),
                format!("unknown tensor `{tname}`"),
                "not declared",
                Some(help),
            );
            return None;
        };
        if !matches!(t, TensorRef::Input(_)) && !self.defined.contains(&t) {
            if self.assigned.contains(&t) && self.current != Some(t) {
                // Its defining statement had a mistake, already reported.
                self.quiet += 1;
                return None;
            }
            self.err(span_of(&name), format!("`{tname}` is read before it is defined"), "not yet defined", Some("define it in an earlier statement; a tensor cannot be defined in terms of itself".into()));
            return None;
        }
        let decl: Vec<DimEntry> = self.op_tensor_dims(t).to_vec();
        let mut indices = Vec::new();
        let mut ok = true;
        for ix in it {
            let ispan = span_of(&ix);
            let Some(e) = ix.into_inner().next() else {
                continue;
            };
            match e.as_rule() {
                Rule::ellipsis => match scope.ellipsis.last() {
                    Some(v) => indices.push(Index::Ellipsis(*v)),
                    None => {
                        self.err(ispan, "`...` used as an index, but no `...` is bound here", "unbound ellipsis", Some("bind the ellipsis on the left-hand side (`y[..., n] = ...`) or in a reducer (`Sum(...: ...)`)".into()));
                        ok = false;
                    }
                },
                Rule::colon => {
                    if !allow_full {
                        self.err(
                            ispan,
                            "`:` slices are only allowed in arguments of opaque functions",
                            "slice",
                            Some("index every dim with an expression".into()),
                        );
                        ok = false;
                    }
                    indices.push(Index::Full);
                }
                _ => match self.expr(e, scope) {
                    Some(x) => {
                        self.check_index(&x);
                        indices.push(Index::Expr(x));
                    }
                    None => ok = false,
                },
            }
        }
        if !ok {
            return None;
        }
        if indices.len() != decl.len() {
            self.err(
                span,
                format!(
                    "rank mismatch: `{tname}` has {} dims but is indexed with {}",
                    decl.len(),
                    indices.len()
                ),
                "wrong number of indices",
                Some(format!(
                    "index `{tname}` with one index per dim (`...` counts as one)"
                )),
            );
            return None;
        }
        for (i, (ix, d)) in indices.iter().zip(&decl).enumerate() {
            let is_ell = matches!(ix, Index::Ellipsis(_));
            if is_ell != matches!(d, DimEntry::Ellipsis) {
                self.err(
                    span,
                    format!(
                        "index {i} of `{tname}` {} but its declaration {}",
                        if is_ell { "is `...`" } else { "is not `...`" },
                        if is_ell {
                            "has no `...` there"
                        } else {
                            "has `...` there"
                        }
                    ),
                    "misplaced ellipsis",
                    Some("put `...` in the same position as in the tensor's declaration".into()),
                );
                return None;
            }
        }
        Some(Self::mk(
            ExprKind::Read { tensor: t, indices },
            span,
            Type::Real,
        ))
    }
}

fn span_of_binders(b: &[Pair<Rule>], fallback: Span) -> Span {
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => Span::new(f.as_span().start(), l.as_span().end()),
        _ => fallback,
    }
}

/// Whether `e` mentions variable `v` anywhere.
pub(crate) fn uses_var(e: &Expr, v: VarId) -> bool {
    let mut found = false;
    visit(e, &mut |x| {
        if let ExprKind::Var(w) = x.kind {
            found |= w == v;
        }
        if let ExprKind::Read { indices, .. } = &x.kind {
            found |= indices
                .iter()
                .any(|i| matches!(i, Index::Ellipsis(w) if *w == v));
        }
    });
    found
}

fn contains_read(e: &Expr) -> bool {
    let mut found = false;
    visit(e, &mut |x| {
        found |= matches!(x.kind, ExprKind::Read { .. } | ExprKind::Opaque { .. })
    });
    found
}

fn has_real_div(e: &Expr) -> bool {
    let mut found = false;
    visit(e, &mut |x| {
        found |= matches!(x.kind, ExprKind::Binary(BinOp::Div, _, _))
    });
    found
}

/// Pre-order walk over an expression and all its sub-expressions (including indices).
pub fn visit(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Read { indices, .. } => {
            for i in indices {
                if let Index::Expr(x) = i {
                    visit(x, f);
                }
            }
        }
        ExprKind::Unary(_, a) => visit(a, f),
        ExprKind::Binary(_, a, b) => {
            visit(a, f);
            visit(b, f);
        }
        ExprKind::Call(_, args) => args.iter().for_each(|a| visit(a, f)),
        ExprKind::Reduce { body, .. } => visit(body, f),
        ExprKind::Opaque { args, index, .. } => args.iter().chain(index).for_each(|a| visit(a, f)),
        _ => {}
    }
}
