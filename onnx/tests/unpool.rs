//! MaxUnpool after MaxPool's Indices output, on several images and channels
//! (ONNX's indices count over the whole N×C×H×W tensor, which the lowering
//! turns into positions of each (n, c) plane): the round trip keeps each
//! window's maximum in place and zeros the rest (oracle: the windows worked
//! out directly). The training graph carries `maxunpool_grad`.

mod common;

use std::path::Path;

use common::models::{ints_attr, model, node, vi};
use common::{assert_close, backward_specs, library, run_imported, values};
use onnx::{Data, Elem, Options};
use onnx_protobuf::GraphProto;

const X: [i64; 4] = [2, 3, 4, 6];

fn graph() -> GraphProto {
    let mut g = GraphProto::new();
    g.name = "unpool".into();
    g.input = vec![vi("x", 1, &X)];
    g.output = vec![vi("z", 1, &[])];
    let k = || {
        vec![
            ints_attr("kernel_shape", &[2, 2]),
            ints_attr("strides", &[2, 2]),
        ]
    };
    g.node = vec![
        node("MaxPool", &["x"], &["y", "i"], k()),
        node("MaxUnpool", &["y", "i"], &["z"], k()),
    ];
    g
}

#[test]
fn unpooling_puts_each_window_maximum_back() {
    let n: i64 = X.iter().product();
    let xv = values(n as usize, 3);
    let shape: Vec<usize> = X.iter().map(|&d| d as usize).collect();
    let mut opts = Options::default();
    opts.input_values.insert(
        "x".into(),
        Data {
            elem: Elem::F32,
            shape: shape.clone(),
            values: xv.iter().map(|&v| f64::from(v)).collect(),
        },
    );
    let imp = onnx::import(&model(graph()), Path::new("unpool.onnx"), library(), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    let (got_shape, got) = run_imported(&imp).remove(0);
    assert_eq!(got_shape, shape);
    let (h, w) = (shape[2], shape[3]);
    let mut want = vec![0.0f64; xv.len()];
    for plane in 0..shape[0] * shape[1] {
        for (bi, bj) in (0..h / 2).flat_map(|a| (0..w / 2).map(move |b| (a, b))) {
            let at = |i: usize, j: usize| plane * h * w + (2 * bi + i) * w + 2 * bj + j;
            let best = [(0, 0), (0, 1), (1, 0), (1, 1)]
                .into_iter()
                .map(|(i, j)| at(i, j))
                .max_by(|&a, &b| xv[a].total_cmp(&xv[b]))
                .expect("a window");
            want[best] = f64::from(xv[best]);
        }
    }
    assert_close("unpool", &got, &want);
}

#[test]
fn unpooling_trains() {
    let mut g = graph();
    let n: i64 = X.iter().product();
    g.initializer = vec![common::models::floats("s", &X, &values(n as usize, 5))];
    g.node.insert(0, node("Mul", &["x", "s"], &["xs"], vec![]));
    g.node[1].input[0] = "xs".into();
    let opts = Options {
        training: true,
        ..Options::default()
    };
    let imp = onnx::import(&model(g), Path::new("unpool.onnx"), library(), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    let backward = backward_specs(&imp);
    assert!(backward.contains(&"maxunpool_grad"), "{backward:?}");
}
