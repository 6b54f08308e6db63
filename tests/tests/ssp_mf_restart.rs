//! Kill and restart during a multi-process MF run on loopback (issue 12,
//! consistent checkpoints): two server processes of one shard each that
//! checkpoint every 2 clocks, two worker processes of two threads made
//! slow (40 ms a clock) so the kill lands mid-run. Once both shards have a
//! checkpoint at clock ≥ 5 server 0 is killed; the workers must fail and
//! server 1 must stop with an error (its clients' links closed without
//! `Bye`), none of them hang. Then both servers restart from the latest
//! common checkpoint t and the workers resume at clock t + 1 (their
//! visiting order replayed from the seed).
//!
//! Oracle of "nothing lost or applied twice": every worker adds its
//! per-clock counts of training and held-out ratings to the servers'
//! metrics table, so after the restart each epoch must count exactly the
//! 90 000 / 10 000 ratings of the split (counted here from the file) — a
//! clock whose updates were lost counts short, one applied twice counts
//! over. And the model must end where an uninterrupted run ends: the held-out
//! RMSE of every epoch within the s = 1 tolerance of `ssp_mf_processes.rs`
//! (0.03; the last epoch 0.006) of the in-process run.

mod ssp_common;

use std::path::Path;
use std::time::{Duration, Instant};

use ssp_common::{assert_close, floats, free_ports, split_counts, Host, MfRun, Procs};
use tofu_tests::movielens_file;

/// Highest clock with a checkpoint file of both shards 0 and 1.
fn common_checkpoint(dir: &Path) -> Option<u32> {
    (0..1000u32)
        .rev()
        .find(|t| (0..2).all(|s| dir.join(format!("shard-{s}-clock-{t}.ckpt")).is_file()))
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn killed_mf_server_restarts_from_its_checkpoint_losing_and_repeating_nothing() {
    let Some(file) = movielens_file() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("tofu-ssp-mf-ckpt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = MfRun::small(file, 1);
    let clocks = run.epochs * run.clocks_per_epoch;
    let ckpt = strings(&["--checkpoint-dir", &dir.display().to_string()]);
    let mut server_flags = ckpt.clone();
    server_flags.extend(strings(&["--checkpoint-every", "2"]));
    let hosts = [Host::loopback(), Host::loopback()];
    let ports = || free_ports(2);

    // First run: killed once a checkpoint at clock >= 5 exists.
    let mut procs = Procs::default();
    let mut slow = ckpt.clone();
    slow.extend(strings(&["--delay-ms", "40"]));
    let (s, w) = run.start(&mut procs, &hosts, &hosts, &ports(), &server_flags, &slow);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !matches!(common_checkpoint(&dir), Some(t) if t >= 5) {
        assert!(
            Instant::now() < deadline,
            "no checkpoint at clock >= 5 within 60 s"
        );
        assert!(procs.running(s[0]), "the server ended before it was killed");
        std::thread::sleep(Duration::from_millis(10));
    }
    procs.kill(s[0]);
    for (c, &i) in w.iter().enumerate() {
        let (ok, _) = procs.wait(i, 30);
        assert!(!ok, "worker {c} cannot finish without its server");
    }
    let (ok, _) = procs.wait(s[1], 30);
    assert!(!ok, "server 1 cannot finish once its clients are gone");
    let t = common_checkpoint(&dir).unwrap();
    assert!(
        t + 1 < clocks,
        "the kill came too late to test anything (checkpoint at {t})"
    );

    // Restart: the server from its checkpoint, the workers after it.
    server_flags.push("--restore".into());
    let mut resume = ckpt.clone();
    resume.push("--resume".into());
    let (s, w) = run.start(&mut procs, &hosts, &hosts, &ports(), &server_flags, &resume);
    let workers: Vec<_> = w.iter().map(|&i| procs.json(i, 120)).collect();
    for &i in &s {
        let server = procs.json(i, 30);
        assert_eq!(server["restored_from"].as_u64(), Some(u64::from(t)));
    }
    drop(procs);
    let (train, held) = split_counts(&run.data);
    for v in &workers {
        assert_eq!(v["resumed_at"].as_u64(), Some(u64::from(t) + 1));
        assert_eq!(
            MfRun::counts(v),
            vec![(train, held); run.epochs as usize],
            "ratings counted per epoch after the restart: something lost or applied twice"
        );
    }
    let local = run.in_process();
    eprintln!(
        "held-out per epoch: restarted {} / in process {}",
        workers[0]["heldout_rmse_per_epoch"], local["heldout_rmse_per_epoch"]
    );
    assert_close(
        "held-out RMSE",
        &floats(&workers[0]["heldout_rmse_per_epoch"]),
        &floats(&local["heldout_rmse_per_epoch"]),
        0.03,
    );
    let last = |v: &serde_json::Value| v["heldout_rmse"].as_f64().unwrap();
    assert!((last(&workers[0]) - last(&local)).abs() <= 0.006);
    let _ = std::fs::remove_dir_all(&dir);
}
