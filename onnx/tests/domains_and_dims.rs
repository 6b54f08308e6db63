//! Issue 26, item 5: a `--dim NAME=V` whose name no graph input has is an
//! error listing the model's dim names (it used to be ignored silently), and
//! a node of a domain other than ai.onnx is an error naming the domain and
//! saying whether tofu could ever train it; `--opaque-unsupported` still
//! imports such a node. Models are built here (protobuf messages).

mod common;

use std::path::Path;

use common::models::{floats, model_with_opsets, node, vi};
use onnx::domain::Trainable;
use onnx::OnnxError;
use onnx_protobuf::GraphProto;

fn lib() -> tdl::Library {
    tdl::Library::shipped().expect("shipped specs load")
}

/// `y = Relu(x)` with x of dims [batch, sequence_length, 4] and a second
/// input `mask` of dims [batch, 4].
fn dynamic_model() -> onnx::proto::Model {
    let mut g = GraphProto::new();
    g.name = "dyn".into();
    let mut x = vi("x", 1, &[-1, -1, 4]);
    x.type_
        .mut_or_insert_default()
        .mut_tensor_type()
        .shape
        .mut_or_insert_default()
        .dim[1]
        .set_dim_param("sequence_length".into());
    g.input = vec![x, vi("mask", 1, &[-1, 4])];
    g.output = vec![vi("y", 1, &[])];
    g.node = vec![node("Relu", &["x"], &["y"], vec![])];
    model_with_opsets(g, &[("", 17)])
}

fn with_dims(named: &[(&str, usize)]) -> onnx::Options {
    let mut opts = onnx::Options::default();
    for &(n, v) in named {
        opts.dims.named.insert(n.into(), v);
    }
    opts
}

#[test]
fn a_dim_name_no_input_has_is_an_error_listing_the_models_dims() {
    let m = dynamic_model();
    let p = Path::new("dyn.onnx");
    let err = match onnx::import(&m, p, &lib(), &with_dims(&[("sequence", 128)])) {
        Ok(_) => panic!("--dim sequence=128 must not be ignored"),
        Err(e) => e,
    };
    assert!(matches!(err, OnnxError::Options { .. }), "{err:?}");
    let msg = err.to_string();
    for part in [
        "dyn.onnx",
        "--dim names `sequence`",
        "`sequence_length` (x)",
        "`batch` (x, mask)",
    ] {
        assert!(msg.contains(part), "`{part}` missing from: {msg}");
    }
    // The right name is taken.
    let im = onnx::import(&m, p, &lib(), &with_dims(&[("sequence_length", 16)])).unwrap();
    let x = im.graph.tensors().iter().find(|t| t.name == "x").unwrap();
    assert_eq!(x.shape, vec![1, 16, 4]);
    // A model without named dims says so.
    let mut g = GraphProto::new();
    g.name = "static".into();
    g.input = vec![vi("x", 1, &[2, 4])];
    g.output = vec![vi("y", 1, &[])];
    g.node = vec![node("Relu", &["x"], &["y"], vec![])];
    let m = model_with_opsets(g, &[("", 17)]);
    let msg = match onnx::import(&m, p, &lib(), &with_dims(&[("seq", 8)])) {
        Ok(_) => panic!("--dim on a static model must fail"),
        Err(e) => e.to_string(),
    };
    assert!(msg.contains("no named dynamic dims"), "{msg}");
}

/// One node `op_type` of `domain` reading X [2, 3] (through `Mul` by a
/// weight when `weighted`) and giving Y [2, 1].
fn foreign(domain: &str, op_type: &str, weighted: bool) -> onnx::proto::Model {
    let mut g = GraphProto::new();
    g.name = "foreign".into();
    g.input = vec![vi("X", 1, &[2, 3])];
    g.output = vec![vi("Y", 1, &[2, 1])];
    let mut src = "X";
    if weighted {
        g.initializer = vec![floats("w", &[2, 3], &[0.5; 6])];
        g.node.push(node("Mul", &["X", "w"], &["Xw"], vec![]));
        src = "Xw";
    }
    let mut n = node(op_type, &[src], &["Y"], vec![]);
    n.domain = domain.into();
    g.node.push(n);
    model_with_opsets(g, &[("", 17), (domain, 3)])
}

#[test]
fn a_foreign_domain_is_named_with_whether_tofu_could_train_it() {
    let p = Path::new("forest.onnx");
    for (domain, op, trainable, says) in [
        (
            "ai.onnx.ml",
            "TreeEnsembleRegressor",
            Trainable::Never,
            "not differentiable",
        ),
        (
            "ai.onnx.ml",
            "SVMClassifier",
            Trainable::Never,
            "node attributes, not tensors",
        ),
        (
            "com.microsoft",
            "FusedMatMul",
            Trainable::AsAiOnnx,
            "before onnxruntime's optimizations",
        ),
        (
            "com.example.custom",
            "Mystery",
            Trainable::Unknown,
            "custom domain",
        ),
    ] {
        let err = match onnx::import(&foreign(domain, op, false), p, &lib(), &Default::default()) {
            Ok(_) => panic!("{domain}::{op} must not import"),
            Err(e) => e,
        };
        assert!(
            matches!(&err, OnnxError::Domain { domain: d, trainable: t, op_type, .. }
                if d == domain && *t == trainable && op_type == op),
            "{err:?}"
        );
        let msg = err.to_string();
        for part in [
            "forest.onnx",
            "node `Y`",
            op,
            domain,
            says,
            "--opaque-unsupported",
        ] {
            assert!(msg.contains(part), "`{part}` missing from: {msg}");
        }
        if trainable == Trainable::Never {
            assert!(msg.contains("could never train"), "{msg}");
        }
    }
}

#[test]
fn opaque_unsupported_still_imports_a_foreign_node_but_not_trains_through_it() {
    let p = Path::new("forest.onnx");
    let opts = onnx::Options {
        opaque_unsupported: true,
        ..Default::default()
    };
    let m = foreign("ai.onnx.ml", "TreeEnsembleRegressor", false);
    let im = onnx::import(&m, p, &lib(), &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(im.summary.opaque.len(), 1);
    assert_eq!(im.summary.opaque[0].op_type, "TreeEnsembleRegressor");
    // Training with a weight in front of it: the error names the node and why.
    let opts = onnx::Options {
        opaque_unsupported: true,
        training: true,
        ..Default::default()
    };
    let m = foreign("ai.onnx.ml", "TreeEnsembleRegressor", true);
    let err = match onnx::import(&m, p, &lib(), &opts) {
        Ok(_) => panic!("training through an opaque node must fail"),
        Err(e) => e,
    };
    assert!(matches!(err, OnnxError::NoGradient { .. }), "{err:?}");
    let msg = err.to_string();
    for part in ["node `Y`", "TreeEnsembleRegressor", "opaque operator"] {
        assert!(msg.contains(part), "`{part}` missing from: {msg}");
    }
}
