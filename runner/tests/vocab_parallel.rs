//! Megatron-LM's vocabulary parallelism executed (issue 28): a tiny GPT
//! planned by the `megatron` search, whose tensor-parallel levels split the
//! tied `wte[V, D]` by vocabulary rows, so the token lookup
//! (`vocab_embedding`) reduces over V (partial lookups summed by an
//! all-reduce), the row max of the logits reduces over V by Max and the
//! cross-entropy row sums by Sum. At k = 2 and 4 (t = k, and t = 2 inside
//! data parallelism at k = 4) the partitioned step computes what the
//! unpartitioned one computes (max relative error ≤ 1e-4) and every rank
//! sends exactly the bytes the planner predicts.

mod partition;

use interval::cache::StrategyCache;
use partition::{check_one_opts, cpu, lib, reference};
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
    let model = Model::new(&g, lib(), &cache).unwrap();
    let r1 = reference(&g, &model, 1).unwrap();
    for (k, t) in [(2, 2), (4, 4), (4, 2)] {
        let opts = PlanOptions {
            tensor_parallel: Some(t),
            ..PlanOptions::default()
        };
        let p = plan_with(&g, lib(), &cache, k, SearchKind(&Megatron), opts).unwrap();
        let case = format!("k={k} t={t}");
        // The tensor-parallel levels are the innermost ones.
        let inner = |name: &str| {
            let c = chosen(&g, &model, &p.decisions.ops, name);
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
        let err = check_one_opts(
            &cpu,
            "gpt-tiny",
            &g,
            &model,
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
