//! User-facing diagnostics for TDL files: file, line, column, a caret under
//! the offending text and a hint, rendered by miette.
//!
//! Takes a file name, its source text, a byte span, a message and a hint;
//! gives a [`Diagnostic`] (one mistake) and [`Diagnostics`] (every mistake of a
//! check, reported together). Spans are clamped into the source so rendering
//! never panics.

use std::sync::Arc;

use miette::{GraphicalReportHandler, GraphicalTheme, NamedSource, SourceSpan};

use crate::ast::Span;

/// One mistake in a TDL file.
#[derive(Debug, Clone, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
#[diagnostic(code(tdl::error))]
pub struct Diagnostic {
    /// What is wrong, in one sentence.
    pub message: String,
    /// The file and its text.
    #[source_code]
    pub src: NamedSource<Arc<String>>,
    /// Where.
    #[label("{label}")]
    pub span: SourceSpan,
    /// Short label printed at the caret.
    pub label: String,
    /// How to fix it.
    #[help]
    pub help: Option<String>,
    /// The file name (also inside `src`).
    pub file: String,
    /// 1-based line of the span start.
    pub line: usize,
    /// 1-based column (in characters) of the span start.
    pub column: usize,
}

impl Diagnostic {
    /// Build a diagnostic for `span` of `text` (clamped to the text).
    pub fn new(
        file: &str,
        text: &Arc<String>,
        span: Span,
        message: impl Into<String>,
        label: impl Into<String>,
        help: Option<String>,
    ) -> Self {
        let len = text.len();
        let mut start = span.start.min(len);
        while start > 0 && !text.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = span.end.clamp(start, len);
        while end < len && !text.is_char_boundary(end) {
            end += 1;
        }
        let before = &text[..start];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Diagnostic {
            message: message.into(),
            src: NamedSource::new(file, text.clone()),
            span: SourceSpan::new(start.into(), end - start),
            label: label.into(),
            help,
            file: file.to_string(),
            line,
            column,
        }
    }

    /// Render as plain text (no colours): `file:line:col` header, the source
    /// line, a caret under the span and the hint.
    pub fn render(&self) -> String {
        let mut out = format!(
            "error: {}\n  --> {}:{}:{}\n",
            self.message, self.file, self.line, self.column
        );
        let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
            .with_width(100)
            .with_context_lines(1);
        let mut body = String::new();
        if handler.render_report(&mut body, self).is_ok() {
            // miette repeats the code and the message above the snippet; the
            // header above already says both, so start at the snippet frame.
            match body.find("╭─[") {
                Some(frame) => {
                    let line_start = body[..frame].rfind('\n').map_or(0, |i| i + 1);
                    out.push_str(&body[line_start..]);
                }
                None => out.push_str(&body),
            }
        }
        out
    }
}

/// Every mistake found in one check, in source order.
#[derive(Debug, Clone, thiserror::Error, miette::Diagnostic)]
#[error("{} error(s) in TDL", .errors.len())]
pub struct Diagnostics {
    /// The mistakes.
    #[related]
    pub errors: Vec<Diagnostic>,
}

impl Diagnostics {
    /// Render every diagnostic as plain text, separated by blank lines.
    pub fn render(&self) -> String {
        self.errors
            .iter()
            .map(Diagnostic::render)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The span of an op's name inside the op's span (which starts at its doc
/// comment); the whole span if not found.
pub(crate) fn op_name_span(text: &str, span: Span, name: &str) -> Span {
    let Some(s) = text.get(span.start..span.end.min(text.len())) else {
        return span;
    };
    let mut off = 0;
    for line in s.split_inclusive('\n') {
        if !line.trim_start().starts_with("///") {
            break;
        }
        off += line.len();
    }
    match s[off..]
        .find("op")
        .and_then(|k| s[off + k..].find(name).map(|i| off + k + i))
    {
        Some(i) => Span::new(span.start + i, span.start + i + name.len()),
        None => span,
    }
}

/// 1-based line of byte offset `pos` in `text`.
pub(crate) fn line_of(text: &str, pos: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(pos)
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The candidate closest to `name` (edit distance at most a third of its
/// length, rounded up), for "did you mean" hints.
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (name.chars().count() + 1) / 3;
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}
