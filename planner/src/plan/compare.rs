//! Side-by-side comparison of every search on one graph (the planner
//! benchmark of issue 6, and `docs/benchmarks.md`).
//!
//! Takes a graph, its library and worker counts; gives one [`Row`] per
//! (k, search) with the plan time (seconds), the bytes per step, the ratio
//! to the ILP's bytes measured in the same run and the candidate plan each
//! search kept, and prints them as Markdown: every row ([`markdown_row`]),
//! or one line per (model, k) with CriticalDP, the ILP and the best baseline
//! ([`summary_row`]).

use interval::cache::StrategyCache;
use tdl::Library;

use super::driver::plan;
use super::searches::SearchKind;
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
    /// Which of the search's candidate plans was kept
    /// ([`super::planned::Planned::choice`], e.g. `recursion 2·2·2`).
    pub choice: Option<String>,
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
                    choice: p.as_ref().map(|p| p.choice.clone()),
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

/// The header of [`summary_row`]'s table.
pub const SUMMARY_HEADER: &str = "| model | k | CriticalDP bytes (kept) | ILP bytes (kept) | CDP/ILP | best baseline (bytes) | CDP plan s | ILP plan s |\n|---|---|---|---|---|---|---|---|";

/// The summary line of one (model, k): CriticalDP's and the ILP's bytes per
/// step with the candidate each kept, their ratio, the baseline (every other
/// search) with the fewest bytes, and both plan times (seconds). `rows` are
/// [`compare`]'s rows of that k; `None` when CriticalDP has no result.
pub fn summary_row(rows: &[Row]) -> Option<String> {
    let find = |s: SearchKind| rows.iter().find(|r| r.search == s);
    let cdp = find(SearchKind::CriticalDp)?;
    let ilp = find(SearchKind::Ilp);
    let dash = || "–".to_string();
    let with_choice = |r: &Row| match (r.comm_bytes, &r.choice) {
        (Some(b), Some(c)) => format!("{b} ({c})"),
        (Some(b), None) => b.to_string(),
        _ => dash(),
    };
    let best = rows
        .iter()
        .filter(|r| r.search != SearchKind::CriticalDp && r.search != SearchKind::Ilp)
        .filter_map(|r| Some((r.comm_bytes?, r.search.name())))
        .min();
    let secs = |r: Option<&Row>| {
        r.and_then(|r| r.seconds)
            .map_or_else(dash, |s| format!("{s:.3}"))
    };
    Some(format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} |",
        cdp.model,
        cdp.k,
        with_choice(cdp),
        ilp.map_or_else(dash, with_choice),
        cdp.vs_ilp.map_or_else(dash, |v| format!("{v:.3}")),
        best.map_or_else(dash, |(b, n)| format!("{n} ({b})")),
        secs(Some(cdp)),
        secs(ilp),
    ))
}

/// [`summary_row`] for every (model, k) of `rows` (consecutive rows of one
/// model and k, as [`compare`] gives them), under [`SUMMARY_HEADER`].
pub fn summary_markdown(rows: &[Row]) -> String {
    let mut out = SUMMARY_HEADER.to_string();
    for group in rows.chunk_by(|a, b| a.model == b.model && a.k == b.k) {
        if let Some(line) = summary_row(group) {
            out.push('\n');
            out.push_str(&line);
        }
    }
    out
}

/// Worker counts from `TOFU_BENCH_K` (comma-separated), default 2, 4, 6, 8, 16, 64.
pub fn ks_from_env() -> Vec<usize> {
    std::env::var("TOFU_BENCH_K")
        .unwrap_or_else(|_| "2,4,6,8,16,64".to_string())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}
