//! Hybrid plans (issue 14): with weights replicable at every recursion level
//! (data parallelism at that level) CriticalDP moves no more bytes than the
//! hand-designed Megatron-style hybrid, nor than whole-model data
//! parallelism, and (on the benchmark models) holds no more memory per
//! worker than the Megatron-style plan the baseline keeps.

use interval::cache::StrategyCache;
use planner::graph::{Graph, Optimizer};
use planner::plan::{plan, Planned, SearchKind};
use planner::zoo::{self, GptConfig};
use tdl::Library;

fn max_mem(p: &Planned) -> u64 {
    p.memory.iter().map(|m| m.total()).max().unwrap_or(0)
}

/// CriticalDP against the megatron baseline (best t) and data parallelism.
fn check(name: &str, g: &Graph, lib: &Library, k: usize) {
    let cache = StrategyCache::new();
    let cdp = plan(g, lib, &cache, k, SearchKind::CriticalDp).unwrap();
    let meg = plan(g, lib, &cache, k, "megatron".parse().unwrap()).unwrap();
    let dp = plan(g, lib, &cache, k, SearchKind::DataParallel).unwrap();
    eprintln!(
        "{name} k={k}: critical-dp {} B {} B/worker ({}); megatron {} B {} B/worker ({}); data-parallel {} B",
        cdp.comm_bytes,
        max_mem(&cdp),
        cdp.choice,
        meg.comm_bytes,
        max_mem(&meg),
        meg.choice,
        dp.comm_bytes
    );
    assert!(
        cdp.comm_bytes <= meg.comm_bytes,
        "{name} k={k}: vs megatron"
    );
    assert!(
        cdp.comm_bytes <= dp.comm_bytes,
        "{name} k={k}: vs data parallel"
    );
}

/// [`check`], and CriticalDP's plan holds no more memory per worker (its
/// memory report) than the megatron baseline's kept plan.
fn check_memory(name: &str, g: &Graph, lib: &Library, k: usize) {
    check(name, g, lib, k);
    let cache = StrategyCache::new();
    let cdp = plan(g, lib, &cache, k, SearchKind::CriticalDp).unwrap();
    let meg = plan(g, lib, &cache, k, "megatron".parse().unwrap()).unwrap();
    assert!(
        max_mem(&cdp) <= max_mem(&meg),
        "{name} k={k}: memory {} > megatron's {}",
        max_mem(&cdp),
        max_mem(&meg)
    );
}

#[test]
fn critical_dp_moves_no_more_than_megatron_on_a_small_gpt() {
    let lib = Library::shipped().unwrap();
    let cfg = GptConfig {
        layers: 2,
        d_model: 128,
        heads: 2,
        d_ff: 512,
        seq: 64,
        vocab: 500,
        batch: 8,
    };
    let g = zoo::Model::Gpt(cfg)
        .training(
            &lib,
            &Optimizer::Momentum {
                lr: 0.1,
                momentum: 0.9,
            },
        )
        .unwrap();
    check("gpt-small", &g, &lib, 8);
}

#[test]
fn critical_dp_moves_and_holds_no_more_than_megatron_on_the_benchmark_models() {
    let lib = Library::shipped().unwrap();
    let opt = Optimizer::Momentum {
        lr: 0.1,
        momentum: 0.9,
    };
    for m in ["gpt-24-2048", "wresnet-152-10"] {
        let g = zoo::Model::parse(m).unwrap().training(&lib, &opt).unwrap();
        check_memory(m, &g, &lib, 8);
    }
}
