//! `tofu train --backend cuda` on the CPU stand-in of the CUDA libraries
//! (`scripts/cpu-cuda.sh`, `cpu-cuda/`; issue 37, items 1 and 3), in CI
//! without a GPU, with seeded random delays on every stream.
//!
//! Oracle: the CPU backend's run of the same command in the same test. The
//! zoo MLP (mlp-3-256, 2 workers) on scikit-learn's digits for 60 steps
//! gives the CPU run's loss at every step within [`TOL`] relative, over
//! NCCL between two stand-in devices and host-staged with two ranks on one,
//! and the same held-out accuracy; a CPU checkpoint resumes on CUDA (and a
//! CUDA one on the CPU) with the CPU run's remaining losses; under
//! `tofu launch --nproc-per-node 2` (one rank per process, the stand-in's
//! NCCL between the processes) the losses are the same too. Negative
//! control: with one synchronisation left out of the backend
//! (`TOFU_CUDA_FAULT=skip-sync`) the host-staged comparison fails. Too
//! little device memory is an error naming the rank, the tensor and the
//! bytes, not a crash; a rank process killed under `tofu launch` fails the
//! launch within its grace period, naming the rank, never a hang; a rank
//! stopped (SIGSTOP, no connection closed) makes the other's collective time
//! out under the NCCL watchdog (`TOFU_NCCL_TIMEOUT_S`), which aborts the
//! communicator and fails the launch naming the rank; a CUDA
//! run killed after a checkpoint resumes on CUDA with the uninterrupted
//! run's losses bit for bit.
//!
//! A root-package test so that `CARGO_BIN_EXE_tofu` is this build's binary
//! (feature `cuda`). Needs g++ (the stand-in compiles kernels with it) and
//! `digits.csv` (`scripts/fetch-digits.sh`): without them it prints
//! `SKIPPED` and passes, and fails when `CI` is set.
//!
//! Behind `--ignored` (the stand-in compiles every kernel with g++ once, then
//! runs each GPU thread as a fiber: minutes for the GPT, about 3.5 minutes
//! for the CNN with its convolutions and max pooling through the stand-in's
//! cuDNN): cnn-8-64 on Fashion-MNIST and gpt-2-64 on KJV, 100 steps each,
//! the losses of the CPU run with one thread per rank (the summation order
//! of the stand-in's; see [`cpu_threads`]) at every step within [`TOL`]:
//! `cargo test --features cuda --test cpu_cuda_train -- --ignored`.
#![cfg(feature = "cuda")]

use std::path::Path;
use std::process::{Command, Output};

use tofu_tests::{losses, max_rel};

/// Largest relative difference of a step's loss, CUDA against CPU: issue
/// 37's bound. Measured under the stand-in: 1.9e-7 (one process over NCCL
/// or host-staged, and two processes; 2.0e-7 for resumed checkpoints): the
/// stand-in's GEMM is the `gemm` crate, as the CPU backend's, and its
/// kernels the generated CUDA C compiled for the CPU, which computes in f32
/// where the CPU backend's compiled evaluator and optimizer kernels compute
/// in f64 and round once. A real GPU (cuBLAS's own summation order, FMA
/// contraction, CUDA's math functions) differs more; the bound leaves it
/// room, and the negative control shows a missing synchronisation exceeds
/// it.
const TOL: f64 = 1e-5;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Whether g++ runs and the digits are cached; panics without them when
/// `CI` is set.
fn ready() -> bool {
    let gxx = Command::new("g++")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let digits = datasets::cache_dir()
        .join("sklearn-digits/digits.csv")
        .is_file();
    if !(gxx && digits) {
        assert!(
            std::env::var_os("CI").is_none(),
            "cpu_cuda_train: needs g++ ({gxx}) and digits.csv ({digits}, scripts/fetch-digits.sh) under CI"
        );
        println!("SKIPPED: cpu_cuda_train needs g++ and scripts/fetch-digits.sh");
    }
    gxx && digits
}

const MODEL: [&str; 6] = ["--model", "mlp-3-256", "--workers", "2", "--data", "digits"];

/// `tofu train MODEL --json ARGS` on the CPU backend.
fn cpu(args: &[&str]) -> Output {
    cpu_of(&MODEL, args)
}

/// `tofu train MODEL_ARGS --json ARGS` on the CPU backend.
fn cpu_of(model: &[&str], args: &[&str]) -> Output {
    cpu_threads(model, args, None)
}

/// [`cpu_of`] with `threads` CPU threads per rank (`RAYON_NUM_THREADS`;
/// `None`: every core). The CPU convolution's weight gradient sums its
/// images in per-thread chunks, so its rounding depends on the thread
/// count; the stand-in's cuDNN sums them in order, as one thread does.
fn cpu_threads(model: &[&str], args: &[&str], threads: Option<usize>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tofu"));
    if let Some(t) = threads {
        c.env("RAYON_NUM_THREADS", t.to_string());
    }
    c.arg("train")
        .args(model)
        .arg("--json")
        .args(args)
        .env_remove("TOFU_SPECS")
        .output()
        .expect("running tofu train")
}

/// `tofu LAUNCH train MODEL --json --backend cuda ARGS` under the stand-in
/// with delays seeded by `seed`, and `env` (`launch` empty: one process).
fn under_stand_in(launch: &[&str], args: &[&str], seed: u64, env: &[(&str, &str)]) -> Output {
    stand_in_of(&MODEL, launch, args, seed, env)
}

/// [`under_stand_in`] of `tofu train MODEL_ARGS`.
fn stand_in_of(
    model: &[&str],
    launch: &[&str],
    args: &[&str],
    seed: u64,
    env: &[(&str, &str)],
) -> Output {
    Command::new("bash")
        .arg(root().join("scripts/cpu-cuda.sh"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_tofu"))
        .args(launch)
        .arg("train")
        .args(model)
        .args(["--json", "--backend", "cuda"])
        .args(args)
        .env_remove("TOFU_SPECS")
        .env("TOFU_CPU_CUDA_SEED", seed.to_string())
        .env("TOFU_CPU_CUDA_DELAY_US", "300")
        .envs(env.iter().copied())
        .output()
        .expect("running scripts/cpu-cuda.sh")
}

/// [`under_stand_in`] in one process.
fn cuda(args: &[&str], seed: u64, env: &[(&str, &str)]) -> Output {
    under_stand_in(&[], args, seed, env)
}

/// The JSON lines of a run that succeeded, or a panic with its output.
fn lines(o: &Output, what: &str) -> Vec<serde_json::Value> {
    assert!(
        o.status.success(),
        "{what}: failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
        .collect()
}

/// The `&str`s of `v`.
fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn training_on_cuda_gives_the_cpu_losses_at_every_step() {
    if !ready() {
        return;
    }
    let steps = ["--steps", "60"];
    let oracle = lines(&cpu(&steps), "cpu");
    let want = losses(&oracle);
    assert_eq!(want.len(), 60);
    for (what, args, seed) in [
        ("NCCL between two devices", &["--devices", "0,1"][..], 1),
        (
            "two ranks on one device, host-staged",
            &["--ranks-per-device", "2"][..],
            2,
        ),
    ] {
        let run = lines(&cuda(&[&steps[..], args].concat(), seed, &[]), what);
        let got = losses(&run);
        assert_eq!(got.len(), 60, "{what}");
        let rel = max_rel(&got, &want);
        println!("{what}: max relative difference of the 60 losses from the CPU run's: {rel:e}");
        assert!(rel <= TOL, "{what}: {rel:e} > {TOL:e}");
        let (a, b) = (oracle.last().unwrap(), run.last().unwrap());
        assert_eq!(b["workers"], 2);
        let (ta, tb) = (
            a["test_loss"].as_f64().unwrap(),
            b["test_loss"].as_f64().unwrap(),
        );
        assert!(
            (ta - tb).abs() <= 1e-4 * ta.abs(),
            "{what}: held-out loss {tb} vs {ta}"
        );
        assert_eq!(a["test_accuracy"], b["test_accuracy"], "{what}");
    }
}

/// The zoo's `model` on the cached data set `data` (fetched by
/// `scripts/fetch-DATA.sh`, checked by `file`): 100 steps on the CPU and
/// under the stand-in (NCCL between two devices), losses compared at every
/// step. Slow (the stand-in compiles every kernel with g++ the first time;
/// minutes per model): `--ignored`.
fn zoo_model_gives_the_cpu_losses(model: &[&str], data: &str, file: &str) {
    let cached = datasets::cache_dir().join(file);
    assert!(
        cached.is_file(),
        "{} is missing: run scripts/fetch-{data}.sh",
        cached.display()
    );
    let steps = ["--steps", "100"];
    let model = [model, &["--workers", "2", "--data", data]].concat();
    let want = losses(&lines(&cpu_threads(&model, &steps, Some(1)), "cpu"));
    assert_eq!(want.len(), 100);
    let args = [&steps[..], &["--devices", "0,1"]].concat();
    let got = losses(&lines(&stand_in_of(&model, &[], &args, 3, &[]), "cuda"));
    assert_eq!(got.len(), 100);
    let rel = max_rel(&got, &want);
    println!(
        "{}: max relative difference of the 100 losses from the CPU run's: {rel:e} (first {:.6}, last {:.6})",
        model[1], want[0].1, want[99].1
    );
    assert!(rel <= TOL, "{rel:e} > {TOL:e}");
}

/// Measured (2 cores shared with other work): 3 min 25 s for the stand-in
/// run, 115 CPU-seconds (convolutions and max pooling through its cuDNN;
/// 4 min 56 s with the pooling as generated kernels; before cuDNN, 3 steps
/// at batch 16 took over 9 CPU-minutes); the 100 losses within 2.1e-7 of
/// the one-thread CPU run's, the same held-out accuracy (0.7459). Against a CPU run on every core
/// they part from step 45 (2.7e-2 at worst), exactly as that CPU run
/// parts from the one-thread one: the CNN amplifies the rounding of a
/// different summation order.
#[test]
#[ignore = "minutes: 100 steps and the held-out evaluation under the stand-in (3.5 minutes on 2 cores)"]
fn cnn_on_fashion_mnist_under_the_stand_in_gives_the_cpu_losses() {
    zoo_model_gives_the_cpu_losses(
        &["--model", "cnn-8-64"],
        "fashion-mnist",
        "fashion-mnist/train-images-idx3-ubyte",
    );
}

/// Convolutions and max pooling through cuDNN (issue 37, item 4): cnn-2-8
/// (two 3×3 convolutions, padding 1, each followed by a 2×2 max pooling)
/// on 96 seeded 28×28 images for 4 steps on one worker and on two (one
/// process, a rank per device, NCCL): its `conv2d`, `conv2d_grad_x`,
/// `conv2d_grad_w`, `maxpool2d` and `maxpool2d_grad` go through the
/// stand-in's cuDNN (on the stream's thread, seeded delays) and give the
/// CPU backend's losses at the same worker count (its own kernels) within
/// [`TOL`] at every step (measured: 0 on these images at k = 1, 1.0e-7 on
/// others; 0 at k = 2). The stand-in's trace (`TOFU_CPU_CUDA_TRACE_CUDNN`)
/// shows every pooling run forward through cuDNN also run backward through
/// it, at k = 2 too (measured: 14 and 14 at k = 1, 22 and 22 at k = 2,
/// the held-out evaluation's included; before codegen ran the batch-split
/// `maxpool2d_grad` locally — its `let first` made it windowed, generated
/// kernels, `codegen/tests/local_mode.rs` — 6 backward of 22 at k = 2).
/// Negative control: asking cuDNN for a true convolution (the filter flipped,
/// `TOFU_CUDA_FAULT=cudnn-convolution-mode`) instead of the spec's
/// cross-correlation runs and gives other losses.
#[test]
fn a_cnn_through_cudnn_gives_the_cpu_losses() {
    if !ready() {
        return;
    }
    let dir = tofu_tests::temp_dir("cuda-cudnn");
    let data = dir.join("images.safetensors");
    tofu_tests::write_images(&data, 96, 28);
    let data = data.to_string_lossy().into_owned();
    let steps = ["--steps", "4"];
    let trace = [("TOFU_CPU_CUDA_TRACE_CUDNN", "1")];
    // cuDNN pooling calls (forward, backward), per worker count.
    let mut calls = Vec::new();
    for workers in ["1", "2"] {
        let model = ["--model", "cnn-2-8", "--workers", workers, "--batch", "8"];
        let model = [&model[..], &["--data", &data]].concat();
        let want = losses(&lines(&cpu_of(&model, &steps), "cpu"));
        assert_eq!(want.len(), 4);
        let o = stand_in_of(&model, &[], &steps, 4, &trace);
        let got = losses(&lines(&o, "cuda"));
        let rel = max_rel(&got, &want);
        println!("cnn-2-8 at k = {workers} through cuDNN: max relative difference of the 4 losses: {rel:e}");
        assert!(rel <= TOL, "k = {workers}: {rel:e} > {TOL:e}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("through cuDNN ("), "{err}");
        let count = |call: &str| err.matches(&format!("cpu-cuda: cudnn {call}\n")).count();
        calls.push([count("cudnnPoolingForward"), count("cudnnPoolingBackward")]);
        if workers == "1" {
            let fault = [("TOFU_CUDA_FAULT", "cudnn-convolution-mode")];
            let o = stand_in_of(&model, &[], &steps, 4, &fault);
            let rel = max_rel(&losses(&lines(&o, "fault")), &want);
            assert!(rel > TOL, "flipped filters gave the CPU losses ({rel:e})");
        }
    }
    println!("cuDNN pooling (forward, backward) calls at k = 1, 2: {calls:?}");
    for [fwd, bwd] in &calls {
        assert!(
            *fwd >= 4 * 2 && bwd == fwd,
            "pooling calls (forward, backward): {calls:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "minutes: the stand-in compiles the GPT's kernels with g++"]
fn gpt_on_kjv_under_the_stand_in_gives_the_cpu_losses() {
    zoo_model_gives_the_cpu_losses(
        &["--model", "gpt-2-64", "--batch", "16"],
        "kjv",
        "kjv/kjv.txt",
    );
}

#[test]
fn a_missing_synchronisation_fails_the_comparison() {
    if !ready() {
        return;
    }
    let steps = ["--steps", "20"];
    let want = losses(&lines(&cpu(&steps), "cpu"));
    let o = cuda(
        &[&steps[..], &["--ranks-per-device", "2"]].concat(),
        2,
        &[("TOFU_CUDA_FAULT", "skip-sync")],
    );
    assert!(o.status.code().is_some(), "killed by a signal");
    let passed = o.status.success() && {
        let got = losses(&lines(&o, "fault"));
        got.len() == want.len() && max_rel(&got, &want) <= TOL
    };
    assert!(
        !passed,
        "the run without its synchronisation gave the CPU losses:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn checkpoints_move_between_cpu_and_cuda() {
    if !ready() {
        return;
    }
    let dir = tofu_tests::temp_dir("cuda-train-ck");
    let full = losses(&lines(&cpu(&["--steps", "40"]), "cpu, 40 steps"));
    let ck_args = |ck: &Path, steps: &'static str| -> Vec<String> {
        [
            "--steps",
            steps,
            "--checkpoint-every",
            "20",
            "--checkpoint-dir",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([ck.to_str().unwrap().to_string()])
        .collect()
    };
    // CPU → CUDA.
    let ck = dir.join("from-cpu");
    lines(&cpu(&strs(&ck_args(&ck, "20"))), "cpu, 20 steps");
    let mut resume = ck_args(&ck, "40");
    resume.push("--resume".into());
    let got = losses(&lines(&cuda(&strs(&resume), 3, &[]), "cuda resumed"));
    assert_eq!(got.first().map(|g| g.0), Some(20));
    let rel = max_rel(&got, &full);
    println!("cpu checkpoint resumed on cuda: max relative difference {rel:e}");
    assert!(rel <= TOL, "{rel:e}");
    // CUDA → CPU.
    let ck = dir.join("from-cuda");
    lines(&cuda(&strs(&ck_args(&ck, "20")), 4, &[]), "cuda, 20 steps");
    let mut resume = ck_args(&ck, "40");
    resume.push("--resume".into());
    let got = losses(&lines(&cpu(&strs(&resume)), "cpu resumed"));
    assert_eq!(got.first().map(|g| g.0), Some(20));
    let rel = max_rel(&got, &full);
    println!("cuda checkpoint resumed on cpu: max relative difference {rel:e}");
    assert!(rel <= TOL, "{rel:e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn too_little_device_memory_names_the_rank_the_tensor_and_the_bytes() {
    if !ready() {
        return;
    }
    let o = cuda(
        &["--steps", "2", "--devices", "0,1"],
        1,
        &[("TOFU_CPU_CUDA_MEMORY", "64K")],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(1),
        "an error exit, not a crash:\n{err}"
    );
    assert!(
        err.contains("out of memory") || err.contains("OUT_OF_MEMORY"),
        "{err}"
    );
    assert!(err.contains("rank "), "names the rank: {err}");
    assert!(err.contains("bytes"), "names the bytes: {err}");
    assert!(err.contains('`'), "names the tensor: {err}");
}

#[test]
fn one_rank_per_process_over_nccl_gives_the_cpu_losses() {
    if !ready() {
        return;
    }
    let steps = ["--steps", "60"];
    let oracle = lines(&cpu(&steps), "cpu");
    let want = losses(&oracle);
    let port = tofu_tests::free_port();
    let launch = tofu_tests::launch_args("2", &port, &[]);
    let o = under_stand_in(&launch, &steps, 5, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "launch failed:\n{err}");
    let mut got = Vec::new();
    let mut by_rank: Vec<Vec<serde_json::Value>> = vec![Vec::new(); 2];
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let (_, json) = line.split_once("] ").expect("a [rank r] prefix");
        let v: serde_json::Value = serde_json::from_str(json).expect("JSON");
        assert_eq!(v["world_size"], 2, "{line}");
        by_rank[v["rank"].as_u64().unwrap() as usize].push(v);
    }
    for lines in &by_rank {
        assert_eq!(lines.last().unwrap()["done"], true, "{err}");
        got.extend(losses(lines));
    }
    got.sort_by_key(|g| g.0);
    got.dedup_by_key(|g| g.0);
    assert_eq!(got.len(), 60, "every step's loss from a rank that keeps it");
    let rel = max_rel(&got, &want);
    println!("two processes over NCCL: max relative difference {rel:e}");
    assert!(rel <= TOL, "{rel:e}");
    assert_eq!(
        by_rank[0].last().unwrap()["test_accuracy"],
        oracle.last().unwrap()["test_accuracy"]
    );
}

/// The pid of the process whose environment holds `RANK=rank` and `mark`.
fn pid_of_rank(rank: usize, mark: &str) -> Option<String> {
    let want = format!("RANK={rank}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let environ = std::fs::read(e.path().join("environ")).ok()?;
        let vars: Vec<&[u8]> = environ.split(|&b| b == 0).collect();
        (vars.contains(&want.as_bytes()) && vars.contains(&mark.as_bytes()))
            .then(|| e.file_name().to_string_lossy().into_owned())
    })
}

/// An endless `tofu launch --nproc-per-node 2 -- train … --backend cuda`
/// under the stand-in, its processes marked with `TOFU_TEST_MARK=name-PID`
/// and given `env`; gives the launch and rank 1's pid once it is training.
fn endless_launch(name: &str, env: &[(&str, &str)]) -> (std::process::Child, String) {
    let mark = format!("TOFU_TEST_MARK={name}-{}", std::process::id());
    let (k, v) = mark.split_once('=').unwrap();
    let port = tofu_tests::free_port();
    let child = Command::new("bash")
        .arg(root().join("scripts/cpu-cuda.sh"))
        .args(["--", env!("CARGO_BIN_EXE_tofu"), "launch"])
        .args(["--nproc-per-node", "2", "--grace-s", "2"])
        .args(["--master-port", &port, "--", "train"])
        .args(MODEL)
        .args(["--backend", "cuda", "--steps", "100000000"])
        .args(["--log-every", "1000"])
        .env_remove("TOFU_SPECS")
        .env(k, v)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running scripts/cpu-cuda.sh");
    let t0 = std::time::Instant::now();
    let victim = loop {
        assert!(t0.elapsed().as_secs() < 120, "rank 1 never started");
        if let Some(pid) = pid_of_rank(1, &mark) {
            break pid;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    std::thread::sleep(std::time::Duration::from_secs(3)); // training by now
    (child, victim)
}

#[test]
fn a_killed_rank_process_fails_the_cuda_launch_naming_it() {
    if !ready() {
        return;
    }
    let (child, victim) = endless_launch("cuda-kill", &[]);
    tofu_tests::kill_rank_and_wait(child, &victim, 1);
}

#[test]
fn a_stopped_rank_times_out_the_others_collective_which_aborts_and_names_it() {
    if !ready() {
        return;
    }
    // Rank 1 stopped (SIGSTOP) mid-training closes no connection: rank 0's
    // all-reduce waits for it until its NCCL watchdog's limit, then aborts
    // the communicator and fails naming itself; the launch then fails.
    let (child, victim) = endless_launch("cuda-stop", &[("TOFU_NCCL_TIMEOUT_S", "3")]);
    let stopped = Command::new("kill").args(["-STOP", &victim]).status();
    assert!(
        stopped.expect("running kill").success(),
        "kill -STOP {victim}"
    );
    let t1 = std::time::Instant::now();
    let out = child.wait_with_output().expect("waiting for the launch");
    let _ = Command::new("kill").args(["-KILL", &victim]).status();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the launch succeeded: {err}");
    // 3 s of the watchdog, the grace period, and the stand-in's slowness;
    // far below the stand-in's own 120 s limit on a collective.
    assert!(t1.elapsed().as_secs() < 60, "{:?}: {err}", t1.elapsed());
    assert!(
        err.contains("rank 0: synchronize: NCCL work did not finish within")
            && err.contains("ncclCommAbort")
            && err.contains("TOFU_NCCL_TIMEOUT_S"),
        "{err}"
    );
    assert!(err.contains("rank 0 failed first"), "{err}");
    println!("stopped rank 1: the launch failed after {:?}", t1.elapsed());
}

/// A CUDA run killed (SIGKILL, the whole process group: the stand-in's
/// wrapper and tofu) after its second checkpoint resumes on CUDA with the
/// uninterrupted CUDA run's losses, bit for bit (issue 37, item 3).
#[test]
fn a_killed_cuda_run_resumes_with_bit_identical_losses() {
    use std::os::unix::process::CommandExt;
    if !ready() {
        return;
    }
    let dir = tofu_tests::temp_dir("cuda-train-kill");
    let ck = dir.join("ck");
    let ck_s = ck.to_str().unwrap();
    let child = Command::new("bash")
        .arg(root().join("scripts/cpu-cuda.sh"))
        .args(["--", env!("CARGO_BIN_EXE_tofu"), "train"])
        .args(MODEL)
        .args(["--json", "--backend", "cuda", "--steps", "100000000"])
        .args(["--checkpoint-every", "10", "--checkpoint-dir", ck_s])
        .env_remove("TOFU_SPECS")
        .env("TOFU_CPU_CUDA_SEED", "5")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .expect("running scripts/cpu-cuda.sh");
    let t0 = std::time::Instant::now();
    while !ck.join("step-00000020").is_dir() {
        assert!(
            t0.elapsed().as_secs() < 300,
            "no second checkpoint in 300 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let group = format!("-{}", child.id());
    let killed = Command::new("kill")
        .args(["-KILL", "--", &group])
        .status()
        .expect("running kill");
    assert!(killed.success(), "kill -KILL -- {group}");
    let mut child = child;
    child.wait().unwrap();
    let latest = tofu_tests::latest_checkpoint(&ck).expect("a checkpoint");
    let total = (latest + 20).to_string();
    let resume = ["--steps", &total, "--checkpoint-dir", ck_s, "--resume"];
    let resumed = losses(&lines(&cuda(&resume, 6, &[]), "cuda resumed"));
    let full = losses(&lines(&cuda(&["--steps", &total], 7, &[]), "cuda, whole"));
    assert_eq!(
        resumed.iter().map(|r| r.0).collect::<Vec<_>>(),
        (latest..latest + 20).collect::<Vec<_>>()
    );
    for &(s, l) in &resumed {
        let w = full
            .iter()
            .find(|f| f.0 == s)
            .expect("the step in the whole run")
            .1;
        assert_eq!(
            l.to_bits(),
            w.to_bits(),
            "step {s}: resumed {l} vs whole {w}"
        );
    }
    println!("killed at checkpoint {latest}: 20 resumed steps bit-identical");
    let _ = std::fs::remove_dir_all(&dir);
}
