//! `--topology` (issue 14): plans priced on a cluster's link levels
//! (`planner::plan::topology`).
//!
//! * The estimate of one operator's communication equals the ring formulas
//!   (an all-reduce) and the point-to-point sums (a scalar reduced on rank 0)
//!   worked out by hand below, on a 2×2 cluster.
//! * Bytes over the link levels add up to the plan's exact bytes.
//! * With `--topology 2x8` the outermost level is the one between the two
//!   nodes, and the plan's estimated time is below that of the bytes-optimal
//!   plan priced on the same cluster.

use interval::cache::StrategyCache;
use interval::strategy::SplitKind;
use planner::graph::{Graph, Optimizer};
use planner::plan::cost::{CostModel, OpChoice};
use planner::plan::file::PlanFile;
use planner::plan::model::Model;
use planner::plan::topology::{price, Link, Topology};
use planner::plan::{plan, plan_with, BoundPlan, PlanOptions, SearchKind};
use planner::zoo;
use tdl::Library;

fn graph(name: &str, batch: usize, lib: &Library) -> Graph {
    zoo::Model::parse(name)
        .unwrap()
        .with_batch(batch)
        .training(lib, &Optimizer::Sgd { lr: 0.1 })
        .unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-30)
}

const INTER: f64 = Topology::NDR_BYTES_PER_S as f64;
const INTRA: f64 = Topology::NVLINK4_BYTES_PER_S as f64;

#[test]
fn all_reduce_of_a_weight_gradient_costs_the_ring_formula() {
    let lib = Library::shipped().unwrap();
    let g = graph("mlp-3-64", 16, &lib);
    let cache = StrategyCache::new();
    let model = Model::new(&g, &lib, &cache).unwrap();
    // dW = xᵀ·dy of the first layer, [64, 64]: every worker sums its quarter
    // of the batch (the reduction split at both levels of 2·2) and the
    // gradient is replicated on all four workers: one ring all-reduce.
    let o = g.op_by_name("bwd/fc0/b").unwrap();
    let reduce = model
        .op(o)
        .strategies
        .strategies
        .iter()
        .position(|s| {
            s.splits
                .iter()
                .all(|sv| matches!(sv.kind, SplitKind::Reduction { .. }))
        })
        .expect("matmul_tn splits its reduction") as u32;
    let factors = [2, 2];
    let cm = CostModel::new(&g, &model, &factors);
    let choices = [OpChoice::Strategy(reduce); 2];
    let topo = Topology::new(2, 2);
    let load = cm.output_load(o, 0, &choices, &[None, None], &topo);
    // Ring (comm::traffic): N = 64·64 elements in 4 blocks of 1024; rank r
    // sends N − c_r (reduce-scatter) + N − c_{r+1} (all-gather) = 6144
    // elements = 24576 bytes to rank r+1. Ranks 0,1 are node 0 and 2,3
    // node 1: edges 1→2 and 3→0 cross nodes, 0→1 and 2→3 do not.
    let per_rank = 2.0 * (4.0 - 1.0) / 4.0 * 4096.0 * 4.0;
    assert_eq!(per_rank, 24576.0);
    assert_eq!(load.bytes[Link::InterNode as usize], 2 * 24576);
    assert_eq!(load.bytes[Link::IntraNode as usize], 2 * 24576);
    // The ring waits for its slowest edge: each link carries one rank's share.
    assert!(close(
        load.seconds[Link::InterNode as usize],
        per_rank / INTER
    ));
    assert!(close(
        load.seconds[Link::IntraNode as usize],
        per_rank / INTRA
    ));
    // The same bytes as the exact cost model (what codegen sends).
    assert_eq!(
        load.total_bytes(),
        cm.output_bytes(o, 0, &choices, &[None, None])
    );
    // One node of four GPUs: everything on NVLink, at the same ring time.
    let one = cm.output_load(o, 0, &choices, &[None, None], &Topology::new(1, 4));
    assert_eq!(one.bytes, [0, 4 * 24576]);
    assert!(close(
        one.seconds[Link::IntraNode as usize],
        per_rank / INTRA
    ));
}

#[test]
fn scalar_loss_is_reduced_on_rank_zero_point_to_point() {
    let lib = Library::shipped().unwrap();
    let g = graph("mlp-3-64", 16, &lib);
    let cache = StrategyCache::new();
    let topo = Topology::new(2, 2);
    let opts = PlanOptions {
        topology: Some(topo),
        ..PlanOptions::default()
    };
    let (bound, p) =
        BoundPlan::search(g.clone(), &lib, &cache, 4, SearchKind::DataParallel, opts).unwrap();
    let cm = bound.cost();
    let o = g.op_by_name("loss").unwrap();
    let t = g.op(o).outputs[0];
    assert!(g.tensor(t).shape.is_empty());
    let load = cm.output_load(
        o,
        0,
        &p.decisions.ops[o.index()],
        &p.decisions.tensors[t.index()],
        &topo,
    );
    // Batch split four ways: ranks 1, 2, 3 send their partial loss (4 bytes)
    // to rank 0, which sends the sum back to each. Across nodes: 2→0, 3→0,
    // 0→2, 0→3 (16 bytes; rank 0's NIC receives 8 and sends 8). Inside
    // node 0: 1→0 and 0→1 (8 bytes; 4 each way).
    assert_eq!(load.bytes, [16, 8]);
    assert!(close(load.seconds[Link::InterNode as usize], 8.0 / INTER));
    assert!(close(load.seconds[Link::IntraNode as usize], 4.0 / INTRA));
}

#[test]
fn bytes_over_the_links_add_up_to_the_exact_bytes() {
    let lib = Library::shipped().unwrap();
    let cache = StrategyCache::new();
    for (name, batch, nodes, gpus) in [
        ("mlp-3-64", 16, 2, 2),
        ("gpt-1-64", 2, 2, 3),
        ("rnn-1-32", 4, 3, 2),
    ] {
        let g = graph(name, batch, &lib);
        let model = Model::new(&g, &lib, &cache).unwrap();
        let topo = Topology::new(nodes, gpus);
        for s in SearchKind::ALL {
            let p = plan(&g, &lib, &cache, topo.workers(), s).unwrap();
            let r = price(&g, &model, &p.factors, &p.decisions, &topo);
            assert_eq!(r.load.total_bytes(), p.comm_bytes, "{name} {}", s.name());
        }
    }
}

#[test]
fn two_by_eight_puts_the_outer_level_across_nodes_and_beats_the_bytes_optimal_plan() {
    let lib = Library::shipped().unwrap();
    let g = graph("gpt-2-256", 8, &lib);
    let cache = StrategyCache::new();
    let model = Model::new(&g, &lib, &cache).unwrap();
    let topo = Topology::parse("2x8").unwrap();
    let opts = PlanOptions {
        topology: Some(topo),
        ..PlanOptions::default()
    };
    let timed = plan_with(&g, &lib, &cache, 16, SearchKind::CriticalDp, opts).unwrap();
    let bytes = plan(&g, &lib, &cache, 16, SearchKind::CriticalDp).unwrap();
    // The outermost level splits the 16 workers into the two nodes: workers
    // of that level's halves talk over InfiniBand, those of inner levels
    // over NVLink.
    assert_eq!(timed.factors[0], 2);
    assert_eq!(topo.link(0, 1, 2), Link::InterNode);
    for inner in [4, 8, 16] {
        assert_eq!(topo.link(0, 1, inner), Link::IntraNode);
    }
    let r = timed.links.expect("priced on the topology");
    assert!(r.load.bytes[Link::InterNode as usize] > 0);
    let b = price(&g, &model, &bytes.factors, &bytes.decisions, &topo);
    eprintln!(
        "gpt-2-256 2x8: time-priced {} ({} B, inter {} B) vs bytes-optimal {} ({} B, inter {} B): {:.6} s vs {:.6} s",
        timed.choice,
        timed.comm_bytes,
        r.load.bytes[0],
        bytes.choice,
        bytes.comm_bytes,
        b.load.bytes[0],
        r.seconds(),
        b.seconds()
    );
    assert!(bytes.comm_bytes <= timed.comm_bytes);
    assert!(r.seconds() < b.seconds());
}

#[test]
fn the_plan_file_records_the_topology_and_its_link_bytes_are_checked() {
    let lib = Library::shipped().unwrap();
    let g = graph("mlp-3-64", 16, &lib);
    let cache = StrategyCache::new();
    let model = Model::new(&g, &lib, &cache).unwrap();
    let topo = Topology::new(2, 2);
    let opts = PlanOptions {
        topology: Some(topo),
        ..PlanOptions::default()
    };
    let p = plan_with(&g, &lib, &cache, 4, SearchKind::CriticalDp, opts).unwrap();
    let dir = std::env::temp_dir().join(format!("tofu-topo-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.json");
    PlanFile::new(&g, &model, &p).save(&path).unwrap();
    let b = PlanFile::load(&path, &lib, &cache).unwrap();
    let (file, g2, d) = (
        b.recorded.expect("loaded from a file"),
        b.graph,
        b.decisions,
    );
    let links = file.links.expect("a topology plan records its links");
    assert_eq!(links.topology, topo);
    // The recorded bytes per link level are the ones the decisions imply.
    let implied = price(&g2, &model, &file.factors, &d, &topo);
    assert_eq!(links.load.bytes, implied.load.bytes);
    assert_eq!(
        links.load.bytes.iter().sum::<u64>(),
        file.comm_bytes_per_step
    );
    file.check_recorded(&g2, &model, &d).unwrap();
    // Moving bytes from one link level to the other is caught.
    let mut tampered = file.clone();
    let l = tampered.links.as_mut().unwrap();
    let (from, to) = if l.load.bytes[0] >= 4 { (0, 1) } else { (1, 0) };
    l.load.bytes[from] -= 4;
    l.load.bytes[to] += 4;
    let err = tampered.check_recorded(&g2, &model, &d).unwrap_err();
    assert!(err.to_string().contains("links"), "{err}");
    // A plan made without a topology records none, and its JSON has no field.
    let plain = plan(&g, &lib, &cache, 4, SearchKind::CriticalDp).unwrap();
    let f = PlanFile::new(&g, &model, &plain);
    assert!(f.links.is_none());
    assert!(!serde_json::to_string(&f).unwrap().contains("\"links\""));
    std::fs::remove_dir_all(&dir).ok();
}
