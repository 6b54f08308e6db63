//! Megatron-LM's vocabulary parallelism executed (issue 28): a tiny GPT
//! planned by the `megatron` search, whose tensor-parallel levels split the
//! tied `wte[V, D]` by vocabulary rows, so the token lookup
//! (`vocab_embedding`) reduces over V (partial lookups summed by an
//! all-reduce), the row max of the logits reduces over V by Max and the
//! cross-entropy row sums by Sum. At k = 2 and 4 (t = k), and t = 2 inside
//! data parallelism at k = 4 and 8 (two data-parallel levels) the partitioned step computes what the
//! unpartitioned one computes (max relative error ≤ 1e-4) and every rank
//! sends exactly the bytes the planner predicts; at k = 4, t = 2 the two
//! contributions to the tied table's gradient are split at the
//! data-parallel level (reduce-scattered, summed split, the sum
//! all-gathered). A worker's share of the
//! lookup (a window: a vocabulary shard, a box of positions and features)
//! runs the library kernel and equals the compiled evaluator's window.

mod partition;

use interval::cache::StrategyCache;
use partition::{check_one_opts, cpu, lib, reference, unpartitioned};
use planner::graph::{Graph, Optimizer};
use planner::plan::model::Model;
use planner::plan::searches::megatron::Megatron;
use planner::plan::{plan_with, OpChoice, PlanOptions, SearchKind};
use planner::zoo::{self, GptConfig};

/// The strategy names the plan chooses for op `name`, one per level
/// (`replicate` for a replicated op).
fn chosen(g: &Graph, model: &Model, choices: &[Vec<OpChoice>], name: &str) -> Vec<String> {
    let o = g
        .op_ids()
        .find(|&o| g.op(o).name == name)
        .unwrap_or_else(|| panic!("no op {name}"));
    choices[o.index()]
        .iter()
        .map(|c| match c {
            OpChoice::Strategy(i) => model.op(o).strategies.strategies[*i as usize].name.clone(),
            OpChoice::Replicate => "replicate".into(),
            OpChoice::Linear(mask) => format!("linear {mask:#b}"),
        })
        .collect()
}

#[test]
fn gpt_tiny_vocabulary_parallel_plans_run_exactly() {
    // A vocabulary of 64 rows: with `tiny()`'s 7 the table (7 × 8) is
    // smaller than the lookup's [B, S, D] (2 × 4 × 8), and moving the table
    // beats all-reducing the lookup; in GPT-2 the table is 50257 rows.
    let config = GptConfig {
        vocab: 64,
        ..GptConfig::tiny()
    };
    let g = zoo::Model::Gpt(config)
        .training(lib(), &Optimizer::Sgd { lr: 0.1 })
        .unwrap();
    let cache = StrategyCache::new();
    let one = unpartitioned(&g, &cache);
    let r1 = reference(&one, 1).unwrap();
    for (k, t) in [(2, 2), (4, 4), (4, 2), (8, 2)] {
        let opts = PlanOptions {
            tensor_parallel: Some(t),
            ..PlanOptions::default()
        };
        let p = plan_with(&g, lib(), &cache, k, SearchKind(&Megatron), opts).unwrap();
        let case = format!("k={k} t={t}");
        // The tensor-parallel levels are the innermost ones.
        let inner = |name: &str| {
            let c = chosen(&g, &one.ops, &p.decisions.ops, name);
            let levels = c.len();
            let tp = match t {
                2 => 1,
                _ => 2,
            };
            c[levels - tp..].to_vec()
        };
        for (op, want) in [
            ("embed.tokens", "reduce v (Sum)"),
            ("loss.max", "reduce n (Max)"),
            ("loss.parts", "reduce n (Sum)"),
        ] {
            let got = inner(op);
            assert!(
                got.iter().all(|s| s == want),
                "{case}: {op} chose {got:?}, want {want}"
            );
        }
        if (k, t) == (4, 2) {
            // The tied table's two gradient contributions (the lookup's and
            // the logits') are reduce-scattered over the data-parallel pair
            // and summed split; only the sum is all-gathered.
            for name in ["grad/logits/w", "grad/embed.tokens/table", "grad/wte"] {
                let tensor = g
                    .tensors()
                    .iter()
                    .position(|x| x.name == name)
                    .unwrap_or_else(|| panic!("no tensor {name}"));
                let outer = p.decisions.tensors[tensor][0];
                assert_eq!(
                    outer.is_some(),
                    name != "grad/wte",
                    "{case}: {name} at the data-parallel level: {outer:?}"
                );
            }
        }
        let err = check_one_opts(
            &cpu,
            "gpt-tiny",
            &g,
            &cache,
            k,
            SearchKind(&Megatron),
            opts,
            1,
            &r1,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        eprintln!("{case}: max rel error {err:e}");
    }
}

/// `vocab_embedding`'s window kernel against the compiled evaluator's window
/// (the oracle of windows: global coordinates, the spec's dense sum over the
/// shard) on shards, position boxes and feature boxes of a [V = 11, D = 6]
/// table with ids in and out of the table, integers and not.
#[test]
fn vocab_embedding_shards_equal_the_compiled_window() {
    use runner::{Provider, Registry, Window};
    let spec = lib().get("vocab_embedding").unwrap();
    let (v, d, shape) = (11i64, 6i64, [3usize, 5]);
    let shapes = vec![vec![v as usize, d as usize], shape.to_vec()];
    let attrs = tdl::Attrs::new();
    let binding = spec.bind(&shapes, &attrs).unwrap();
    let var = |name: &str| {
        binding
            .spec
            .vars
            .iter()
            .position(|x| x.name == name)
            .unwrap()
    };
    let ids_all: Vec<f32> = (0..15)
        .map(|i| match i % 4 {
            0 => (i % 11) as f32,
            1 => -1.0 - i as f32,
            2 => 10.5 - i as f32 * 0.25,
            _ => ((i * 7) % 13) as f32,
        })
        .collect();
    let table_all: Vec<f32> = (0..v * d).map(|i| i as f32 * 0.5 - 7.0).collect();
    let mut checked = 0;
    for (v0, v1) in [(0, 11), (0, 6), (6, 11), (3, 4)] {
        for (d0, d1) in [(0, 6), (2, 5)] {
            for (p0, p1) in [(0, 3), (1, 2)] {
                let mut vars = Window::whole(&binding).unwrap().vars;
                vars[var("v")] = (v0, v1);
                vars[var("d")] = (d0, d1);
                vars[var("_e0")] = (p0, p1);
                let table_region = vec![(v0, v1), (d0, d1)];
                let ids_region = vec![(p0, p1), (0, 5)];
                let w = Window {
                    vars,
                    inputs: vec![table_region, ids_region],
                };
                let table: Vec<f32> = (v0..v1)
                    .flat_map(|r| (d0..d1).map(move |c| (r, c)))
                    .map(|(r, c)| table_all[(r * d + c) as usize])
                    .collect();
                let ids: Vec<f32> = (p0 as usize * 5..p1 as usize * 5)
                    .map(|i| ids_all[i])
                    .collect();
                let run = |reg: &Registry| {
                    let k = reg.prepare_window(spec, &shapes, &attrs, &w).unwrap();
                    let n: usize = k.output_shapes()[0].iter().product();
                    let mut y = vec![f32::NAN; n];
                    k.run(&[&table, &ids], &mut [&mut y]).unwrap();
                    (k.provider(), y)
                };
                let (provider, got) = run(&Registry::default());
                let (oracle, want) = run(&Registry::empty());
                assert_eq!(provider, Provider::Library("gather"));
                assert_eq!(oracle, Provider::Compiled);
                assert_eq!(
                    got, want,
                    "shard {v0}..{v1}, d {d0}..{d1}, positions {p0}..{p1}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 16);
}
