//! Conv and pooling with begin pads unlike end pads (issue 26, item 2):
//! `pads = [0, 0, 1, 1]` (TensorFlow's and Paddle's "SAME" exports) and
//! every `auto_pad` mode, lowered to padded reads (`conv2d_ext`,
//! `conv2d_group_ext`, `maxpool2d_ext`, `avgpool2d_ext`), no Pad operator.
//!
//! Oracles: values worked out by hand; and ONNX's definition of the pads —
//! zeros added to the input before a convolution without pads — as a model
//! `Pad(x, pads) → Conv(VALID)` (Pad is checked by ONNX's own node tests in
//! the conformance run), with the pads an `auto_pad` mode resolves to worked
//! out by hand from the ONNX operator spec. Both run through the importer and
//! the TDL interpreter. The new specs' gradients are checked by finite
//! differences in `tdl/tests/gradients.rs`; here the training graph of an
//! asymmetric convolution builds and carries them.

mod common;

use std::path::Path;

use common::models::{attr, floats, ints, ints_attr, model, node, vi, A};
use common::{assert_close, library, run_imported, values};
use onnx::{Data, Elem, Options};
use onnx_protobuf::{AttributeProto, GraphProto};

/// One convolution case: input dims, weight dims, group, bias, attributes.
struct Case {
    name: &'static str,
    x: Vec<i64>,
    w: Vec<i64>,
    group: i64,
    bias: bool,
    /// The Conv node's attributes (pads or auto_pad, strides, dilations).
    attrs: Vec<AttributeProto>,
    /// The pads [begin…, end…] these attributes mean, worked out by hand.
    pads: Vec<i64>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
}

/// Import `g` with `x` given as the value of graph input `x`, and run it.
fn run(g: GraphProto, x: &[i64], xv: &[f32]) -> (Vec<usize>, Vec<f64>) {
    let shape: Vec<usize> = x.iter().map(|&d| d as usize).collect();
    let mut opts = Options::default();
    opts.input_shapes.insert("x".into(), shape.clone());
    opts.input_values.insert(
        "x".into(),
        Data {
            elem: Elem::F32,
            shape,
            values: xv.iter().map(|&v| v as f64).collect(),
        },
    );
    let has_pad_node = g.node.iter().any(|n| n.op_type == "Pad");
    let imp = onnx::import(&model(g), Path::new("pads.onnx"), library(), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    let specs: Vec<&str> = imp.graph.ops().iter().map(|o| o.spec.as_str()).collect();
    assert!(
        has_pad_node || !specs.contains(&"pad"),
        "a padded read, no Pad operator: {specs:?}"
    );
    run_imported(&imp).remove(0)
}

/// `Conv(x, w[, b])` with the case's attributes, or (`oracle`) `Pad` with
/// the case's pads and then `Conv` without pads.
fn conv_graph(c: &Case, oracle: bool) -> GraphProto {
    let mut g = GraphProto::new();
    g.name = c.name.into();
    g.input = vec![vi("x", 1, &c.x)];
    g.output = vec![vi("y", 1, &[])];
    let nw: i64 = c.w.iter().product();
    g.initializer = vec![floats("w", &c.w, &values(nw as usize, 7))];
    let mut ins = vec!["xp", "w"];
    if c.bias {
        g.initializer
            .push(floats("b", &[c.w[0]], &values(c.w[0] as usize, 3)));
        ins.push("b");
    }
    let mut attrs = vec![
        attr("group", A::I(c.group)),
        ints_attr("strides", &c.strides),
        ints_attr("dilations", &c.dilations),
    ];
    if oracle {
        let k = c.pads.len() / 2;
        // Pad's pads: [begin of every axis…, end of every axis…], N and C unpadded.
        let mut p = vec![0, 0];
        p.extend(&c.pads[..k]);
        p.extend([0, 0]);
        p.extend(&c.pads[k..]);
        g.initializer.push(ints("pads", &p, false));
        g.node.push(node("Pad", &["x", "pads"], &["xp"], vec![]));
    } else {
        ins[0] = "x";
        attrs.extend(c.attrs.iter().cloned());
    }
    g.node.push(node("Conv", &ins, &["y"], attrs));
    g
}

fn cases() -> Vec<Case> {
    let pads = |v: &[i64]| ints_attr("pads", v);
    let auto = |s: &str| attr("auto_pad", A::S(s));
    vec![
        // TensorFlow "SAME", 3×3 stride 1 exports as symmetric; stride 2 on an
        // even side as [0, 0, 1, 1]: total (3 - 1)·2 + 3 - 6 = 1.
        Case {
            name: "tf_same_stride2",
            x: vec![1, 2, 6, 6],
            w: vec![3, 2, 3, 3],
            group: 1,
            bias: true,
            attrs: vec![pads(&[0, 0, 1, 1])],
            pads: vec![0, 0, 1, 1],
            strides: vec![2, 2],
            dilations: vec![1, 1],
        },
        Case {
            name: "end_pads_only",
            x: vec![2, 2, 5, 4],
            w: vec![2, 2, 2, 3],
            group: 1,
            bias: false,
            attrs: vec![pads(&[0, 0, 1, 2])],
            pads: vec![0, 0, 1, 2],
            strides: vec![1, 1],
            dilations: vec![1, 1],
        },
        // SAME_UPPER, kernel 2 stride 1: total 1, the odd pad at the end.
        Case {
            name: "same_upper_even_kernel",
            x: vec![1, 1, 4, 5],
            w: vec![2, 1, 2, 2],
            group: 1,
            bias: false,
            attrs: vec![auto("SAME_UPPER")],
            pads: vec![0, 0, 1, 1],
            strides: vec![1, 1],
            dilations: vec![1, 1],
        },
        // SAME_LOWER: the odd pad at the beginning.
        Case {
            name: "same_lower_even_kernel",
            x: vec![1, 1, 4, 5],
            w: vec![2, 1, 2, 2],
            group: 1,
            bias: true,
            attrs: vec![auto("SAME_LOWER")],
            pads: vec![1, 1, 0, 0],
            strides: vec![1, 1],
            dilations: vec![1, 1],
        },
        // SAME_UPPER, stride 2, dilation 2 along h: out = ceil(7 / 2) = 4,
        // total h = 3·2 + 5 - 7 = 4 → (2, 2); w: out 3, total 2·2 + 3 - 6 = 1 → (0, 1).
        Case {
            name: "same_upper_strided_dilated",
            x: vec![1, 2, 7, 6],
            w: vec![2, 2, 3, 3],
            group: 1,
            bias: false,
            attrs: vec![auto("SAME_UPPER")],
            pads: vec![2, 0, 2, 1],
            strides: vec![2, 2],
            dilations: vec![2, 1],
        },
        Case {
            name: "valid",
            x: vec![1, 2, 5, 5],
            w: vec![1, 2, 3, 2],
            group: 1,
            bias: false,
            attrs: vec![auto("VALID")],
            pads: vec![0, 0, 0, 0],
            strides: vec![2, 1],
            dilations: vec![1, 1],
        },
        Case {
            name: "grouped",
            x: vec![1, 4, 5, 5],
            w: vec![4, 2, 3, 3],
            group: 2,
            bias: true,
            attrs: vec![pads(&[1, 0, 2, 1])],
            pads: vec![1, 0, 2, 1],
            strides: vec![1, 2],
            dilations: vec![1, 1],
        },
        // 1-D "SAME" of an audio model: kernel 3, stride 2 on 8 samples: total 1.
        Case {
            name: "conv1d_same_upper",
            x: vec![2, 2, 8],
            w: vec![3, 2, 3],
            group: 1,
            bias: true,
            attrs: vec![auto("SAME_UPPER")],
            pads: vec![0, 1],
            strides: vec![2],
            dilations: vec![1],
        },
        // Depthwise 1-D with asymmetric pads.
        Case {
            name: "conv1d_depthwise",
            x: vec![1, 3, 6],
            w: vec![3, 1, 2],
            group: 3,
            bias: false,
            attrs: vec![pads(&[2, 1])],
            pads: vec![2, 1],
            strides: vec![1],
            dilations: vec![2],
        },
    ]
}

#[test]
fn conv_pads_equal_zero_padding_then_an_unpadded_conv() {
    for c in cases() {
        let n: i64 = c.x.iter().product();
        let xv = values(n as usize, 11);
        let (shape, got) = run(conv_graph(&c, false), &c.x, &xv);
        let (eshape, expected) = run(conv_graph(&c, true), &c.x, &xv);
        assert_eq!(shape, eshape, "{}: output shape", c.name);
        assert_close(c.name, &got, &expected);
    }
}

/// Output shapes from the ONNX spec: SAME_* gives ceil(in / stride).
#[test]
fn same_auto_pad_keeps_ceil_of_input_over_stride() {
    for c in cases().iter().filter(|c| c.name.contains("same")) {
        let n: i64 = c.x.iter().product();
        let (shape, _) = run(conv_graph(c, false), &c.x, &values(n as usize, 5));
        let want: Vec<usize> = c.x[2..]
            .iter()
            .zip(&c.strides)
            .map(|(&d, &s)| (d as usize).div_ceil(s as usize))
            .collect();
        assert_eq!(shape[2..], want[..], "{}", c.name);
    }
}

/// Pooling `x` (1×1×2×2 = [[1, 2], [3, 4]]) with a 2×2 window and `pad_attrs`.
fn pool_2x2(op: &str, pad_attrs: AttributeProto) -> Vec<f64> {
    let mut g = GraphProto::new();
    g.name = op.into();
    g.input = vec![vi("x", 1, &[1, 1, 2, 2])];
    g.output = vec![vi("y", 1, &[])];
    let attrs = vec![ints_attr("kernel_shape", &[2, 2]), pad_attrs];
    g.node = vec![node(op, &["x"], &["y"], attrs)];
    let (shape, v) = run(g, &[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(shape, [1, 1, 2, 2], "{op}");
    v
}

#[test]
fn hand_worked_values() {
    // Conv with a 2×2 kernel of ones over [[1, 2], [3, 4]].
    let conv = |a: AttributeProto| {
        let mut g = GraphProto::new();
        g.name = "hand".into();
        g.input = vec![vi("x", 1, &[1, 1, 2, 2])];
        g.output = vec![vi("y", 1, &[])];
        g.initializer = vec![floats("w", &[1, 1, 2, 2], &[1.0; 4])];
        g.node = vec![node("Conv", &["x", "w"], &["y"], vec![a])];
        run(g, &[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]).1
    };
    // End pads (bottom, right): windows start at each element.
    assert_eq!(
        conv(ints_attr("pads", &[0, 0, 1, 1])),
        [10.0, 6.0, 7.0, 4.0]
    );
    assert_eq!(
        conv(attr("auto_pad", A::S("SAME_UPPER"))),
        [10.0, 6.0, 7.0, 4.0]
    );
    // Begin pads (top, left): windows end at each element.
    assert_eq!(
        conv(ints_attr("pads", &[1, 1, 0, 0])),
        [1.0, 3.0, 4.0, 10.0]
    );
    assert_eq!(
        conv(attr("auto_pad", A::S("SAME_LOWER"))),
        [1.0, 3.0, 4.0, 10.0]
    );
    let end = || ints_attr("pads", &[0, 0, 1, 1]);
    assert_eq!(pool_2x2("MaxPool", end()), [4.0, 4.0, 4.0, 4.0]);
    assert_eq!(
        pool_2x2("MaxPool", attr("auto_pad", A::S("SAME_LOWER"))),
        [1.0, 2.0, 3.0, 4.0]
    );
    // count_include_pad = 0: the mean over the elements inside.
    assert_eq!(pool_2x2("AveragePool", end()), [2.5, 3.0, 3.5, 4.0]);
    assert_eq!(
        pool_2x2("AveragePool", attr("auto_pad", A::S("SAME_LOWER"))),
        [1.0, 1.5, 2.0, 2.5]
    );
}

/// The training graph of an asymmetric convolution differentiates it (the
/// gradient ops of `conv2d_ext` / `conv2d_group_ext`) and still runs.
#[test]
fn asymmetric_conv_trains() {
    for c in cases() {
        let opts = Options {
            training: true,
            ..Options::default()
        };
        let g = conv_graph(&c, false);
        let imp = onnx::import(&model(g), Path::new("pads.onnx"), library(), &opts)
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let specs: Vec<&str> = imp.graph.ops().iter().map(|o| o.spec.as_str()).collect();
        let grad_w = if c.group == 1 {
            "conv2d_grad_w"
        } else {
            "conv2d_group_grad_w"
        };
        assert!(specs.contains(&grad_w), "{}: {specs:?}", c.name);
    }
}
