//! The planner benchmark of issue 6 on the zoo models: for each model and
//! worker count, the plan time and communication bytes per step of
//! CriticalDP, the exact ILP (on CriticalDP's candidate plans) and every
//! baseline, with the ratio to the ILP measured in the same run (never a
//! timed assertion). Prints Markdown: the full table, then the summary (one
//! line per model and k).
//!
//! `cargo bench -p planner --bench plan_table` runs the full grid (minutes).
//! `TOFU_BENCH_MODELS=mlp-8-8192,rnn-4-8k:512` (`name[:batch]`) and
//! `TOFU_BENCH_K=2,8` narrow it; `TOFU_BENCH_ILP_MAX_OPS` (default 5000)
//! skips the ILP on larger graphs. The ONNX models are in the root package's
//! `plan_onnx` bench.

use planner::graph::Optimizer;
use planner::plan::compare::{compare, markdown_row, summary_markdown, MARKDOWN_HEADER};
use planner::zoo;

fn main() {
    let models = std::env::var("TOFU_BENCH_MODELS").unwrap_or_else(|_| {
        "mlp-8-8192,rnn-4-8k:512,rnn-10-8k,wresnet-50-4,wresnet-152-10,gpt-24-2048".to_string()
    });
    let ks = planner::plan::compare::ks_from_env();
    let ilp_max_ops: usize = std::env::var("TOFU_BENCH_ILP_MAX_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000);
    let lib = tdl::Library::shipped().expect("shipped specs");
    println!("{MARKDOWN_HEADER}");
    let mut all = Vec::new();
    for spec in models.split(',') {
        let (name, batch) = match spec.split_once(':') {
            Some((n, b)) => (n, b.parse().ok()),
            None => (spec, None),
        };
        let mut m = zoo::Model::parse(name).expect("zoo model");
        if let Some(b) = batch {
            m = m.with_batch(b);
        }
        let g = m
            .training(
                &lib,
                &Optimizer::Momentum {
                    lr: 0.1,
                    momentum: 0.9,
                },
            )
            .expect("graph");
        eprintln!("{} (batch {}): {} ops", m.name(), m.batch(), g.ops().len());
        for r in compare(
            &format!("{} (b={})", m.name(), m.batch()),
            &g,
            &lib,
            &ks,
            ilp_max_ops,
        ) {
            println!("{}", markdown_row(&r));
            all.push(r);
        }
    }
    println!("\n{}", summary_markdown(&all));
}
