//! `tofu run PLAN --estimate GPU`: the static cost model of one training
//! step on the CUDA backend (`runner::backend::cuda::estimate`), per rank
//! and per operator, without a GPU and without running anything. A model,
//! not a measurement: the output says so.

use codegen::Programs;
use runner::backend::cuda::estimate::{estimate_program, Roofline, StepEstimate};

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
pub fn print(model: &str, progs: &Programs, gpu: &Roofline, json: bool) -> miette::Result<()> {
    let ranks: Vec<StepEstimate> = progs
        .programs
        .iter()
        .map(|p| estimate_program(p, gpu))
        .collect::<Result<_, _>>()
        .map_err(lib_err)?;
    let slowest = (0..ranks.len())
        .max_by(|&a, &b| ranks[a].seconds().total_cmp(&ranks[b].seconds()))
        .unwrap_or(0);
    if json {
        print_json(model, gpu, &ranks, slowest);
    } else {
        print_table(model, gpu, &ranks, slowest);
    }
    Ok(())
}

/// The `--json` object: the step per rank and the slowest rank's operators.
fn print_json(model: &str, gpu: &Roofline, ranks: &[StepEstimate], slowest: usize) {
    let step: Vec<f64> = ranks.iter().map(StepEstimate::seconds).collect();
    {
        let ops: Vec<_> = ranks[slowest]
            .ops
            .iter()
            .map(|(op, n, e)| {
                serde_json::json!({
                    "op": op, "provider": e.provider, "instances": n, "launches": e.launches,
                    "bytes": e.bytes, "flops": e.flops, "seconds": e.seconds,
                })
            })
            .collect();
        let v = serde_json::json!({
            "model": model,
            "gpu": gpu.name,
            "estimate": "static roofline model, not a measurement",
            "step_seconds_per_rank": step,
            "slowest_rank": slowest,
            "ops": ops,
        });
        println!("{v}");
    }
}

/// The table of the slowest rank's operators, with the model's figures.
fn print_table(model: &str, gpu: &Roofline, ranks: &[StepEstimate], slowest: usize) {
    println!(
        "{model}: estimated step on a modelled {} ({:.2} TB/s, {:.0} TFLOP/s FP32, {:.0} TFLOP/s \
         FP64, {:.0} µs a launch), rank {slowest} of {} (the slowest)",
        gpu.name.to_uppercase(),
        gpu.bandwidth / 1e12,
        gpu.f32_flops / 1e12,
        gpu.f64_flops / 1e12,
        gpu.launch * 1e6,
        ranks.len()
    );
    println!(
        "a static roofline model, not a measurement: index arithmetic, caches, allocation, \
         memsets and communication are not modelled"
    );
    let r = &ranks[slowest];
    let total = r.seconds();
    println!(
        "{:<30} {:<12} {:>6} {:>8} {:>10} {:>10} {:>10} {:>6}",
        "op", "provider", "count", "launches", "GB", "GFLOP", "ms", "share"
    );
    for (op, n, e) in &r.ops {
        println!(
            "{:<30} {:<12} {:>6} {:>8} {:>10.3} {:>10.2} {:>10.3} {:>5.1}%",
            op,
            e.provider,
            n,
            e.launches,
            e.bytes / 1e9,
            e.flops / 1e9,
            e.seconds * 1e3,
            100.0 * e.seconds / total.max(f64::MIN_POSITIVE)
        );
    }
    println!(
        "{:<30} {:<12} {:>6} {:>8} {:>10.3} {:>10.2} {:>10.3}",
        "step (modelled)",
        "",
        "",
        r.launches(),
        r.ops.iter().map(|o| o.2.bytes).sum::<f64>() / 1e9,
        r.ops.iter().map(|o| o.2.flops).sum::<f64>() / 1e9,
        total * 1e3
    );
}
