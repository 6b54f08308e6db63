//! `Scan` unrolled at import (its trip count is its scan input's length,
//! known from the input shape): the unrolled graph run by the interpreter
//! computes what a direct loop over the `Scan` semantics (ONNX spec, opset
//! 9+: scan axis, input and output directions, state carried between
//! iterations) computes, and it imports for training.

mod common;

use std::path::Path;

use common::models::{graph_attr, model, node, vi};
use onnx::Options;
use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{AttributeProto, GraphProto};
use planner::graph::execute::{execute, Values};
use planner::graph::OpRole;

fn library() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INTS.into();
    a.ints = v.to_vec();
    a
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INT.into();
    a.i = v;
    a
}

const B: usize = 2;
const T: usize = 3;

/// `Scan` over `x: [B, T]` along axis 1, reversed; state `s: [B]`:
/// `s ← s + x_t`, scan output `y_t = s · x_t` stacked along axis 1, reversed.
fn scan_model() -> onnx::proto::Model {
    let mut body = GraphProto::new();
    body.name = "body".into();
    body.input = vec![vi("s_in", 1, &[B as i64]), vi("x_t", 1, &[B as i64])];
    body.output = vec![vi("s_out", 1, &[B as i64]), vi("y_t", 1, &[B as i64])];
    body.node = vec![
        node("Add", &["s_in", "x_t"], &["s_out"], vec![]),
        node("Mul", &["s_out", "x_t"], &["y_t"], vec![]),
    ];
    let mut g = GraphProto::new();
    g.name = "scan".into();
    g.input = vec![vi("s0", 1, &[B as i64]), vi("x", 1, &[B as i64, T as i64])];
    g.output = vec![vi("s", 1, &[B as i64]), vi("y", 1, &[B as i64, T as i64])];
    g.node = vec![node(
        "Scan",
        &["s0", "x"],
        &["s", "y"],
        vec![
            graph_attr("body", body),
            int_attr("num_scan_inputs", 1),
            ints_attr("scan_input_axes", &[1]),
            ints_attr("scan_input_directions", &[1]),
            ints_attr("scan_output_axes", &[1]),
            ints_attr("scan_output_directions", &[1]),
        ],
    )];
    model(g)
}

/// The `Scan` semantics written out: (final state, scan output [B, T]).
fn oracle(s0: &[f64], x: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let mut s = s0.to_vec();
    let mut y = vec![0.0; B * T];
    for t in 0..T {
        let col = T - 1 - t; // reverse input direction
        let pos = T - 1 - t; // reverse output direction
        for b in 0..B {
            let xt = x[b * T + col];
            s[b] += xt;
            y[b * T + pos] = s[b] * xt;
        }
    }
    (s, y)
}

#[test]
fn scan_is_unrolled_and_computes_the_scan() {
    let imp = onnx::import(
        &scan_model(),
        Path::new("scan.onnx"),
        library(),
        &Options::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(imp.summary.inlined.get("Scan"), Some(&1));
    let graph = &imp.graph;
    let steps: std::collections::BTreeSet<u32> =
        graph.ops().iter().filter_map(|o| o.step).collect();
    assert_eq!(steps, (0..T as u32).collect());
    let s0 = vec![1.0, -2.0];
    let x = vec![0.5, 1.5, -3.0, 2.0, 4.0, 0.25];
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
    for (name, shape, data) in [("s0", vec![B], &s0), ("x", vec![B, T], &x)] {
        let id = graph.tensor_by_name(name).expect("graph input");
        values.set(
            id,
            tdl::Tensor {
                shape,
                data: data.clone(),
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
    let (s, y) = oracle(&s0, &x);
    assert_eq!(out("s").data, s);
    let got = out("y");
    assert_eq!(got.shape, vec![B, T]);
    assert_eq!(got.data, y);
}

#[test]
fn scan_imports_for_training() {
    let opts = Options {
        training: true,
        ..Default::default()
    };
    // The initial state a weight (a float initializer): it gets a gradient
    // through every unrolled iteration.
    let mut m = scan_model();
    let g = m.proto.graph.as_mut().unwrap();
    g.input.remove(0);
    let mut w = onnx_protobuf::TensorProto::new();
    w.name = "s0".into();
    w.data_type = 1;
    w.dims = vec![B as i64];
    w.float_data = vec![1.0, -2.0];
    g.initializer.push(w);
    let imp = onnx::import(&m, Path::new("scan.onnx"), library(), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(imp.graph.ops().iter().any(|o| o.role == OpRole::Backward));
}
