//! `tofu run PLAN --estimate GPU`: the static cost model of one training
//! step on the CUDA backend (`runner::backend::cuda::estimate`), per rank
//! and per operator, without a GPU and without running anything
//! ([`runner::report::estimate`]). A model, not a measurement: the output
//! says so.

use codegen::Programs;
use runner::backend::cuda::estimate::Roofline;
use runner::report::estimate::EstimateSummary;

use super::lib_err;

/// The [`Roofline`] named by `--estimate`, or an error listing the presets.
pub fn roofline(name: &str) -> miette::Result<Roofline> {
    Roofline::named(name).ok_or_else(|| {
        let names: Vec<&str> = Roofline::ALL.iter().map(|r| r.name).collect();
        miette::miette!(
            "--estimate {name}: no such GPU model; use one of {}",
            names.join(", ")
        )
    })
}

/// Print the estimate of every rank of `progs` on `gpu` (a table of the
/// slowest rank's operators, or one JSON object with `json`).
pub fn print(model: &str, progs: &Programs, gpu: Roofline, json: bool) -> miette::Result<()> {
    let summary = EstimateSummary::new(model, &progs.programs, gpu).map_err(lib_err)?;
    if json {
        println!("{}", summary.json());
    } else {
        print!("{summary}");
    }
    Ok(())
}
