//! The user operator specs a plan was made with (`tofu plan --specs`),
//! recorded in the plan file so the plan runs anywhere.
//!
//! Takes the `(file name, text)` pairs of the user `.tdl` files a plan was
//! made with; gives [`SpecFile`] records (name, SHA-256 of the text, the
//! text) for the plan file's `specs` field, and at run time the library to
//! bind the plan with ([`plan_library`]): the shipped library plus the
//! recorded files, checked against their hashes and against any spec files
//! given again (`tofu run --specs`), whose operators must be the ones
//! planned with.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tdl::{Library, LibraryError};

/// One user spec file a plan was made with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecFile {
    /// The file as it was named on the command line (e.g. `myops/swiglu.tdl`).
    pub file: String,
    /// SHA-256 (hex) of `text`.
    pub sha256: String,
    /// The whole file.
    pub text: String,
}

impl SpecFile {
    /// Records of `(file name, text)` pairs, in order.
    pub fn of(sources: &[(String, String)]) -> Vec<SpecFile> {
        sources
            .iter()
            .map(|(file, text)| SpecFile {
                file: file.clone(),
                sha256: sha256(text),
                text: text.clone(),
            })
            .collect()
    }
}

/// Why a plan's recorded specs cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SpecsError {
    /// A recorded text does not have its recorded hash (an edited plan file).
    #[error("the recorded spec file `{file}` does not match its sha256 {sha256}; the plan file was edited: make it again with `tofu plan --specs`")]
    Tampered {
        /// The recorded file name.
        file: String,
        /// Its recorded hash.
        sha256: String,
    },
    /// An operator of a spec file given now differs from the one planned with.
    #[error("operator `{op}` changed since the plan was made: the plan was made with `{planned_file}` (operator sha256 {planned}), --specs gives `{given_file}` (operator sha256 {given}); plan again with the new spec (`tofu plan … --specs`), or run without --specs to use the recorded one")]
    Changed {
        /// The operator.
        op: String,
        /// The file it was recorded from.
        planned_file: String,
        /// SHA-256 of its source text when planned.
        planned: String,
        /// The file given now.
        given_file: String,
        /// SHA-256 of its source text now.
        given: String,
    },
    /// The specs do not load (rendered diagnostics, or an I/O error).
    #[error("{0}")]
    Library(String),
}

/// SHA-256 (hex) of a text.
pub fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A library error as text: every diagnostic rendered (file:line:col,
/// caret, hint), or the I/O error.
pub fn render(e: &LibraryError) -> String {
    match e {
        LibraryError::Invalid(d) => d.render(),
        other => other.to_string(),
    }
}

/// The source text of operator `op` of `lib` and its file, if it is defined
/// in one of `files`.
fn op_text<'a>(lib: &'a Library, op: &str, files: &[&str]) -> Option<(&'a str, String)> {
    let spec = lib.get(op).filter(|s| files.contains(&s.file.as_str()))?;
    let src = lib.source(&spec.file)?;
    let text = src.get(spec.span.start..spec.span.end.min(src.len()))?;
    Some((spec.file.as_str(), sha256(text)))
}

/// The library to bind a plan made with the user specs `recorded` (the plan
/// file's `specs`): the shipped library plus the recorded files. `given`
/// (the `--specs` files of this run, possibly none) are checked against
/// them: an operator defined in both must have the same source text. A plan
/// recorded without specs binds with the shipped library plus `given`.
///
/// Errors: [`SpecsError::Tampered`], [`SpecsError::Changed`] naming the
/// operator and both hashes, [`SpecsError::Library`] for specs that do not
/// load.
pub fn plan_library(
    recorded: &[SpecFile],
    given: &[(String, String)],
) -> Result<Library, SpecsError> {
    let load = |files: &[(String, String)]| {
        Library::shipped_with(files).map_err(|e| SpecsError::Library(render(&e)))
    };
    if recorded.is_empty() {
        return load(given);
    }
    for r in recorded {
        if sha256(&r.text) != r.sha256 {
            return Err(SpecsError::Tampered {
                file: r.file.clone(),
                sha256: r.sha256.clone(),
            });
        }
    }
    let sources: Vec<(String, String)> = recorded
        .iter()
        .map(|r| (r.file.clone(), r.text.clone()))
        .collect();
    let lib = load(&sources)?;
    if given.is_empty() {
        return Ok(lib);
    }
    let now = load(given)?;
    let planned_files: Vec<&str> = recorded.iter().map(|r| r.file.as_str()).collect();
    let given_files: Vec<&str> = given.iter().map(|(f, _)| f.as_str()).collect();
    for op in now.ops() {
        let Some((given_file, given)) = op_text(&now, &op.name, &given_files) else {
            continue;
        };
        let Some((planned_file, planned)) = op_text(&lib, &op.name, &planned_files) else {
            continue;
        };
        if planned != given {
            return Err(SpecsError::Changed {
                op: op.name.clone(),
                planned_file: planned_file.to_string(),
                planned,
                given_file: given_file.to_string(),
                given,
            });
        }
    }
    Ok(lib)
}
