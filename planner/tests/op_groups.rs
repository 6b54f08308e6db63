//! The summary's top operators fold time steps and layers (issue 28): on
//! the zoo RNN and GPT every group's count and bytes agree with an
//! independent recount from the per-operator list, the groups cover every
//! communicating operator once, and the unrolled steps and stacked layers
//! really fold.

use std::collections::BTreeSet;

use interval::cache::StrategyCache;
use planner::graph::{Graph, Optimizer};
use planner::plan::op_groups::{group_ops, index_pattern};
use planner::plan::{plan, SearchKind};
use planner::zoo::{self, GptConfig, RnnConfig};
use tdl::Library;

/// Whether `name` is `pattern` with each `*` standing for one or more
/// digits (written apart from [`index_pattern`]: the recount's own reading).
fn fits(pattern: &str, name: &str) -> bool {
    let mut rest = name;
    for (i, piece) in pattern.split('*').enumerate() {
        if i > 0 {
            let n = rest.bytes().take_while(u8::is_ascii_digit).count();
            if n == 0 {
                return false;
            }
            rest = &rest[n..];
        }
        match rest.strip_prefix(piece) {
            Some(r) => rest = r,
            None => return false,
        }
    }
    rest.is_empty()
}

/// Build `model`'s training graph, plan it at k = 4 and check its groups
/// against the per-op list (and that something folds); gives the graph and
/// the largest group's size.
fn check(name: &str, model: zoo::Model) -> (Graph, usize) {
    let lib = Library::shipped().unwrap();
    let graph = model.training(&lib, &Optimizer::Sgd { lr: 0.1 }).unwrap();
    let (g, lib) = (&graph, &lib);
    let cache = StrategyCache::new();
    let p = plan(g, lib, &cache, 4, SearchKind::CriticalDp).unwrap();
    eprintln!("{name}: kept {}, {} bytes", p.choice, p.comm_bytes);
    let groups = group_ops(g, &p.op_comm_bytes);
    let moving: Vec<usize> = (0..g.ops().len())
        .filter(|&i| p.op_comm_bytes[i] > 0)
        .collect();
    // Every communicating operator is in exactly one group; the groups'
    // bytes add up to the plan's.
    let mut seen = BTreeSet::new();
    for grp in &groups {
        for m in &grp.members {
            assert!(seen.insert(m.index()), "{name}: op {m:?} in two groups");
        }
    }
    assert_eq!(seen, moving.iter().copied().collect(), "{name}");
    let total: u64 = groups.iter().map(|grp| grp.comm_bytes).sum();
    assert_eq!(total, p.comm_bytes, "{name}");
    for grp in &groups {
        // The recount: every communicating op of that spec whose name the
        // pattern fits.
        let recount: Vec<usize> = moving
            .iter()
            .copied()
            .filter(|&i| g.ops()[i].spec == grp.spec && fits(&grp.pattern, &g.ops()[i].name))
            .collect();
        let members: Vec<usize> = grp.members.iter().map(|m| m.index()).collect();
        assert_eq!(members, recount, "{name}: {}", grp.pattern);
        let bytes: u64 = recount.iter().map(|&i| p.op_comm_bytes[i]).sum();
        assert_eq!(grp.comm_bytes, bytes, "{name}: {}", grp.pattern);
    }
    // Heaviest first.
    assert!(groups
        .windows(2)
        .all(|w| w[0].comm_bytes >= w[1].comm_bytes));
    for grp in groups.iter().take(10) {
        eprintln!(
            "{name}: {:>12}  {} ×{} ({})",
            grp.comm_bytes,
            grp.label(g),
            grp.members.len(),
            grp.spec
        );
    }
    let largest = groups
        .iter()
        .map(|grp| grp.members.len())
        .max()
        .unwrap_or(0);
    let folded = groups.iter().filter(|grp| grp.members.len() > 1).count();
    assert!(folded > 0, "{name}: nothing folded");
    (graph, largest)
}

/// How many operators of `g` (moving bytes or not) fold to `pattern`.
fn count_named(g: &Graph, pattern: &str) -> usize {
    g.ops()
        .iter()
        .filter(|o| index_pattern(&o.name) == pattern)
        .count()
}

#[test]
fn rnn_steps_and_layers_fold_with_the_right_counts_and_bytes() {
    let cfg = RnnConfig {
        layers: 3,
        hidden: 256,
        embed: 32,
        steps: 6,
        vocab: 50,
        batch: 16,
    };
    let (g, largest) = check("rnn", zoo::Model::Rnn(cfg.clone()));
    // The per-step operators of every layer fold into one group: a group
    // of layers × steps exists (one cell op per layer and step).
    assert!(
        largest >= cfg.layers * cfg.steps,
        "largest group {largest} < {} layers × {} steps",
        cfg.layers,
        cfg.steps
    );
    // And a pattern names both indices: one op per (layer, step).
    assert_eq!(
        count_named(&g, "bwd/lstm.l*.t*.gh/w"),
        cfg.layers * cfg.steps
    );
}

#[test]
fn gpt_layers_fold_with_the_right_counts_and_bytes() {
    let cfg = GptConfig {
        seq: 32,
        batch: 8,
        ..GptConfig::new(4, 64).expect("d_model a multiple of 64")
    };
    let (g, largest) = check("gpt", zoo::Model::Gpt(cfg.clone()));
    assert!(
        largest >= cfg.layers,
        "largest group {largest} < {} layers",
        cfg.layers
    );
    assert_eq!(count_named(&g, "bwd/h*.fc1/w"), cfg.layers);
}

#[test]
fn the_recount_reads_patterns_as_written() {
    assert!(fits("bwd/lstm.l*.t*.gh/w", "bwd/lstm.l0.t13.gh/w"));
    assert!(!fits("bwd/lstm.l*.t*.gh/w", "bwd/lstm.l0.tx.gh/w"));
    assert!(!fits("h*.fc1", "h3.fc12"));
    assert!(fits("fc3", "fc3") && !fits("fc3", "fc4"));
}
