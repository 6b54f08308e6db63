//! What `tofu plan --topology` says about a plan: its bytes and estimated
//! seconds per link level (the `topology` object of `--json`:
//! [`crate::plan::summary::topology_json`]).
//!
//! Takes a finished [`Planned`] priced on a cluster
//! ([`crate::plan::topology`]); writes text lines. Units: bytes per step,
//! seconds, GB/s per GPU and direction.

use std::fmt;

use super::human_bytes as human;
use crate::plan::topology::{Link, Topology};
use crate::plan::Planned;

/// Seconds in a readable unit: `1.23 s`, `4.56 ms`, `7.89 µs`.
fn seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.3} µs", s * 1e6)
    }
}

/// Which levels of `factors` cross nodes, in words, e.g. `level 0 across
/// nodes, levels 1–3 inside nodes`.
fn level_words(t: &Topology, factors: &[usize]) -> String {
    let span = |a: usize, b: usize| match b - a {
        0 => None,
        1 => Some(format!("level {a}")),
        _ => Some(format!("levels {a}–{}", b - 1)),
    };
    let n = t.node_levels().min(factors.len());
    [
        span(0, n).map(|s| format!("{s} across nodes")),
        span(n, factors.len()).map(|s| format!("{s} inside nodes")),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(", ")
}

/// The lines of a plan priced on a topology (none without one): the
/// cluster, then per link level and in total the bytes per step and the
/// estimated seconds.
pub fn links(f: &mut fmt::Formatter<'_>, p: &Planned) -> fmt::Result {
    let Some(r) = &p.links else {
        return Ok(());
    };
    let t = &r.topology;
    writeln!(
        f,
        "topology   {}x{} GPUs, {}",
        t.nodes,
        t.gpus_per_node,
        level_words(t, &p.factors)
    )?;
    for link in Link::ALL {
        let l = link as usize;
        writeln!(
            f,
            "  {:<10} {:>12} per step, {:>11} estimated ({:.0} GB/s per GPU)",
            link.name(),
            human(r.load.bytes[l]),
            seconds(r.load.seconds[l]),
            t.bandwidth(link) as f64 / 1e9
        )?;
    }
    writeln!(
        f,
        "  {:<10} {:>12} per step, {:>11} estimated (what the search minimised)",
        "total",
        human(r.load.total_bytes()),
        seconds(r.seconds())
    )
}
