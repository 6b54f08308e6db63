//! End-to-end tests of `tofu launch` and the rendezvous, on loopback, no
//! GPU: several `tofu rendezvous-check` processes exchange rank 0's id and
//! pass barriers (one node, and two "nodes" on one host); a rank killed
//! mid-session fails every other rank with an error naming it, well within
//! the timeout, and the launcher names it with its exit status; a rank that
//! never starts is named after the timeout; a rank that hangs is killed
//! after the grace period; bad variables and layouts are errors naming them.

use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use tofu_tests::{free_port, text, tofu, tofu_bin};

/// Run `tofu ARGS` and time it.
fn timed(args: &[&str]) -> (Output, Duration) {
    let t = Instant::now();
    let o = tofu(args);
    (o, t.elapsed())
}

/// The JSON lines of `rendezvous-check`, by rank, from the launcher's
/// `[rank r] {…}` output.
fn reports(stdout: &str) -> BTreeMap<u64, serde_json::Value> {
    stdout
        .lines()
        .filter_map(|l| l.split_once("] {").map(|(_, j)| format!("{{{j}")))
        .map(|j| serde_json::from_str::<serde_json::Value>(&j).expect("a JSON line"))
        .map(|v| (v["rank"].as_u64().unwrap(), v))
        .collect()
}

/// Lines of `text` prefixed `[rank r]`, joined, with miette's wrapping
/// (`  |` continuations) undone.
fn rank_text(text: &str, rank: usize) -> String {
    let prefix = format!("[rank {rank}] ");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .flat_map(|l| l.split_whitespace())
        .filter(|w| *w != "|" && *w != "x")
        .collect::<Vec<_>>()
        .join(" ")
}

fn flat(text: &str) -> String {
    text.split_whitespace()
        .filter(|w| *w != "|")
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn four_ranks_exchange_an_id_and_pass_barriers() {
    let port = free_port();
    let (o, took) = timed(&[
        "launch",
        "--nproc-per-node",
        "4",
        "--master-port",
        &port,
        "--",
        "rendezvous-check",
        "--timeout-s",
        "10",
        "--barriers",
        "20",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let r = reports(&out);
    assert_eq!(
        r.keys().copied().collect::<Vec<_>>(),
        vec![0, 1, 2, 3],
        "{out}"
    );
    let id = r[&0]["payload"].as_str().unwrap();
    assert_eq!(id.len(), 256, "128 bytes in hex");
    for (rank, v) in &r {
        assert_eq!(v["payload"], id, "rank {rank}");
        assert_eq!(v["world_size"], 4);
        assert_eq!(v["local_rank"], *rank);
        assert_eq!(v["same_payload"], true);
        assert_eq!(v["barriers"], 20);
    }
    eprintln!(
        "4 ranks: launch {took:?}, join {:.1} ms, barrier {:.0} µs (rank 0)",
        r[&0]["join_ms"].as_f64().unwrap(),
        r[&0]["barrier_us"].as_f64().unwrap()
    );
}

/// Two launchers on one host act as two nodes of two ranks each.
#[test]
fn two_nodes_make_one_world() {
    let port = free_port();
    let node = |r: &str| {
        Command::new(tofu_bin())
            .args(["launch", "--nproc-per-node", "2", "--nnodes", "2"])
            .args(["--node-rank", r, "--master-port", &port])
            .args(["--", "rendezvous-check", "--timeout-s", "10"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (n1, n0) = (node("1"), node("0"));
    let (o0, o1) = (
        n0.wait_with_output().unwrap(),
        n1.wait_with_output().unwrap(),
    );
    for o in [&o0, &o1] {
        assert!(o.status.success(), "{}", text(o).1);
    }
    let (r0, r1) = (reports(&text(&o0).0), reports(&text(&o1).0));
    assert_eq!(r0.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(r1.keys().copied().collect::<Vec<_>>(), vec![2, 3]);
    assert_eq!(r1[&2]["local_rank"], 0);
    assert_eq!(r1[&3]["local_rank"], 1);
    assert_eq!(r0[&0]["payload"], r1[&3]["payload"]);
    assert_eq!(r1[&2]["world_size"], 4);
}

/// Rank 2 aborts (SIGABRT) after the first barrier: ranks 0, 1, 3 fail at
/// barrier #2 naming it, long before the 10 s timeout, and the launcher
/// names rank 2 and its signal.
#[test]
fn a_killed_rank_fails_the_others_naming_it() {
    let port = free_port();
    let (o, took) = timed(&[
        "launch",
        "--nproc-per-node",
        "4",
        "--master-port",
        &port,
        "--",
        "rendezvous-check",
        "--timeout-s",
        "10",
        "--kill-rank",
        "2",
    ]);
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(reports(&out).is_empty(), "{out}");
    for r in [0, 1, 3] {
        let t = rank_text(&err, r);
        assert!(
            t.contains(&format!(
                // In barrier #2, or just before it when the host saw the
                // drop before any rank entered it.
                "rank {r}: rank 2 lost its connection to the rendezvous during"
            )),
            "rank {r}: {t}\n{err}"
        );
    }
    let f = flat(&err);
    assert!(
        f.contains("rank 2 failed first (was killed by signal 6 (SIGABRT))"),
        "{err}"
    );
    for r in [0, 1, 3] {
        assert!(
            f.contains(&format!("rank {r}: exited with status 1")),
            "{err}"
        );
    }
    assert!(took < Duration::from_secs(5), "took {took:?}");
    eprintln!("killed rank: the launcher failed after {took:?}");
}

/// World size 3, only ranks 0 and 1 start (by hand, as another launcher
/// would): both fail naming rank 2 once the 1 s timeout passes.
#[test]
fn a_missing_rank_is_named_after_the_timeout() {
    let port = free_port();
    let t = Instant::now();
    let ranks: Vec<_> = (0..2)
        .map(|r| {
            Command::new(tofu_bin())
                .args(["rendezvous-check", "--timeout-s", "1"])
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", "3")
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", &port)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (r, c) in ranks.into_iter().enumerate() {
        let o = c.wait_with_output().unwrap();
        assert!(!o.status.success());
        let err = flat(&text(&o).1);
        assert!(
            err.contains(&format!(
                "rank {r}: rank(s) 2 did not reach join within 1 s"
            )),
            "{err}"
        );
    }
    let took = t.elapsed();
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(took >= Duration::from_millis(900), "took {took:?}");
}

/// Rank 1 aborts, rank 2 hangs outside the rendezvous: the launcher kills
/// rank 2 after the 0.5 s grace period and says so.
#[test]
fn a_hanging_rank_is_killed_after_the_grace_period() {
    let port = free_port();
    let (o, took) = timed(&[
        "launch",
        "--nproc-per-node",
        "3",
        "--master-port",
        &port,
        "--grace-s",
        "0.5",
        "--",
        "rendezvous-check",
        "--kill-rank",
        "1",
        "--hang-rank",
        "2",
    ]);
    let err = flat(&text(&o).1);
    assert!(!o.status.success());
    assert!(
        err.contains("rank 1 failed first (was killed by signal 6"),
        "{err}"
    );
    assert!(
        err.contains("rank 2: killed by tofu launch after the 0.5 s grace period"),
        "{err}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// A subcommand that fails on every rank: the launcher reports a rank and
/// its exit status (clap's usage error: 2).
#[test]
fn a_failing_subcommand_is_reported_with_its_status() {
    let port = free_port();
    let o = tofu(&[
        "launch",
        "--nproc-per-node",
        "2",
        "--master-port",
        &port,
        "--",
        "no-such-command",
    ]);
    let err = flat(&text(&o).1);
    assert!(!o.status.success());
    assert!(err.contains("failed first (exited with status 2)"), "{err}");
    assert!(
        err.contains("[rank 1]") && err.contains("[rank 0]"),
        "{err}"
    );
}

#[test]
fn bad_layouts_and_variables_are_named() {
    let o = tofu(&[
        "launch",
        "--nproc-per-node",
        "2",
        "--nnodes",
        "2",
        "--node-rank",
        "2",
        "--",
        "rendezvous-check",
    ]);
    assert!(!o.status.success());
    assert!(flat(&text(&o).1).contains("--node-rank 2 is not below --nnodes 2"));
    let o = tofu(&["launch", "--nproc-per-node", "2"]);
    assert!(!o.status.success(), "no subcommand accepted");
    let o = tofu(&[
        "launch",
        "--nproc-per-node",
        "1",
        "--nnodes",
        "2",
        "--max-restarts",
        "1",
        "--",
        "rendezvous-check",
    ]);
    assert!(!o.status.success());
    let err = flat(&text(&o).1);
    assert!(err.contains("restarts work on one node only"), "{err}");

    let run = |vars: &[(&str, &str)]| {
        let mut c = Command::new(tofu_bin());
        c.arg("rendezvous-check");
        for v in [
            "RANK",
            "LOCAL_RANK",
            "WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
        ] {
            c.env_remove(v);
        }
        for (k, v) in vars {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        assert!(!o.status.success());
        flat(&text(&o).1)
    };
    let base = [
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "127.0.0.1"),
    ];
    assert!(run(&base).contains("MASTER_PORT is not set"));
    let mut bad = base.to_vec();
    bad.push(("MASTER_PORT", "http"));
    assert!(run(&bad).contains("MASTER_PORT=\"http\" is invalid"));
    bad[0] = ("RANK", "2");
    bad[3] = ("MASTER_PORT", "29500");
    assert!(run(&bad).contains("RANK=\"2\" is invalid: must be below WORLD_SIZE=2"));
    assert!(run(&[]).contains("RANK and WORLD_SIZE are not set"));
}

/// `tofu launch -- run PLAN --backend cpu`: each process runs its own rank
/// of the plan over TCP, and sends exactly the bytes the plan predicts for
/// it (the same as the in-process run's per-rank counts).
#[test]
fn launched_run_processes_each_run_one_rank_and_send_the_predicted_bytes() {
    let dir = tofu_tests::temp_dir("launch-run");
    let plan = dir.join("p4.json");
    let p = plan.to_str().unwrap();
    let o = tofu(&[
        "plan",
        "--model",
        "mlp-3-64",
        "--batch",
        "16",
        "--workers",
        "4",
        "-o",
        p,
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let port = free_port();
    let args = [
        "launch",
        "--nproc-per-node",
        "4",
        "--master-port",
        &port,
        "--",
        "run",
        p,
    ];
    let o = tofu(&[&args[..], &["--steps", "2", "--json"]].concat());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let one = tofu(&["run", p, "--steps", "2", "--json"]);
    let one: serde_json::Value = serde_json::from_str(&text(&one).0).unwrap();
    let mut ranks = Vec::new();
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line.split_once("] ").unwrap().1).unwrap();
        let r = v["rank"].as_u64().unwrap() as usize;
        assert_eq!(v["world_size"], 4);
        assert_eq!(v["bytes_sent"], v["predicted_bytes"], "rank {r}");
        assert_eq!(v["bytes_sent"], one["bytes_sent_per_rank"][r], "rank {r}");
        ranks.push(r);
    }
    ranks.sort();
    assert_eq!(ranks, [0, 1, 2, 3], "one line per rank: {out}");
}
