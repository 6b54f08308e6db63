//! Faults that close no socket (issue 42): a two-host `tofu launch` of
//! `tofu train` across two network namespaces joined by a veth pair
//! (`tofu_tests::netns`), one rank per host; once both ranks have logged a
//! step, the link is taken down (`ip link set veth0 down`: no FIN, no RST,
//! a vanished host as the other sees it). Both hosts must then exit non-zero
//! within the timeout plus the grace period, naming the lost host and its
//! ranks, and no process may remain in either namespace:
//! * through the launchers' heartbeats (`--heartbeat-timeout 2`, the ranks'
//!   own `--comm-timeout` left at 600 s), and
//! * through the ranks' transport deadline (`--comm-timeout 2`, the
//!   heartbeat at 600 s).
//!
//! Needs root and iproute2; without them it prints `SKIPPED:` and passes,
//! except under `CI`, where it fails. Takes a few seconds each.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tofu_tests::netns::{pair_or_skip, Netns};
use tofu_tests::{free_port, have_digits, tofu_bin};

/// Start `tofu launch` on host `node` of `netns` for a long two-rank
/// training run with these timeouts; its stdout lines go to `lines`.
fn start(
    netns: &Netns,
    node: usize,
    port: &str,
    (heartbeat, comm): (&str, &str),
    lines: mpsc::Sender<String>,
) -> Child {
    let mut cmd = netns.command(node, tofu_bin());
    cmd.args(["launch", "--nnodes", "2", "--nproc-per-node", "1"])
        .args(["--node-rank", &node.to_string()])
        .args(["--master-addr", &netns.ip(0), "--master-port", port])
        .args(["--heartbeat-timeout", heartbeat, "--grace-s", "1", "--"])
        .args(["train", "--model", "mlp-3-256", "--workers", "2"])
        .args(["--data", "digits", "--steps", "1000000", "--batch", "16"])
        .args(["--json", "--comm-timeout", comm])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start tofu launch in a namespace");
    let out = child.stdout.take().expect("piped");
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = lines.send(format!("node {node}: {line}"));
        }
    });
    child
}

/// Wait for `child` at most `limit`; gives its status and stderr, or kills
/// it and panics naming `what`.
fn finish(mut child: Child, limit: Duration, what: &str) -> (std::process::ExitStatus, String) {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            let _ = child.stderr.take().expect("piped").read_to_string(&mut err);
            return (status, err);
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let mut err = String::new();
            let _ = child.stderr.take().expect("piped").read_to_string(&mut err);
            panic!("{what} still running {limit:?} after the cut; stderr:\n{err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run both hosts, cut the link once each rank logged a step, and check
/// both launches fail within `limit` of the cut; gives each host's stderr.
fn cut_mid_run(
    tag: &str,
    subnet: &str,
    timeouts: (&str, &str),
    limit: Duration,
) -> Option<[String; 2]> {
    if !have_digits() {
        return None;
    }
    let netns = pair_or_skip(tag, subnet)?;
    let port = free_port();
    let (tx, rx) = mpsc::channel();
    let a = start(&netns, 0, &port, timeouts, tx.clone());
    let b = start(&netns, 1, &port, timeouts, tx);
    let mut stepped = [false; 2];
    let deadline = Instant::now() + Duration::from_secs(120);
    while stepped != [true, true] {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("both ranks log a step within 120 s");
        for (k, s) in stepped.iter_mut().enumerate() {
            *s |= line.starts_with(&format!("node {k}: [rank {k}] {{"));
        }
    }
    netns.set_link(false).expect("take the link down");
    let cut = Instant::now();
    let (sa, ea) = finish(a, limit, "host A's launch");
    let (sb, eb) = finish(b, limit, "host B's launch");
    let took = cut.elapsed();
    eprintln!("both hosts exited {took:?} after the cut");
    assert!(
        !sa.success() && !sb.success(),
        "{sa} / {sb}\nA:\n{ea}\nB:\n{eb}"
    );
    std::thread::sleep(Duration::from_millis(200));
    for k in 0..2 {
        assert_eq!(
            netns.pids(k),
            Vec::<u32>::new(),
            "processes left on host {k}"
        );
    }
    let [a, b] = [ea, eb].map(|e| e.split_whitespace().collect::<Vec<_>>().join(" "));
    eprintln!("host A's stderr: {a}\nhost B's stderr: {b}");
    Some([a, b])
}

#[test]
fn a_cut_link_stops_both_hosts_through_the_heartbeats() {
    // Heartbeat 2 s + grace 1 s, plus a margin for start-up noise.
    let Some([a, b]) = cut_mid_run("hb", "10.214.0", ("2", "600"), Duration::from_secs(10)) else {
        return;
    };
    assert!(
        a.contains("node 1 (rank 1) was lost") && a.contains("10.214.0.2"),
        "{a}"
    );
    assert!(
        b.contains("node 0 (rank 0) was lost") && b.contains("10.214.0.1"),
        "{b}"
    );
    assert!(a.contains("no heartbeat"), "{a}");
}

#[test]
fn a_cut_link_fails_both_ranks_through_the_comm_timeout() {
    // --comm-timeout 2 s (every message of a step), grace 1 s, margin.
    let Some([a, b]) = cut_mid_run("ct", "10.215.0", ("600", "2"), Duration::from_secs(12)) else {
        return;
    };
    for (text, peer, ip) in [(&a, 1, "10.215.0.2"), (&b, 0, "10.215.0.1")] {
        assert!(
            text.contains(&format!("rank {peer} is at {ip}")) && text.contains("no message from"),
            "{text}"
        );
    }
}
