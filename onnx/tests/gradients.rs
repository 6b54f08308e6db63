//! Training through the operators of issue 26 (item 4): models built here
//! (protobuf messages) with a weight `w` in front of the operator under
//! test, imported for training, executed whole with the TDL interpreter
//! (`planner::graph::execute`), and every element of the weight's gradient
//! compared with central finite differences of the loss (forward operators
//! re-run). Covers `Pad` in every mode, `Clip` with an infinite attribute
//! (opset 6) or input bound (opset 13), rounding (zero gradient), a float →
//! int → float round trip, and float → float casts (passed through). An
//! operator without a gradient on a path from a weight to the loss is an
//! error naming the node, its op type and why.

mod common;

use std::path::Path;

use common::models::{attr, floats, ints, model_with_opsets, node, vi, A};
use onnx_protobuf::{GraphProto, NodeProto};
use planner::graph::execute::{execute, synthesize, Values};
use planner::graph::{Graph, OpRole, TensorRole};

/// `h = MatMul(x, w)` (x: input [2, 4], w: weight [4, 4]) then `nodes`,
/// which read `h` and give the graph output `y`.
fn weighted(nodes: Vec<NodeProto>, inits: Vec<onnx_protobuf::TensorProto>) -> GraphProto {
    let mut g = GraphProto::new();
    g.name = "weighted".into();
    g.input = vec![vi("x", 1, &[2, 4])];
    g.output = vec![vi("y", 1, &[])];
    let w: Vec<f32> = (0..16).map(|i| ((i * 7 % 11) as f32 - 5.0) / 8.0).collect();
    g.initializer = vec![floats("w", &[4, 4], &w)];
    g.initializer.extend(inits);
    g.node = vec![node("MatMul", &["x", "w"], &["h"], vec![])];
    g.node.extend(nodes);
    g
}

fn lib() -> tdl::Library {
    tdl::Library::shipped().expect("shipped specs load")
}

fn import(g: GraphProto, opset: i64) -> Result<onnx::Imported, onnx::OnnxError> {
    let m = model_with_opsets(g, &[("", opset)]);
    let opts = onnx::Options {
        training: true,
        ..Default::default()
    };
    onnx::import(&m, Path::new("grad.onnx"), &lib(), &opts)
}

/// The leaf values: the synthetic fills, with the file's weights.
fn leaves(im: &onnx::Imported) -> Values {
    let mut v = synthesize(&im.graph, 7);
    for (t, k) in &im.leaf_values {
        let d = k.data().expect("in-memory data");
        v.set(
            *t,
            tdl::Tensor {
                shape: d.shape.clone(),
                data: d.values.clone(),
            },
        );
    }
    v
}

/// The loss with `w` set to `value`, forward operators re-run.
fn loss_at(g: &Graph, lib: &tdl::Library, base: &Values, w: usize, value: tdl::Tensor) -> f64 {
    let mut v = base.clone();
    let wid = g.tensor_ids().nth(w).unwrap();
    v.set(wid, value);
    execute(g, lib, &mut v, |_, op| op.role == OpRole::Forward).unwrap();
    v.get(g.loss().unwrap()).unwrap().data[0]
}

/// Execute the training step; every element of `w`'s gradient must equal
/// the central finite difference of the loss (h = 1e-6) within 1e-5
/// relative (at least 1e-3 of the largest element). Gives the gradient.
fn check_weight_gradient(im: &onnx::Imported) -> Vec<f64> {
    let g = &im.graph;
    let lib = &im.library;
    let mut v = leaves(im);
    execute(g, lib, &mut v, |_, _| true).unwrap_or_else(|e| panic!("{e}"));
    let (wi, wt) = g
        .tensors()
        .iter()
        .enumerate()
        .find(|(_, t)| t.name == "w" && t.role == TensorRole::Weight)
        .expect("weight `w`");
    let grad = v
        .get(wt.grad.expect("w has a gradient"))
        .unwrap()
        .data
        .clone();
    let w0 = v.get(g.tensor_ids().nth(wi).unwrap()).unwrap().clone();
    let gmax = grad.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    assert!(gmax > 1e-6, "the gradient of w is zero: {grad:?}");
    let h = 1e-6;
    for (i, &gi) in grad.iter().enumerate() {
        let at = |s: f64| {
            let mut t = w0.clone();
            t.data[i] += s;
            loss_at(g, lib, &v, wi, t)
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        let err = (fd - gi).abs() / fd.abs().max(gi.abs()).max(1e-3 * gmax);
        assert!(
            err <= 1e-5,
            "dL/dw[{i}]: gradient {gi}, finite differences {fd}"
        );
    }
    grad
}

fn backward_specs(g: &Graph) -> Vec<&str> {
    g.ops()
        .iter()
        .filter(|o| o.role == OpRole::Backward)
        .map(|o| o.spec.as_str())
        .collect()
}

#[test]
fn pad_in_every_mode_trains_and_its_gradient_matches_finite_differences() {
    for (mode, grad) in [
        ("constant", "slice"),
        ("edge", "pad_edge_grad"),
        ("reflect", "pad_reflect_grad"),
        ("wrap", "pad_wrap_grad"),
    ] {
        // Pads on both axes: [1, 1] before, [0, 3] after: y is [3, 8].
        let pad = node(
            "Pad",
            &["h", "pads"],
            &["y"],
            vec![attr("mode", A::S(mode))],
        );
        let reflect_ok = if mode == "reflect" { 1 } else { 3 };
        let g = weighted(vec![pad], vec![ints("pads", &[1, 1, 0, reflect_ok], false)]);
        let im = import(g, 13).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert!(
            backward_specs(&im.graph).contains(&grad),
            "{mode}: backward {:?}",
            backward_specs(&im.graph)
        );
        check_weight_gradient(&im);
    }
}

#[test]
fn clip_with_an_infinite_bound_trains() {
    // Opset 6: bounds are attributes; `max = inf` is a one-sided clamp.
    let clip = node(
        "Clip",
        &["h"],
        &["y"],
        vec![attr("min", A::F(0.0)), attr("max", A::F(f32::INFINITY))],
    );
    let im = import(weighted(vec![clip], vec![]), 6).unwrap_or_else(|e| panic!("{e}"));
    let op = im.graph.ops().iter().find(|o| o.spec == "clip").unwrap();
    assert_eq!(op.attrs["max"], tdl::AttrValue::Float(f64::INFINITY));
    assert!(backward_specs(&im.graph).contains(&"clip_grad"));
    check_weight_gradient(&im);
    // Opset 13: bounds are inputs, here -inf below and 0.5 above.
    let clip = node("Clip", &["h", "lo", "hi"], &["y"], vec![]);
    let bounds = vec![
        floats("lo", &[], &[f32::NEG_INFINITY]),
        floats("hi", &[], &[0.5]),
    ];
    let im = import(weighted(vec![clip], bounds), 13).unwrap_or_else(|e| panic!("{e}"));
    let op = im.graph.ops().iter().find(|o| o.spec == "clip").unwrap();
    assert_eq!(op.attrs["min"], tdl::AttrValue::Float(f64::NEG_INFINITY));
    check_weight_gradient(&im);
    // The graph file keeps the bound.
    let text = planner::graph::format::to_json(&im.graph);
    assert_eq!(planner::graph::format::from_json(&text).unwrap(), im.graph);
}

#[test]
fn rounding_has_zero_gradient_and_a_float_int_float_round_trip_trains() {
    // y = h + Floor(h) + float(int64(Floor(h))) + Round(h) + Sign(h) + Ceil(h)
    // + float(int32(h)): only the first term carries a gradient.
    let nodes = vec![
        node("Floor", &["h"], &["f"], vec![]),
        node("Cast", &["f"], &["fi"], vec![attr("to", A::I(7))]),
        node("Cast", &["fi"], &["ff"], vec![attr("to", A::I(1))]),
        node("Round", &["h"], &["r"], vec![]),
        node("Sign", &["h"], &["s"], vec![]),
        node("Ceil", &["h"], &["c"], vec![]),
        node("Cast", &["h"], &["t"], vec![attr("to", A::I(6))]),
        node("Cast", &["t"], &["tf"], vec![attr("to", A::I(1))]),
        node(
            "Sum",
            &["h", "f", "ff", "r", "s", "c", "tf"],
            &["y"],
            vec![],
        ),
    ];
    let im = import(weighted(nodes, vec![]), 17).unwrap_or_else(|e| panic!("{e}"));
    let specs = backward_specs(&im.graph);
    for spec in ["floor", "round", "sign", "ceil", "cast_trunc"] {
        let op = im.graph.ops().iter().find(|o| o.spec == spec);
        assert!(op.is_some(), "no `{spec}` in the forward graph");
    }
    assert!(specs.contains(&"scale"), "backward {specs:?}");
    check_weight_gradient(&im);
}

#[test]
fn a_float_to_float_cast_passes_the_gradient_through() {
    // y = float32(float16(h)): the gradient of w equals that of y = h, up to
    // the f16 rounding of the forward values the loss's gradient reads.
    let cast = vec![
        node("Cast", &["h"], &["h16"], vec![attr("to", A::I(10))]),
        node("Cast", &["h16"], &["y"], vec![attr("to", A::I(1))]),
    ];
    let im = import(weighted(cast, vec![]), 17).unwrap_or_else(|e| panic!("{e}"));
    assert!(im.graph.ops().iter().any(|o| o.spec == "cast_float_round"));
    let plain = import(
        weighted(vec![node("Identity", &["h"], &["y"], vec![])], vec![]),
        17,
    )
    .unwrap();
    let grad_of = |im: &onnx::Imported| {
        let mut v = leaves(im);
        // The same labels in both graphs.
        let labels = |g: &Graph| g.tensor_ids().find(|&t| g.tensor(t).name == "loss.labels");
        let l0 = leaves(&plain);
        let from = l0.get(labels(&plain.graph).unwrap()).unwrap().clone();
        v.set(labels(&im.graph).unwrap(), from);
        execute(&im.graph, &im.library, &mut v, |_, _| true).unwrap();
        let w = im
            .graph
            .tensor_ids()
            .find(|&t| im.graph.tensor(t).name == "w")
            .unwrap();
        v.get(im.graph.tensor(w).grad.unwrap())
            .unwrap()
            .data
            .clone()
    };
    let (got, want) = (grad_of(&im), grad_of(&plain));
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    assert!(scale > 1e-3);
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-2 * scale, "{got:?} vs {want:?}");
    }
}

#[test]
fn an_operator_without_gradient_on_the_weight_path_names_the_node_and_why() {
    for (op, attrs, why) in [
        (
            "ArgMax",
            vec![attr("axis", A::I(1)), attr("keepdims", A::I(1))],
            "integer output",
        ),
        ("IsNaN", vec![], "boolean output"),
    ] {
        let nodes = vec![
            node(op, &["h"], &["k"], attrs),
            node("Cast", &["k"], &["kf"], vec![attr("to", A::I(1))]),
            node("Mul", &["h", "kf"], &["y"], vec![]),
        ];
        let err = match import(weighted(nodes, vec![]), 17) {
            Ok(_) => panic!("{op}: training through it must fail"),
            Err(e) => e,
        };
        assert!(
            matches!(&err, onnx::OnnxError::NoGradient { node, op_type, .. } if node == "k" && op_type == op),
            "{op}: {err:?}"
        );
        let msg = err.to_string();
        for part in ["grad.onnx", "node `k`", op, why, "--loss"] {
            assert!(msg.contains(part), "{op}: `{part}` missing from: {msg}");
        }
    }
}

/// A float output without a gradient (LayerNormalization's Mean): the
/// reason is the spec's own sentence.
#[test]
fn a_float_output_without_gradient_gives_the_specs_reason() {
    let ln = node(
        "LayerNormalization",
        &["h", "sc", "bi"],
        &["ln", "y", "istd"],
        vec![attr("axis", A::I(-1))],
    );
    let params = vec![floats("sc", &[4], &[1.0; 4]), floats("bi", &[4], &[0.0; 4])];
    let err = match import(weighted(vec![ln], params), 17) {
        Ok(_) => panic!("training through LayerNormalization's Mean must fail"),
        Err(e) => e,
    };
    let msg = err.to_string();
    for part in [
        "node `ln`",
        "LayerNormalization",
        "layernorm_stats",
        "Not differentiable",
    ] {
        assert!(msg.contains(part), "`{part}` missing from: {msg}");
    }
}

#[test]
fn clip_with_a_run_time_bound_trains() {
    // y = Clip(h, max(h) − 0.5): the floor moves with the weight too.
    let nodes = vec![
        node(
            "ReduceMax",
            &["h"],
            &["top"],
            vec![attr("keepdims", A::I(0))],
        ),
        node("Sub", &["top", "range"], &["floor"], vec![]),
        node("Clip", &["h", "floor"], &["y"], vec![]),
    ];
    let g = weighted(nodes, vec![floats("range", &[], &[0.5])]);
    let im = import(g, 13).unwrap_or_else(|e| panic!("{e}"));
    assert!(im.graph.ops().iter().any(|o| o.spec == "maximum"));
    check_weight_gradient(&im);
}

#[test]
fn an_if_on_float_data_is_predicated_and_trains_through_the_taken_branch() {
    // y = If(sum(h) > 0) then h · 3 else −h, both branches declared [2, 4].
    let branch = |name: &str, nodes: Vec<NodeProto>, out: &str| {
        let mut b = GraphProto::new();
        b.name = name.into();
        b.node = nodes;
        b.output = vec![vi(out, 1, &[2, 4])];
        b
    };
    let then_b = branch(
        "then",
        vec![node("Mul", &["h", "three"], &["t_out"], vec![])],
        "t_out",
    );
    let else_b = branch(
        "else",
        vec![node("Neg", &["h"], &["e_out"], vec![])],
        "e_out",
    );
    let nodes = vec![
        node(
            "ReduceSum",
            &["h"],
            &["total"],
            vec![attr("keepdims", A::I(0))],
        ),
        node("Greater", &["total", "zero"], &["positive"], vec![]),
        node(
            "If",
            &["positive"],
            &["y"],
            vec![
                common::models::graph_attr("then_branch", then_b),
                common::models::graph_attr("else_branch", else_b),
            ],
        ),
    ];
    let inits = vec![floats("three", &[], &[3.0]), floats("zero", &[], &[0.0])];
    let im = import(weighted(nodes, inits), 17).unwrap_or_else(|e| panic!("{e}"));
    assert!(im.graph.ops().iter().any(|o| o.spec == "where"));
    check_weight_gradient(&im);
}
