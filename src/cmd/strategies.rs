//! `tofu strategies OP`: the partition strategies interval analysis finds.
//!
//! Takes an op name of the shipped library or a `--specs` file (Tofu §3.2), optional example
//! shapes (`--shape a=64x32`), attributes (`--attr stride=2`) and a part count;
//! prints the table of [`interval::report::Report`] (strategy, output layout,
//! each input's layout, bytes each part reads assuming f32), or JSON.

use std::process::ExitCode;

use interval::report::{parse_attrs, parse_shapes, Report};
use interval::StrategyCache;

use super::lib_err;

/// Arguments of `tofu strategies`.
#[derive(clap::Args)]
pub struct Args {
    /// Operator name (see `specs/README.md`).
    op: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Example input shape, `name=8x16` (repeatable; other dims are 8).
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    shapes: Vec<String>,
    /// Attribute value, `name=value` (repeatable; others take their defaults).
    #[arg(long = "attr", value_name = "NAME=VALUE")]
    attrs: Vec<String>,
    /// Number of parts (at least 2; parts are uneven when a dim does not divide).
    #[arg(long, default_value_t = 2)]
    parts: usize,
    #[command(flatten)]
    specs: super::specs_args::SpecsArgs,
}

/// Run `tofu strategies`.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    let lib = args.specs.library()?;
    let Some(spec) = lib.get(&args.op) else {
        let names: Vec<&str> = lib.ops().map(|o| o.name.as_str()).collect();
        return Err(miette::miette!(
            "no operator `{}` in the library; known: {}",
            args.op,
            names.join(", ")
        ));
    };
    let shapes = parse_shapes(&args.shapes).map_err(lib_err)?;
    let attrs = parse_attrs(&args.attrs).map_err(lib_err)?;
    let report =
        Report::new(&StrategyCache::new(), spec, &shapes, &attrs, args.parts).map_err(lib_err)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.json()).map_err(lib_err)?
        );
    } else {
        print!("{}", report.text());
    }
    Ok(ExitCode::SUCCESS)
}
