//! `tofu plan --topology NODESxGPUS [--link-bandwidth intra=BW,inter=BW]`:
//! reading the cluster and showing a plan's bytes and estimated seconds per
//! link level (`planner::plan::topology`).
//!
//! Takes the two arguments' text and a finished plan; gives the
//! [`Topology`] the search prices its levels on and the summary lines (the
//! `topology` object of `--json`: [`planner::plan::summary::topology_json`]).

use planner::plan::topology::{Link, Topology};
use planner::plan::Planned;

use super::lib_err;
use super::plan_print::human;

/// The cluster of `--topology` with `--link-bandwidth`'s overrides, checked
/// against `--workers`; `None` without `--topology`.
///
/// Errors: a malformed topology or bandwidth list, a bandwidth list without
/// a topology, a topology whose GPUs are not the workers (each message says
/// how to write it).
pub fn parse(
    topology: Option<&str>,
    bandwidth: Option<&str>,
    workers: usize,
) -> miette::Result<Option<Topology>> {
    let Some(t) = topology else {
        if bandwidth.is_some() {
            return Err(miette::miette!(
                "--link-bandwidth needs --topology NODESxGPUS, e.g. --topology 2x8 --link-bandwidth intra=450G,inter=50G"
            ));
        }
        return Ok(None);
    };
    let mut t = Topology::parse(t).map_err(|e| miette::miette!("--topology: {e}"))?;
    if let Some(b) = bandwidth {
        t = t
            .with_bandwidths(b)
            .map_err(|e| miette::miette!("--link-bandwidth: {e}"))?;
    }
    t.check_workers(workers).map_err(lib_err)?;
    Ok(Some(t))
}

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

/// The summary lines of a plan priced on a topology (none without one).
pub fn summary(p: &Planned) -> Vec<String> {
    let Some(r) = &p.links else {
        return Vec::new();
    };
    let t = &r.topology;
    let mut out = vec![format!(
        "topology   {}x{} GPUs, {}",
        t.nodes,
        t.gpus_per_node,
        level_words(t, &p.factors)
    )];
    for link in Link::ALL {
        let l = link as usize;
        out.push(format!(
            "  {:<10} {:>12} per step, {:>11} estimated ({:.0} GB/s per GPU)",
            link.name(),
            human(r.load.bytes[l]),
            seconds(r.load.seconds[l]),
            t.bandwidth(link) as f64 / 1e9
        ));
    }
    out.push(format!(
        "  {:<10} {:>12} per step, {:>11} estimated (what the search minimised)",
        "total",
        human(r.load.total_bytes()),
        seconds(r.seconds())
    ));
    out
}
