//! ConvTranspose (1-D, 2-D, 3-D; groups, strides, dilations, asymmetric pads,
//! output_padding, output_shape, auto_pad, bias) and 3-D Conv (issue 26,
//! item 1), imported and run through the TDL interpreter.
//!
//! Oracle: ONNX's definition of the transposed convolution written the other
//! way round from the specs — each input element scatters x · w into the
//! outputs at i·stride + k·dilation − pad_begin (the specs gather, reading x
//! at the strided offsets), and a 3-D convolution as plain loops — with the
//! begin pads and output sizes the attributes mean worked out by hand from
//! the ONNX operator spec. ONNX's own node tests of ConvTranspose run in the
//! conformance test; the gradient specs are checked by finite differences in
//! `tdl/tests/gradients.rs`. Here also: a U-Net-style model (a strided Conv
//! down, a ConvTranspose up, a skip connection) imports for training and
//! plans at k = 4.

mod common;

use std::path::Path;

use common::models::{attr, floats, ints_attr, model, node, vi, A};
use common::{assert_close, backward_specs, library, run_imported, values};
use interval::cache::StrategyCache;
use onnx::{Data, Elem, Options};
use onnx_protobuf::{AttributeProto, GraphProto};
use planner::plan::{plan, SearchKind};

/// One case: the node (`ConvTranspose` or `Conv`), input and weight dims,
/// group, bias, attributes, and what they mean, worked out by hand.
struct Case {
    name: &'static str,
    op: &'static str,
    x: Vec<i64>,
    w: Vec<i64>,
    group: i64,
    bias: bool,
    attrs: Vec<AttributeProto>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    /// Begin pads.
    begin: Vec<i64>,
    /// Output spatial sizes.
    out: Vec<i64>,
}

fn case(name: &'static str, x: &[i64], w: &[i64], attrs: Vec<AttributeProto>) -> Case {
    let k = x.len() - 2;
    Case {
        name,
        op: "ConvTranspose",
        x: x.to_vec(),
        w: w.to_vec(),
        group: 1,
        bias: false,
        attrs,
        strides: vec![1; k],
        dilations: vec![1; k],
        begin: vec![0; k],
        out: vec![],
    }
}

fn cases() -> Vec<Case> {
    let auto = |s: &str| attr("auto_pad", A::S(s));
    vec![
        // H: 2·3 + 3 − 1 − 0 = 8; W: 2 + 3 − 0 − 2 = 3.
        Case {
            bias: true,
            strides: vec![2, 1],
            begin: vec![1, 0],
            out: vec![8, 3],
            ..case(
                "asymmetric_pads",
                &[1, 2, 4, 3],
                &[2, 3, 3, 3],
                vec![
                    ints_attr("pads", &[1, 0, 0, 2]),
                    ints_attr("strides", &[2, 1]),
                ],
            )
        },
        // H: 2·2 + 1 + 2·1 + 1 = 8; W: 3·2 + 2 + 2 + 1 = 11.
        Case {
            strides: vec![2, 3],
            dilations: vec![2, 1],
            out: vec![8, 11],
            ..case(
                "output_padding_dilated",
                &[2, 1, 3, 3],
                &[1, 2, 2, 3],
                vec![
                    ints_attr("strides", &[2, 3]),
                    ints_attr("dilations", &[2, 1]),
                    ints_attr("output_padding", &[1, 2]),
                ],
            )
        },
        // Natural 7 × 9; output_shape 6 × 10: totals 1 and −1, SAME_LOWER puts
        // the odd half first: begin (1, 0), end (0, −1).
        Case {
            strides: vec![2, 2],
            begin: vec![1, 0],
            out: vec![6, 10],
            ..case(
                "output_shape_same_lower",
                &[1, 2, 3, 4],
                &[2, 1, 3, 3],
                vec![
                    ints_attr("strides", &[2, 2]),
                    ints_attr("output_shape", &[6, 10]),
                    auto("SAME_LOWER"),
                ],
            )
        },
        // SAME_UPPER: output 3·2 = 6 of a natural 7: the odd pad at the end.
        Case {
            strides: vec![2, 2],
            out: vec![6, 6],
            ..case(
                "same_upper",
                &[1, 1, 3, 3],
                &[1, 2, 3, 3],
                vec![ints_attr("strides", &[2, 2]), auto("SAME_UPPER")],
            )
        },
        // H: 2·2 + 2 − 0 − 1 = 5; W: 2·2 + 2 − 1 − 0 = 5.
        Case {
            group: 2,
            bias: true,
            strides: vec![2, 2],
            begin: vec![0, 1],
            out: vec![5, 5],
            ..case(
                "grouped",
                &[1, 4, 3, 3],
                &[4, 2, 2, 2],
                vec![
                    attr("group", A::I(2)),
                    ints_attr("strides", &[2, 2]),
                    ints_attr("pads", &[0, 1, 1, 0]),
                ],
            )
        },
        // 2·4 + 2·2 + 1 − 2 = 11.
        Case {
            group: 3,
            strides: vec![2],
            dilations: vec![2],
            begin: vec![1],
            out: vec![11],
            ..case(
                "depthwise_1d",
                &[2, 3, 5],
                &[3, 1, 3],
                vec![
                    attr("group", A::I(3)),
                    ints_attr("strides", &[2]),
                    ints_attr("dilations", &[2]),
                    ints_attr("pads", &[1, 1]),
                ],
            )
        },
        // 3·3 + 2 + 1 + 1 = 13.
        Case {
            bias: true,
            strides: vec![3],
            out: vec![13],
            ..case(
                "output_padding_1d",
                &[1, 2, 4],
                &[2, 3, 2],
                vec![
                    ints_attr("strides", &[3]),
                    ints_attr("output_padding", &[2]),
                ],
            )
        },
        // D: 1 + 2 − 0 − 1 = 2; H: 2·2 + 2 − 1 − 0 = 5; W: 2·1 + 3 − 0 − 1 = 4.
        Case {
            bias: true,
            strides: vec![1, 2, 2],
            begin: vec![0, 1, 0],
            out: vec![2, 5, 4],
            ..case(
                "pads_3d",
                &[1, 2, 2, 3, 2],
                &[2, 2, 2, 2, 3],
                vec![
                    ints_attr("strides", &[1, 2, 2]),
                    ints_attr("pads", &[0, 1, 0, 1, 0, 1]),
                ],
            )
        },
        Case {
            group: 2,
            strides: vec![2, 2, 2],
            out: vec![4, 4, 4],
            ..case(
                "grouped_3d",
                &[1, 4, 2, 2, 2],
                &[4, 1, 2, 2, 2],
                vec![attr("group", A::I(2)), ints_attr("strides", &[2, 2, 2])],
            )
        },
        // Conv 3-D, grouped, asymmetric pads: D (3 + 1 + 0 − 2) / 1 + 1 = 3,
        // H (4 + 0 + 1 − 3) / 2 + 1 = 2, W (5 + 2 + 1 − 2·1 − 1) / 1 + 1 = 6.
        Case {
            op: "Conv",
            group: 2,
            bias: true,
            strides: vec![1, 2, 1],
            dilations: vec![1, 1, 2],
            begin: vec![1, 0, 2],
            out: vec![3, 2, 6],
            ..case(
                "conv_3d",
                &[1, 4, 3, 4, 5],
                &[2, 2, 2, 3, 2],
                vec![
                    attr("group", A::I(2)),
                    ints_attr("strides", &[1, 2, 1]),
                    ints_attr("dilations", &[1, 1, 2]),
                    ints_attr("pads", &[1, 0, 2, 0, 1, 1]),
                ],
            )
        },
    ]
}

/// Output channels of a case.
fn out_channels(c: &Case) -> i64 {
    if c.op == "Conv" {
        c.w[0]
    } else {
        c.w[1] * c.group
    }
}

/// The case's node on graph input `x`; with `train`, on x times a
/// parameter of x's shape, so that the training graph differentiates the
/// node with respect to its input too.
fn graph(c: &Case, train: bool) -> GraphProto {
    let mut g = GraphProto::new();
    g.name = c.name.into();
    g.input = vec![vi("x", 1, &c.x)];
    g.output = vec![vi("y", 1, &[])];
    let nw: i64 = c.w.iter().product();
    g.initializer = vec![floats("w", &c.w, &values(nw as usize, 7))];
    let mut ins = vec!["x", "w"];
    if train {
        let nx: i64 = c.x.iter().product();
        g.initializer
            .push(floats("s", &c.x, &values(nx as usize, 5)));
        g.node.push(node("Mul", &["x", "s"], &["xs"], vec![]));
        ins[0] = "xs";
    }
    if c.bias {
        let m = out_channels(c);
        g.initializer
            .push(floats("b", &[m], &values(m as usize, 3)));
        ins.push("b");
    }
    g.node.push(node(c.op, &ins, &["y"], c.attrs.clone()));
    g
}

/// Row-major strides of `dims`.
fn strides_of(dims: &[i64]) -> Vec<i64> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Every multi-index of a box of `dims`.
fn indices(dims: &[i64]) -> Vec<Vec<i64>> {
    let mut out = vec![vec![]];
    for &d in dims {
        out = out
            .into_iter()
            .flat_map(|p| {
                (0..d).map(move |i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect();
    }
    out
}

/// The oracle: ConvTranspose by scattering every x · w product (ONNX's
/// definition), Conv by gathering with zero padding; plus the bias.
fn oracle(c: &Case, x: &[f32]) -> (Vec<usize>, Vec<f64>) {
    let k = c.x.len() - 2;
    let w = values(c.w.iter().product::<i64>() as usize, 7);
    let m = out_channels(c);
    let mut ydims = vec![c.x[0], m];
    ydims.extend(&c.out);
    let (xs, ws, ys) = (strides_of(&c.x), strides_of(&c.w), strides_of(&ydims));
    let mut y = vec![0.0f64; ydims.iter().product::<i64>() as usize];
    let at = |s: &[i64], idx: &[i64]| -> usize {
        idx.iter().zip(s).map(|(i, s)| i * s).sum::<i64>() as usize
    };
    let kernel = &c.w[2..];
    let transpose = c.op == "ConvTranspose";
    // Channels per group on the weight's second axis and on x.
    let (xg, wg) = (c.x[1] / c.group, c.w[1]);
    for b in 0..c.x[0] {
        for ch in 0..c.x[1] {
            let g = ch / xg;
            for p in indices(&c.x[2..]) {
                let xv = f64::from(x[at(&xs, &[&[b, ch][..], &p[..]].concat())]);
                for q in indices(kernel) {
                    // Transposed: x position p feeds output p·s + q·d − begin.
                    // Conv: output o reads x at o·s + q·d − begin = p, when o is integral.
                    let mut o = Vec::with_capacity(k);
                    for i in 0..k {
                        let t = p[i] * c.strides[i] + q[i] * c.dilations[i] - c.begin[i];
                        o.push(t);
                    }
                    if transpose {
                        if o.iter().zip(&c.out).any(|(&t, &n)| t < 0 || t >= n) {
                            continue;
                        }
                        for mg in 0..wg {
                            let wv = f64::from(w[at(&ws, &[&[ch, mg][..], &q[..]].concat())]);
                            let yi = at(&ys, &[&[b, g * wg + mg][..], &o[..]].concat());
                            y[yi] += xv * wv;
                        }
                    } else {
                        // Outputs o with o·s + q·d − begin = p.
                        let mut oo = Vec::with_capacity(k);
                        for i in 0..k {
                            let t = p[i] + c.begin[i] - q[i] * c.dilations[i];
                            if t < 0 || t % c.strides[i] != 0 || t / c.strides[i] >= c.out[i] {
                                break;
                            }
                            oo.push(t / c.strides[i]);
                        }
                        if oo.len() < k {
                            continue;
                        }
                        let per = c.w[0] / c.group;
                        for co in g * per..(g + 1) * per {
                            let wv = f64::from(w[at(&ws, &[&[co, ch % wg][..], &q[..]].concat())]);
                            let yi = at(&ys, &[&[b, co][..], &oo[..]].concat());
                            y[yi] += xv * wv;
                        }
                    }
                }
            }
        }
    }
    if c.bias {
        let bv = values(m as usize, 3);
        let per: usize = c.out.iter().product::<i64>() as usize;
        for (i, v) in y.iter_mut().enumerate() {
            *v += f64::from(bv[(i / per) % m as usize]);
        }
    }
    (ydims.iter().map(|&d| d as usize).collect(), y)
}

fn import(g: GraphProto, opts: &Options) -> onnx::Imported {
    onnx::import(&model(g), Path::new("conv_transpose.onnx"), library(), opts)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn imported_values_equal_the_scatter_definition() {
    for c in cases() {
        let n: i64 = c.x.iter().product();
        let xv = values(n as usize, 11);
        let shape: Vec<usize> = c.x.iter().map(|&d| d as usize).collect();
        let mut opts = Options::default();
        opts.input_values.insert(
            "x".into(),
            Data {
                elem: Elem::F32,
                shape,
                values: xv.iter().map(|&v| f64::from(v)).collect(),
            },
        );
        let (shape, got) = run_imported(&import(graph(&c, false), &opts)).remove(0);
        let (eshape, expected) = oracle(&c, &xv);
        assert_eq!(shape, eshape, "{}: output shape", c.name);
        assert_close(c.name, &got, &expected);
    }
}

/// The training graph of every case carries the gradients of the mapped
/// spec: the input gradient of a transposed convolution is a convolution,
/// its weight gradient a convolution's weight gradient.
#[test]
fn every_case_trains_through_the_gradient_specs() {
    for c in cases() {
        let opts = Options {
            training: true,
            ..Options::default()
        };
        let imp = import(graph(&c, true), &opts);
        let backward = backward_specs(&imp);
        let k = c.x.len() - 2;
        let want: &[&str] = match (c.op, k, c.group) {
            ("Conv", _, _) => &["conv_transpose3d_ext", "conv3d_group_grad_w"],
            (_, 3, _) => &["conv3d_group_ext", "conv3d_group_grad_w"],
            (_, _, 1) => &["conv2d_ext", "conv2d_grad_w"],
            _ => &["conv2d_group_ext", "conv2d_group_grad_w"],
        };
        for w in want {
            assert!(backward.contains(w), "{}: {w} not in {backward:?}", c.name);
        }
    }
}

/// A U-Net-style block: a strided Conv down, Relu, a ConvTranspose back up
/// (pads and output_padding), a skip connection added: imports for training
/// and plans at k = 4.
#[test]
fn a_unet_block_trains_and_plans_at_k4() {
    let mut g = GraphProto::new();
    g.name = "unet_block".into();
    g.input = vec![vi("x", 1, &[8, 8, 16, 16])];
    g.output = vec![vi("y", 1, &[])];
    g.initializer = vec![
        floats("w_down", &[16, 8, 3, 3], &values(16 * 8 * 9, 1)),
        floats("b_down", &[16], &values(16, 2)),
        floats("w_up", &[16, 8, 3, 3], &values(16 * 8 * 9, 3)),
        floats("b_up", &[8], &values(8, 4)),
    ];
    g.node = vec![
        node(
            "Conv",
            &["x", "w_down", "b_down"],
            &["d"],
            vec![
                ints_attr("strides", &[2, 2]),
                ints_attr("pads", &[1, 1, 1, 1]),
            ],
        ),
        node("Relu", &["d"], &["r"], vec![]),
        // (8 − 1)·2 + 1 + 3 − 1 − 1 = 16.
        node(
            "ConvTranspose",
            &["r", "w_up", "b_up"],
            &["u"],
            vec![
                ints_attr("strides", &[2, 2]),
                ints_attr("pads", &[1, 1, 1, 1]),
                ints_attr("output_padding", &[1, 1]),
            ],
        ),
        node("Add", &["u", "x"], &["y"], vec![]),
    ];
    let opts = Options {
        training: true,
        ..Options::default()
    };
    let imp = import(g, &opts);
    let specs: Vec<&str> = imp.graph.ops().iter().map(|o| o.spec.as_str()).collect();
    assert!(specs.contains(&"conv_transpose2d_ext"), "{specs:?}");
    let cache = StrategyCache::new();
    let p = plan(&imp.graph, &imp.library, &cache, 4, SearchKind::CriticalDp)
        .unwrap_or_else(|e| panic!("plan at k = 4: {e}"));
    assert_eq!(p.factors.iter().product::<usize>(), 4);
    assert_eq!(p.memory.len(), 4);
    println!(
        "U-Net block: {} training ops, plan at k = 4 moves {} bytes",
        imp.graph.ops().len(),
        p.comm_bytes
    );
}
