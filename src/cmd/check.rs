//! `tofu check [PATH ...]`: validate TDL specs.
//!
//! Takes files or directories (default: the shipped library; with `--specs`,
//! user files checked beside it); prints one line
//! per file with its operator count and a total, or every diagnostic (file,
//! line, column, caret, hint) and exits 1.

use std::path::PathBuf;
use std::process::ExitCode;

use tdl::{Library, LibraryError};

/// Arguments of `tofu check`.
#[derive(clap::Args)]
pub struct Args {
    /// `.tdl` files or directories to check on their own (default: the
    /// shipped library; with --specs, beside it).
    paths: Vec<PathBuf>,
    #[command(flatten)]
    specs: super::specs_args::SpecsArgs,
}

/// Run `tofu check`.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    let beside = !args.specs.specs.is_empty();
    let mut user = args.specs.sources()?;
    let loaded = match (beside, args.paths.is_empty()) {
        (false, true) => Library::shipped(),
        (false, false) => Library::load(&args.paths),
        (true, _) => tdl::read_sources(&args.paths).and_then(|p| {
            user.extend(p);
            Library::shipped_with(&user)
        }),
    };
    match loaded {
        Ok(lib) => {
            let mut missing_doc = Vec::new();
            let shown = |f: &str| !beside || user.iter().any(|(u, _)| u == f);
            for (file, ops) in lib.files().filter(|(f, _)| shown(f)) {
                println!("ok  {file}: {} operator(s)", ops.len());
                for op in ops {
                    if lib.get(op).is_some_and(|s| s.doc.trim().is_empty()) {
                        missing_doc.push(format!("{file}: operator `{op}` has no `///` doc comment (say what it computes and its source, e.g. the ONNX op)"));
                    }
                }
            }
            if !missing_doc.is_empty() {
                for m in &missing_doc {
                    eprintln!("error: {m}");
                }
                return Ok(ExitCode::FAILURE);
            }
            println!(
                "{} operators in {} file(s), no errors",
                lib.len(),
                lib.files().count()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(LibraryError::Invalid(d)) => {
            eprintln!("{}", d.render());
            eprintln!("{} error(s)", d.errors.len());
            Ok(ExitCode::FAILURE)
        }
        Err(e) => Err(miette::Report::msg(e.to_string())),
    }
}
