//! The Megatron-style baseline (`--search megatron`): the weights of a
//! transformer's matmuls are replicated across the data-parallel levels and
//! split as Megatron-LM splits them inside the tensor-parallel group
//! (column-split first linear, row-split second, vocabulary-split embedding);
//! without `tensor_parallel`, the best t is kept.

use interval::cache::StrategyCache;
use planner::graph::{Graph, Optimizer};
use planner::plan::{plan_with, PlanOptions, SearchKind};
use planner::zoo::{self, GptConfig};
use tdl::Library;

fn gpt(lib: &Library) -> Graph {
    let cfg = GptConfig {
        layers: 1,
        d_model: 16,
        heads: 2,
        d_ff: 32,
        seq: 8,
        vocab: 12,
        batch: 4,
    };
    zoo::Model::Gpt(cfg)
        .training(lib, &Optimizer::Sgd { lr: 0.1 })
        .unwrap()
}

fn megatron(g: &Graph, lib: &Library, k: usize, t: Option<usize>) -> planner::plan::Planned {
    let opts = PlanOptions {
        tensor_parallel: t,
        ..PlanOptions::default()
    };
    plan_with(
        g,
        lib,
        &StrategyCache::new(),
        k,
        "megatron".parse().unwrap(),
        opts,
    )
    .unwrap()
}

#[test]
fn megatron_splits_matmul_weights_inside_the_tensor_parallel_group() {
    let lib = Library::shipped().unwrap();
    let g = gpt(&lib);
    let p = megatron(&g, &lib, 4, Some(2));
    assert_eq!(p.factors, vec![2, 2]);
    assert_eq!(p.choice, "tensor parallel 2 × data parallel 2");
    let layout = |name: &str| {
        let t = g.tensors().iter().position(|t| t.name == name).unwrap();
        p.decisions.tensors[t].clone()
    };
    // Outer level: data parallelism (replicated); inner: Megatron's split.
    assert_eq!(layout("h0.q.w"), vec![None, Some(1)], "column-split q");
    assert_eq!(layout("h0.fc1.w"), vec![None, Some(1)], "column-split fc1");
    assert_eq!(layout("h0.proj.w"), vec![None, Some(0)], "row-split proj");
    assert_eq!(layout("h0.fc2.w"), vec![None, Some(0)], "row-split fc2");
    assert_eq!(layout("wte"), vec![None, Some(0)], "vocabulary-split");
    assert_eq!(
        layout("grad/h0.fc2.w"),
        vec![None, Some(0)],
        "gradient follows"
    );
    assert_eq!(layout("h0.ln1.gamma").iter().flatten().count(), 0);
    // Activations are split along the batch at the data-parallel level.
    assert_eq!(layout("ids")[0], Some(0));
}

#[test]
fn megatron_without_t_keeps_the_cheapest_group_size() {
    let lib = Library::shipped().unwrap();
    let g = gpt(&lib);
    let best = megatron(&g, &lib, 4, None);
    let each: Vec<u64> = [1, 2, 4]
        .iter()
        .map(|&t| megatron(&g, &lib, 4, Some(t)).comm_bytes)
        .collect();
    assert_eq!(best.comm_bytes, *each.iter().min().unwrap(), "{each:?}");
    // t = 1 is data parallelism.
    let dp = plan_with(
        &g,
        &lib,
        &StrategyCache::new(),
        4,
        SearchKind::DataParallel,
        PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(each[0], dp.comm_bytes);
}
