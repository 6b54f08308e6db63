//! The operator library: every op of a set of `.tdl` files, by name.
//!
//! Takes files or directories of `.tdl` files, the shipped library built into
//! the binary ([`shipped_sources`]: `specs/` at build time, or `TOFU_SPECS`
//! at run time) or both ([`Library::shipped_with`]); gives a [`Library`] in which
//! every op name is unique and every gradient declaration names an op that
//! exists and fits (one argument per input of the gradient op, one result per
//! declared input, known attribute names). Errors: every mistake of every file
//! as [`Diagnostics`], or an I/O error naming the path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::ast::OpSpec;
use crate::ast::Span;
use crate::diagnostic::{closest, op_name_span, Diagnostic, Diagnostics};
use crate::lower::parse_file;

/// Errors loading a library.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum LibraryError {
    /// A file or directory could not be read.
    #[error("cannot read `{path}`: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The specs have mistakes.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Invalid(#[from] Diagnostics),
}

/// A set of checked operator specs, by name.
#[derive(Debug, Clone, Default)]
pub struct Library {
    ops: BTreeMap<String, OpSpec>,
    /// Source text per file, for diagnostics of later passes.
    sources: BTreeMap<String, Arc<String>>,
    /// Op names per file, in definition order.
    files: BTreeMap<String, Vec<String>>,
}

impl Library {
    /// Load every `.tdl` file under the given paths (files or directories, recursively, sorted).
    pub fn load(paths: &[PathBuf]) -> Result<Library, LibraryError> {
        Ok(Library::from_sources(&read_sources(paths)?)?)
    }

    /// The shipped library: the `specs/` files built into the binary, or the
    /// `.tdl` files under `TOFU_SPECS` when it is set (for developing specs
    /// without rebuilding). See [`shipped_sources`].
    pub fn shipped() -> Result<Library, LibraryError> {
        Ok(Library::from_sources(&shipped_sources()?)?)
    }

    /// The shipped library with `user` files (`(file name, text)`, e.g. from
    /// [`read_sources`] of `--specs` paths) loaded beside it: one library in
    /// which every op name is unique.
    ///
    /// Errors: as [`Library::from_sources`]; an op of `user` named like a
    /// shipped op (or one of another user file) is a duplicate naming both
    /// files and lines.
    pub fn shipped_with(user: &[(String, String)]) -> Result<Library, LibraryError> {
        let mut files = shipped_sources()?;
        files.extend(user.iter().cloned());
        Ok(Library::from_sources(&files)?)
    }

    /// Build from in-memory `(file name, text)` pairs.
    pub fn from_sources(files: &[(String, String)]) -> Result<Library, Diagnostics> {
        let mut lib = Library::default();
        let mut errors = Vec::new();
        // Where each op name was first defined: file and span of its name.
        let mut origin: BTreeMap<String, (String, Span)> = BTreeMap::new();
        let mut broken: Vec<String> = Vec::new();
        for (name, text) in files {
            let src = Arc::new(text.clone());
            lib.sources.insert(name.clone(), src.clone());
            match parse_file(name, text) {
                Ok(ops) => {
                    let mut names = Vec::new();
                    for op in ops {
                        let span = op_name_span(&src, op.span, &op.name);
                        if let Some((first, at)) = origin.get(&op.name) {
                            let text = lib.sources.get(first).cloned().unwrap_or_default();
                            let there = Diagnostic::new(first, &text, *at, "", "", None);
                            errors.push(Diagnostic::new(
                                name,
                                &src,
                                span,
                                format!(
                                    "operator `{}` is already defined at {first}:{}:{}",
                                    op.name, there.line, there.column
                                ),
                                "duplicate operator",
                                Some(
                                    "operator names are global across the shipped library and every --specs file: rename one of the two"
                                        .into(),
                                ),
                            ));
                            continue;
                        }
                        origin.insert(op.name.clone(), (name.clone(), span));
                        names.push(op.name.clone());
                        lib.ops.insert(op.name.clone(), op);
                    }
                    lib.files.insert(name.clone(), names);
                }
                Err(d) => {
                    errors.extend(d.errors);
                    broken.extend(declared_op_names(text));
                }
            }
        }
        // A gradient op that is declared in a file with mistakes is not reported
        // again as undefined: its own diagnostics say what to fix.
        errors.extend(
            lib.check_grads()
                .into_iter()
                .filter(|(missing, _)| !missing.as_ref().is_some_and(|m| broken.contains(m)))
                .map(|(_, d)| d),
        );
        if errors.is_empty() {
            Ok(lib)
        } else {
            Err(Diagnostics { errors })
        }
    }

    /// Mistakes in gradient declarations, each with the name of the
    /// gradient op if the mistake is that it does not exist.
    fn check_grads(&self) -> Vec<(Option<String>, Diagnostic)> {
        let mut errors = Vec::new();
        for op in self.ops.values() {
            let src = self.sources.get(&op.file).cloned().unwrap_or_default();
            let mut err = |missing: Option<String>, span, msg: String, help: String| {
                errors.push((
                    missing,
                    Diagnostic::new(
                        &op.file,
                        &src,
                        span,
                        msg,
                        "in this gradient declaration",
                        Some(help),
                    ),
                ));
            };
            for g in &op.grads {
                // Spans inside the declaration `grad x = op(args; attr = e);`.
                let decl = src.get(g.span.start..g.span.end).unwrap_or("");
                let eq = decl.find('=').unwrap_or(0);
                let op_span = decl[eq..].find(g.op.as_str()).map_or(g.span, |i| {
                    Span::new(g.span.start + eq + i, g.span.start + eq + i + g.op.len())
                });
                let call_span = Span::new(
                    op_span.start,
                    g.span.end.saturating_sub(1).max(op_span.start),
                );
                let Some(gop) = self.ops.get(&g.op) else {
                    let help = match closest(&g.op, self.ops.keys().map(String::as_str)) {
                        Some(c) => format!("did you mean `{c}`? Otherwise define `op {}` in a .tdl file of the library", g.op),
                        None => format!("define `op {}` in a .tdl file of the library", g.op),
                    };
                    err(
                        Some(g.op.clone()),
                        op_span,
                        format!("gradient op `{}` of `{}` is not defined", g.op, op.name),
                        help,
                    );
                    continue;
                };
                if gop.inputs.len() != g.args.len() {
                    err(
                        None,
                        call_span,
                        format!(
                            "wrong arity: `{}` takes {} input(s) but {} are passed",
                            g.op,
                            gop.inputs.len(),
                            g.args.len()
                        ),
                        format!(
                            "`{}` expects ({})",
                            g.op,
                            gop.inputs
                                .iter()
                                .map(|t| t.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                }
                if gop.outputs.len() != g.wrt.len() {
                    err(
                        None,
                        g.span,
                        format!(
                            "`{}` has {} output(s) but {} gradient(s) are bound to it",
                            g.op,
                            gop.outputs.len(),
                            g.wrt.len()
                        ),
                        "bind one input per output of the gradient op, in order".into(),
                    );
                }
                for (a, value) in &g.attrs {
                    if gop.attr(a).is_none() {
                        let before = src.get(g.span.start..value.span.start).unwrap_or("");
                        let span = before.rfind(a.as_str()).map_or(value.span, |i| {
                            Span::new(g.span.start + i, g.span.start + i + a.len())
                        });
                        err(
                            None,
                            span,
                            format!("unknown attribute `{a}` passed to `{}`", g.op),
                            if gop.attrs.is_empty() {
                                format!("`{}` has no attributes; remove `{a} = ...`", g.op)
                            } else {
                                format!(
                                    "`{}` has attributes: {}",
                                    g.op,
                                    gop.attrs
                                        .iter()
                                        .map(|x| x.name.as_str())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                )
                            },
                        );
                    }
                }
            }
        }
        errors
    }

    /// Look an op up by name.
    pub fn get(&self, name: &str) -> Option<&OpSpec> {
        self.ops.get(name)
    }

    /// Every op, sorted by name.
    pub fn ops(&self) -> impl Iterator<Item = &OpSpec> {
        self.ops.values()
    }

    /// Number of ops.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the library is empty.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Files and the ops each defines, sorted by file name.
    pub fn files(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.files.iter().map(|(f, o)| (f.as_str(), o.as_slice()))
    }

    /// Source text of a file, for rendering diagnostics of later passes.
    pub fn source(&self, file: &str) -> Option<&Arc<String>> {
        self.sources.get(file)
    }
}

/// Names after the `op` keyword at the start of a line (a rough scan of a
/// file that does not parse, to avoid cascading "not defined" errors).
fn declared_op_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("op "))
        .map(|rest| {
            rest.trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .filter(|n| !n.is_empty())
        .collect()
}

include!(concat!(env!("OUT_DIR"), "/shipped_specs.rs"));

/// The shipped `.tdl` files as `(file name, text)`: the `specs/` directory
/// of the source tree, built into the binary (`specs/NAME.tdl`, so
/// diagnostics name `specs/NAME.tdl:LINE:COL`); or, when the environment
/// variable `TOFU_SPECS` names a directory, its `.tdl` files read now (named
/// by their paths).
///
/// Errors: [`LibraryError::Io`] for a `TOFU_SPECS` that cannot be read.
pub fn shipped_sources() -> Result<Vec<(String, String)>, LibraryError> {
    match std::env::var_os("TOFU_SPECS") {
        Some(dir) => read_sources(&[PathBuf::from(dir)]),
        None => Ok(SHIPPED
            .iter()
            .map(|(name, text)| (name.to_string(), text.to_string()))
            .collect()),
    }
}

/// Every `.tdl` file under `paths` (files, or directories read recursively
/// in sorted order) as `(path, text)`.
///
/// Errors: [`LibraryError::Io`] naming the path that cannot be read.
pub fn read_sources(paths: &[PathBuf]) -> Result<Vec<(String, String)>, LibraryError> {
    let mut files = Vec::new();
    for p in paths {
        collect(p, &mut files)?;
    }
    let mut texts = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|source| LibraryError::Io {
            path: f.clone(),
            source,
        })?;
        texts.push((f.display().to_string(), text));
    }
    Ok(texts)
}

fn collect(p: &Path, out: &mut Vec<PathBuf>) -> Result<(), LibraryError> {
    let meta = std::fs::metadata(p).map_err(|source| LibraryError::Io {
        path: p.to_path_buf(),
        source,
    })?;
    if meta.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
            .map_err(|source| LibraryError::Io {
                path: p.to_path_buf(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            if e.is_dir() || e.extension().is_some_and(|x| x == "tdl") {
                collect(&e, out)?;
            }
        }
    } else {
        out.push(p.to_path_buf());
    }
    Ok(())
}
