//! Folding a `Gather` whose data is a zero-size constant (issue 38, item 6:
//! a silero-vad variant was reported to fail folding a `Gather` on a tensor
//! of shape `[0, 2, 128]`; no flag on any of the six ONNX files of the
//! silero-vad 6.2.3 wheel reproduces it on this code, so this is a guard,
//! not a regression test of a fix). Takes a small model built here; checks
//! the shapes and values the importer folds against ONNX's `Gather`
//! semantics worked out by hand: gathering along a non-empty axis of
//! `[0, 2, 128]` gives `[0, …]`, an empty index tensor `[2, 0]` along the
//! empty axis gives `[2, 0, 2, 128]`, and the shapes of those results feed
//! on (`Shape`, `Concat`) as the exporters' shape chains do. An index into
//! the empty axis is out of range (onnxruntime refuses it at run time too:
//! "indices element out of data bounds"), and the import error names the
//! node and the shape.

mod common;

use std::path::Path;

use common::models::{attr, ints, model, node, vi, A};
use common::run_imported;
use onnx_protobuf::{attribute_proto::AttributeType, AttributeProto, GraphProto, TensorProto};

/// A `Constant` node giving `name` = an int64 tensor of `dims` (no
/// elements when a dim is 0).
fn constant(name: &str, dims: &[i64], values: &[i64]) -> onnx_protobuf::NodeProto {
    let mut t = TensorProto::new();
    t.data_type = 7;
    t.dims = dims.to_vec();
    t.int64_data = values.to_vec();
    let mut a = AttributeProto::new();
    a.name = "value".into();
    a.type_ = AttributeType::TENSOR.into();
    a.t = Some(t).into();
    node("Constant", &[], &[name], vec![a])
}

/// `z` = int64 zeros `[0, 2, 128]` (a `Constant` node); `g1 =
/// Gather(z, 1, axis 1)`, `g2 = Gather(z, [2, 0] empty, axis 0)`,
/// `g3 = Gather(z, [127, 0], axis 2)`; `s = Concat(Shape(g1), Shape(g2),
/// Shape(g3))`; `y = x + Cast(ReduceSum(s))` so that the graph has an
/// operator. With `bad`, `g1` gathers index 0 along the empty axis 0.
fn zero_size_gathers(bad: bool) -> GraphProto {
    let mut g = GraphProto::new();
    g.name = "zero_size_gathers".into();
    g.input = vec![vi("x", 1, &[2, 3])];
    g.output = ["g1", "g2", "g3", "s"]
        .iter()
        .map(|o| vi(o, 7, &[]))
        .chain([vi("y", 1, &[2, 3])])
        .collect();
    g.initializer = vec![
        ints("one", &[1], true),
        ints("zero", &[0], true),
        ints("last", &[127, 0], false),
    ];
    let mut none = ints("none", &[], false);
    none.dims = vec![2, 0];
    g.initializer.push(none);
    let gather = |data: &str, idx: &str, out: &str, axis: i64| {
        node(
            "Gather",
            &[data, idx],
            &[out],
            vec![attr("axis", A::I(axis))],
        )
    };
    let mut cast = node("Cast", &["total"], &["total_f"], vec![]);
    cast.attribute = vec![attr("to", A::I(1))];
    g.node = vec![
        constant("z", &[0, 2, 128], &[]),
        if bad {
            gather("z", "zero", "g1", 0)
        } else {
            gather("z", "one", "g1", 1)
        },
        gather("z", "none", "g2", 0),
        gather("z", "last", "g3", 2),
        node("Shape", &["g1"], &["s1"], vec![]),
        node("Shape", &["g2"], &["s2"], vec![]),
        node("Shape", &["g3"], &["s3"], vec![]),
        node(
            "Concat",
            &["s1", "s2", "s3"],
            &["s"],
            vec![attr("axis", A::I(0))],
        ),
        node(
            "ReduceSum",
            &["s"],
            &["total"],
            vec![attr("keepdims", A::I(0))],
        ),
        cast,
        node("Add", &["x", "total_f"], &["y"], vec![]),
    ];
    g
}

/// The values `x` runs on.
const X: [f64; 6] = [0.5, -1.0, 2.0, 0.0, 3.25, -7.5];

fn import(bad: bool) -> Result<onnx::Imported, String> {
    let mut opts = onnx::Options::default();
    opts.input_shapes.insert("x".into(), vec![2, 3]);
    opts.input_values
        .insert("x".into(), onnx::Data::floats(vec![2, 3], X.to_vec()));
    onnx::import(
        &model(zero_size_gathers(bad)),
        Path::new("zero_size.onnx"),
        common::library(),
        &opts,
    )
    .map_err(|e| e.to_string())
}

#[test]
fn gathers_on_a_zero_size_constant_fold_to_onnx_shapes() {
    let imp = import(false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        imp.summary.folded.get("Gather"),
        Some(&3),
        "{:?}",
        imp.summary.folded
    );
    let out = run_imported(&imp);
    let names: Vec<&str> = imp.outputs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["g1", "g2", "g3", "s", "y"]);
    // Gather along axis a: data.shape[..a] ++ indices.shape ++ data.shape[a+1..].
    let (g1, g2, g3, s, y) = (&out[0], &out[1], &out[2], &out[3], &out[4]);
    assert_eq!(g1.0, [0, 128]);
    assert_eq!(g2.0, [2, 0, 2, 128]);
    assert_eq!(g3.0, [0, 2, 2]);
    assert!(g1.1.is_empty() && g2.1.is_empty() && g3.1.is_empty());
    let want_s = [0.0, 128.0, 2.0, 0.0, 2.0, 128.0, 0.0, 2.0, 2.0];
    assert_eq!(s.1, want_s);
    // y = x + 264 (the sum of the folded shapes), element by element.
    assert_eq!(y.0, [2, 3]);
    let want: Vec<f64> = X.iter().map(|v| v + 264.0).collect();
    common::assert_close("y", &y.1, &want);
}

#[test]
fn an_index_into_the_empty_axis_names_the_node_and_the_shape() {
    let e = import(true).err().expect("index 0 of an empty axis");
    for want in ["zero_size.onnx", "g1", "Gather", "[0, 2, 128]"] {
        assert!(e.contains(want), "`{want}` missing from: {e}");
    }
}
