//! `--batch B` on ONNX exports whose batch is static (issue 38, item 1):
//! torch.onnx's default export bakes the example input's batch (16 here)
//! into the graph input shapes and into constants such as a Reshape target
//! `[16, -1]`. Two models are written here as ONNX: an MLP (Gemm, Relu,
//! Gemm on `x[16, 64]`) and a small CNN (`x[16, 1, 8, 8]`, Conv, Relu,
//! Reshape to `[16, -1]`, Gemm).
//!
//! Oracles: the same model written with batch B in its input shapes and its
//! Reshape target (what a re-export at batch B gives): `tofu train
//! MODEL16.onnx --batch 8` and `tofu train MODEL8.onnx` give the same loss
//! at every step. Planned with `--batch 4` and `--batch 32`, the plan's
//! graph input `x` has that batch and `tofu run --verify` passes at k = 2.
//! A Reshape target that leads with the export's batch while its input
//! does not carry the batch in axis 0 (`[16, 64]` → `[16, 4, 16]` after a
//! transpose to `[64, 16]`) is an error naming the node and the fix
//! (negative control: without the check the target would be reshaped
//! silently wrong or fail without the cause); any other shape error of a
//! re-batched import (a constant `[16, 64]` added to the input) says that
//! `--batch` replaced the export's batch and gives the same fix. An opaque
//! node's declared output shape follows the batch as well.

mod run_outputs_common;

use onnx_protobuf::{GraphProto, TensorProto};
use run_outputs_common::{node, random, serialise, value_info};
use tofu_tests::{have_digits, plan_and_verify, temp_dir, text, tofu};

/// A float initializer.
fn floats(name: &str, dims: &[i64], values: Vec<f32>) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.data_type = 1;
    t.dims = dims.to_vec();
    t.float_data = values;
    t
}

/// An int64 initializer of rank 1.
fn ints(name: &str, values: &[i64]) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.data_type = 7;
    t.dims = vec![values.len() as i64];
    t.int64_data = values.to_vec();
    t
}

/// Weights scaled to keep the first losses moderate.
fn scaled(n: usize, seed: u64) -> Vec<f32> {
    random(n, seed).iter().map(|v| v * 0.3).collect()
}

/// The MLP 64 → 32 → 10 exported at batch `b`.
fn mlp(b: i64) -> Vec<u8> {
    let mut g = GraphProto::new();
    g.name = "mlp".into();
    g.input.push(value_info("x", &[b, 64]));
    g.initializer = vec![
        floats("w1", &[64, 32], scaled(64 * 32, 1)),
        floats("b1", &[32], vec![0.0; 32]),
        floats("w2", &[32, 10], scaled(32 * 10, 2)),
        floats("b2", &[10], vec![0.0; 10]),
    ];
    g.node = vec![
        node("Gemm", &["x", "w1", "b1"], "h", &[]),
        node("Relu", &["h"], "r", &[]),
        node("Gemm", &["r", "w2", "b2"], "logits", &[]),
    ];
    g.output.push(value_info("logits", &[b, 10]));
    serialise(g)
}

/// The CNN exported at batch `b`: Conv 1 → 4 channels 3×3 (pads 1), Relu,
/// Reshape to `[b, -1]` (the batch baked into the target), Gemm 256 → 10.
fn cnn(b: i64) -> Vec<u8> {
    let mut g = GraphProto::new();
    g.name = "cnn".into();
    g.input.push(value_info("x", &[b, 1, 8, 8]));
    g.initializer = vec![
        floats("k", &[4, 1, 3, 3], scaled(36, 3)),
        floats("kb", &[4], vec![0.0; 4]),
        ints("flat", &[b, -1]),
        floats(
            "w",
            &[256, 10],
            scaled(2560, 4).iter().map(|v| v * 0.3).collect(),
        ),
        floats("wb", &[10], vec![0.0; 10]),
    ];
    let pads = ("pads", vec![1, 1, 1, 1]);
    g.node = vec![
        node(
            "Conv",
            &["x", "k", "kb"],
            "c",
            &[pads, ("kernel_shape", vec![3, 3])],
        ),
        node("Relu", &["c"], "r", &[]),
        node("Reshape", &["r", "flat"], "f", &[]),
        node("Gemm", &["f", "w", "wb"], "logits", &[]),
    ];
    g.output.push(value_info("logits", &[b, 10]));
    serialise(g)
}

/// The losses of `tofu train ARGS --json` by step.
fn losses(args: &[&str]) -> Vec<f64> {
    let o = tofu(args);
    let (out, err) = text(&o);
    assert!(o.status.success(), "tofu {args:?}: {err}");
    out.lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("loss")?.as_f64().filter(|_| v.get("step").is_some()))
        .collect()
}

/// The shape of graph input `x` in a plan file.
fn input_shape(plan: &std::path::Path) -> Vec<u64> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(plan).unwrap()).unwrap();
    let tensors = v["graph"]["tensors"]
        .as_array()
        .expect("the plan's graph tensors");
    let x = tensors.iter().find(|t| t["name"] == "x").expect("input x");
    x["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap())
        .collect()
}

#[test]
fn batch_sets_a_static_export_batch_and_trains_as_a_re_export() {
    let dir = temp_dir("onnx-batch");
    for (name, build, rest) in [
        ("mlp", mlp as fn(i64) -> Vec<u8>, vec![64u64]),
        ("cnn", cnn, vec![1, 8, 8]),
    ] {
        let (m16, m8) = (
            dir.join(format!("{name}16.onnx")),
            dir.join(format!("{name}8.onnx")),
        );
        std::fs::write(&m16, build(16)).unwrap();
        std::fs::write(&m8, build(8)).unwrap();
        for b in ["4", "32"] {
            let what = format!("{name}-b{b}");
            let flags = ["--batch", b];
            plan_and_verify(&what, (&m16, &flags), 2, true, &dir);
            let plan = dir.join(format!("{what}-2.json"));
            let want: Vec<u64> = [vec![b.parse().unwrap()], rest.clone()].concat();
            assert_eq!(input_shape(&plan), want, "{what}: input x");
        }
        if !have_digits() {
            continue;
        }
        let train = |m: &std::path::Path, extra: &[&str]| {
            let base = [
                "train",
                m.to_str().unwrap(),
                "--workers",
                "2",
                "--data",
                "digits",
            ];
            let tail = [
                "--optimizer",
                "momentum",
                "--lr",
                "0.05",
                "--steps",
                "30",
                "--json",
            ];
            losses(&[&base[..], extra, &tail].concat())
        };
        let rebatched = train(&m16, &["--batch", "8"]);
        let exported = train(&m8, &[]);
        assert_eq!(rebatched.len(), 30, "{name}");
        assert_eq!(rebatched, exported, "{name}: --batch 8 vs the export at 8");
        // The export's own batch trains otherwise (the check is not vacuous).
        assert_ne!(train(&m16, &[]), exported, "{name}: batch 16 vs 8");
    }
}

/// A Reshape target that leads with the export's batch, on a tensor whose
/// axis 0 is not the batch, cannot be rewritten: the error names the node,
/// the target and the fix.
#[test]
fn a_baked_batch_that_is_not_provably_the_batch_is_a_clear_error() {
    let dir = temp_dir("onnx-batch-error");
    let mut g = GraphProto::new();
    g.name = "baked".into();
    g.input.push(value_info("x", &[16, 64]));
    g.initializer = vec![ints("target", &[16, 4, -1])];
    g.node = vec![
        node("Transpose", &["x"], "t", &[("perm", vec![1, 0])]),
        node("Reshape", &["t", "target"], "y", &[]),
    ];
    g.output.push(value_info("y", &[16, 4, 16]));
    let m = dir.join("baked.onnx");
    std::fs::write(&m, serialise(g)).unwrap();
    let plan = dir.join("p.json");
    let args = ["plan", m.to_str().unwrap(), "--workers", "1", "--inference"];
    let o = tofu(&[&args[..], &["--batch", "4", "-o", plan.to_str().unwrap()]].concat());
    let err = text(&o).1;
    assert!(!o.status.success(), "a baked batch must fail");
    for want in ["`y`", "target", "[16, 4, -1]", "dynamic_axes", "batch 16"] {
        assert!(err.contains(want), "{want}: {err}");
    }
    // At the export's own batch it imports.
    let o = tofu(&[&args[..], &["-o", plan.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", text(&o).1);

    // A constant of the export's batch elsewhere (`x + c`, c `[16, 64]`):
    // the shape error says that --batch replaced the export's batch, and the fix.
    let mut g = GraphProto::new();
    g.name = "baked_add".into();
    g.input.push(value_info("x", &[16, 64]));
    g.initializer = vec![floats("c", &[16, 64], random(16 * 64, 5))];
    g.node = vec![node("Add", &["x", "c"], "y", &[])];
    g.output.push(value_info("y", &[16, 64]));
    std::fs::write(&m, serialise(g)).unwrap();
    let o = tofu(&[&args[..], &["--batch", "4", "-o", plan.to_str().unwrap()]].concat());
    let err = text(&o).1;
    assert!(!o.status.success(), "[4, 64] + [16, 64] must fail");
    for want in ["`y`", "static batch 16", "dynamic_axes"] {
        assert!(err.contains(want), "{want}: {err}");
    }
}

/// An opaque node (`--opaque-unsupported`) takes its output shape from the
/// model's declared one: that shape's export batch follows `--batch` too
/// (negative control: without it `y` stays `[16, 8]`).
#[test]
fn an_opaque_node_s_declared_shape_follows_the_batch() {
    let dir = temp_dir("onnx-batch-opaque");
    let mut g = GraphProto::new();
    g.name = "opaque".into();
    g.input.push(value_info("x", &[16, 8]));
    g.node = vec![
        node("Relu", &["x"], "r", &[]),
        node("MysteryOp", &["r"], "y", &[]),
    ];
    g.output.push(value_info("y", &[16, 8]));
    let (m, out) = (dir.join("opaque.onnx"), dir.join("g.json"));
    std::fs::write(&m, serialise(g)).unwrap();
    let args = [
        "graph",
        m.to_str().unwrap(),
        "--opaque-unsupported",
        "--batch",
        "4",
    ];
    let o = tofu(&[&args[..], &["-o", out.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", text(&o).1);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let y = v["outputs"][0]["tensor"].as_u64().expect("output y") as usize;
    for (name, t) in [("x", 0), ("y", y)] {
        assert_eq!(
            v["tensors"][t]["shape"],
            serde_json::json!([4, 8]),
            "{name}"
        );
    }
}
