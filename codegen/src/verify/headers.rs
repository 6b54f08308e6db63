//! Headers: one program per rank, each with the program format's name and
//! version, its rank number and the world size.

use crate::error::CodegenError;
use crate::generate::Programs;
use crate::program::{Program, FORMAT, VERSION};

/// One program per rank of `world`.
///
/// Errors: [`CodegenError::Invalid`] at rank 0 saying how many there are.
pub(super) fn check_count(progs: &Programs, world: usize) -> Result<(), CodegenError> {
    if progs.programs.len() != world {
        return Err(CodegenError::Invalid {
            rank: 0,
            message: format!("{} programs for {world} ranks", progs.programs.len()),
        });
    }
    Ok(())
}

/// Program `p`, the `r`-th of `world`, says so and is in this format and
/// version. Errors: the header as found.
pub(super) fn check_header(p: &Program, r: usize, world: usize) -> Result<(), String> {
    if p.format != FORMAT || p.version != VERSION || p.rank != r || p.world != world {
        return Err(format!(
            "header {} v{} rank {} of {}",
            p.format, p.version, p.rank, p.world
        ));
    }
    Ok(())
}
