//! `tofu run --backend cuda` on the CPU stand-in of the CUDA libraries
//! (`scripts/cpu-cuda.sh`, `cpu-cuda/`; issue 37, item 3), in CI without a
//! GPU: a zoo MLP's synthetic steps verify (every rank's results against
//! the CPU reference, `--verify`) at k = 1, at k = 2 host-staged with two
//! ranks on one stand-in device, and at k = 2 over the stand-in's NCCL
//! across two devices, all with seeded random delays on every stream; a
//! negative control: the backend with one synchronisation left out
//! (`TOFU_CUDA_FAULT=skip-sync`: a device-to-host copy on a second stream
//! that does not wait for the buffer's stream) fails the k = 2
//! host-staged run that verifies without it, under the same delays; a device memory smaller than the run needs is an error naming
//! out-of-memory, not a crash; a user operator loaded with `--specs` (a
//! custom ONNX node) runs through its generated kernels and verifies; a
//! CNN's convolutions run through the stand-in's cuDNN (or, without it,
//! the generated kernels) and verify; convolutions, max pooling and their
//! gradients of assorted geometry go through the stand-in's cuDNN and
//! equal the CPU backend's, op by op, and a flipped filter is caught.
//!
//! A root-package test so that `CARGO_BIN_EXE_tofu` is the binary of this
//! build, with the `cuda` feature. Needs bash and g++ (the stand-in
//! compiles kernels with it): without g++ it prints `SKIPPED` and passes,
//! and fails when `CI` is set.
#![cfg(feature = "cuda")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Whether g++ runs; panics without it when `CI` is set.
fn have_gxx() -> bool {
    let ok = Command::new("g++")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "cpu_cuda: g++ is not usable and CI is set"
        );
        println!("SKIPPED: cpu_cuda needs g++");
    }
    ok
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tofu-cpu-cuda-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temporary directory");
    d
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `tofu plan` mlp-2-8 (batch 4) for `workers` into `dir`.
fn plan(dir: &Path, workers: &str) -> PathBuf {
    plan_model(dir, "mlp-2-8", workers)
}

/// `tofu plan` of zoo `model` (batch 4) for `workers` into `dir`.
fn plan_model(dir: &Path, model: &str, workers: &str) -> PathBuf {
    let p = dir.join(format!("plan-{model}-{workers}.json"));
    let o = Command::new(env!("CARGO_BIN_EXE_tofu"))
        .args([
            "plan",
            "--model",
            model,
            "--batch",
            "4",
            "--workers",
            workers,
            "-o",
        ])
        .arg(&p)
        .env_remove("TOFU_SPECS")
        .output()
        .expect("running tofu plan");
    assert!(o.status.success(), "{}", text(&o).1);
    p
}

/// `tofu run PLAN --backend cuda --steps 2 --verify --json ARGS` under the
/// stand-in with delays seeded by `seed`, and `env`.
fn run(plan: &Path, args: &[&str], seed: u64, env: &[(&str, &str)]) -> Output {
    Command::new("bash")
        .arg(root().join("scripts/cpu-cuda.sh"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_tofu"))
        .arg("run")
        .arg(plan)
        .args(["--backend", "cuda", "--steps", "2", "--verify", "--json"])
        .args(args)
        .env_remove("TOFU_SPECS")
        .env("TOFU_CPU_CUDA_SEED", seed.to_string())
        .env("TOFU_CPU_CUDA_DELAY_US", "1000")
        .envs(env.iter().copied())
        .output()
        .expect("running scripts/cpu-cuda.sh")
}

/// The JSON report of a run that verified, or a panic with its output.
fn verified(o: &Output, what: &str) -> serde_json::Value {
    let (out, err) = text(o);
    assert!(o.status.success(), "{what}: failed:\n{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v["verified"], true, "{what}: {v}");
    assert!(v["max_rel_error"].as_f64().unwrap() <= 1e-4, "{what}: {v}");
    v
}

#[test]
fn an_mlp_verifies_at_k1_and_k2_host_staged_and_over_nccl() {
    if !have_gxx() {
        return;
    }
    let dir = temp_dir("verify");
    let (p1, p2) = (plan(&dir, "1"), plan(&dir, "2"));
    verified(&run(&p1, &[], 1, &[]), "k = 1");
    let v = verified(
        &run(&p2, &["--ranks-per-device", "2"], 2, &[]),
        "k = 2, two ranks on one device (host-staged)",
    );
    assert_eq!(
        v["bytes_sent_per_rank"], v["predicted_bytes_per_rank"],
        "{v}"
    );
    let v = verified(
        &run(&p2, &["--devices", "0,1"], 3, &[]),
        "k = 2 on two devices (NCCL)",
    );
    assert_eq!(
        v["bytes_sent_per_rank"], v["predicted_bytes_per_rank"],
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_synchronisation_gives_a_wrong_result() {
    if !have_gxx() {
        return;
    }
    let dir = temp_dir("fault");
    let p = plan(&dir, "2");
    // The host-staged exchange copies device results to the host in the
    // middle of a step: the copy the fault leaves unordered.
    let o = run(
        &p,
        &["--ranks-per-device", "2"],
        2,
        &[("TOFU_CUDA_FAULT", "skip-sync")],
    );
    let (out, err) = text(&o);
    let passed = o.status.success()
        && serde_json::from_str::<serde_json::Value>(out.trim())
            .is_ok_and(|v| v["verified"] == true);
    assert!(
        !passed,
        "the run without its synchronisation verified:\n{out}\n{err}"
    );
    assert!(o.status.code().is_some(), "killed by a signal:\n{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn too_little_device_memory_is_an_out_of_memory_error() {
    if !have_gxx() {
        return;
    }
    let dir = temp_dir("oom");
    let p = plan(&dir, "1");
    let o = run(&p, &[], 1, &[("TOFU_CPU_CUDA_MEMORY", "1K")]);
    let (_, err) = text(&o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "an error exit, not a crash:\n{err}"
    );
    assert!(
        err.contains("OUT_OF_MEMORY") || err.contains("out of memory"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A user operator (issue 43, item 3): the custom ONNX node
/// `com.example::SwiGLU` of `onnx/tests/fixtures/swiglu-mlp.onnx`, planned
/// with its spec from `--specs` (`tdl/tests/user_specs/swiglu.tdl`, no
/// kernel of tofu knows it) for k = 2, runs on the CUDA backend through its
/// generated kernels and verifies against the CPU reference.
#[test]
fn a_custom_operator_runs_through_its_generated_kernel() {
    if !have_gxx() {
        return;
    }
    let dir = temp_dir("custom-op");
    let p = dir.join("plan.json");
    let o = Command::new(env!("CARGO_BIN_EXE_tofu"))
        .arg("plan")
        .arg(root().join("onnx/tests/fixtures/swiglu-mlp.onnx"))
        .args(["-k", "2", "--specs"])
        .arg(root().join("tdl/tests/user_specs"))
        .arg("-o")
        .arg(&p)
        .env_remove("TOFU_SPECS")
        .output()
        .expect("running tofu plan");
    assert!(o.status.success(), "{}", text(&o).1);
    let v = verified(
        &run(&p, &["--ranks-per-device", "2"], 3, &[]),
        "swiglu at k = 2 on the CUDA backend",
    );
    assert_eq!(
        v["bytes_sent_per_rank"], v["predicted_bytes_per_rank"],
        "{v}"
    );
}

/// Convolutions through cuDNN (issue 37, item 4): a CNN's steps at k = 1
/// and k = 2 over NCCL (the convolutions split by batch: cuDNN calls of
/// other sizes), with seeded delays, verify against the unpartitioned run
/// (`--verify`, on the same backend: a check of the partitioned cuDNN
/// calls against the whole ones, not of cuDNN itself; the CPU-backend
/// oracle and the negative control are
/// `tests/cpu_cuda_train.rs::a_cnn_through_cudnn_gives_the_cpu_losses`); the
/// backend says it used cuDNN, and without cuDNN (`TOFU_CPU_CUDA_NO_CUDNN`)
/// says it fell back to the generated kernels.
#[test]
fn a_cnn_verifies_with_its_convolutions_through_cudnn() {
    if !have_gxx() {
        return;
    }
    let dir = temp_dir("cudnn");
    let (p1, p2) = (
        plan_model(&dir, "cnn-2-8", "1"),
        plan_model(&dir, "cnn-2-8", "2"),
    );
    let o = run(&p1, &[], 4, &[]);
    verified(&o, "cnn k = 1 through cuDNN");
    let err = text(&o).1;
    assert!(err.contains("through cuDNN ("), "{err}");
    let o = run(&p2, &["--devices", "0,1"], 5, &[]);
    verified(&o, "cnn k = 2 through cuDNN");
    let o = run(&p1, &[], 4, &[("TOFU_CPU_CUDA_NO_CUDNN", "1")]);
    verified(&o, "cnn k = 1, generated convolutions");
    let err = text(&o).1;
    assert!(
        err.contains("cuDNN") && err.contains("could not be loaded"),
        "{err}"
    );
    assert!(err.contains("generated CUDA kernels"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One op-level case: op, input shapes, attributes.
type Case = (&'static str, Vec<Vec<usize>>, Vec<(&'static str, i64)>);

/// Convolutions (strided, padded, dilated, non-square) and max poolings
/// (padded, strided, overlapping) and their gradients.
fn cudnn_cases() -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    let geoms: [(usize, usize, [usize; 2], [i64; 6]); 4] = [
        // (h, w, [kh, kw], [sh, sw, ph, pw, dh, dw])
        (7, 6, [3, 2], [2, 1, 1, 0, 1, 2]),
        (5, 5, [3, 3], [1, 1, 1, 1, 1, 1]),
        (9, 4, [1, 1], [3, 2, 0, 0, 1, 1]),
        (6, 8, [2, 3], [1, 2, 2, 1, 2, 1]),
    ];
    for (h, w, [kh, kw], [sh, sw, ph, pw, dh, dw]) in geoms {
        let (b, ci, co) = (2, 3, 4);
        let out = |i: usize, k: usize, s: i64, p: i64, d: i64| {
            ((i as i64 + 2 * p - d * (k as i64 - 1) - 1) / s + 1) as usize
        };
        let (oh, ow) = (out(h, kh, sh, ph, dh), out(w, kw, sw, pw, dw));
        let at = vec![
            ("stride_h", sh),
            ("stride_w", sw),
            ("pad_h", ph),
            ("pad_w", pw),
            ("dilation_h", dh),
            ("dilation_w", dw),
        ];
        let (x, wt, dy) = (vec![b, ci, h, w], vec![co, ci, kh, kw], vec![b, co, oh, ow]);
        cases.push(("conv2d", vec![x.clone(), wt.clone()], at.clone()));
        let gx = [&at[..], &[("in_h", h as i64), ("in_w", w as i64)]].concat();
        cases.push(("conv2d_grad_x", vec![dy.clone(), wt], gx));
        let gw = [&at[..], &[("kernel_h", kh as i64), ("kernel_w", kw as i64)]].concat();
        cases.push(("conv2d_grad_w", vec![x, dy], gw));
    }
    for (k, s, p) in [(2, 2, 0), (3, 2, 1), (3, 1, 1)] {
        let at = vec![
            ("kernel_h", k),
            ("kernel_w", k),
            ("stride_h", s),
            ("stride_w", s),
            ("pad_h", p),
            ("pad_w", p),
        ];
        let x = vec![2, 3, 7, 6];
        let o = |i: i64| ((i + 2 * p - k) / s + 1) as usize;
        let y = vec![2, 3, o(7), o(6)];
        cases.push(("maxpool2d", vec![x.clone()], at.clone()));
        cases.push(("maxpool2d_grad", vec![x, y.clone(), y], at));
    }
    cases
}

/// `op` of `case` on `backend` with these inputs: its output.
fn run_case<B: runner::Backend>(
    backend: &B,
    lib: &tdl::Library,
    (op, shapes, attrs): &Case,
    inputs: &[Vec<f32>],
) -> (Vec<f32>, B::Kernel) {
    let spec = lib.get(op).expect("shipped op");
    let attrs: tdl::Attrs = attrs
        .iter()
        .map(|&(k, v)| (k.to_string(), tdl::AttrValue::Int(v)))
        .collect();
    let bound = spec.bind(shapes, &attrs).expect("the case binds");
    let n: usize = bound.output_shapes[0].iter().product();
    let k = backend.prepare(spec, shapes, &attrs).expect("prepares");
    let ins: Vec<B::Buffer> = inputs.iter().map(|v| backend.upload(v).unwrap()).collect();
    let mut out = backend.alloc_for_output(n).unwrap();
    let refs: Vec<&B::Buffer> = ins.iter().collect();
    backend
        .launch(&k, &refs, &mut [&mut out])
        .expect("launches");
    let mut host = vec![0.0; n];
    backend.download(&out, &mut host).unwrap();
    backend.synchronize().unwrap();
    (host, k)
}

/// Run by [`cudnn_calls_match_the_cpu_backend`] under the stand-in: every
/// case of [`cudnn_cases`] on the CUDA backend (through the stand-in's
/// cuDNN) against the CPU backend (its im2col + GEMM and pooling kernels),
/// seeded inputs (a pooling gradient's y is the CPU's pooling of its x);
/// prints how many kernels were cuDNN's.
#[test]
#[ignore = "run under scripts/cpu-cuda.sh by cudnn_calls_match_the_cpu_backend"]
fn cudnn_cases_under_the_stand_in() {
    use rand::{Rng, SeedableRng};
    if std::env::var_os("TOFU_CUDNN_CASES").is_none() {
        println!("SKIPPED: run by cudnn_calls_match_the_cpu_backend (TOFU_CUDNN_CASES set)");
        return;
    }
    let lib = tdl::Library::shipped().expect("shipped specs");
    let cuda = runner::backend::cuda::CudaBackend::new(0).expect("the stand-in's device 0");
    let cpu = runner::CpuBackend::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(37);
    let (mut through, mut worst) = (0, 0.0f64);
    for case in cudnn_cases() {
        let mut inputs: Vec<Vec<f32>> = case
            .1
            .iter()
            .map(|s| {
                (0..s.iter().product())
                    .map(|_| rng.gen_range(-1.0..1.0))
                    .collect()
            })
            .collect();
        if case.0 == "maxpool2d_grad" {
            let fwd = ("maxpool2d", vec![case.1[0].clone()], case.2.clone());
            inputs[1] = run_case(&cpu, &lib, &fwd, &inputs[..1]).0;
        }
        let (want, _) = run_case(&cpu, &lib, &case, &inputs);
        let (got, k) = run_case(&cuda, &lib, &case, &inputs);
        through += usize::from(k.provider() == "cudnn");
        let scale = want.iter().fold(1e-6f64, |m, v| m.max(v.abs() as f64));
        let err = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (*g as f64 - *w as f64).abs() / scale)
            .fold(0.0, f64::max);
        assert!(err <= 1e-5, "{} {:?} {:?}: {err:e}", case.0, case.1, case.2);
        worst = worst.max(err);
    }
    println!(
        "cudnn: {through} of {} cases, worst error {worst:e}",
        cudnn_cases().len()
    );
}

/// The cuDNN paths op by op (issue 37, item 4): [`cudnn_cases_under_the_stand_in`]
/// in a process of its own under the stand-in, with seeded delays: every
/// case goes through cuDNN and matches the CPU backend within 1e-5 of the
/// output's largest magnitude (measured: equal; both are im2col + the
/// `gemm` crate). Negative control: with the filter flipped
/// (`TOFU_CUDA_FAULT=cudnn-convolution-mode`) the first convolution fails
/// (0.87).
#[test]
fn cudnn_calls_match_the_cpu_backend() {
    if !have_gxx() {
        return;
    }
    let run = |fault: &str| {
        Command::new("bash")
            .arg(root().join("scripts/cpu-cuda.sh"))
            .arg("--")
            .arg(std::env::current_exe().expect("this test binary"))
            .args([
                "--exact",
                "cudnn_cases_under_the_stand_in",
                "--ignored",
                "--nocapture",
            ])
            .env("TOFU_CPU_CUDA_SEED", "6")
            .env("TOFU_CPU_CUDA_DELAY_US", "200")
            .env("TOFU_CUDA_FAULT", fault)
            .env("TOFU_CUDNN_CASES", "1")
            .output()
            .expect("running scripts/cpu-cuda.sh")
    };
    let o = run("");
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let n = cudnn_cases().len();
    assert!(out.contains(&format!("cudnn: {n} of {n} cases")), "{out}");
    let o = run("cudnn-convolution-mode");
    let (out, err) = text(&o);
    assert!(!o.status.success(), "flipped filters passed:\n{out}");
    assert!(
        err.contains("conv2d") || out.contains("conv2d"),
        "{out}\n{err}"
    );
}
