//! `--opaque-unsupported`: an operator without a spec becomes an opaque
//! operator that the interval analysis lets the planner only replicate or
//! split along its leading batch dim (issue 5). The models are built here
//! with the protobuf messages: one node of an op type no table row maps.

use std::collections::BTreeSet;
use std::path::Path;

use onnx_protobuf::{
    tensor_shape_proto, type_proto, GraphProto, Message, ModelProto, NodeProto, OperatorSetIdProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

fn value(name: &str, shape: &[i64]) -> ValueInfoProto {
    let mut shp = TensorShapeProto::new();
    for &d in shape {
        let mut dim = tensor_shape_proto::Dimension::new();
        dim.set_dim_value(d);
        shp.dim.push(dim);
    }
    let mut tt = type_proto::Tensor::new();
    tt.elem_type = 1;
    tt.shape = Some(shp).into();
    let mut tp = TypeProto::new();
    tp.set_tensor_type(tt);
    let mut v = ValueInfoProto::new();
    v.name = name.into();
    v.type_ = Some(tp).into();
    v
}

/// A model with one `Mystery` node reading `inputs` (graph inputs), a float
/// initializer `w` of shape [7], and giving `outputs`.
fn model(inputs: &[(&str, &[i64])], outputs: &[(&str, &[i64])]) -> Vec<u8> {
    let mut g = GraphProto::new();
    g.name = "opaque_test".into();
    for (n, s) in inputs {
        g.input.push(value(n, s));
    }
    let mut w = TensorProto::new();
    w.name = "w".into();
    w.data_type = 1;
    w.dims = vec![7];
    w.float_data = (0..7).map(|i| i as f32).collect();
    g.initializer.push(w);
    let mut node = NodeProto::new();
    node.name = "mystery".into();
    node.op_type = "Mystery".into();
    node.input = inputs.iter().map(|(n, _)| n.to_string()).collect();
    node.input.push("w".into());
    node.output = outputs.iter().map(|(n, _)| n.to_string()).collect();
    g.node.push(node);
    for (n, s) in outputs {
        g.output.push(value(n, s));
    }
    let mut m = ModelProto::new();
    m.ir_version = 8;
    let mut op = OperatorSetIdProto::new();
    op.version = 17;
    m.opset_import.push(op);
    m.graph = Some(g).into();
    m.write_to_bytes().expect("serialises")
}

/// The strategy names the interval analysis finds for the opaque operator.
fn opaque_strategies(bytes: &[u8]) -> BTreeSet<String> {
    let lib = tdl::Library::shipped().expect("shipped specs load");
    let path = Path::new("opaque_test.onnx");
    let m = onnx::proto::decode(bytes, path).expect("decodes");
    // Without the flag the node is an error naming it.
    let e = onnx::import(&m, path, &lib, &onnx::Options::default())
        .err()
        .expect("unmapped op is an error")
        .to_string();
    assert!(e.contains("mystery") && e.contains("Mystery"), "{e}");
    let opts = onnx::Options {
        opaque_unsupported: true,
        ..Default::default()
    };
    let imported = onnx::import(&m, path, &lib, &opts).expect("imports as opaque");
    assert_eq!(imported.summary.opaque.len(), 1);
    let spec_name = &imported.summary.opaque[0].spec;
    let spec = imported.library.get(spec_name).expect("generated spec");
    let st = interval::analyse(spec).expect("analysable");
    st.strategies.iter().map(|s| s.name.clone()).collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn opaque_op_splits_only_along_the_batch_dim() {
    // Batched input and output (with other dims of both kinds): only the batch split.
    let bytes = model(&[("x", &[4, 3, 5])], &[("y", &[4, 6, 2])]);
    assert_eq!(opaque_strategies(&bytes), set(&["split b"]));
    // A rank-1 batched output, two batched inputs.
    let bytes = model(&[("x", &[4, 3]), ("z", &[4])], &[("y", &[4])]);
    assert_eq!(opaque_strategies(&bytes), set(&["split b"]));
    // Two batched outputs split together.
    let bytes = model(&[("x", &[4, 3])], &[("y", &[4, 2]), ("v", &[4, 5, 5])]);
    assert_eq!(opaque_strategies(&bytes), set(&["split b"]));
}

#[test]
fn opaque_op_without_a_batch_dim_is_only_replicated() {
    // Output without the batch dim: nothing splits (replication only).
    let bytes = model(&[("x", &[4, 3])], &[("y", &[2, 3])]);
    assert_eq!(opaque_strategies(&bytes), set(&[]));
    // One batched and one unbatched output: the batch split cannot cover both.
    let bytes = model(&[("x", &[4, 3])], &[("y", &[4, 3]), ("v", &[6])]);
    assert_eq!(opaque_strategies(&bytes), set(&[]));
    // A scalar output.
    let bytes = model(&[("x", &[4, 3])], &[("y", &[])]);
    assert_eq!(opaque_strategies(&bytes), set(&[]));
}
