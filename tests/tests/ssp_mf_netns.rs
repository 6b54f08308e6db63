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
//! the reason and passes. The namespaces (and with them the veth pair) are
//! deleted when the test ends, failed or not (a guard's `Drop`).

mod ssp_common;

use std::process::Command;

use ssp_common::{assert_close, floats, Host, MfRun};
use tofu_tests::movielens_file;

/// Network namespaces made for this test; deleted on drop.
struct Netns(Vec<String>);

impl Netns {
    /// Two namespaces joined by a veth pair, A at 10.213.0.1 and B at
    /// 10.213.0.2, loopback and link up.
    fn pair() -> Result<Netns, String> {
        let pid = std::process::id();
        let names = [format!("tofu-ssp-{pid}-a"), format!("tofu-ssp-{pid}-b")];
        let mut made = Netns(Vec::new());
        let ip = |args: &[&str]| -> Result<(), String> {
            let out = Command::new("ip")
                .args(args)
                .output()
                .map_err(|e| format!("cannot run `ip` (iproute2): {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "`ip {}` failed: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        for n in &names {
            ip(&["netns", "add", n])?;
            made.0.push(n.clone());
        }
        let (a, b) = (names[0].as_str(), names[1].as_str());
        ip(&[
            "link", "add", "veth0", "netns", a, "type", "veth", "peer", "name", "veth1", "netns", b,
        ])?;
        ip(&["-n", a, "addr", "add", "10.213.0.1/24", "dev", "veth0"])?;
        ip(&["-n", b, "addr", "add", "10.213.0.2/24", "dev", "veth1"])?;
        for (n, dev) in [(a, "veth0"), (b, "veth1")] {
            ip(&["-n", n, "link", "set", dev, "up"])?;
            ip(&["-n", n, "link", "set", "lo", "up"])?;
        }
        Ok(made)
    }

    fn host(&self, i: usize) -> Host {
        Host {
            prefix: ["ip", "netns", "exec", &self.0[i]]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            ip: format!("10.213.0.{}", i + 1),
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

#[test]
fn mf_across_network_namespaces_matches_loopback() {
    let Some(file) = movielens_file() else {
        return;
    };
    let netns = match Netns::pair() {
        Ok(n) => n,
        Err(why) => {
            eprintln!("SKIPPED: cannot make network namespaces: {why}");
            return;
        }
    };
    let run = MfRun::small(file, 0);
    let hosts = [netns.host(0), netns.host(1)];
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
