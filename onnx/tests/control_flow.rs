//! Control flow with import-time constants (issue 15, item 3): an `If`
//! whose condition folds from input shapes becomes its taken branch; a
//! `Loop` with a constant trip count is unrolled (iterations named
//! `<loop>/t<i>/…`) and computes what the loop computes (checked with the
//! interpreter against values worked out by hand); a condition that depends
//! on run-time data is an error naming it.

mod common;

use std::path::Path;

use common::models::{branch, graph_attr, if_on_shape, ints, model, node, vi};
use onnx::Options;
use onnx_protobuf::{GraphProto, TensorProto};
use planner::graph::execute::{execute, Values};

fn library() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

#[test]
fn if_with_a_shape_condition_becomes_its_branch() {
    for (width, taken, not) in [(4, "relu", "neg"), (5, "neg", "relu")] {
        let m = if_on_shape(width);
        let imp = onnx::import(&m, Path::new("cf.onnx"), library(), &Options::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let specs: Vec<&str> = imp.graph.ops().iter().map(|o| o.spec.as_str()).collect();
        assert!(specs.contains(&taken), "{specs:?}");
        assert!(!specs.contains(&not), "{specs:?}");
        assert_eq!(imp.summary.inlined.get("If"), Some(&1));
    }
}

#[test]
fn if_on_run_time_data_names_the_condition() {
    let mut g = GraphProto::new();
    g.name = "if_on_data".into();
    g.input = vec![vi("x", 1, &[2, 4])];
    g.output = vec![vi("y", 1, &[2, 4])];
    g.initializer = vec![ints("zero", &[0], true)];
    g.node = vec![
        node("ReduceSum", &["x"], &["total"], vec![]),
        node("Greater", &["total", "zero"], &["positive"], vec![]),
        node(
            "If",
            &["positive"],
            &["y"],
            vec![
                graph_attr("then_branch", branch("Relu")),
                graph_attr("else_branch", branch("Neg")),
            ],
        ),
    ];
    let e = onnx::import(
        &model(g),
        Path::new("cf.onnx"),
        library(),
        &Options::default(),
    )
    .err()
    .expect("run-time condition")
    .to_string();
    assert!(
        e.contains("`positive` depends on run-time data") && e.contains("If"),
        "{e}"
    );
}

/// `Loop` 3 times: `v ← v + x` (carried), scan output `v · 2` each iteration.
#[test]
fn loop_with_a_constant_trip_count_is_unrolled() {
    let mut body = GraphProto::new();
    body.name = "body".into();
    body.input = vec![vi("i", 7, &[]), vi("cond_in", 9, &[]), vi("v_in", 1, &[2])];
    body.output = vec![
        vi("cond_out", 9, &[]),
        vi("v_out", 1, &[2]),
        vi("scan", 1, &[2]),
    ];
    let mut two = TensorProto::new();
    two.name = "two".into();
    two.data_type = 1;
    two.float_data = vec![2.0];
    body.initializer = vec![two];
    body.node = vec![
        node("Identity", &["cond_in"], &["cond_out"], vec![]),
        node("Add", &["v_in", "x"], &["v_out"], vec![]),
        node("Mul", &["v_out", "two"], &["scan"], vec![]),
    ];
    let mut g = GraphProto::new();
    g.name = "loop".into();
    g.input = vec![vi("x", 1, &[2]), vi("v0", 1, &[2])];
    g.output = vec![vi("v", 1, &[2]), vi("stacked", 1, &[3, 2])];
    let mut t = TensorProto::new();
    t.name = "cond".into();
    t.data_type = 9;
    t.int32_data = vec![1];
    g.initializer = vec![ints("trips", &[3], true), t];
    g.node = vec![node(
        "Loop",
        &["trips", "cond", "v0"],
        &["v", "stacked"],
        vec![graph_attr("body", body)],
    )];
    let imp = onnx::import(
        &model(g),
        Path::new("cf.onnx"),
        library(),
        &Options::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let graph = &imp.graph;
    for t in 0..3 {
        assert!(
            graph
                .ops()
                .iter()
                .any(|o| o.name.starts_with(&format!("v/t{t}/"))),
            "iteration {t} is named v/t{t}/…"
        );
    }
    // Run it: x = [1, 2], v0 = [10, 20].
    let mut values = Values::new(graph.tensors().len());
    for (t, k) in &imp.leaf_values {
        let d = k.data().unwrap();
        values.set(
            *t,
            tdl::Tensor {
                shape: d.shape,
                data: d.values,
            },
        );
    }
    for (i, t) in graph.tensors().iter().enumerate() {
        let id = planner::graph::TensorId(i as u32);
        let v = match t.name.as_str() {
            "x" => vec![1.0, 2.0],
            "v0" => vec![10.0, 20.0],
            _ => continue,
        };
        values.set(
            id,
            tdl::Tensor {
                shape: vec![2],
                data: v,
            },
        );
    }
    execute(graph, &imp.library, &mut values, |_, _| true).unwrap();
    let out = |name: &str| -> tdl::Tensor {
        let (_, o) = imp.outputs.iter().find(|(n, _)| n == name).unwrap();
        match o {
            onnx::Output::Tensor(t) => values.get(*t).unwrap().clone(),
            onnx::Output::Const(_) => panic!("computed at run time"),
        }
    };
    assert_eq!(out("v").data, vec![13.0, 26.0]);
    let s = out("stacked");
    assert_eq!(s.shape, vec![3, 2]);
    assert_eq!(s.data, vec![22.0, 44.0, 24.0, 48.0, 26.0, 52.0]);
}
