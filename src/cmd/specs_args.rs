//! `--specs PATH`, the user operator libraries that every command reading
//! operators loads beside the shipped one (clap; flattened into their args).

use std::path::PathBuf;

use planner::plan::specs::render;
use tdl::Library;

/// User operator specs (see the module doc).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SpecsArgs {
    /// A `.tdl` file or a directory of them, loaded beside the shipped
    /// operator library (repeatable). `tofu plan` records them in the plan
    /// file; `tofu run`/`train` of a plan need none and refuse changed ones.
    #[arg(long = "specs", value_name = "PATH")]
    pub specs: Vec<PathBuf>,
}

impl SpecsArgs {
    /// The user files as `(path, text)`.
    pub fn sources(&self) -> miette::Result<Vec<(String, String)>> {
        tdl::read_sources(&self.specs).map_err(|e| miette::miette!("{}", render(&e)))
    }

    /// The shipped library with the user files beside it.
    pub fn library(&self) -> miette::Result<Library> {
        Library::shipped_with(&self.sources()?)
            .map_err(|e| miette::miette!("loading the operator specs:\n{}", render(&e)))
    }
}
