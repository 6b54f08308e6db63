//! `--device-memory` inside the search and the `--pareto` frontier (issue 14).
//!
//! Oracle for the limit: on one-layer MLPs (weights or activations
//! dominating) at a prime k (one recursion level),
//! every plan CriticalDP's candidates can produce — every assignment of the
//! level problem's cluster configurations, plus whole-model data parallelism
//! — is enumerated, with its exact bytes and memory report. For limits
//! between the smallest and the largest memory of that space, and below the
//! smallest, the planner must return a plan that fits whenever one exists,
//! and `DoesNotFit` otherwise — priced in bytes and, with a topology, in
//! estimated nanoseconds (the memory price's scale differs). The frontier is checked against the plan
//! files its points write (their memory report) and for domination.

use interval::cache::StrategyCache;
use planner::graph::{Graph, Optimizer};
use planner::plan::coarsen::coarsen;
use planner::plan::driver::exact_cost;
use planner::plan::level::{Decisions, LayoutRule, LevelInput};
use planner::plan::memory::per_worker;
use planner::plan::model::Model;
use planner::plan::pareto::pareto;
use planner::plan::topology::Topology;
use planner::plan::{
    max_memory, plan, plan_with, MemoryFit, OpChoice, PlanFile, PlanOptions, SearchKind,
};
use planner::zoo::{self, GptConfig};
use tdl::Library;

/// (bytes per step, largest worker's memory) of every plan of the one-level
/// space at k = `factor`, and of data parallelism.
fn enumerate(g: &Graph, lib: &Library, factor: usize) -> Vec<(u64, u64)> {
    let cache = StrategyCache::new();
    let model = Model::new(g, lib, &cache).unwrap();
    let clusters = coarsen(g, &model);
    let factors = [factor];
    let input = LevelInput {
        graph: g,
        model: &model,
        clusters: &clusters,
        factors: &factors,
        rule: LayoutRule::Free,
        tensor_parallel: false,
        topology: None,
        memo: None,
        partial_sums: false,
    };
    let lp = input.build(&Decisions::empty(g), 0);
    let sizes: Vec<usize> = lp.configs.iter().map(Vec::len).collect();
    let total: usize = sizes.iter().product();
    eprintln!("configurations per cluster: {sizes:?}");
    assert!(
        total <= 200_000,
        "{total} assignments: too many to enumerate"
    );
    let mut out = Vec::with_capacity(total + 1);
    let mut a = vec![0usize; sizes.len()];
    loop {
        let mut d = Decisions::empty(g);
        for (node, &k) in a.iter().enumerate() {
            let cfg = &lp.configs[node][k];
            for (o, ch) in &cfg.ops {
                d.ops[o.index()].push(*ch);
            }
            for (t, l) in &cfg.tensors {
                d.tensors[t.index()].push(*l);
            }
        }
        for x in d.ops.iter_mut().filter(|x| x.is_empty()) {
            x.push(OpChoice::Replicate);
        }
        for x in d.tensors.iter_mut().filter(|x| x.is_empty()) {
            x.push(None);
        }
        let (bytes, _) = exact_cost(g, &model, &factors, &d);
        let mem = per_worker(g, &d.tensors, &factors)
            .iter()
            .map(|m| m.total())
            .max()
            .unwrap();
        out.push((bytes, mem));
        // Odometer over the configurations.
        let mut i = 0;
        while i < a.len() {
            a[i] += 1;
            if a[i] < sizes[i] {
                break;
            }
            a[i] = 0;
            i += 1;
        }
        if i == a.len() {
            break;
        }
    }
    let dp = plan(g, lib, &cache, factor, SearchKind::DataParallel).unwrap();
    out.push((dp.comm_bytes, max_memory(&dp)));
    out
}

fn small_models(lib: &Library) -> Vec<(String, Graph)> {
    let opt = Optimizer::Momentum {
        lr: 0.1,
        momentum: 0.9,
    };
    [("mlp-1-64", 32), ("mlp-1-256", 8), ("mlp-1-8", 512)]
        .into_iter()
        .map(|(m, b)| {
            let g = zoo::Model::parse(m)
                .unwrap()
                .with_batch(b)
                .training(lib, &opt)
                .unwrap();
            (format!("{m} b={b}"), g)
        })
        .collect()
}

#[test]
fn device_memory_never_exceeded_when_a_fitting_plan_exists() {
    let lib = Library::shipped().unwrap();
    let cache = StrategyCache::new();
    let mut bound = 0;
    for (name, g) in small_models(&lib) {
        for k in [2usize, 3] {
            let space = enumerate(&g, &lib, k);
            let least = space.iter().map(|s| s.1).min().unwrap();
            let most = space.iter().map(|s| s.1).max().unwrap();
            let free = plan(&g, &lib, &cache, k, SearchKind::CriticalDp).unwrap();
            // Each limit bytes-priced and, on k nodes of one GPU, time-priced
            // (level costs in nanoseconds: the price's scale differs).
            for topology in [None, Some(Topology::new(k, 1))] {
                // Limits: below the least memory of the space (none fits), at it,
                // and spread up to the unconstrained plan's memory.
                let top = max_memory(&free).max(least);
                let mut caps = vec![least - 1, least];
                caps.extend((1..=6).map(|i| least + (top - least) * i / 7));
                for &cap in &caps {
                    let opts = PlanOptions {
                        device_memory: Some(cap),
                        topology,
                        ..PlanOptions::default()
                    };
                    let best_fitting = space.iter().filter(|s| s.1 <= cap).map(|s| s.0).min();
                    let p = plan_with(&g, &lib, &cache, k, SearchKind::CriticalDp, opts)
                        .unwrap_or_else(|e| panic!("{name} k={k}: {e}"));
                    match p.fit {
                        MemoryFit::Fits { device_memory } => {
                            assert_eq!(device_memory, cap);
                            let b = p.budget.clone().expect("a budget report");
                            eprintln!(
                            "{name} k={k} cap={cap} topology {topology:?}: {} B, {} B/worker (bound: {}, price {}); best fitting in the space: {best_fitting:?} B; space memory {least}..{most}",
                            p.comm_bytes,
                            max_memory(&p),
                            b.bound,
                            b.price
                        );
                            assert!(
                                max_memory(&p) <= cap,
                                "{name} k={k}: {} > {cap}",
                                max_memory(&p)
                            );
                            let opt = best_fitting.expect("a plan fits, so the space has one");
                            assert!(
                                p.comm_bytes >= opt,
                                "{name} k={k}: below the space's optimum"
                            );
                            assert_eq!(b.device_memory, cap);
                            if topology.is_none() {
                                assert_eq!(b.unconstrained_comm_bytes, free.comm_bytes);
                            }
                            bound += usize::from(b.bound);
                        }
                        // Not an error: the smallest plan found, marked.
                        MemoryFit::DoesNotFit {
                            smallest,
                            device_memory,
                        } => {
                            assert_eq!(
                            best_fitting, None,
                            "{name} k={k} cap={cap}: a plan of {least} B fits, but the search says none does (smallest found {smallest})"
                        );
                            assert_eq!(device_memory, cap);
                            assert_eq!(smallest, max_memory(&p));
                            assert!(smallest > cap && smallest >= least);
                        }
                        MemoryFit::Unlimited => panic!("{name} k={k}: a limit was given"),
                    }
                }
            }
        }
    }
    assert!(bound > 0, "the limit never bound: the test checks nothing");
}

/// A 2-layer GPT (D = 64, 2 heads, sequence 32, vocabulary 300, batch 8).
fn small_gpt(lib: &Library, opt: &Optimizer) -> Graph {
    zoo::Model::Gpt(GptConfig {
        layers: 2,
        d_model: 64,
        heads: 2,
        d_ff: 256,
        seq: 32,
        vocab: 300,
        batch: 8,
    })
    .training(lib, opt)
    .unwrap()
}

#[test]
fn pareto_points_fit_what_they_claim_and_none_is_dominated() {
    let lib = Library::shipped().unwrap();
    let cache = StrategyCache::new();
    let dir = std::env::temp_dir().join(format!("tofu-pareto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let opt = Optimizer::Momentum {
        lr: 0.1,
        momentum: 0.9,
    };
    let g = small_gpt(&lib, &opt);
    let model = Model::new(&g, &lib, &cache).unwrap();
    let k = 4;
    let front = pareto(
        &g,
        &lib,
        &cache,
        k,
        SearchKind::CriticalDp,
        PlanOptions::default(),
    )
    .unwrap();
    assert!(front.len() >= 2, "a frontier of {} point(s)", front.len());
    let free = plan(&g, &lib, &cache, k, SearchKind::CriticalDp).unwrap();
    // The first point moves the fewest bytes: no more than the unpriced
    // search (a priced level-by-level search may even beat it).
    assert!(front[0].plan.comm_bytes <= free.comm_bytes);
    for (i, p) in front.iter().enumerate() {
        let (bytes, mem) = (p.plan.comm_bytes, max_memory(&p.plan));
        eprintln!(
            "point {i}: {bytes} B/step, {mem} B/worker, {} (price {})",
            p.plan.choice, p.price
        );
        // The plan written for this point: its memory report fits the claim.
        let path = dir.join(format!("point{i}.json"));
        PlanFile::new(&g, &model, &p.plan).save(&path).unwrap();
        let b = PlanFile::load(&path, &lib, &cache).unwrap();
        let (file, graph, d) = (
            b.recorded.expect("loaded from a file"),
            b.graph,
            b.decisions,
        );
        let report = per_worker(&graph, &d.tensors, &file.factors);
        let worst = report.iter().map(|m| m.total()).max().unwrap();
        assert!(
            worst <= mem,
            "point {i}: its plan needs {worst} > claimed {mem}"
        );
        assert_eq!(file.max_worker_memory_bytes, mem);
        let m2 = Model::new(&graph, &lib, &cache).unwrap();
        assert_eq!(
            exact_cost(&graph, &m2, &file.factors, &d).0,
            bytes,
            "point {i}"
        );
        for (j, q) in front.iter().enumerate() {
            let (b2, m2) = (q.plan.comm_bytes, max_memory(&q.plan));
            assert!(
                i == j || !(b2 <= bytes && m2 <= mem),
                "point {j} ({b2}, {m2}) dominates point {i} ({bytes}, {mem})"
            );
        }
        // A device as large as the point: the search finds a plan that fits
        // and moves no more than the point.
        let capped = plan_with(
            &g,
            &lib,
            &cache,
            k,
            SearchKind::CriticalDp,
            PlanOptions {
                device_memory: Some(mem),
                ..PlanOptions::default()
            },
        )
        .unwrap();
        assert!(max_memory(&capped) <= mem, "point {i}");
        eprintln!("  --device-memory {mem}: {} B/step", capped.comm_bytes);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// With a topology the frontier trades estimated seconds (what the search
/// minimised), not bytes, against memory: no point is dominated in
/// (seconds, memory), and each point's seconds are its decisions priced
/// again on the cluster.
#[test]
fn pareto_on_a_topology_trades_estimated_seconds_for_memory() {
    let lib = Library::shipped().unwrap();
    let cache = StrategyCache::new();
    let g = small_gpt(&lib, &Optimizer::Sgd { lr: 0.1 });
    let model = Model::new(&g, &lib, &cache).unwrap();
    let topo = Topology::new(2, 2);
    let opts = PlanOptions {
        topology: Some(topo),
        ..PlanOptions::default()
    };
    let front = pareto(&g, &lib, &cache, 4, SearchKind::CriticalDp, opts).unwrap();
    assert!(!front.is_empty());
    let secs: Vec<f64> = front
        .iter()
        .map(|p| {
            let l = p.plan.links.expect("priced on the topology");
            let again = planner::plan::topology::price(
                &g,
                &model,
                &p.plan.factors,
                &p.plan.decisions,
                &topo,
            );
            assert_eq!(l.load.bytes, again.load.bytes);
            assert!((l.seconds() - again.seconds()).abs() <= 1e-12 * again.seconds().max(1e-30));
            l.seconds()
        })
        .collect();
    for (i, p) in front.iter().enumerate() {
        let mem = max_memory(&p.plan);
        eprintln!(
            "point {i}: {:.6} ms, {} B/step, {mem} B/worker, {}",
            secs[i] * 1e3,
            p.plan.comm_bytes,
            p.plan.choice
        );
        for (j, q) in front.iter().enumerate() {
            assert!(
                i == j || !(secs[j] <= secs[i] && max_memory(&q.plan) <= mem),
                "point {j} dominates point {i} in (seconds, memory)"
            );
        }
    }
    // Ordered by estimated time (ascending), memory strictly descending.
    assert!(secs.windows(2).all(|w| w[0] <= w[1]));
}
