//! End-to-end tests of `tofu plan`: the summary and `--json` fields, the
//! plan file and the picture, `--device-memory` reports, and that bad
//! arguments, missing files and unknown operators exit non-zero with an
//! explanation and leave no partial plan file; `--topology` reports bytes
//! and estimated seconds per link level.

use tofu_tests::{temp_dir, text, tofu};

#[test]
fn json_summary_has_the_documented_fields() {
    let o = tofu(&[
        "plan",
        "--model",
        "mlp-3-64",
        "--batch",
        "16",
        "--workers",
        "4",
        "--json",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    for f in [
        "workers",
        "search",
        "comm_bytes_per_step",
        "max_worker_memory_bytes",
        "plan_seconds",
        "stop_reason",
        "top_ops",
        "top_op_groups",
    ] {
        assert!(v.get(f).is_some(), "missing `{f}` in {v}");
    }
    assert_eq!(v["workers"], 4);
    assert_eq!(v["search"], "critical-dp");
    assert!(v["comm_bytes_per_step"].as_u64().unwrap() > 0);
    // The folded list sums the per-op bytes of its members: every group's
    // bytes are at least its heaviest member's, and the groups' total is
    // at most the plan's.
    let groups = v["top_op_groups"].as_array().expect("a list");
    assert!(!groups.is_empty());
    let total: u64 = groups
        .iter()
        .map(|g| g["comm_bytes"].as_u64().unwrap())
        .sum();
    assert!(total <= v["comm_bytes_per_step"].as_u64().unwrap());
    assert!(groups.iter().all(|g| g["ops"].as_u64().unwrap() >= 1));
}

#[test]
fn writes_plan_and_picture_and_summarises() {
    let dir = temp_dir("plan-ok");
    let plan = dir.join("plan.json");
    let dot = dir.join("plan.dot");
    let o = tofu(&[
        "plan",
        "--model",
        "rnn-1-32",
        "--batch",
        "4",
        "--workers",
        "3",
        "--search",
        "spartan",
        "-o",
        plan.to_str().unwrap(),
        "--dot",
        dot.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    for needle in ["comm", "memory", "data-par.", "top operators", "stopped"] {
        assert!(out.contains(needle), "summary lacks `{needle}`:\n{out}");
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(v["format"], "tofu-plan");
    assert_eq!(v["workers"], 3);
    assert!(
        v["graph"]["ops"].as_array().is_some_and(|a| !a.is_empty()),
        "plan embeds its graph"
    );
    assert!(std::fs::read_to_string(&dot)
        .unwrap()
        .starts_with("digraph plan"));
}

#[test]
fn device_memory_overflow_names_the_worst_worker_and_tensor() {
    // With --pareto too: the smallest plan is the result, not an error.
    for pareto in [None, Some("--pareto")] {
        let mut args = vec![
            "plan",
            "--model",
            "mlp-3-256",
            "--batch",
            "64",
            "--workers",
            "2",
            "--device-memory",
            "1K",
        ];
        args.extend(pareto);
        let o = tofu(&args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{pareto:?}: {out}{err}");
        assert!(
            out.contains("DOES NOT FIT") && out.contains("worker") && out.contains("largest tile"),
            "{pareto:?}: {out}"
        );
    }
}

#[test]
fn bad_inputs_exit_nonzero_and_write_no_plan() {
    let dir = temp_dir("plan-bad");
    let plan = dir.join("plan.json");
    let p = plan.to_str().unwrap();
    let bad_graph = dir.join("graph.json");
    std::fs::write(
        &bad_graph,
        "{\"format\": \"tofu-graph\", \"version\": 1, \"name\": \"x\", \"ops\": [{\"oops\": 1}]}",
    )
    .unwrap();
    let unknown_op = dir.join("unknown.json");
    // A graph with an operator whose spec does not exist.
    std::fs::write(
        &unknown_op,
        r#"{"format":"tofu-graph","version":1,"name":"u","tensors":[{"name":"x","shape":[2],"dtype":"f32","role":"input","group":0,"fill":{"constant":{"value":1.0}}},{"name":"y","shape":[2],"dtype":"f32","role":"activation","group":1}],"groups":[{"tensor":0},{"op":0}],"ops":[{"name":"frob","spec":"no_such_op","inputs":[0],"outputs":[1],"role":"forward","group":1}]}"#,
    )
    .unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["plan", "--model", "mlp-2-8", "--workers", "0", "-o", p],
        vec![
            "plan",
            "--model",
            "mlp-2-8",
            "--workers",
            "2",
            "--search",
            "magic",
            "-o",
            p,
        ],
        vec!["plan", "--model", "resnet-9000", "--workers", "2", "-o", p],
        vec!["plan", "/no/such/graph.json", "--workers", "2", "-o", p],
        vec![
            "plan",
            bad_graph.to_str().unwrap(),
            "--workers",
            "2",
            "-o",
            p,
        ],
        vec![
            "plan",
            unknown_op.to_str().unwrap(),
            "--workers",
            "2",
            "-o",
            p,
        ],
        vec!["plan", "--workers", "2", "-o", p],
        // --inference is for ONNX models only.
        vec![
            "plan",
            "--model",
            "mlp-2-8",
            "--inference",
            "--workers",
            "2",
            "-o",
            p,
        ],
    ];
    for args in cases {
        let o = tofu(&args);
        let (out, err) = text(&o);
        assert!(!o.status.success(), "{args:?} succeeded:\n{out}");
        assert!(err.trim().len() > 20, "{args:?}: no explanation:\n{err}");
        assert!(!plan.exists(), "{args:?} left a plan file");
    }
}

#[test]
fn pareto_json_lists_a_frontier_and_writes_the_chosen_point() {
    let dir = temp_dir("plan-pareto");
    let plan = dir.join("plan.json");
    let base = [
        "plan",
        "--model",
        "mlp-2-512",
        "--batch",
        "16",
        "--workers",
        "4",
        "--pareto",
        "--json",
    ];
    let o = tofu(&base);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    let points = v["pareto"].as_array().expect("a `pareto` array");
    assert!(!points.is_empty(), "{v}");
    let coords: Vec<(u64, u64)> = points
        .iter()
        .map(|p| {
            (
                p["comm_bytes_per_step"].as_u64().unwrap(),
                p["max_worker_memory_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    for (i, a) in coords.iter().enumerate() {
        for (j, b) in coords.iter().enumerate() {
            assert!(
                i == j || !(b.0 <= a.0 && b.1 <= a.1),
                "{j} dominates {i}: {v}"
            );
        }
    }
    // The last point (least memory) written with -o: its file claims its memory.
    let last = (coords.len() - 1).to_string();
    let mut args = base.to_vec();
    args.extend(["--pareto-point", &last, "-o", plan.to_str().unwrap()]);
    let o = tofu(&args);
    assert!(o.status.success(), "{}", text(&o).1);
    let f: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(
        f["max_worker_memory_bytes"].as_u64(),
        Some(coords[coords.len() - 1].1)
    );
    assert_eq!(
        f["comm_bytes_per_step"].as_u64(),
        Some(coords[coords.len() - 1].0)
    );
    // A point past the frontier is an error that names its size.
    let mut args = base.to_vec();
    args.extend(["--pareto-point", "99"]);
    let o = tofu(&args);
    assert!(!o.status.success());
    assert!(text(&o).1.contains("the frontier has"), "{}", text(&o).1);
}

#[test]
fn device_memory_that_binds_says_what_it_traded() {
    let base = [
        "plan",
        "--model",
        "mlp-2-512",
        "--batch",
        "16",
        "--workers",
        "4",
    ];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        args.push("--json");
        let o = tofu(&args);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{err}");
        serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()
    };
    let front = run(&["--pareto"]);
    let points = front["pareto"].as_array().unwrap();
    assert!(points.len() >= 2, "{front}");
    let least = points.last().unwrap()["max_worker_memory_bytes"]
        .as_u64()
        .unwrap();
    let cap = least.to_string();
    let v = run(&["--device-memory", &cap]);
    assert!(
        v["max_worker_memory_bytes"].as_u64().unwrap() <= least,
        "{v}"
    );
    assert_eq!(v["budget"]["bound"], true, "{v}");
    assert!(
        v["budget"]["unconstrained_comm_bytes"].as_u64()
            >= points[0]["comm_bytes_per_step"].as_u64(),
        "{v}"
    );
    let mut args = base.to_vec();
    args.extend(["--device-memory", &cap]);
    let o = tofu(&args);
    let (out, _) = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("bound") && out.contains("traded"), "{out}");
}

#[test]
fn topology_reports_bytes_and_seconds_per_link_level() {
    let o = tofu(&[
        "plan",
        "--model",
        "mlp-3-64",
        "--batch",
        "16",
        "-k",
        "4",
        "--topology",
        "2x2",
        "--link-bandwidth",
        "inter=400Gb",
        "--json",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    let t = &v["topology"];
    assert_eq!(t["nodes"], 2);
    assert_eq!(t["gpus_per_node"], 2);
    assert_eq!(t["node_levels"], 1);
    let links = t["links"].as_array().unwrap();
    assert_eq!(links[0]["link"], "inter-node");
    assert_eq!(links[0]["bandwidth_bytes_per_s"], 50_000_000_000u64);
    assert_eq!(links[1]["link"], "intra-node");
    let bytes: u64 = links.iter().map(|l| l["bytes"].as_u64().unwrap()).sum();
    assert_eq!(bytes, v["comm_bytes_per_step"].as_u64().unwrap());
    let secs: f64 = links.iter().map(|l| l["seconds"].as_f64().unwrap()).sum();
    let total = t["estimated_comm_seconds"].as_f64().unwrap();
    assert!((secs - total).abs() <= 1e-12 + 1e-9 * total);

    let o = tofu(&[
        "plan",
        "--model",
        "mlp-3-64",
        "-k",
        "4",
        "--topology",
        "2x2",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("level 0 across nodes, level 1 inside nodes"),
        "{out}"
    );
    assert!(
        out.contains("inter-node") && out.contains("intra-node"),
        "{out}"
    );

    for (args, want) in [
        (vec!["--topology", "2x3"], "use -k 6"),
        (vec!["--topology", "2by2"], "NODESxGPUS"),
        (
            vec!["--topology", "2x2", "--link-bandwidth", "fast"],
            "intra=450G",
        ),
        (vec!["--link-bandwidth", "intra=1G"], "needs --topology"),
    ] {
        let mut a = vec!["plan", "--model", "mlp-3-64", "-k", "4"];
        a.extend(args);
        let o = tofu(&a);
        let (_, err) = text(&o);
        assert!(!o.status.success(), "{a:?}");
        assert!(err.contains(want), "{a:?}: {err}");
    }
}

/// `tofu plan … | head` must stop quietly when the reader closes the pipe,
/// as Unix filters do, not panic on the failed write (issue: `failed
/// printing to stdout: Broken pipe`). The read end is closed before the plan
/// is printed, so every write fails.
#[cfg(unix)]
#[test]
fn plan_into_a_closed_pipe_stops_without_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    let mut child = Command::new(tofu_tests::tofu_bin())
        .args(["plan", "--model", "mlp-3-64", "--workers", "4"])
        .env_remove("TOFU_SPECS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run tofu");
    drop(child.stdout.take());
    let o = child.wait_with_output().expect("tofu runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        o.status.signal(),
        Some(13),
        "killed by SIGPIPE: {:?} {err}",
        o.status
    );
}
