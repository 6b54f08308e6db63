//! ONNX's sequence operators, resolved at import (`map_sequence`): the
//! dynamo exporter's `torch.split` (SplitToSequence with a chunk size, then
//! SequenceAt at fixed positions, negative ones too), a sequence built,
//! inserted into, erased from, measured and stacked (SequenceConstruct,
//! SequenceInsert, SequenceErase, SequenceLength, ConcatFromSequence with
//! `new_axis = 1`), and the split into single slices without the axis
//! (`keepdims = 0`). Oracle: the same slices and arithmetic written out
//! here from the input's values, run through the TDL interpreter; the
//! training graph's backward runs through the split and the concatenation.

mod common;

use std::path::Path;

use common::models::{attr, ints, model, node, vi, A};
use common::{assert_close, backward_specs, library, run_imported, values};
use onnx::{Data, Elem, Options};
use onnx_protobuf::GraphProto;

fn graph() -> GraphProto {
    let mut g = GraphProto::new();
    g.name = "sequences".into();
    g.input = vec![vi("x", 1, &[2, 6])];
    g.initializer = vec![
        ints("two", &[2], true),
        ints("first", &[0], true),
        ints("last", &[-1], true),
        ints("second", &[1], true),
    ];
    let axis = |a: i64| vec![attr("axis", A::I(a))];
    g.node = vec![
        node("SplitToSequence", &["x", "two"], &["s"], axis(1)),
        node("SequenceAt", &["s", "first"], &["a"], vec![]),
        node("SequenceAt", &["s", "last"], &["c"], vec![]),
        node("SequenceAt", &["s", "second"], &["b"], vec![]),
        node("Mul", &["a", "c"], &["ac"], vec![]),
        node("Add", &["ac", "b"], &["y"], vec![]),
        node("SequenceConstruct", &["y", "a"], &["t"], vec![]),
        node("SequenceInsert", &["t", "c", "first"], &["t2"], vec![]),
        node("SequenceErase", &["t2", "last"], &["t3"], vec![]),
        node(
            "ConcatFromSequence",
            &["t3"],
            &["z"],
            vec![attr("axis", A::I(0)), attr("new_axis", A::I(1))],
        ),
        node("SequenceLength", &["t3"], &["len"], vec![]),
        node(
            "SplitToSequence",
            &["x"],
            &["rows"],
            vec![attr("axis", A::I(0)), attr("keepdims", A::I(0))],
        ),
        node("SequenceAt", &["rows", "second"], &["r1"], vec![]),
    ];
    g.output = vec![
        vi("y", 1, &[2, 2]),
        vi("z", 1, &[2, 2, 2]),
        vi("len", 7, &[]),
        vi("r1", 1, &[6]),
    ];
    g
}

#[test]
fn sequences_resolve_at_import_and_compute_the_slices() {
    let x: Vec<f64> = values(12, 4).iter().map(|&v| f64::from(v)).collect();
    let mut opts = Options::default();
    opts.input_values.insert(
        "x".into(),
        Data {
            elem: Elem::F32,
            shape: vec![2, 6],
            values: x.clone(),
        },
    );
    let imp = onnx::import(
        &model(graph()),
        Path::new("sequences.onnx"),
        library(),
        &opts,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let outs = run_imported(&imp);
    // Column block k of x: x[:, 2k .. 2k + 2].
    let block = |k: usize| -> Vec<f64> {
        (0..2)
            .flat_map(|r| (0..2).map(move |j| (r, j)))
            .map(|(r, j)| x[r * 6 + 2 * k + j])
            .collect()
    };
    let (a, b, c) = (block(0), block(1), block(2));
    let y: Vec<f64> = (0..4).map(|i| a[i] * c[i] + b[i]).collect();
    assert_eq!(outs[0].0, vec![2, 2]);
    assert_close("y", &outs[0].1, &y);
    // [c, y] stacked along a new axis 0.
    assert_eq!(outs[1].0, vec![2, 2, 2]);
    assert_close("z", &outs[1].1, &[c.clone(), y.clone()].concat());
    assert_eq!(outs[2], (vec![], vec![2.0]));
    assert_eq!(outs[3].0, vec![6]);
    assert_close("r1", &outs[3].1, &x[6..]);
}

#[test]
fn a_position_out_of_range_is_refused_naming_the_node() {
    let mut g = graph();
    g.node[2].input[1] = "two".into(); // position 2 of 3: fine
    g.node[3].input[1] = "five".into();
    g.initializer.push(ints("five", &[5], true));
    let err = onnx::import(
        &model(g),
        Path::new("seq.onnx"),
        library(),
        &Options::default(),
    )
    .err()
    .expect("position 5 of 3 elements");
    let msg = err.to_string();
    assert!(
        msg.contains("SequenceAt") && msg.contains("position 5"),
        "{msg}"
    );
}

#[test]
fn the_training_graph_differentiates_through_split_and_concat() {
    let mut g = graph();
    g.input.clear();
    g.initializer
        .push(common::models::floats("x", &[2, 6], &values(12, 4)));
    g.output = vec![vi("z", 1, &[2, 2, 2])];
    let opts = Options {
        training: true,
        ..Options::default()
    };
    let imp = onnx::import(&model(g), Path::new("seq.onnx"), library(), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    let specs = backward_specs(&imp);
    assert!(
        specs.iter().any(|s| s.starts_with("split_last")),
        "{specs:?}"
    );
    assert!(specs.iter().any(|s| s.starts_with("concat")), "{specs:?}");
}
