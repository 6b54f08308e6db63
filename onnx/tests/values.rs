//! `onnx::values` (`tofu run --weights MODEL.onnx`): the values a model
//! gives a graph planned from it. Oracle: the initializer values written
//! into the model by hand; negative control: a plan whose `w` has another
//! shape is refused, naming the tensor.

mod common;

use std::path::{Path, PathBuf};

use common::models::{floats, model, node, vi};
use onnx::{ImportOptions, ModelValues, ValuesError};
use onnx_protobuf::GraphProto;

const W: [f32; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];

/// `y = x + w` with `w` an initializer of shape `w_dims`, written to `dir`.
fn write(dir: &Path, file: &str, w_dims: &[i64]) -> PathBuf {
    let mut g = GraphProto::new();
    g.name = "addw".into();
    g.input.push(vi("x", 1, &[2, 3]));
    g.output.push(vi("y", 1, &[2, 3]));
    let n: i64 = w_dims.iter().product();
    g.initializer.push(floats("w", w_dims, &W[..n as usize]));
    g.node.push(node("Add", &["x", "w"], &["y"], vec![]));
    let path = dir.join(file);
    std::fs::write(&path, onnx::synth::to_bytes(&model(g).proto)).unwrap();
    path
}

fn inference() -> ImportOptions {
    ImportOptions {
        batch: None,
        dims: vec![],
        input_shapes: vec![],
        input_values: vec![],
        training: false,
        loss: None,
        class_ids: false,
        optimizer: "sgd".into(),
        weight_decay: 0.0,
        opaque_unsupported: false,
        op_map: vec![],
    }
}

#[test]
fn values_by_tensor_and_initializers_and_a_refused_shape() {
    let lib = tdl::Library::shipped().unwrap();
    let dir = std::env::temp_dir().join(format!("onnx-values-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = write(&dir, "full.onnx", &[2, 3]);
    let opts = inference();
    let graph = onnx::load_graph_with(&path, &lib, &opts.options().unwrap())
        .unwrap()
        .graph;
    let w = graph
        .tensor_ids()
        .find(|&t| graph.tensor(t).name == "w")
        .unwrap();
    match onnx::values(&graph, &path, &lib, Some(&opts)).unwrap() {
        ModelValues::ByTensor(v) => assert_eq!(v, vec![(w, W.to_vec())]),
        other => panic!("expected values by tensor, got {other:?}"),
    }
    match onnx::values(&graph, &path, &lib, None).unwrap() {
        ModelValues::Initializers(v) => assert_eq!(v, vec![("w".into(), vec![2, 3], W.to_vec())]),
        other => panic!("expected the initializers, got {other:?}"),
    }
    // The plan was made from a model whose `w` is a row of 3: refused.
    let row = write(&dir, "row.onnx", &[3]);
    let planned = onnx::load_graph_with(&row, &lib, &opts.options().unwrap())
        .unwrap()
        .graph;
    let err = onnx::values(&planned, &path, &lib, Some(&opts)).unwrap_err();
    assert!(
        matches!(&err, ValuesError::NotLeaf { name, plan_shape, .. } if name == "w" && plan_shape == &vec![3]),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
