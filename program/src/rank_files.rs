//! Every rank's program as its own file, `DIR/rank-<r>.json` (what `tofu
//! run --save-programs DIR` writes; each file reads back with
//! [`Program::from_json`]).
//!
//! Takes a directory and the programs; gives the files, the directory
//! created first when missing.

use std::path::{Path, PathBuf};

use crate::Program;

/// A directory or file that could not be created or written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct WriteError {
    /// The directory or file.
    pub path: PathBuf,
    /// The I/O error.
    pub source: std::io::Error,
}

/// Writes `DIR/rank-<r>.json` for every program (JSON text of
/// [`Program::to_json`]), creating `dir` first.
///
/// Errors: [`WriteError`] naming the directory or file that failed.
pub fn write_ranks(dir: &Path, programs: &[Program]) -> Result<(), WriteError> {
    let fail = |path: &Path| {
        let path = path.to_path_buf();
        move |source| WriteError { path, source }
    };
    std::fs::create_dir_all(dir).map_err(fail(dir))?;
    for p in programs {
        let path = dir.join(format!("rank-{}.json", p.rank));
        std::fs::write(&path, p.to_json()).map_err(fail(&path))?;
    }
    Ok(())
}
