//! Helpers for the end-to-end tests of the `tofu` binary (in `tests/`).
//!
//! The binary belongs to another package, so `CARGO_BIN_EXE_tofu` is not
//! available here; [`tofu_bin`] builds it once per test run with the cargo
//! that runs the tests (`cargo build --workspace --features tofu/cuda --bin
//! tofu --profile test`, into the same target directory: the features and
//! profile of the test command in `scripts/test.sh`, so under that command
//! it reuses the suite's own build instead of building every crate again
//! with `-p tofu`'s feature set, and is never stale; the CUDA backend loads
//! CUDA at run time, so this builds anywhere). `TOFU_BIN` overrides the path.

pub mod netns;
pub mod relay;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The step of the newest `step-N` checkpoint directory in `ck` (`tofu
/// train --checkpoint-dir`); `None` when there is none or `ck` is missing.
pub fn latest_checkpoint(ck: &Path) -> Option<u64> {
    std::fs::read_dir(ck)
        .ok()?
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("step-")?
                .parse::<u64>()
                .ok()
        })
        .max()
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Path of a freshly built `tofu` binary.
pub fn tofu_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("TOFU_BIN") {
            return PathBuf::from(p);
        }
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .current_dir(workspace_root())
            .args([
                "build",
                "--quiet",
                "--workspace",
                "--features",
                "tofu/cuda",
                "--bin",
                "tofu",
                "--profile",
                "test",
                "--message-format=json",
            ])
            .output()
            .expect("cannot run cargo to build the `tofu` binary");
        assert!(
            out.status.success(),
            "building `tofu` failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "tofu")
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .expect("cargo did not report the `tofu` executable")
    })
}

/// Run `tofu` with these arguments (the shipped specs, not `TOFU_SPECS`).
pub fn tofu<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(tofu_bin())
        .args(args)
        .env_remove("TOFU_SPECS")
        .output()
        .expect("cannot run tofu")
}

/// Stdout and stderr as text.
pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A fresh temporary directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tofu-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// The MovieLens-100K file (`datasets::movielens::default_path`:
/// `${TOFU_DATA_CACHE:-~/.cache/tofu}/recbole-1.2.1/ml-100k.inter`) if it is
/// there; otherwise prints `SKIPPED` and gives `None`, or panics when `CI` is
/// set (data must be fetched there by `scripts/fetch-movielens.sh`).
pub fn movielens_file() -> Option<PathBuf> {
    let file = datasets::movielens::default_path();
    if file.is_file() {
        return Some(file);
    }
    let msg = format!(
        "MovieLens-100K not at {}: run `bash scripts/fetch-movielens.sh`",
        file.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{msg}");
    eprintln!("SKIPPED: {msg}");
    None
}

/// The data cache the fetch scripts fill (`datasets::cache_dir`:
/// `$TOFU_DATA_CACHE`, default `~/.cache/tofu`).
pub fn data_cache() -> PathBuf {
    datasets::cache_dir()
}

/// Whether `file` (relative to [`data_cache`]) is there; otherwise prints
/// `SKIPPED` and gives `false`, or panics when `CI` is set (data must be
/// fetched there by `script`).
pub fn have_cached(file: &str, script: &str) -> bool {
    let path = data_cache().join(file);
    if path.is_file() {
        return true;
    }
    let msg = format!("{} is missing: run `bash {script}`", path.display());
    assert!(std::env::var_os("CI").is_none(), "{msg}");
    eprintln!("SKIPPED: {msg}");
    false
}

/// Whether scikit-learn's digits are cached ([`have_cached`]:
/// `sklearn-digits/digits.csv`, from `scripts/fetch-digits.sh`).
pub fn have_digits() -> bool {
    have_cached("sklearn-digits/digits.csv", "scripts/fetch-digits.sh")
}

/// A port nobody listens on now (bound to port 0, then released): a
/// launcher's `--master-port` for tests that run side by side.
pub fn free_port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind a loopback port")
        .local_addr()
        .expect("a bound address")
        .port()
        .to_string()
}

/// `launch --nproc-per-node NPROC --master-port PORT --` followed by
/// `args`: a `tofu launch` command line.
pub fn launch_args<'a>(nproc: &'a str, port: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["launch", "--nproc-per-node", nproc];
    v.extend(["--master-port", port, "--"]);
    v.extend(args);
    v
}

/// The pid of rank `rank`'s process under the `tofu launch` process
/// `launcher` (a child of it with `RANK=rank` in its environment), waiting
/// up to 60 s for it to start.
pub fn rank_pid(launcher: u32, rank: usize) -> String {
    let launcher = launcher.to_string();
    let want = format!("RANK={rank}");
    let t0 = std::time::Instant::now();
    loop {
        assert!(t0.elapsed().as_secs() < 60, "rank {rank} never started");
        let found = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
            let dir = e.path();
            let status = std::fs::read_to_string(dir.join("status")).ok()?;
            let ppid = status
                .lines()
                .find_map(|l| l.strip_prefix("PPid:"))?
                .trim()
                .to_string();
            let environ = std::fs::read(dir.join("environ")).ok()?;
            let mine = environ.split(|&b| b == 0).any(|v| v == want.as_bytes());
            (ppid == launcher && mine).then(|| e.file_name().to_string_lossy().into_owned())
        });
        if let Some(pid) = found {
            return pid;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// SIGKILL process `victim`, rank `rank` of the `tofu launch` run `child`
/// (its stderr piped), and wait for the launch: it must fail within 60 s,
/// naming the rank as the one that failed first, killed by signal 9.
/// Gives the launch's stderr.
pub fn kill_rank_and_wait(child: std::process::Child, victim: &str, rank: usize) -> String {
    let killed = Command::new("kill").args(["-9", victim]).status().unwrap();
    assert!(killed.success());
    let t1 = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "the launch succeeded with a killed rank"
    );
    assert!(
        t1.elapsed().as_secs() < 60,
        "noticed within the timeout: {err}"
    );
    assert!(
        err.contains(&format!("rank {rank} failed first (was killed by signal 9")),
        "{err}"
    );
    err
}

/// Plan the ONNX `model` (with the import `flags`) for `k` workers into
/// `dir` and run one step with `--verify --json`. Panics naming `what` and
/// k unless the step verifies, every rank sends the bytes the plan
/// predicts, and every tensor is within 1e-4 relative of the unpartitioned
/// run — or, unless `strict`, above it only where `--verify` judged it
/// ill-conditioned with an error within 10× its sensitivity
/// (`runner::verify`). Gives the run's JSON report.
pub fn plan_and_verify(
    what: &str,
    (model, flags): (&Path, &[&str]),
    k: usize,
    strict: bool,
    dir: &Path,
) -> serde_json::Value {
    let plan = dir.join(format!("{what}-{k}.json"));
    let mut args: Vec<String> = vec!["plan".into(), model.to_string_lossy().into()];
    args.extend(flags.iter().map(|f| f.to_string()));
    args.extend(["--workers".into(), k.to_string(), "-o".into()]);
    args.push(plan.to_string_lossy().into());
    let o = tofu(&args);
    assert!(o.status.success(), "{what} k={k}: plan: {}", text(&o).1);
    let o = tofu(&["run", plan.to_str().unwrap(), "--verify", "--json"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{what} k={k}: run: {err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["verified"], true, "{what} k={k}: {v}");
    let ill = v["verify"]["ill_conditioned"].as_array().unwrap();
    if strict {
        assert!(
            v["max_rel_error"].as_f64().unwrap() <= 1e-4 && ill.is_empty(),
            "{what} k={k}: {v}"
        );
    }
    for t in ill {
        let (e, s) = (
            t["error"].as_f64().unwrap(),
            t["sensitivity"].as_f64().unwrap(),
        );
        assert!(e <= 10.0 * s, "{what} k={k}: {t}");
    }
    assert_eq!(
        v["bytes_sent_per_rank"], v["predicted_bytes_per_rank"],
        "{what} k={k}"
    );
    v
}

/// Loss by step.
pub fn losses(lines: &[serde_json::Value]) -> Vec<(u64, f64)> {
    lines
        .iter()
        .filter_map(|l| Some((l.get("step")?.as_u64()?, l["loss"].as_f64()?)))
        .collect()
}

/// The largest relative difference of `got`'s losses from `want`'s at the
/// same steps (every step of `got` must be in `want`).
pub fn max_rel(got: &[(u64, f64)], want: &[(u64, f64)]) -> f64 {
    assert!(!got.is_empty(), "no steps");
    got.iter()
        .map(|&(s, g)| {
            let w = want
                .iter()
                .find(|&&(t, _)| t == s)
                .unwrap_or_else(|| panic!("step {s} is not in the oracle"))
                .1;
            (g - w).abs() / w.abs().max(1e-12)
        })
        .fold(0.0, f64::max)
}

/// Write `n` seeded grey `side`×`side` images and their labels to the
/// `.safetensors` file `path` (`x[n, 1, side, side]` f32 in [0, 1),
/// `labels[n]` u8 class ids 0–9), a data set for `tofu train --data PATH`
/// that needs no download.
pub fn write_images(path: &Path, n: usize, side: usize) {
    let pixels = n * side * side;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut data: Vec<u8> = Vec::with_capacity(pixels * 4 + n);
    for _ in 0..pixels {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let v = (state >> 40) as f32 / (1u64 << 24) as f32;
        data.extend_from_slice(&v.to_le_bytes());
    }
    data.extend((0..n).map(|i| (i % 10) as u8));
    let header = serde_json::json!({
        "x": {"dtype": "F32", "shape": [n, 1, side, side], "data_offsets": [0, pixels * 4]},
        "labels": {"dtype": "U8", "shape": [n], "data_offsets": [pixels * 4, pixels * 4 + n]},
    })
    .to_string();
    let mut header = header.into_bytes();
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend(header);
    file.extend(data);
    std::fs::write(path, file).expect("writing the images");
}
