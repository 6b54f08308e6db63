//! Plans of small zoo models: every search at k ∈ {1, 2, 3, 4, 6}; tiles
//! cover every tensor exactly once per replica at every level; the access
//! model contains every element the interpreter reads; plan files round-trip
//! and reject tampering; CriticalDP is never worse than the partitioning
//! baselines; snapshots of the plans are reviewed like code.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use interval::cache::StrategyCache;
use planner::graph::{Graph, Optimizer};
use planner::plan::cost::CostModel;
use planner::plan::model::Model;
use planner::plan::tile::digits;
use planner::plan::{
    plan, plan_with, transfers, Phase, PlanFile, PlanOptions, Planned, SearchKind,
};
use planner::zoo::{self, GptConfig, MlpConfig, RnnConfig, WResNetConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tdl::Library;

fn lib() -> Library {
    Library::shipped().expect("shipped specs load")
}

fn tiny_models(lib: &Library) -> Vec<(&'static str, Graph)> {
    let opt = Optimizer::Sgd { lr: 0.1 };
    vec![
        (
            "mlp",
            zoo::Model::Mlp(MlpConfig::tiny())
                .training(lib, &opt)
                .unwrap(),
        ),
        (
            "rnn",
            zoo::Model::Rnn(RnnConfig::tiny())
                .training(lib, &opt)
                .unwrap(),
        ),
        (
            "wresnet",
            zoo::Model::WResNet(WResNetConfig::tiny())
                .training(lib, &opt)
                .unwrap(),
        ),
        (
            "gpt",
            zoo::Model::Gpt(GptConfig::tiny())
                .training(lib, &opt)
                .unwrap(),
        ),
    ]
}

/// Every tensor's tiles, at every level prefix, cover it exactly `r` times,
/// where r is the product of the factors of the levels that replicate it, and
/// tiles of workers that differ at a split level are disjoint.
fn check_tiles(graph: &Graph, p: &Planned) {
    for (t, splits) in graph.tensors().iter().zip(&p.decisions.tensors) {
        for l in 0..=p.factors.len() {
            let f = &p.factors[..l];
            let workers: usize = f.iter().product();
            let rep: u64 = f
                .iter()
                .zip(splits)
                .filter(|(_, s)| s.is_none())
                .map(|(p, _)| *p as u64)
                .product();
            let tiles: Vec<_> = (0..workers)
                .map(|w| CostModel::tile(&t.shape, &splits[..l], f, &digits(w, f)))
                .collect();
            let total: u64 = tiles.iter().map(|r| r.volume()).sum();
            let n: u64 = t.shape.iter().map(|&d| d as u64).product();
            assert_eq!(
                total,
                n * rep,
                "tensor `{}` level {l}: tiles cover {total} elements, expected {n} × {rep}",
                t.name
            );
            for a in 0..workers {
                for b in a + 1..workers {
                    let (da, db) = (digits(a, f), digits(b, f));
                    let differ_at_split = (0..l).any(|i| splits[i].is_some() && da[i] != db[i]);
                    if differ_at_split {
                        assert_eq!(
                            tiles[a].overlap(&tiles[b]),
                            0,
                            "tensor `{}`: workers {a} and {b} overlap",
                            t.name
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn every_search_plans_every_tiny_model_and_tiles_cover_exactly_once() {
    let lib = lib();
    let cache = StrategyCache::new();
    for (name, g) in tiny_models(&lib) {
        for k in [1usize, 2, 3, 4, 6] {
            for s in SearchKind::ALL {
                let p = plan(&g, &lib, &cache, k, s)
                    .unwrap_or_else(|e| panic!("{name} k={k} {}: {e}", s.name()));
                assert_eq!(p.factors.iter().product::<usize>(), k);
                check_tiles(&g, &p);
                if k == 1 {
                    assert_eq!(p.comm_bytes, 0, "{name}: one worker communicates nothing");
                }
            }
        }
    }
}

/// The transfer list is what the planner counts (bytes match exactly), each
/// worker receives exactly the input elements it needs but does not own, and
/// every tile of every output is completed exactly once per element.
#[test]
fn transfers_realise_the_predicted_bytes_exactly() {
    let lib = lib();
    let cache = StrategyCache::new();
    for (name, g) in tiny_models(&lib) {
        let model = Model::new(&g, &lib, &cache).unwrap();
        for k in [2usize, 3, 4] {
            for s in SearchKind::ALL {
                let p = plan(&g, &lib, &cache, k, s).unwrap();
                let ts = transfers(&g, &model, &p.factors, &p.decisions);
                let bytes: u64 = ts
                    .iter()
                    .map(|t| t.region.volume() * g.tensor(t.tensor).dtype.size_bytes())
                    .sum();
                assert_eq!(bytes, p.comm_bytes, "{name} k={k} {}", s.name());
                let cm = CostModel::new(&g, &model, &p.factors);
                for t in &ts {
                    assert_ne!(t.src, t.dst);
                    if let Phase::Input { slot } = t.phase {
                        // The piece lies in the receiver's need and the sender's tile, not the receiver's tile.
                        let op = t.op;
                        let need = model.ops[op.index()].access.input_region(
                            slot,
                            &cm.op_box(
                                op,
                                &p.decisions.ops[op.index()],
                                &digits(t.dst, &p.factors),
                            ),
                        );
                        let shape = &g.tensor(t.tensor).shape;
                        let splits = &p.decisions.tensors[t.tensor.index()];
                        let own =
                            CostModel::tile(shape, splits, &p.factors, &digits(t.dst, &p.factors));
                        let src =
                            CostModel::tile(shape, splits, &p.factors, &digits(t.src, &p.factors));
                        assert_eq!(
                            need.overlap(&t.region),
                            t.region.volume(),
                            "{name}: piece outside need"
                        );
                        assert_eq!(
                            src.overlap(&t.region),
                            t.region.volume(),
                            "{name}: piece outside sender's tile"
                        );
                        assert_eq!(own.overlap(&t.region), 0, "{name}: piece already owned");
                    }
                }
            }
        }
    }
}

#[test]
fn critical_dp_is_never_worse_than_the_partitioning_baselines() {
    let lib = lib();
    let cache = StrategyCache::new();
    let opt = Optimizer::Sgd { lr: 0.1 };
    let models = [
        zoo::Model::parse("mlp-4-512").unwrap().with_batch(64),
        zoo::Model::parse("rnn-2-256").unwrap().with_batch(16),
        zoo::Model::parse("gpt-2-128").unwrap().with_batch(1),
    ];
    for m in models {
        let g = m.training(&lib, &opt).unwrap();
        for k in [2usize, 4] {
            let cdp = plan(&g, &lib, &cache, k, SearchKind::CriticalDp).unwrap();
            let ilp = plan(&g, &lib, &cache, k, SearchKind::Ilp).unwrap();
            for s in [
                SearchKind::DataParallel,
                SearchKind::AllrowGreedy,
                SearchKind::Spartan,
                SearchKind::EqualChop,
            ] {
                let b = plan(&g, &lib, &cache, k, s).unwrap();
                assert!(
                    cdp.comm_bytes <= b.comm_bytes,
                    "{} k={k}: critical-dp {} > {} {}",
                    m.name(),
                    cdp.comm_bytes,
                    s.name(),
                    b.comm_bytes
                );
            }
            // Per level the ILP is optimal; across levels both are greedy, so
            // compare with a tolerance (the target is 5%).
            assert!(
                cdp.comm_bytes as f64 <= 1.05 * ilp.comm_bytes as f64,
                "{} k={k}: critical-dp {} vs ilp {}",
                m.name(),
                cdp.comm_bytes,
                ilp.comm_bytes
            );
        }
    }
}

/// CriticalDP keeps data parallelism only when it moves fewer bytes and fits
/// `--device-memory`; with a device one byte smaller than data parallelism
/// needs, it keeps a partitioned plan.
#[test]
fn critical_dp_keeps_data_parallelism_only_when_it_fits() {
    let lib = lib();
    let cache = StrategyCache::new();
    let opt = Optimizer::Sgd { lr: 0.1 };
    let max_mem = |p: &Planned| p.memory.iter().map(|m| m.total()).max().unwrap();
    let (mut chosen, mut beaten) = (0, 0);
    for (m, b, k) in [
        ("gpt-2-128", 8, 2usize),
        ("gpt-2-128", 8, 4),
        ("gpt-2-128", 1, 2),
        ("mlp-4-512", 64, 2),
    ] {
        let g = zoo::Model::parse(m)
            .unwrap()
            .with_batch(b)
            .training(&lib, &opt)
            .unwrap();
        let dp = plan(&g, &lib, &cache, k, SearchKind::DataParallel).unwrap();
        let free = plan(&g, &lib, &cache, k, SearchKind::CriticalDp).unwrap();
        assert!(free.comm_bytes <= dp.comm_bytes, "{m} k={k}");
        if free.choice != "data parallelism" {
            // A hybrid that replicates only where it pays beats it outright.
            beaten += usize::from(free.comm_bytes < dp.comm_bytes);
            continue;
        }
        chosen += 1;
        assert_eq!(free.comm_bytes, dp.comm_bytes, "{m} k={k}");
        // The summary's "not kept" line: the partitioned plan, with more bytes
        // and less memory per worker.
        let (_, bytes, mem) = free.runner_up.clone().expect("a runner-up");
        assert!(bytes >= dp.comm_bytes && mem < max_mem(&dp), "{m} k={k}");
        let cap = max_mem(&dp) - 1;
        let opts = PlanOptions {
            device_memory: Some(cap),
            ..PlanOptions::default()
        };
        let capped = plan_with(&g, &lib, &cache, k, SearchKind::CriticalDp, opts).unwrap();
        assert_ne!(capped.choice, "data parallelism", "{m} k={k}");
        assert!(
            max_mem(&capped) <= cap,
            "{m} k={k}: {} > {cap}",
            max_mem(&capped)
        );
        // Data parallelism was the cheapest: a plan that fits in less memory
        // moves at least as much (a hybrid may tie it when it replicates
        // only where data parallelism pays).
        assert!(
            capped.comm_bytes >= dp.comm_bytes,
            "{m} k={k}: {} < {}",
            capped.comm_bytes,
            dp.comm_bytes
        );
    }
    assert!(
        chosen > 0 || beaten == 4,
        "data parallelism neither kept nor beaten by a hybrid: the test checks nothing"
    );
}

/// The cost model's regions contain every element the interpreter reads, for
/// every operator of the tiny models under random shares.
#[test]
fn access_regions_contain_every_traced_read() {
    let lib = lib();
    let cache = StrategyCache::new();
    let mut rng = StdRng::seed_from_u64(7);
    for (name, g) in tiny_models(&lib) {
        let model = Model::new(&g, &lib, &cache).unwrap();
        for (i, op) in g.ops().iter().enumerate() {
            let spec = lib.get(&op.spec).unwrap();
            let shapes: Vec<Vec<usize>> = op
                .inputs
                .iter()
                .map(|t| g.tensor(*t).shape.clone())
                .collect();
            let b = spec.bind(&shapes, &op.attrs).unwrap();
            let inputs: Vec<tdl::Tensor> = shapes
                .iter()
                .enumerate()
                .map(|(j, s)| {
                    let n: usize = s.iter().product();
                    // Index-like inputs (ids) must be valid indices.
                    let data = if g.tensor(op.inputs[j]).dtype == planner::graph::DType::I32 {
                        vec![0.0; n]
                    } else {
                        (0..n).map(|_| rng.gen_range(0.5..1.5)).collect()
                    };
                    tdl::Tensor::new(s, data).unwrap()
                })
                .collect();
            let access = &model.ops[i].access;
            for _ in 0..3 {
                // A random sub-box of every variable's range.
                let ranges: Vec<(i64, i64)> = access
                    .var_ranges
                    .iter()
                    .map(|&(lo, hi)| {
                        if hi - lo <= 1 {
                            (lo, hi)
                        } else {
                            let a = rng.gen_range(lo..hi);
                            (a, rng.gen_range(a + 1..=hi))
                        }
                    })
                    .collect();
                let restrict: HashMap<tdl::VarId, (i64, i64)> = ranges
                    .iter()
                    .enumerate()
                    .map(|(v, r)| (tdl::VarId(v as u32), *r))
                    .collect();
                let mut reads: Vec<HashSet<Vec<i64>>> = vec![HashSet::new(); shapes.len()];
                let res = tdl::evaluate_traced(&b, &inputs, &restrict, &mut |inp, idx| {
                    reads[inp as usize].insert(idx.to_vec());
                });
                if res.is_err() {
                    continue; // e.g. an opaque function rejecting random data
                }
                for (j, set) in reads.iter().enumerate() {
                    let region = access.input_region(j, &ranges);
                    for idx in set {
                        assert!(
                            idx.iter()
                                .zip(&region.0)
                                .all(|(x, (lo, hi))| x >= lo && x < hi),
                            "{name}: op `{}` ({}) reads {}{idx:?} outside predicted {:?}",
                            op.name,
                            op.spec,
                            spec.inputs[j].name,
                            region.0
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn plan_files_round_trip_and_reject_tampering() {
    let lib = lib();
    let cache = StrategyCache::new();
    let opt = Optimizer::Sgd { lr: 0.1 };
    let g = zoo::Model::Mlp(MlpConfig::tiny())
        .training(&lib, &opt)
        .unwrap();
    let p = plan(&g, &lib, &cache, 3, SearchKind::CriticalDp).unwrap();
    let model = Model::new(&g, &lib, &cache).unwrap();
    let file = PlanFile::new(&g, &model, &p);
    let dir = std::env::temp_dir().join(format!("tofu-plan-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.json");
    file.save(&path).unwrap();
    let b = PlanFile::load(&path, &lib, &cache).unwrap();
    let (back, g2, d) = (
        b.recorded.expect("loaded from a file"),
        b.graph,
        b.decisions,
    );
    assert_eq!(back, file);
    assert_eq!(g2, g);
    assert_eq!(d, p.decisions);

    // Tampered tiles: a split dim beyond the tensor's rank.
    let mut bad = file.clone();
    let t = bad
        .tensors
        .iter_mut()
        .find(|t| !t.shape.is_empty())
        .unwrap();
    t.splits[0] = Some(9);
    bad.save(&path).unwrap();
    let err = PlanFile::load(&path, &lib, &cache).unwrap_err().to_string();
    assert!(err.contains("split along dim 9"), "{err}");

    // A different graph under the same hash.
    let mut bad = file.clone();
    bad.graph["name"] = serde_json::json!("someone-else");
    bad.save(&path).unwrap();
    let err = PlanFile::load(&path, &lib, &cache).unwrap_err().to_string();
    assert!(err.contains("does not match its graph"), "{err}");

    // Not a plan at all.
    std::fs::write(&path, "{\"format\": \"tofu-plan\", \"version\": 1}").unwrap();
    let err = PlanFile::load(&path, &lib, &cache).unwrap_err().to_string();
    assert!(err.contains("missing field"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Plans of the tiny models at k = 2, 3, 4 (CriticalDP), as reviewed text.
#[test]
fn plan_snapshots() {
    let lib = lib();
    let cache = StrategyCache::new();
    for (name, g) in tiny_models(&lib) {
        if name == "wresnet" {
            continue; // hundreds of operators: covered by the coverage test above
        }
        for k in [2usize, 3, 4] {
            let p = plan(&g, &lib, &cache, k, SearchKind::CriticalDp).unwrap();
            let model = Model::new(&g, &lib, &cache).unwrap();
            let file = PlanFile::new(&g, &model, &p);
            let mut out = format!(
                "{name} on {k} workers: levels {:?}, {} bytes/step, stop {:?}\n",
                p.factors, p.comm_bytes, p.stop_reason
            );
            for op in file
                .ops
                .iter()
                .filter(|o| !o.name.starts_with("grad") && !o.name.contains("update"))
            {
                let _ = writeln!(
                    out,
                    "  op {:<28} {:<22} {:?} {}",
                    op.name, op.spec, op.strategies, op.comm_bytes
                );
            }
            for t in file.tensors.iter().filter(|t| !t.name.starts_with("grad")) {
                let _ = writeln!(out, "  tensor {:<24} {:?} {:?}", t.name, t.shape, t.splits);
            }
            insta::assert_snapshot!(format!("{name}_k{k}"), out);
        }
    }
}
