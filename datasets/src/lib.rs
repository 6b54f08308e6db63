//! Readers of the data sets that `scripts/fetch-*.sh` put in the data cache,
//! shared by the crates that train on them (the SSP parameter server and
//! the dependence-aware loops), and the cache itself.
//!
//! The cache is `$TOFU_DATA_CACHE`, by default `~/.cache/tofu` ([`cache_dir`]);
//! it is the one variable every fetch script and reader obeys. Depends on
//! no other tofu crate.
#![warn(missing_docs)]

use std::path::PathBuf;

pub mod movielens;

/// The data cache the fetch scripts fill: `$TOFU_DATA_CACHE`, else
/// `$HOME/.cache/tofu` (the directory may be missing).
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("TOFU_DATA_CACHE") {
        Some(c) => PathBuf::from(c),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
            .join(".cache/tofu"),
    }
}

/// A data file that cannot be read or does not parse.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The file cannot be read (missing: the script that fetches it).
    #[error("{}: {source}; run `bash scripts/{script}` (or set TOFU_DATA_CACHE) to fetch it", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The fetch script (in `scripts/`).
        script: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// A line does not parse.
    #[error("{}:{line}: {what} (expected {expected})", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        what: &'static str,
        /// The expected form of a line.
        expected: &'static str,
    },
    /// The file holds no records.
    #[error("{}: no records", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}
