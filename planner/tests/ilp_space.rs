//! The ILP judges CriticalDP's whole space (issue 14, second Done-when item):
//! the ILP weighs the same candidate plans as CriticalDP (replication of
//! weights, gradients and optimizer state at every level, one k-way level,
//! whole-model data parallelism, the hybrids with data parallelism outside),
//! each level solved exactly. On the benchmark's own rows
//! ([`planner::plan::compare::compare`], what `docs/benchmarks.md` prints)
//! of small models, where the ILP finishes in seconds, CriticalDP is within
//! 5% of the ILP and never worse than any baseline, and the ILP is never
//! worse than whole-model data parallelism or one k-way level solved by
//! CriticalDP (before the ILP had CriticalDP's candidates it lost to them,
//! e.g. by 3% to equal-chop on wresnet-50-4 at k = 4).

use planner::graph::Optimizer;
use planner::plan::compare::{compare, Row};
use planner::plan::SearchKind;
use planner::zoo;
use tdl::Library;

/// Every baseline's row of one k: CriticalDP moves no more bytes.
fn assert_never_worse_than_a_baseline(label: &str, group: &[Row]) {
    let k = group[0].k;
    let cdp = bytes(group, SearchKind::CriticalDp);
    for r in group {
        if r.search == SearchKind::CriticalDp || r.search == SearchKind::Ilp {
            continue;
        }
        let b = r.comm_bytes.expect("every baseline plans");
        assert!(
            cdp <= b,
            "{label} k={k}: critical-dp {cdp} > {} {b}",
            r.search.name()
        );
    }
}

fn bytes(rows: &[Row], s: SearchKind) -> u64 {
    rows.iter()
        .find(|r| r.search == s)
        .and_then(|r| r.comm_bytes)
        .unwrap_or_else(|| panic!("{} has no result", s.name()))
}

#[test]
fn critical_dp_is_within_5_percent_of_the_ilp_and_never_worse_than_a_baseline() {
    let lib = Library::shipped().unwrap();
    let opt = Optimizer::Momentum {
        lr: 0.1,
        momentum: 0.9,
    };
    let models = [
        ("mlp-4-512", 64),
        ("rnn-2-256", 16),
        ("gpt-2-128", 8),
        ("gpt-2-128", 1),
    ];
    for (name, batch) in models {
        let m = zoo::Model::parse(name).unwrap().with_batch(batch);
        let g = m.training(&lib, &opt).unwrap();
        let label = format!("{name} (b={batch})");
        let rows = compare(&label, &g, &lib, &[2, 4, 8], usize::MAX);
        for group in rows.chunk_by(|a, b| a.k == b.k) {
            let k = group[0].k;
            let cdp = bytes(group, SearchKind::CriticalDp);
            let ilp = bytes(group, SearchKind::Ilp);
            let ilp_row = group.iter().find(|r| r.search == SearchKind::Ilp);
            eprintln!(
                "{label} k={k}: critical-dp {cdp}, ilp {ilp} ({})",
                ilp_row.and_then(|r| r.choice.clone()).unwrap_or_default()
            );
            assert!(
                cdp as f64 <= 1.05 * ilp as f64,
                "{label} k={k}: critical-dp {cdp} > 1.05 × ilp {ilp}"
            );
            assert_never_worse_than_a_baseline(&label, group);
            // The ILP weighs whole-model data parallelism and one k-way level
            // too, each solved exactly, so it never loses to the baselines
            // that are exactly those candidates solved by CriticalDP.
            for s in [SearchKind::DataParallel, SearchKind::EqualChop] {
                let b = bytes(group, s);
                assert!(ilp <= b, "{label} k={k}: ilp {ilp} > {} {b}", s.name());
            }
        }
    }
}

/// At k = 16 and 64 (no ILP: the levels are many) CriticalDP is never worse
/// than any baseline either. Before Megatron's t > 1 plans were among its
/// candidates the megatron baseline beat it on transformers at large k
/// (gpt-24-2048 at k = 64: 304.2e9 against 330.5e9 bytes, docs/benchmarks.md).
#[test]
fn critical_dp_is_never_worse_than_a_baseline_at_k_16_and_64() {
    let lib = Library::shipped().unwrap();
    let opt = Optimizer::Momentum {
        lr: 0.1,
        momentum: 0.9,
    };
    for (name, batch) in [("mlp-4-512", 64), ("rnn-2-256", 16), ("gpt-2-128", 4)] {
        let m = zoo::Model::parse(name).unwrap().with_batch(batch);
        let g = m.training(&lib, &opt).unwrap();
        let label = format!("{name} (b={batch})");
        let rows = compare(&label, &g, &lib, &[16, 64], 0);
        for group in rows.chunk_by(|a, b| a.k == b.k) {
            eprintln!(
                "{label} k={}: critical-dp {} ({})",
                group[0].k,
                bytes(group, SearchKind::CriticalDp),
                group[0].choice.clone().unwrap_or_default()
            );
            assert_never_worse_than_a_baseline(&label, group);
        }
    }
}
