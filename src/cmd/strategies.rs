//! `tofu strategies OP`: the partition strategies interval analysis finds.
//!
//! Takes an op name of the shipped library (Tofu §3.2), optional example
//! shapes (`--shape a=64x32`), attributes (`--attr stride=2`) and a part count;
//! prints the table of [`interval::report::Report`] (strategy, output layout,
//! each input's layout, bytes each part reads assuming f32), or JSON.

use std::collections::BTreeMap;
use std::process::ExitCode;

use interval::report::Report;
use interval::StrategyCache;
use tdl::{AttrValue, Attrs, Library};

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
}

fn pair(s: &str) -> miette::Result<(&str, &str)> {
    s.split_once('=')
        .ok_or_else(|| miette::miette!("expected NAME=VALUE, got `{s}`"))
}

/// Run `tofu strategies`.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    let lib = Library::shipped().map_err(lib_err)?;
    let Some(spec) = lib.get(&args.op) else {
        let names: Vec<&str> = lib.ops().map(|o| o.name.as_str()).collect();
        return Err(miette::miette!(
            "no operator `{}` in the library; known: {}",
            args.op,
            names.join(", ")
        ));
    };
    let mut shapes = BTreeMap::new();
    for s in &args.shapes {
        let (name, dims) = pair(s)?;
        let dims: Vec<usize> = dims
            .split(['x', ','])
            .filter(|d| !d.is_empty())
            .map(|d| {
                d.trim()
                    .parse()
                    .map_err(|_| miette::miette!("bad dim `{d}` in `{s}`"))
            })
            .collect::<miette::Result<_>>()?;
        shapes.insert(name.to_string(), dims);
    }
    let mut attrs = Attrs::new();
    for a in &args.attrs {
        let (name, v) = pair(a)?;
        let v = match v.parse::<i64>() {
            Ok(i) => AttrValue::Int(i),
            Err(_) => AttrValue::Float(
                v.parse()
                    .map_err(|_| miette::miette!("bad value in `{a}`"))?,
            ),
        };
        attrs.insert(name.to_string(), v);
    }
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
