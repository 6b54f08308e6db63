//! The topology-aware search at cluster scale (issue 44): link loads priced
//! by fans of like transfers (`planner::plan::link_loads`, linear in the
//! workers) give the plan and the per-link estimate that pricing every
//! transfer piece by piece gives (the reference, quadratic in the workers),
//! on a 4-layer LLaMA-shaped decoder at 64 workers on 8 nodes of 8 GPUs.

use std::collections::BTreeMap;

use planner::plan::topology::{price, set_piecewise_loads, Topology};
use planner::plan::{plan_with, PlanOptions, Planned, SearchKind};

/// The 4-layer decoder's training graph and library (batch 8, 256 tokens).
fn decoder() -> (planner::graph::Graph, tdl::Library) {
    let cfg = onnx::synth::DecoderConfig {
        layers: 4,
        ..onnx::synth::DecoderConfig::llama_7b()
    };
    let dir = std::env::temp_dir().join(format!("tofu-topology-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("decoder.onnx");
    std::fs::write(&path, onnx::synth::to_bytes(&onnx::synth::decoder(&cfg))).unwrap();
    let opts = onnx::Options {
        training: true,
        input_shapes: BTreeMap::from([("input_ids".to_string(), vec![8, 256])]),
        ..Default::default()
    };
    let lib = tdl::Library::shipped().unwrap();
    let imported = onnx::load_graph_with(&path, &lib, &opts).expect("the decoder imports");
    let _ = std::fs::remove_dir_all(&dir);
    (imported.graph, imported.library)
}

fn plan(g: &planner::graph::Graph, lib: &tdl::Library, topo: Topology) -> Planned {
    let opts = PlanOptions {
        topology: Some(topo),
        ..PlanOptions::default()
    };
    let cache = interval::cache::StrategyCache::new();
    plan_with(g, lib, &cache, topo.workers(), SearchKind::CriticalDp, opts).unwrap()
}

#[test]
fn fans_give_the_plan_of_every_piece() {
    let (g, lib) = decoder();
    let topo = Topology::new(8, 8);
    set_piecewise_loads(true);
    let reference = plan(&g, &lib, topo);
    set_piecewise_loads(false);
    let fast = plan(&g, &lib, topo);
    assert_eq!(fast.choice, reference.choice);
    // (Not assert_eq: the decisions of 4 layers fill pages.)
    assert!(
        fast.decisions == reference.decisions,
        "the decisions differ"
    );
    assert_eq!(fast.comm_bytes, reference.comm_bytes);
    assert_eq!(fast.links, reference.links, "the same estimate, to the bit");
    let seconds: Vec<f64> = fast.levels.iter().map(|l| l.comm_bytes).collect();
    let want: Vec<f64> = reference.levels.iter().map(|l| l.comm_bytes).collect();
    assert_eq!(seconds, want, "every level's objective");

    // Every operator's loads at every prefix of the kept plan's levels,
    // also on 16 nodes of 4 GPUs, where the outer levels' groups of 8 or
    // more ranks span several nodes.
    let model =
        planner::plan::model::Model::new(&g, &lib, &interval::cache::StrategyCache::new()).unwrap();
    for topo in [topo, Topology::new(16, 4)] {
        for levels in 1..=fast.factors.len() {
            let factors = &fast.factors[..levels];
            let d = planner::plan::Decisions {
                tensors: fast
                    .decisions
                    .tensors
                    .iter()
                    .map(|t| t[..levels].to_vec())
                    .collect(),
                ops: fast
                    .decisions
                    .ops
                    .iter()
                    .map(|o| o[..levels].to_vec())
                    .collect(),
            };
            set_piecewise_loads(true);
            let want = price(&g, &model, factors, &d, &topo);
            set_piecewise_loads(false);
            let got = price(&g, &model, factors, &d, &topo);
            let at = format!("{levels} levels on {}x{}", topo.nodes, topo.gpus_per_node);
            assert_eq!(got, want, "{at}");
        }
    }
    shared_slot_tables_give_every_pair_priced_afresh((&g, &lib), topo, &fast);
}

/// Every level problem of the kept plan's prefixes, built with the shared
/// cost memo (each slot's table of (choice, layout) costs computed once per
/// operator kind and decisions, link loads by fans) is the problem built
/// with every pair of every slot priced afresh, piece by piece: the same
/// configurations and the same node and edge costs, to the bit. (Checked to
/// fail when the table's key leaves out the slot's layouts.) Called from
/// the test above: the piecewise switch is process-wide, so the two must
/// not run at once.
fn shared_slot_tables_give_every_pair_priced_afresh(
    (g, lib): (&planner::graph::Graph, &tdl::Library),
    topo: Topology,
    fast: &Planned,
) {
    use planner::plan::coarsen::coarsen;
    use planner::plan::cost::CostMemo;
    use planner::plan::level::{LayoutRule, LevelInput};

    let cache = interval::cache::StrategyCache::new();
    let model = planner::plan::model::Model::new(g, lib, &cache).unwrap();
    let clusters = coarsen(g, &model);
    let memo = CostMemo::default();
    for rule in [LayoutRule::Free, LayoutRule::TensorParallel] {
        for level in 0..fast.factors.len() {
            let input = |memo| LevelInput {
                graph: g,
                model: &model,
                clusters: &clusters,
                factors: &fast.factors,
                rule,
                tensor_parallel: true,
                topology: Some(&topo),
                memo,
                partial_sums: false,
            };
            set_piecewise_loads(true);
            let want = input(None).build(&fast.decisions, level);
            set_piecewise_loads(false);
            let got = input(Some(&memo)).build(&fast.decisions, level);
            let at = format!("level {level} under {rule:?}");
            assert!(got.configs == want.configs, "configurations at {at}");
            assert!(got.problem == want.problem, "costs at {at}");
        }
    }
}
