//! Multi-host (issue 12): MF on MovieLens-100K across two network
//! namespaces that the test makes itself (`ip netns add`, a veth pair,
//! 10.213.0.1/24 and 10.213.0.2/24). Host A runs server 0 and worker
//! process 0, host B server 1 and worker process 1, so every client talks
//! to one server on its own host and one across the link. The result must
//! be the same as the run on loopback, in the sense of
//! `ssp_mf_processes.rs`: every rating counted once per epoch, and
//! per-epoch RMSE within 0.003 (held-out) and 0.006 (training) at s = 0.
//!
//! Needs root and iproute2; without them the test prints `SKIPPED:` with
//! the reason and passes, except under `CI`, where it fails. The namespaces
//! (and with them the veth pair) are deleted when the test ends, failed or
//! not (`tofu_tests::netns`).

mod ssp_common;

use ssp_common::{assert_close, floats, Host, MfRun};
use tofu_tests::movielens_file;
use tofu_tests::netns::{pair_or_skip, Netns};

/// Host `i` of `netns`, for `ssp_common`'s process runner.
fn host(netns: &Netns, i: usize) -> Host {
    Host {
        prefix: ["ip", "netns", "exec", netns.name(i)]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        ip: netns.ip(i),
    }
}

#[test]
fn mf_across_network_namespaces_matches_loopback() {
    let Some(file) = movielens_file() else {
        return;
    };
    let Some(netns) = pair_or_skip("ssp", "10.213.0") else {
        return;
    };
    let run = MfRun::small(file, 0);
    let hosts = [host(&netns, 0), host(&netns, 1)];
    let (servers, workers) = run.processes(&hosts, &hosts, &[7070, 7071]);
    let (_, looped) = run.on_loopback();
    assert_eq!(servers.len(), 2);
    for w in &workers {
        assert_eq!(w["ratings_per_epoch"], looped[0]["ratings_per_epoch"]);
        assert_eq!(
            w["heldout_rmse_per_epoch"],
            workers[0]["heldout_rmse_per_epoch"]
        );
    }
    eprintln!(
        "held-out per epoch: namespaces {} / loopback {}",
        workers[0]["heldout_rmse_per_epoch"], looped[0]["heldout_rmse_per_epoch"]
    );
    for (key, tol) in [("heldout_rmse_per_epoch", 0.003), ("rmse_per_epoch", 0.006)] {
        assert_close(
            key,
            &floats(&workers[0][key]),
            &floats(&looped[0][key]),
            tol,
        );
    }
    drop(netns);
}
