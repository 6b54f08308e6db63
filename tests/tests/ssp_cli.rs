//! End-to-end tests of `tofu ssp` (issue 12): a multi-process run on
//! loopback whose server is killed and restarted from its checkpoint, and
//! the `tofu ssp mf` JSON summary.
//!
//! Oracle of the restart test: the tagged counter — every worker adds 1 to
//! its (worker, clock) column of every row — so after the run every column
//! of every row must be exactly 1: nothing lost, nothing applied twice.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tofu_tests::{data_cache, movielens_file, tofu_bin};

fn spawn(args: &[String], stdout: bool) -> Child {
    Command::new(tofu_bin())
        .args(args)
        .stdout(if stdout {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stderr(Stdio::inherit())
        .spawn()
        .expect("cannot start tofu")
}

/// Waits for `child` at most `secs`; kills it and fails if it hangs.
fn wait_within(child: &mut Child, secs: u64, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not exit within {secs} s (hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Highest clock with a checkpoint file of both shards 0 and 1.
fn common_checkpoint(dir: &Path) -> Option<u32> {
    (0..1000u32)
        .rev()
        .find(|t| (0..2).all(|s| dir.join(format!("shard-{s}-clock-{t}.ckpt")).is_file()))
}

#[test]
fn killed_server_restarts_from_checkpoint_losing_and_repeating_nothing() {
    let dir: PathBuf = std::env::temp_dir().join(format!("tofu-ssp-ckpt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (clocks, rows, clients, workers) = (24u32, 6u64, 2usize, 2usize);
    let shape: Vec<String> = [
        "--clients",
        "2",
        "--workers",
        "2",
        "--num-servers",
        "1",
        "--shards-per-server",
        "2",
        "--clocks",
        "24",
        "--rows",
        "6",
        "--staleness",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(["--checkpoint-dir".to_string(), dir.display().to_string()])
    .collect();
    let cmd = |sub: &str, extra: &[&str]| -> Vec<String> {
        let mut v = vec!["ssp".to_string(), sub.to_string()];
        v.extend(shape.iter().cloned());
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };

    // First run: killed once a checkpoint at clock >= 5 exists.
    let addr = free_addr();
    let mut server = spawn(
        &cmd("server", &["--listen", &addr, "--checkpoint-every", "2"]),
        false,
    );
    let mut ws: Vec<Child> = (0..clients)
        .map(|c| {
            spawn(
                &cmd(
                    "worker",
                    &[
                        "--servers",
                        &addr,
                        "--client",
                        &c.to_string(),
                        "--delay-ms",
                        "60",
                    ],
                ),
                false,
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !matches!(common_checkpoint(&dir), Some(t) if t >= 5) {
        assert!(
            Instant::now() < deadline,
            "no checkpoint at clock >= 5 within 60 s"
        );
        assert!(
            server.try_wait().unwrap().is_none(),
            "the server ended before it was killed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    server.kill().unwrap();
    server.wait().unwrap();
    for (i, w) in ws.iter_mut().enumerate() {
        let status = wait_within(w, 30, &format!("worker {i} after the server was killed"));
        assert!(
            !status.success(),
            "worker {i} cannot finish without its server"
        );
    }
    let t = common_checkpoint(&dir).unwrap();
    assert!(
        t + 1 < clocks,
        "the kill came too late to test anything (checkpoint at {t})"
    );

    // Restart: the server from its checkpoint, the workers after it.
    let addr = free_addr();
    let mut server = spawn(
        &cmd(
            "server",
            &[
                "--listen",
                &addr,
                "--checkpoint-every",
                "2",
                "--restore",
                "--json",
            ],
        ),
        true,
    );
    let mut ws: Vec<Child> = (0..clients)
        .map(|c| {
            spawn(
                &cmd(
                    "worker",
                    &["--servers", &addr, "--client", &c.to_string(), "--resume"],
                ),
                false,
            )
        })
        .collect();
    let ok: Vec<bool> = ws
        .iter_mut()
        .enumerate()
        .map(|(i, w)| wait_within(w, 60, &format!("restarted worker {i}")).success())
        .collect();
    if ok.contains(&false) {
        let _ = server.kill();
        panic!("a restarted worker failed: {ok:?}");
    }
    assert!(wait_within(&mut server, 30, "restarted server").success());
    let out = server.wait_with_output().unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("one JSON object from the server");
    assert!(v["restored_from"].as_u64().unwrap() >= 5);
    let got = v["rows"].as_object().unwrap();
    assert_eq!(got.len() as u64, rows);
    for (r, values) in got {
        let values = values.as_array().unwrap();
        assert_eq!(values.len(), clients * workers * clocks as usize);
        for (col, x) in values.iter().enumerate() {
            assert_eq!(
                x.as_f64().unwrap(),
                1.0,
                "row {r}: worker {} clock {} lost or applied twice",
                col / clocks as usize,
                col % clocks as usize
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ssp_mf_json_summary() {
    let Some(_) = movielens_file() else {
        return;
    };
    let out = Command::new(tofu_bin())
        .args([
            "ssp",
            "mf",
            "--workers",
            "2",
            "--staleness",
            "1",
            "--epochs",
            "2",
            "--rank",
            "8",
            "--json",
        ])
        .env("TOFU_DATA_CACHE", data_cache())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["epochs"], 2);
    assert_eq!(v["rmse_per_epoch"].as_array().unwrap().len(), 2);
    let heldout = v["heldout_rmse"].as_f64().unwrap();
    // A constant predictor (the mean) scores about 1.12 on this split.
    assert!(heldout > 0.5 && heldout < 1.1, "held-out RMSE {heldout}");
    assert!(v["seconds"].as_f64().unwrap() > 0.0);
    assert!(v["bytes_sent"].as_u64().unwrap() > 0);
}
