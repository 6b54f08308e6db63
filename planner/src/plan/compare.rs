//! Side-by-side comparison of every search on one graph (the planner
//! benchmark of issue 6, and `docs/benchmarks.md`).
//!
//! Takes a graph, its library and worker counts; gives one [`Row`] per
//! (k, search) with the plan time (seconds), the bytes per step and the ratio
//! to the ILP's bytes measured in the same run, and prints them as Markdown.

use interval::cache::StrategyCache;
use tdl::Library;

use super::driver::{plan, SearchKind};
use crate::graph::Graph;

/// One (k, search) result; `None` fields when the search was skipped or failed.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Model name.
    pub model: String,
    /// Workers.
    pub k: usize,
    /// The search.
    pub search: SearchKind,
    /// Plan time in seconds.
    pub seconds: Option<f64>,
    /// Bytes per training step.
    pub comm_bytes: Option<u64>,
    /// `comm_bytes / ILP's comm_bytes`.
    pub vs_ilp: Option<f64>,
    /// Largest per-worker memory in bytes.
    pub max_memory: Option<u64>,
}

/// Plan `graph` with every search at every k (the ILP only when the graph
/// has at most `ilp_max_ops` operators).
pub fn compare(
    model: &str,
    graph: &Graph,
    lib: &Library,
    ks: &[usize],
    ilp_max_ops: usize,
) -> Vec<Row> {
    let cache = StrategyCache::new();
    let mut rows = Vec::new();
    for &k in ks {
        let mut these: Vec<Row> = SearchKind::ALL
            .iter()
            .map(|&s| {
                let skip = s == SearchKind::Ilp && graph.ops().len() > ilp_max_ops;
                let p = if skip {
                    None
                } else {
                    plan(graph, lib, &cache, k, s).ok()
                };
                Row {
                    model: model.to_string(),
                    k,
                    search: s,
                    seconds: p.as_ref().map(|p| p.plan_seconds),
                    comm_bytes: p.as_ref().map(|p| p.comm_bytes),
                    vs_ilp: None,
                    max_memory: p
                        .as_ref()
                        .map(|p| p.memory.iter().map(|m| m.total()).max().unwrap_or(0)),
                }
            })
            .collect();
        let ilp = these
            .iter()
            .find(|r| r.search == SearchKind::Ilp)
            .and_then(|r| r.comm_bytes);
        for r in &mut these {
            r.vs_ilp = match (r.comm_bytes, ilp) {
                (Some(b), Some(i)) if i > 0 => Some(b as f64 / i as f64),
                _ => None,
            };
        }
        rows.extend(these);
    }
    rows
}

/// The header of [`markdown_row`]'s table.
pub const MARKDOWN_HEADER: &str = "| model | k | search | plan s | comm bytes/step | vs ILP | max worker memory |\n|---|---|---|---|---|---|---|";

/// One row as a Markdown table line.
pub fn markdown_row(r: &Row) -> String {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "–".to_string());
    format!(
        "| {} | {} | {} | {} | {} | {} | {} |",
        r.model,
        r.k,
        r.search.name(),
        opt(r.seconds.map(|s| format!("{s:.3}"))),
        opt(r.comm_bytes.map(|b| b.to_string())),
        opt(r.vs_ilp.map(|v| format!("{v:.3}"))),
        opt(r.max_memory.map(|b| b.to_string())),
    )
}

/// Worker counts from `TOFU_BENCH_K` (comma-separated), default 2, 4, 6, 8, 16, 64.
pub fn ks_from_env() -> Vec<usize> {
    std::env::var("TOFU_BENCH_K")
        .unwrap_or_else(|_| "2,4,6,8,16,64".to_string())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}
