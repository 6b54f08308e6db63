//! `scripts/gpu-check.sh` (issue 25, item 7) without a GPU: its CPU-side
//! half prepares a folder a GPU machine without Rust can run (the tofu
//! binary and the CUDA test executable built with `--features cuda`, the
//! scripts, a manifest of checksums; the specs are built into both), and its GPU half refuses
//! clearly on a machine without a GPU, running nothing.

use std::path::Path;
use std::process::Command;

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/gpu-check.sh")
}

fn gpu_here() -> bool {
    Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).starts_with("GPU "))
}

#[test]
fn prepare_builds_a_runnable_folder_and_run_refuses_without_a_gpu() {
    let dir = tofu_tests::temp_dir("gpu-check");
    let out = Command::new("bash")
        .arg(script())
        .args(["prepare", dir.to_str().unwrap()])
        .env("GPU_CHECK_PROFILE", "test")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "tofu",
        "cuda-tests",
        "gpu-check.sh",
        "scripts/gpu-bench.sh",
        "MANIFEST",
    ] {
        assert!(dir.join(f).exists(), "{f} missing from the prepared folder");
    }
    let v = Command::new(dir.join("tofu"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("tofu "));
    let list = Command::new(dir.join("cuda-tests"))
        .arg("--list")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&list.stdout).contains(": test"),
        "the CUDA test executable lists its tests"
    );
    let manifest = std::fs::read_to_string(dir.join("MANIFEST")).unwrap();
    assert!(
        manifest.contains("  tofu") && manifest.contains("  cuda-tests"),
        "{manifest}"
    );
    if gpu_here() {
        eprintln!("SKIPPED the no-GPU refusal: this machine has a GPU");
    } else {
        let out = Command::new("bash")
            .arg(dir.join("gpu-check.sh"))
            .args(["run", dir.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("no NVIDIA GPU here") && err.contains("prepare"),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "nothing ran");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
