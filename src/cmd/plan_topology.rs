//! `tofu plan --topology NODESxGPUS [--link-bandwidth intra=BW,inter=BW]`:
//! reading the cluster (`planner::plan::topology`).
//!
//! Takes the two arguments' text; gives the [`Topology`] the search prices
//! its levels on (the lines that show a plan's bytes and estimated seconds
//! per link level: [`planner::plan::report::topology`]).

use planner::plan::topology::Topology;

use super::lib_err;

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
