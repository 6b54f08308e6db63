//! Control flow with import-time constants (issue 15, item 3): an `If`
//! whose condition folds from input shapes becomes its taken branch; a
//! `Loop` with a constant trip count is unrolled (iterations named
//! `<loop>/t<i>/…`) and computes what the loop computes (checked with the
//! interpreter against values worked out by hand); a condition that depends
//! on run-time data is an error naming it. Each iteration's operators carry
//! its time step as graph metadata, which coarsening (Tofu §4.2.1) groups
//! the iterations by.

mod common;

use std::path::Path;

use common::models::{branch, graph_attr, if_on_shape, ints, model, node, vi};
use interval::cache::StrategyCache;
use onnx::Options;
use onnx_protobuf::{GraphProto, TensorProto};
use planner::graph::execute::{execute, Values};
use planner::graph::{Graph, OpRole};
use planner::plan::coarsen::coarsen;
use planner::plan::model::Model;

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
    // A branch output of dynamic shape: the `If` cannot be predicated.
    let mut dynamic = branch("Neg");
    dynamic.output = vec![vi("y_branch", 1, &[-1, 4])];
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
                graph_attr("else_branch", dynamic),
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

/// An RNN as a `Loop` run 3 times: `h ← tanh(h·W + x)`, `W` a weight.
fn rnn_loop() -> onnx::proto::Model {
    let mut body = GraphProto::new();
    body.name = "cell".into();
    body.input = vec![
        vi("i", 7, &[]),
        vi("cond_in", 9, &[]),
        vi("h_in", 1, &[2, 4]),
    ];
    body.output = vec![vi("cond_out", 9, &[]), vi("h_out", 1, &[2, 4])];
    body.node = vec![
        node("Identity", &["cond_in"], &["cond_out"], vec![]),
        node("MatMul", &["h_in", "w"], &["hw"], vec![]),
        node("Add", &["hw", "x"], &["pre"], vec![]),
        node("Tanh", &["pre"], &["h_out"], vec![]),
    ];
    let mut g = GraphProto::new();
    g.name = "rnn_loop".into();
    g.input = vec![vi("x", 1, &[2, 4]), vi("h0", 1, &[2, 4])];
    g.output = vec![vi("h", 1, &[2, 4])];
    let mut w = TensorProto::new();
    w.name = "w".into();
    w.data_type = 1;
    w.dims = vec![4, 4];
    w.float_data = vec![0.1; 16];
    let mut cond = TensorProto::new();
    cond.name = "cond".into();
    cond.data_type = 9;
    cond.int32_data = vec![1];
    g.initializer = vec![ints("trips", &[3], true), cond, w];
    g.node = vec![node(
        "Loop",
        &["trips", "cond", "h0"],
        &["h"],
        vec![graph_attr("body", body)],
    )];
    model(g)
}

/// The iteration in an unrolled op's name (`h/t<i>/…`), read by the test only.
fn iteration_in_name(name: &str) -> Option<u32> {
    name.strip_prefix("h/t")?.split('/').next()?.parse().ok()
}

/// `graph` with every op and tensor renamed `n<k>` (so no name holds a
/// `t<digits>` segment) and, unless `keep_steps`, its step metadata removed.
fn renamed(graph: &Graph, keep_steps: bool) -> Graph {
    let mut ops = graph.ops().to_vec();
    let mut tensors = graph.tensors().to_vec();
    for (k, o) in ops.iter_mut().enumerate() {
        o.name = format!("n{k}");
        o.step = o.step.filter(|_| keep_steps);
    }
    for (k, t) in tensors.iter_mut().enumerate() {
        t.name = format!("m{k}");
        t.step = t.step.filter(|_| keep_steps);
    }
    Graph::from_parts(
        graph.name().to_string(),
        ops,
        tensors,
        graph.groups().to_vec(),
        graph.loss(),
    )
    .unwrap()
}

#[test]
fn unrolled_loop_iterations_are_time_steps_that_coarsening_coalesces() {
    let opts = Options {
        training: true,
        ..Default::default()
    };
    let imp = onnx::import(&rnn_loop(), Path::new("rnn.onnx"), library(), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    let graph = &imp.graph;
    assert!(graph.ops().iter().any(|o| o.role == OpRole::Backward));
    // Every forward op of iteration i (by its name) has step i; no other op
    // has a step; each iteration has the cell's MatMul, Add and Tanh.
    let mut per_step = [0usize; 3];
    for o in graph.ops() {
        let want = iteration_in_name(&o.name).filter(|_| o.role == OpRole::Forward);
        assert_eq!(o.step, want, "op `{}` ({:?})", o.name, o.role);
        if let Some(s) = want {
            per_step[s as usize] += 1;
        }
    }
    assert!(
        per_step.iter().all(|&n| n >= 3 && n == per_step[0]),
        "{per_step:?}"
    );
    // The weight belongs to no step; each iteration's activations to theirs.
    let w = graph.tensor_by_name("w").expect("weight tensor");
    assert_eq!(graph.tensor(w).step, None);
    for (i, t) in graph.tensors().iter().enumerate() {
        let id = planner::graph::TensorId(i as u32);
        if let Some(p) = graph.producer(id) {
            let op = graph.op(p);
            if op.role == OpRole::Forward {
                assert_eq!(t.step, op.step, "tensor `{}`", t.name);
            }
        }
    }

    let lib = &imp.library;
    let cache = StrategyCache::new();
    // Names without `t<i>` segments: only the metadata tells the steps.
    let stepped = renamed(graph, true);
    let got = coarsen(&stepped, &Model::new(&stepped, lib, &cache).unwrap());
    let covers_every_step = |slot: &[planner::graph::OpId]| {
        let mut s: Vec<Option<u32>> = slot.iter().map(|&o| graph.op(o).step).collect();
        s.sort();
        s == [Some(0), Some(1), Some(2)]
    };
    assert!(
        got.iter()
            .any(|c| c.op_slots.iter().any(|s| covers_every_step(s))),
        "no cluster holds an op of every iteration"
    );
    // Without the metadata nothing is coalesced.
    let bare = renamed(graph, false);
    let plain = coarsen(&bare, &Model::new(&bare, lib, &cache).unwrap());
    assert!(plain.len() > got.len());
    assert!(plain
        .iter()
        .all(|c| c.op_slots.iter().all(|s| s.len() == 1)));
}
