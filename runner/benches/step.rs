//! Step time of mlp-4-4096 (batch 256) at k = 1 and k = 2 on CPU threads,
//! and the fraction of the step spent communicating; each k > 1 line also
//! gives its step time as a ratio of the k = 1 step measured in the same run
//! (speed-up = 1 / ratio).
//!
//! Run: `cargo bench -p runner --bench step` (env `TOFU_BENCH_STEPS`, default
//! 3 measured steps after one warm-up step; `TOFU_BENCH_MODEL`, default
//! `mlp-4-4096`).

use codegen::compile;
use interval::cache::StrategyCache;
use planner::graph::Optimizer;
use planner::plan::{BoundPlan, PlanOptions, SearchKind};
use planner::zoo;
use runner::{run_programs, RunOptions};
use tdl::Library;

fn main() {
    let steps: usize = std::env::var("TOFU_BENCH_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let name = std::env::var("TOFU_BENCH_MODEL").unwrap_or_else(|_| "mlp-4-4096".into());
    let lib = Library::shipped().expect("specs");
    let cache = StrategyCache::new();
    let g = zoo::Model::parse(&name)
        .expect("model")
        .with_batch(256)
        .training(&lib, &Optimizer::Sgd { lr: 0.1 })
        .expect("graph");
    let mut baseline: Option<f64> = None;
    for k in [1usize, 2] {
        let search = SearchKind::CriticalDp;
        let opts = PlanOptions::default();
        let (bound, _) = BoundPlan::search(g.clone(), &lib, &cache, k, search, opts).expect("plan");
        let progs = compile(&bound, &lib).expect("programs");
        let r = run_programs(
            &progs.programs,
            RunOptions {
                steps: steps + 1,
                seed: 1,
            },
            None,
        )
        .expect("run");
        // Skip the first (warm-up) step.
        let t: Vec<f64> = r.step_seconds[1..].to_vec();
        let mean = t.iter().sum::<f64>() / t.len() as f64;
        let comm: f64 = r.comm_seconds[1..]
            .iter()
            .map(|s| s.iter().cloned().fold(0.0, f64::max))
            .sum::<f64>()
            / t.len() as f64;
        let base = *baseline.get_or_insert(mean);
        println!(
            "{name} batch 256 k={k}: step {:.3} s (min {:.3}; {:.2}× the k=1 step), comm {:.3} s = {:.1}% of the step, {} bytes sent per step per rank, peak {:?} bytes per rank",
            mean,
            t.iter().cloned().fold(f64::INFINITY, f64::min),
            mean / base,
            comm,
            100.0 * comm / mean,
            r.bytes_sent[1].iter().max().unwrap_or(&0),
            r.peak_bytes_per_rank
        );
    }
}
