//! `tofu train` end to end (issue 27, item 2): the zoo MLP sized to
//! scikit-learn's digits (64 features, 10 classes), planned for K workers
//! and trained with each rank fed only its own tile of every batch.
//!
//! Oracles: the unpartitioned run (K = 1) for the K = 2 and K = 4 losses,
//! step by step; held-out accuracy on 20% of the images (a constant
//! predictor scores about 10%).
//!
//! Needs `digits.csv` from `scripts/fetch-digits.sh`; without it the test
//! fails under CI and prints SKIPPED locally.

use std::process::Command;

use tofu_tests::{data_cache, free_port, have_cached, have_digits, tofu_bin};

/// The JSON lines of `tofu train ARGS --json`.
fn train(args: &[&str]) -> Vec<serde_json::Value> {
    let out = Command::new(tofu_bin())
        .arg("train")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
        .collect()
}

fn losses(lines: &[serde_json::Value]) -> Vec<f64> {
    lines
        .iter()
        .filter(|l| l.get("step").is_some())
        .map(|l| l["loss"].as_f64().unwrap())
        .collect()
}

#[test]
fn mlp_on_digits_reaches_95_percent_and_k_ranks_follow_the_unpartitioned_run() {
    if !have_digits() {
        return;
    }
    let mut first: Option<Vec<f64>> = None;
    for k in ["1", "2", "4"] {
        let lines = train(&[
            "--model",
            "mlp-3-256",
            "--workers",
            k,
            "--data",
            "digits",
            "--epochs",
            "30",
        ]);
        let last = lines.last().unwrap();
        assert_eq!(last["workers"].as_u64().unwrap().to_string(), k);
        let acc = last["test_accuracy"].as_f64().unwrap();
        assert!(acc >= 0.95, "k = {k}: held-out accuracy {acc}");
        let l = losses(&lines);
        assert_eq!(
            l.len() as u64,
            last["steps"].as_u64().unwrap(),
            "a line per step"
        );
        assert!(
            l[l.len() - 1] < l[0] / 5.0,
            "k = {k}: the loss falls: {l:?}"
        );
        match &first {
            None => first = Some(l),
            Some(one) => {
                for (s, (a, b)) in one.iter().zip(&l).take(50).enumerate() {
                    let rel = (a - b).abs() / a.abs().max(1e-12);
                    assert!(rel <= 1e-4, "k = {k}, step {s}: loss {b} vs {a} at k = 1");
                }
            }
        }
    }
}

#[test]
fn log_every_thins_the_lines_evaluations_are_logged_and_plotted() {
    if !have_digits() {
        return;
    }
    let dir = tofu_tests::temp_dir("train-log");
    let svg = dir.join("loss.svg");
    let lines = train(&[
        "--model",
        "mlp-2-32",
        "--data",
        "digits",
        "--steps",
        "12",
        "--log-every",
        "4",
        "--eval-every",
        "6",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let steps: Vec<u64> = lines
        .iter()
        .filter_map(|l| l.get("step").map(|s| s.as_u64().unwrap()))
        .collect();
    assert_eq!(
        steps,
        [0, 4, 5, 8, 11],
        "every 4th, the evaluations (5, 11), the last"
    );
    let evals: Vec<f64> = lines
        .iter()
        .filter(|l| l.get("step").is_some())
        .filter_map(|l| l.get("test_loss")?.as_f64())
        .collect();
    assert_eq!(evals.len(), 2);
    let last = lines.last().unwrap();
    assert_eq!(last["done"], true);
    assert_eq!(
        last["test_loss"].as_f64().unwrap(),
        evals[1],
        "the final evaluation is step 11's"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<svg") && text.contains("train (batch)") && text.contains("held-out")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn models_and_data_that_do_not_fit_are_refused_with_the_fix() {
    let run = |args: &[&str]| {
        let out = Command::new(tofu_bin())
            .arg("train")
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = run(&["--model", "mlp-2-32", "--data", "nope"]);
    assert!(e.contains("--data nope") && e.contains("digits"), "{e}");
    if have_digits() {
        let e = run(&["--model", "gpt-2-64", "--data", "digits"]);
        assert!(e.contains("mlp-<layers>-<hidden>"), "{e}");
        let e = run(&["--model", "mlp-2-32", "--data", "digits", "--batch", "5000"]);
        assert!(e.contains("do not make one batch of 5000"), "{e}");
    }
}

/// Losses by step of a `--json` run.
fn losses_by_step(lines: &[serde_json::Value]) -> std::collections::BTreeMap<u64, f64> {
    lines
        .iter()
        .filter_map(|l| Some((l.get("step")?.as_u64()?, l["loss"].as_f64()?)))
        .collect()
}

const CK_MODEL: [&str; 8] = [
    "--model",
    "mlp-3-64",
    "--workers",
    "4",
    "--data",
    "digits",
    "--optimizer",
    "momentum",
];

#[test]
fn a_run_killed_after_a_checkpoint_resumes_with_bit_identical_losses() {
    if !have_digits() {
        return;
    }
    let dir = tofu_tests::temp_dir("train-kill");
    let ck = dir.join("ck");
    let ck_s = ck.to_str().unwrap();
    let mut child = Command::new(tofu_bin())
        .arg("train")
        .args(CK_MODEL)
        .args([
            "--steps",
            "100000000",
            "--checkpoint-dir",
            ck_s,
            "--checkpoint-every",
            "25",
            "--json",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !ck.join("step-00000050").is_dir() {
        assert!(t0.elapsed().as_secs() < 120, "no checkpoint after 120 s");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let latest = tofu_tests::latest_checkpoint(&ck).expect("a checkpoint");
    let total = (latest + 40).to_string();
    let resumed = train(
        &[
            &CK_MODEL[..],
            &["--steps", &total, "--checkpoint-dir", ck_s, "--resume"],
        ]
        .concat(),
    );
    let reference = train(&[&CK_MODEL[..], &["--steps", &total]].concat());
    let (r, full) = (losses_by_step(&resumed), losses_by_step(&reference));
    assert_eq!(
        r.keys().copied().collect::<Vec<_>>(),
        (latest..latest + 40).collect::<Vec<_>>()
    );
    for (s, l) in &r {
        assert_eq!(
            l.to_bits(),
            full[s].to_bits(),
            "step {s}: resumed {l} vs uninterrupted {}",
            full[s]
        );
    }
    assert_eq!(
        resumed.last().unwrap()["test_accuracy"],
        reference.last().unwrap()["test_accuracy"]
    );

    // A damaged checkpoint is refused, naming the shard.
    let last = ck.join(format!("step-{latest:08}"));
    let shard = last.join("rank-1.safetensors");
    let bytes = std::fs::read(&shard).unwrap();
    std::fs::write(&shard, &bytes[..bytes.len() / 2]).unwrap();
    let refused = |what: &str| {
        let out = Command::new(tofu_bin())
            .arg("train")
            .args(CK_MODEL)
            .args(["--steps", &total, "--checkpoint-dir", ck_s, "--resume"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{what}: resumed anyway");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = refused("truncated");
    assert!(
        e.contains("rank-1.safetensors") && e.contains("truncated"),
        "{e}"
    );
    std::fs::remove_file(&shard).unwrap();
    let e = refused("missing");
    assert!(e.contains("rank-1.safetensors"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn saved_weights_are_the_graph_tensors_and_start_a_run_where_it_would_start() {
    if !have_digits() {
        return;
    }
    let dir = tofu_tests::temp_dir("train-weights");
    let init = dir.join("init.safetensors");
    let model = ["--model", "mlp-2-32", "--workers", "2", "--data", "digits"];
    let out = Command::new(tofu_bin())
        .arg("train")
        .args(model)
        .args(["--steps", "0", "--save-weights", init.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&init).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names: Vec<(String, Vec<usize>)> = st
        .tensors()
        .into_iter()
        .map(|(n, v)| (n, v.shape().to_vec()))
        .collect();
    names.sort();
    let want = [
        ("fc0.b", vec![32]),
        ("fc0.w", vec![64, 32]),
        ("fc1.b", vec![10]),
        ("fc1.w", vec![32, 10]),
    ];
    assert_eq!(names, want.map(|(n, s)| (n.to_string(), s)).to_vec());
    // Starting from the saved initial weights is the run from the fill.
    let given = train(
        &[
            &model[..],
            &["--steps", "20", "--weights", init.to_str().unwrap()],
        ]
        .concat(),
    );
    let fill = train(&[&model[..], &["--steps", "20"]].concat());
    assert_eq!(losses_by_step(&given), losses_by_step(&fill));
    // The trained weights differ from the initial ones and load again.
    let trained = dir.join("trained.safetensors");
    train(
        &[
            &model[..],
            &["--steps", "20", "--save-weights", trained.to_str().unwrap()],
        ]
        .concat(),
    );
    let tb = std::fs::read(&trained).unwrap();
    let t = safetensors::SafeTensors::deserialize(&tb).unwrap();
    assert_ne!(
        t.tensor("fc0.w").unwrap().data(),
        st.tensor("fc0.w").unwrap().data()
    );
    let again = train(
        &[
            &model[..],
            &["--steps", "1", "--weights", trained.to_str().unwrap()],
        ]
        .concat(),
    );
    let first = losses_by_step(&again)[&0];
    assert!(
        first < losses_by_step(&fill)[&0],
        "trained weights start lower: {first}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `tofu launch --nproc-per-node 4 -- train ARGS --json`: (exit status,
/// JSON lines by rank, stderr).
fn launched(args: &[&str]) -> (bool, Vec<Vec<serde_json::Value>>, String) {
    let out = Command::new(tofu_bin())
        .args([
            "launch",
            "--nproc-per-node",
            "4",
            "--master-port",
            &free_port(),
        ])
        .args(["--", "train"])
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let mut by_rank = vec![Vec::new(); 4];
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let (_, json) = line.split_once("] ").expect("a [rank r] prefix");
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(v["world_size"], 4, "{line}");
        by_rank[v["rank"].as_u64().unwrap() as usize].push(v);
    }
    (
        out.status.success(),
        by_rank,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn one_rank_per_process_over_tcp_follows_the_one_process_run() {
    if !have_digits() {
        return;
    }
    let args = [
        "--model",
        "mlp-3-64",
        "--workers",
        "4",
        "--data",
        "digits",
        "--steps",
        "40",
    ];
    let (ok, by_rank, err) = launched(&args);
    assert!(ok, "{err}");
    let one = train(&args);
    let want = losses_by_step(&one);
    let mut seen = 0;
    for lines in &by_rank {
        assert_eq!(lines.last().unwrap()["done"], true);
        for (s, l) in lines
            .iter()
            .filter_map(|l| Some((l.get("step")?.as_u64()?, l["loss"].as_f64()?)))
        {
            let rel = (l - want[&s]).abs() / want[&s].abs();
            assert!(rel <= 1e-5, "step {s}: {l} vs {} in one process", want[&s]);
            seen += 1;
        }
    }
    assert!(
        seen >= 40,
        "every step's loss from a rank that keeps it ({seen})"
    );
    let acc = |v: &serde_json::Value| v["test_accuracy"].as_f64().unwrap();
    assert_eq!(acc(by_rank[0].last().unwrap()), acc(one.last().unwrap()));
}

#[test]
fn a_killed_rank_process_fails_the_launch_naming_it() {
    if !have_digits() {
        return;
    }
    let child = Command::new(tofu_bin())
        .args([
            "launch",
            "--nproc-per-node",
            "4",
            "--grace-s",
            "2",
            "--",
            "train",
        ])
        .args(["--model", "mlp-3-64", "--workers", "4", "--data", "digits"])
        .args(["--steps", "100000000", "--log-every", "1000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let victim = tofu_tests::rank_pid(child.id(), 2);
    std::thread::sleep(std::time::Duration::from_millis(1500)); // training by now
    tofu_tests::kill_rank_and_wait(child, &victim, 2);
}

#[test]
fn the_cnn_sized_to_digits_trains_and_two_ranks_follow_one() {
    if !have_digits() {
        return;
    }
    let run = |k: &str| {
        train(&[
            "--model",
            "cnn-4-32",
            "--workers",
            k,
            "--data",
            "digits",
            "--epochs",
            "15",
        ])
    };
    let (one, two) = (run("1"), run("2"));
    let acc = one.last().unwrap()["test_accuracy"].as_f64().unwrap();
    assert!(acc >= 0.9, "held-out accuracy {acc}");
    let (a, b) = (losses_by_step(&one), losses_by_step(&two));
    assert_eq!(a.len(), 330);
    // The two runs sum in different orders (f32), and training amplifies the
    // difference step by step: within 1e-4 for the first 100 steps, 1e-3
    // after (measured: 1.5e-4 at step 283 with the class-id loss).
    for (s, l) in &a {
        let tol = if *s < 100 { 1e-4 } else { 1e-3 };
        assert!(
            (l - b[s]).abs() <= tol * l.abs(),
            "step {s}: {} vs {l}",
            b[s]
        );
    }
}

/// Fashion-MNIST (issue 27: a small CNN reaches ≥ 85% held-out accuracy).
/// Heavy (60,000 images per epoch): run with
/// `bash scripts/fetch-fashion-mnist.sh && cargo test --release -p tofu-tests --test train_cli -- --ignored`.
#[test]
#[ignore]
fn a_cnn_on_fashion_mnist_reaches_85_percent() {
    if !data_cache().join("fashion-mnist/.complete").is_file() {
        eprintln!("SKIPPED: run `bash scripts/fetch-fashion-mnist.sh` first");
        return;
    }
    let lines = train(&[
        "--model",
        "cnn-8-64",
        "--workers",
        "2",
        "--data",
        "fashion-mnist",
        "--epochs",
        "1",
    ]);
    let last = lines.last().unwrap();
    let acc = last["test_accuracy"].as_f64().unwrap();
    assert_eq!(last["test_samples"], 10000);
    assert!(acc >= 0.85, "held-out accuracy {acc}");
}

/// Whether the King James Bible is cached (`scripts/fetch-kjv.sh`);
/// otherwise SKIPPED locally, a failure under CI.
fn have_kjv() -> bool {
    have_cached("kjv/.complete", "scripts/fetch-kjv.sh")
}

/// Issue 27: a small GPT on a byte-level corpus; the held-out loss falls
/// below the corpus's unigram entropy (what a model of byte frequencies
/// alone scores), and 2 ranks follow 1.
#[test]
fn a_gpt_on_the_kjv_beats_the_unigram_entropy_and_two_ranks_follow_one() {
    if !have_kjv() {
        return;
    }
    let args = |k: &'static str, steps: &'static str| {
        [
            "--model",
            "gpt-1-64",
            "--workers",
            k,
            "--data",
            "kjv",
            "--seq",
            "32",
            "--batch",
            "16",
            "--steps",
            steps,
            "--eval-samples",
            "512",
        ]
    };
    let two = train(&args("2", "200"));
    let last = two.last().unwrap();
    let (loss, h) = (
        last["test_loss"].as_f64().unwrap(),
        last["unigram_entropy"].as_f64().unwrap(),
    );
    assert!(h > 2.5 && h < 3.5, "English bytes: about 3 nats, got {h}");
    assert!(loss < h, "held-out loss {loss} vs unigram entropy {h}");
    let one = losses_by_step(&train(&args("1", "20")));
    let two = losses_by_step(&two);
    for (s, l) in &one {
        assert!(
            (l - two[s]).abs() <= 1e-4 * l.abs(),
            "step {s}: {} vs {l}",
            two[s]
        );
    }
}

/// Your own data: the digits written as a safetensors file (`features`
/// f32 [1797, 64], `digit` i64 [1797]) and trained through `--input
/// x=features --input labels=digit` give the same losses, step by step, as
/// the built-in loader (the same samples, split and batches); a tensor that
/// is not there is named with the file's names.
#[test]
fn a_safetensors_data_set_trains_like_the_built_in_one() {
    if !have_digits() {
        return;
    }
    let text = std::fs::read_to_string(data_cache().join("sklearn-digits/digits.csv")).unwrap();
    let (mut x, mut y) = (Vec::<u8>::new(), Vec::<u8>::new());
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Vec<f32> = line.split(',').map(|f| f.trim().parse().unwrap()).collect();
        for p in &v[..64] {
            x.extend((p / 16.0).to_le_bytes());
        }
        y.extend((v[64] as i64).to_le_bytes());
        n += 1;
    }
    let views = vec![
        (
            "features",
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![n, 64], &x).unwrap(),
        ),
        (
            "digit",
            safetensors::tensor::TensorView::new(safetensors::Dtype::I64, vec![n], &y).unwrap(),
        ),
    ];
    let dir = tofu_tests::temp_dir("train-tensors");
    let file = dir.join("digits.safetensors");
    std::fs::write(&file, safetensors::serialize(views, None).unwrap()).unwrap();
    let f = file.to_str().unwrap();
    let model = ["--model", "mlp-2-32", "--workers", "2", "--steps", "30"];
    let mine = train(
        &[
            &model[..],
            &[
                "--data",
                f,
                "--input",
                "x=features",
                "--input",
                "labels=digit",
            ],
        ]
        .concat(),
    );
    let built_in = train(&[&model[..], &["--data", "digits"]].concat());
    assert_eq!(losses_by_step(&mine), losses_by_step(&built_in));
    assert_eq!(
        mine.last().unwrap()["test_accuracy"],
        built_in.last().unwrap()["test_accuracy"]
    );
    let out = Command::new(tofu_bin())
        .arg("train")
        .args(model)
        .args(["--data", f, "--input", "x=pixels"])
        .output()
        .unwrap();
    let err: Vec<String> = String::from_utf8_lossy(&out.stderr)
        .split_whitespace()
        .filter(|w| *w != "|")
        .map(String::from)
        .collect();
    let err = err.join(" ");
    assert!(!out.status.success());
    assert!(
        err.contains("no tensor `pixels` for graph input `x`") && err.contains("\"digit\""),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Under a launcher each process writes its own shard of a checkpoint and
/// rank 0 commits it; a launched `--resume` and a one-process `--resume`
/// from it both give the uninterrupted one-process run's losses bit for bit.
#[test]
fn launched_checkpoints_resume_in_processes_and_in_one() {
    if !have_digits() {
        return;
    }
    let dir = tofu_tests::temp_dir("train-launch-ck");
    let ck = dir.join("ck");
    let ck = ck.to_str().unwrap();
    let model = CK_MODEL;
    let (ok, _, err) = launched(
        &[
            &model[..],
            &[
                "--steps",
                "20",
                "--checkpoint-dir",
                ck,
                "--checkpoint-every",
                "10",
            ],
        ]
        .concat(),
    );
    assert!(ok, "{err}");
    for r in 0..4 {
        let shard = std::path::Path::new(ck).join(format!("step-00000020/rank-{r}.safetensors"));
        assert!(shard.is_file(), "{}", shard.display());
    }
    let (ok, by_rank, err) = launched(
        &[
            &model[..],
            &["--steps", "30", "--checkpoint-dir", ck, "--resume"],
        ]
        .concat(),
    );
    assert!(ok, "{err}");
    let one = losses_by_step(&train(&[&model[..], &["--steps", "30"]].concat()));
    let one_resumed = losses_by_step(&train(
        &[
            &model[..],
            &["--steps", "30", "--checkpoint-dir", ck, "--resume"],
        ]
        .concat(),
    ));
    let mut launched_losses = std::collections::BTreeMap::new();
    for l in by_rank.iter().flatten() {
        if let (Some(s), Some(v)) = (l.get("step").and_then(|s| s.as_u64()), l["loss"].as_f64()) {
            launched_losses.insert(s, v);
        }
    }
    assert_eq!(
        launched_losses.keys().copied().collect::<Vec<_>>(),
        (20..30).collect::<Vec<_>>()
    );
    for (s, v) in launched_losses.iter().chain(&one_resumed) {
        assert_eq!(v.to_bits(), one[s].to_bits(), "step {s}: {v} vs {}", one[s]);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
