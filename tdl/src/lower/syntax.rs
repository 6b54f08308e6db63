//! Syntax errors: a pest error turned into one [`Diagnostic`] with the
//! expected tokens in words, and the nesting bound checked before parsing.

use std::sync::Arc;

use pest::Parser;

use super::{Rule, TdlParser};
use crate::ast::Span;
use crate::diagnostic::Diagnostic;

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
pub(super) fn too_deep(file: &str, src: &Arc<String>) -> Option<Diagnostic> {
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

pub(super) fn syntax_error(
    file: &str,
    src: &Arc<String>,
    e: pest::error::Error<Rule>,
) -> Diagnostic {
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
