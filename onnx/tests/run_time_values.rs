//! Values known only at run time where the importer used to need them at
//! import (issue 26, real models): an `If` on data whose branches declare
//! the same static shapes is predicated (both branches, `Where`), as in
//! openWakeWord's verifier; a `Clip` bound computed from the data (a
//! decibel spectrogram's `max(x) − 80` floor) becomes `maximum`/`minimum`.
//! Each is run with the interpreter against the operator's semantics
//! written out, and imports for training.

mod common;

use std::path::Path;

use common::models::{graph_attr, model, node, vi};
use onnx::Options;
use onnx_protobuf::{GraphProto, TensorProto};
use planner::graph::execute::{execute, Values};
use planner::graph::OpRole;

fn library() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

fn scalar(name: &str, v: f32) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.data_type = 1;
    t.float_data = vec![v];
    t
}

/// Run `imp` with graph input `x` = `xv` (shape `shape`); output `y`.
fn run(imp: &onnx::Imported, shape: &[usize], xv: &[f64]) -> Vec<f64> {
    let graph = &imp.graph;
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
    let x = graph.tensor_by_name("x").expect("graph input x");
    values.set(
        x,
        tdl::Tensor {
            shape: shape.to_vec(),
            data: xv.to_vec(),
        },
    );
    execute(graph, &imp.library, &mut values, |_, _| true).unwrap();
    let (_, o) = imp.outputs.iter().find(|(n, _)| n == "y").unwrap();
    match o {
        onnx::Output::Tensor(t) => values.get(*t).unwrap().data.clone(),
        onnx::Output::Const(_) => panic!("computed at run time"),
    }
}

/// `y = If(sum(x) > 0) then Relu(x)·w else Neg(x)`, both declared [2, 3]
/// (else branch declared `else_dims`).
fn if_on_data(else_dims: &[i64]) -> onnx::proto::Model {
    let mut then_b = GraphProto::new();
    then_b.name = "then".into();
    then_b.node = vec![
        node("Relu", &["x"], &["r"], vec![]),
        node("Mul", &["r", "w"], &["t_out"], vec![]),
    ];
    then_b.output = vec![vi("t_out", 1, &[2, 3])];
    let mut else_b = GraphProto::new();
    else_b.name = "else".into();
    else_b.node = vec![node("Neg", &["x"], &["e_out"], vec![])];
    else_b.output = vec![vi("e_out", 1, else_dims)];
    let mut g = GraphProto::new();
    g.name = "if_on_data".into();
    g.input = vec![vi("x", 1, &[2, 3])];
    g.output = vec![vi("y", 1, &[2, 3])];
    g.initializer = vec![scalar("zero", 0.0), scalar("w", 3.0)];
    g.node = vec![
        node("ReduceSum", &["x"], &["total"], vec![]),
        node("Greater", &["total", "zero"], &["positive"], vec![]),
        node(
            "If",
            &["positive"],
            &["y"],
            vec![
                graph_attr("then_branch", then_b),
                graph_attr("else_branch", else_b),
            ],
        ),
    ];
    model(g)
}

#[test]
fn if_on_data_with_static_branch_shapes_is_predicated() {
    let imp = onnx::import(
        &if_on_data(&[2, 3]),
        Path::new("if.onnx"),
        library(),
        &Options::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let specs: Vec<&str> = imp.graph.ops().iter().map(|o| o.spec.as_str()).collect();
    assert!(
        specs.contains(&"relu") && specs.contains(&"neg"),
        "{specs:?}"
    );
    for xv in [
        [1.0, -2.0, 3.0, 0.5, -0.5, 4.0],
        [-1.0, -2.0, 3.0, -0.5, -0.5, -4.0],
    ] {
        let positive = xv.iter().sum::<f64>() > 0.0;
        let want: Vec<f64> = xv
            .iter()
            .map(|&v| if positive { v.max(0.0) * 3.0 } else { -v })
            .collect();
        assert_eq!(run(&imp, &[2, 3], &xv), want, "x = {xv:?}");
    }
    let opts = Options {
        training: true,
        ..Default::default()
    };
    let t = onnx::import(&if_on_data(&[2, 3]), Path::new("if.onnx"), library(), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(t.graph.ops().iter().any(|o| o.role == OpRole::Backward));
}

#[test]
fn if_on_data_with_dynamic_branch_shapes_names_the_condition() {
    let e = onnx::import(
        &if_on_data(&[-1, 3]),
        Path::new("if.onnx"),
        library(),
        &Options::default(),
    )
    .err()
    .expect("branches without one static shape")
    .to_string();
    assert!(
        e.contains("`positive` depends on run-time data")
            && e.contains("do not declare one static shape"),
        "{e}"
    );
}

/// `y = Clip(x, max(x) − 2, hi)`: a lower bound computed at run time.
fn clip_from_max(hi: Option<f32>) -> onnx::proto::Model {
    let mut g = GraphProto::new();
    g.name = "clip_db".into();
    g.input = vec![vi("x", 1, &[2, 3])];
    g.output = vec![vi("y", 1, &[2, 3])];
    let mut attr = onnx_protobuf::AttributeProto::new();
    attr.name = "keepdims".into();
    attr.type_ = onnx_protobuf::attribute_proto::AttributeType::INT.into();
    attr.i = 0;
    g.initializer = vec![scalar("range", 2.0)];
    let mut ins = vec!["x", "floor"];
    if let Some(h) = hi {
        g.initializer.push(scalar("hi", h));
        ins.push("hi");
    }
    g.node = vec![
        node("ReduceMax", &["x"], &["top"], vec![attr]),
        node("Sub", &["top", "range"], &["floor"], vec![]),
        node("Clip", &ins, &["y"], vec![]),
    ];
    model(g)
}

#[test]
fn clip_with_a_run_time_bound_clips_to_it() {
    let xv = [1.0, -2.0, 3.0, 0.5, 2.5, 4.0];
    for hi in [None, Some(3.5), Some(f32::INFINITY)] {
        let m = clip_from_max(hi);
        let imp = onnx::import(&m, Path::new("clip.onnx"), library(), &Options::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let top = xv.iter().cloned().fold(f64::MIN, f64::max);
        let h = hi.map_or(f64::INFINITY, f64::from);
        let want: Vec<f64> = xv.iter().map(|&v| v.max(top - 2.0).min(h)).collect();
        assert_eq!(run(&imp, &[2, 3], &xv), want, "hi = {hi:?}");
        let opts = Options {
            training: true,
            ..Default::default()
        };
        onnx::import(&m, Path::new("clip.onnx"), library(), &opts)
            .unwrap_or_else(|e| panic!("training, hi = {hi:?}: {e}"));
    }
}
