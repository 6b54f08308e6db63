//! End-to-end tests of `tofu run`: a plan runs and verifies with `--json`
//! (bytes sent per rank equal the predicted bytes), and malformed or
//! mismatched plan files (a graph that does not match its hash, another
//! model's graph, an edited tile, a split beyond a tensor's rank, not a plan
//! at all) exit non-zero with a message naming the file before anything runs;
//! `--save-programs` writes each rank's self-contained program (format 5);
//! the verified run's programs contain all-to-all and broadcast instructions.

use std::path::{Path, PathBuf};

use tofu_tests::{temp_dir, text, tofu};

/// `tofu plan` a small model for `workers` into `dir/name`.
fn make_plan(dir: &Path, name: &str, model: &str, workers: &str) -> PathBuf {
    make_plan_batch(dir, name, model, workers, "4")
}

/// [`make_plan`] at batch `batch`.
fn make_plan_batch(dir: &Path, name: &str, model: &str, workers: &str, batch: &str) -> PathBuf {
    let plan = dir.join(name);
    let o = tofu(&[
        "plan",
        "--model",
        model,
        "--batch",
        batch,
        "--workers",
        workers,
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    plan
}

fn read(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn write(p: &Path, v: &serde_json::Value) {
    std::fs::write(p, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// Run `tofu run FILE --verify --json`; expect failure before any step ran
/// (nothing on stdout) and an error naming the file and containing `needle`.
fn rejected(file: &Path, needle: &str) {
    let o = tofu(&["run", file.to_str().unwrap(), "--verify", "--json"]);
    let (out, err) = text(&o);
    assert!(!o.status.success(), "tampered plan ran:\n{out}");
    assert!(out.trim().is_empty(), "something ran: {out}");
    // The report is wrapped into lines ("  | " continuation); unwrap it.
    let flat = err
        .split_whitespace()
        .filter(|w| *w != "|")
        .collect::<Vec<_>>()
        .join(" ");
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(
        flat.contains(name) && flat.contains(needle),
        "error should name `{name}` and say `{needle}`:\n{err}"
    );
}

#[test]
fn runs_and_verifies_with_json() {
    let dir = temp_dir("run-ok");
    // Batch 3 on 3 workers: a plan whose programs broadcast as well as
    // exchange (checked below).
    let plan = make_plan_batch(&dir, "plan.json", "mlp-2-8", "3", "3");
    let progs = dir.join("programs");
    let o = tofu(&[
        "run",
        plan.to_str().unwrap(),
        "--steps",
        "2",
        "--verify",
        "--json",
        "--save-programs",
        progs.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v["steps"], 2);
    assert_eq!(v["verified"], true);
    assert!(v["max_rel_error"].as_f64().unwrap() <= 1e-4, "{v}");
    assert_eq!(v["step_seconds"].as_array().unwrap().len(), 2);
    assert_eq!(v["peak_bytes_per_rank"].as_array().unwrap().len(), 3);
    assert_eq!(v["bytes_sent_per_rank"], v["predicted_bytes_per_rank"]);
    let total: u64 = v["bytes_sent_per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .sum();
    let file = read(&plan);
    assert_eq!(total, 2 * file["comm_bytes_per_step"].as_u64().unwrap());
    // The verified programs use the exchange-shaped collectives.
    let text: String = (0..3)
        .map(|r| std::fs::read_to_string(progs.join(format!("rank-{r}.json"))).unwrap())
        .collect();
    assert!(
        text.contains("\"all_to_all\": {"),
        "no all-to-all instruction"
    );
    assert!(
        text.contains("\"broadcast\": {"),
        "no broadcast instruction"
    );
}

#[test]
fn saves_self_contained_programs() {
    let dir = temp_dir("run-save");
    let plan = make_plan(&dir, "plan.json", "mlp-2-8", "2");
    let progs = dir.join("programs");
    let o = tofu(&[
        "run",
        plan.to_str().unwrap(),
        "--save-programs",
        progs.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    for r in 0..2 {
        let v = read(&progs.join(format!("rank-{r}.json")));
        assert_eq!(v["format"], "tofu-program");
        assert_eq!(v["version"], 5);
        assert_eq!(v["rank"], r);
        // Specs, tensor shapes and fills travel with the program.
        assert!(!v["specs"].as_array().unwrap().is_empty());
        assert!(!v["tensors"].as_array().unwrap().is_empty());
        let text = v.to_string();
        assert!(text.contains("\"fill\":{\"fill\""), "no fill in rank {r}");
    }
}

#[test]
fn rejects_a_graph_that_does_not_match_its_hash() {
    let dir = temp_dir("run-hash");
    let plan = make_plan(&dir, "plan.json", "mlp-2-8", "2");
    let mut v = read(&plan);
    v["graph"]["tensors"][0]["shape"][0] = serde_json::json!(5);
    let bad = dir.join("tampered-graph.json");
    write(&bad, &v);
    rejected(&bad, "does not match its graph");
}

#[test]
fn rejects_a_plan_for_another_graph() {
    let dir = temp_dir("run-other");
    let a = make_plan(&dir, "a.json", "mlp-2-8", "2");
    let b = make_plan(&dir, "b.json", "mlp-3-8", "2");
    // A's decisions with B's graph (and B's correct hash).
    let mut v = read(&a);
    let w = read(&b);
    v["graph"] = w["graph"].clone();
    v["graph_sha256"] = w["graph_sha256"].clone();
    let bad = dir.join("mismatched.json");
    write(&bad, &v);
    rejected(&bad, "does not match its graph");
}

#[test]
fn rejects_an_edited_tile() {
    let dir = temp_dir("run-tile");
    let plan = make_plan(&dir, "plan.json", "mlp-2-8", "2");
    let v = read(&plan);
    // Move the first-layer weight's tile to another valid split.
    let tensors = v["tensors"].as_array().unwrap();
    let i = tensors
        .iter()
        .position(|t| t["name"] == "fc0.w")
        .expect("fc0.w in the plan");
    let now = tensors[i]["splits"][0].clone();
    let alt = if now == serde_json::json!(1) {
        serde_json::json!(0)
    } else {
        serde_json::json!(1)
    };
    let mut bad_v = v.clone();
    bad_v["tensors"][i]["splits"][0] = alt;
    let bad = dir.join("tampered-tiles.json");
    write(&bad, &bad_v);
    rejected(&bad, "tofu plan");

    // A split beyond the tensor's rank.
    let mut bad_v = v.clone();
    bad_v["tensors"][i]["splits"][0] = serde_json::json!(7);
    let bad = dir.join("bad-split.json");
    write(&bad, &bad_v);
    rejected(&bad, "split along dim 7");
}

#[test]
fn rejects_files_that_are_not_plans() {
    let dir = temp_dir("run-junk");
    let junk = dir.join("junk.json");
    std::fs::write(&junk, "{\"format\": \"tofu-plan\", \"version\": 1}").unwrap();
    rejected(&junk, "missing field");
    let missing = dir.join("missing.json");
    rejected(&missing, "missing.json");
}

/// `--backend cuda` on a machine without CUDA (or a build without the
/// feature) fails at once, naming what is missing, and never panics; on a
/// GPU machine a 2-worker plan needs `--ranks-per-device`, which the error
/// offers.
#[test]
fn backend_cuda_says_what_is_missing() {
    let dir = temp_dir("run-cuda");
    let plan = make_plan(&dir, "plan.json", "mlp-2-8", "2");
    let o = tofu(&["run", plan.to_str().unwrap(), "--backend", "cuda"]);
    let (out, err) = text(&o);
    assert!(!err.contains("panicked"), "{err}");
    if o.status.success() {
        // A machine with at least 2 GPUs (NCCL): nothing to check here.
        assert!(out.contains("CUDA"), "{out}");
        return;
    }
    let flat = err
        .split_whitespace()
        .filter(|w| *w != "|")
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        [
            "libcuda (the NVIDIA driver) could not be loaded",
            "built without the `cuda` feature",
            "sees no CUDA device",
            "--ranks-per-device 2",
        ]
        .iter()
        .any(|m| flat.contains(m)),
        "the error should say what is missing:\n{err}"
    );
}

/// `--weights FILE.safetensors`: real weights go in (the run verifies
/// against the unpartitioned run on the same weights), and a wrong name or
/// shape is an error naming the file and the tensor.
#[test]
fn runs_on_weights_from_a_safetensors_file() {
    use safetensors::tensor::TensorView;
    let dir = temp_dir("run-weights");
    let plan = make_plan(&dir, "plan.json", "mlp-2-8", "2");
    let write_st = |name: &str, tensors: &[(&str, Vec<usize>)]| {
        let bytes: Vec<Vec<u8>> = tensors
            .iter()
            .map(|(_, s)| {
                let n: usize = s.iter().product();
                (0..n)
                    .flat_map(|i| ((i % 5) as f32 * 0.1 - 0.2).to_le_bytes())
                    .collect()
            })
            .collect();
        let views: Vec<(String, TensorView<'_>)> = tensors
            .iter()
            .zip(&bytes)
            .map(|((n, s), b)| {
                let v = TensorView::new(safetensors::Dtype::F32, s.clone(), b).unwrap();
                (n.to_string(), v)
            })
            .collect();
        let p = dir.join(name);
        std::fs::write(&p, safetensors::serialize(views, None).unwrap()).unwrap();
        p
    };
    let good = write_st(
        "w.safetensors",
        &[("fc0.w", vec![8, 8]), ("fc1.w", vec![8, 8])],
    );
    let o = tofu(&[
        "run",
        plan.to_str().unwrap(),
        "--weights",
        good.to_str().unwrap(),
        "--verify",
        "--json",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["verified"], true, "{out}");
    for (file, tensors, needle) in [
        (
            "name.safetensors",
            vec![("fc9.w", vec![8, 8])],
            "`fc9.w` is not in graph",
        ),
        (
            "shape.safetensors",
            vec![("fc0.w", vec![8, 9])],
            "`fc0.w` has shape [8, 9]",
        ),
    ] {
        let p = write_st(file, &tensors);
        let o = tofu(&[
            "run",
            plan.to_str().unwrap(),
            "--weights",
            p.to_str().unwrap(),
        ]);
        let (_, err) = text(&o);
        let flat = err
            .split_whitespace()
            .filter(|w| *w != "|")
            .collect::<Vec<_>>()
            .join(" ");
        assert!(!o.status.success());
        assert!(
            flat.contains(file) && flat.contains(needle),
            "expected `{needle}`:\n{err}"
        );
    }
}

/// `--estimate GPU` prints the static CUDA model without a GPU and without
/// running: every rank's modelled step is the sum of its operators' rows
/// (checked here from the JSON), the matmuls are cuBLAS with 2·m·n·k FLOPs
/// each, and an unknown GPU names the presets.
#[test]
fn estimate_models_a_cuda_step_without_a_gpu() {
    let dir = temp_dir("run-estimate");
    let plan = make_plan(&dir, "p.json", "mlp-3-256", "2");
    let o = tofu(&[
        "run",
        plan.to_str().unwrap(),
        "--estimate",
        "h100",
        "--json",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(v["estimate"]
        .as_str()
        .unwrap()
        .contains("not a measurement"));
    let steps = v["step_seconds_per_rank"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    let ops = v["ops"].as_array().unwrap();
    let sum: f64 = ops.iter().map(|o| o["seconds"].as_f64().unwrap()).sum();
    let slowest = v["slowest_rank"].as_u64().unwrap() as usize;
    assert!((sum - steps[slowest].as_f64().unwrap()).abs() <= 1e-12 * sum.max(1.0));
    let matmul = ops
        .iter()
        .find(|o| o["op"] == "matmul")
        .expect("a matmul row");
    assert_eq!(matmul["provider"], "cublas");
    // A 2-worker plan splits the batch or the weights: whichever, the
    // matmul FLOPs of a rank are a positive multiple of 2·(256·256) per row.
    let flops = matmul["flops"].as_f64().unwrap();
    assert!(
        flops > 0.0 && flops % (2.0 * 256.0 * 256.0) == 0.0,
        "{flops}"
    );

    let table = tofu(&["run", plan.to_str().unwrap(), "--estimate", "h200"]);
    let (out, _) = text(&table);
    assert!(
        out.contains("not a measurement") && out.contains("step (modelled)"),
        "{out}"
    );

    let bad = tofu(&["run", plan.to_str().unwrap(), "--estimate", "a100"]);
    let (_, err) = text(&bad);
    assert!(
        !bad.status.success() && err.contains("h100") && err.contains("h200"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
