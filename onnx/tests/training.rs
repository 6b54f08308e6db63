//! Training import of ONNX node models whose operators map to specs with
//! gradients: the training graph builds and its backward pass contains the
//! gradient op of the mapped spec (the gradients themselves are checked
//! against finite differences by `tdl/tests/gradients.rs`). A node test
//! model has no parameters, so a trainable elementwise scale (`Mul` by an
//! initializer of the input's shape) is put in front of its first input.

mod common;

use std::path::Path;

use onnx_protobuf::{Message, NodeProto, TensorProto};
use planner::graph::OpRole;

/// Import `node/<case>/model.onnx`, with a scale in front of its first input,
/// for training (loss on its only output); give the specs of its backward
/// operators.
fn backward_specs(case: &str) -> Option<Vec<String>> {
    let dir = common::data_dir()?;
    let path = dir.join("node").join(case).join("model.onnx");
    let m = onnx::proto::read(&path).unwrap_or_else(|e| panic!("{case}: {e}"));
    let mut proto = m.proto.clone();
    let g = proto.graph.as_mut().expect("a graph");
    let x = g.input[0].name.clone();
    // A scale of x's own shape: an elementwise product with a parameter (a
    // one-element scale would become an attribute).
    let dims: Vec<i64> = g.input[0]
        .type_
        .tensor_type()
        .shape
        .dim
        .iter()
        .map(|d| d.dim_value())
        .collect();
    let scaled = format!("{x}_scaled");
    for n in g.node.iter_mut() {
        for i in n.input.iter_mut().filter(|i| **i == x) {
            *i = scaled.clone();
        }
    }
    let mut w = TensorProto::new();
    w.name = "scale".into();
    w.data_type = 1;
    w.float_data = vec![1.5; dims.iter().product::<i64>() as usize];
    w.dims = dims;
    g.initializer.push(w);
    let mut mul = NodeProto::new();
    mul.name = "scale_input".into();
    mul.op_type = "Mul".into();
    mul.input = vec![x, "scale".into()];
    mul.output = vec![scaled];
    g.node.insert(0, mul);
    let bytes = proto.write_to_bytes().expect("serialises");
    let lib = tdl::Library::shipped().expect("shipped specs load");
    let p = Path::new("scaled.onnx");
    let m = onnx::proto::decode(&bytes, p).expect("decodes");
    let opts = onnx::Options {
        training: true,
        ..Default::default()
    };
    let imported = onnx::import(&m, p, &lib, &opts).unwrap_or_else(|e| panic!("{case}: {e}"));
    Some(
        imported
            .graph
            .ops()
            .iter()
            .filter(|o| o.role == OpRole::Backward)
            .map(|o| o.spec.clone())
            .collect(),
    )
}

/// For each (case, spec): the case's training graph has a backward `spec`
/// operator (nothing is checked when the ONNX data is missing).
fn each_backward_has(cases: &[(&str, &str)]) {
    for &(case, grad) in cases {
        let Some(specs) = backward_specs(case) else {
            return;
        };
        assert!(
            specs.iter().any(|s| s == grad),
            "{case}: backward ops {specs:?}"
        );
    }
}

#[test]
fn pooling_3d_and_dilated_average_pooling_train() {
    each_backward_has(&[
        ("test_maxpool_3d_default", "maxpool3d_ext_grad"),
        ("test_maxpool_3d_dilations", "maxpool3d_ext_grad"),
        ("test_averagepool_3d_default", "avgpool3d_ext_grad"),
        (
            "test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True",
            "avgpool3d_ext_grad",
        ),
        ("test_averagepool_2d_dilations", "avgpool3d_ext_grad"),
    ]);
}

#[test]
fn rms_normalization_mvn_swish_and_hardmax_train() {
    each_backward_has(&[
        ("test_rms_normalization_3d_axis1_epsilon", "rmsnorm_grad"),
        ("test_rms_normalization_default_axis", "rmsnorm_grad"),
        ("test_swish", "swish_grad"),
        // MeanVarianceNormalization through `layernorm`.
        ("test_mvn", "layernorm_grad"),
        // Piecewise constant: a zero gradient (`scale` by 0).
        ("test_hardmax_axis_1", "scale"),
    ]);
}

#[test]
fn nll_and_softmax_cross_entropy_losses_train() {
    each_backward_has(&[
        (
            "test_nllloss_NCd1d2_with_weight_reduction_mean",
            "nll_reduced_grad",
        ),
        (
            "test_nllloss_NCd1d2d3_none_no_weight_negative_ii",
            "nll_elements_grad",
        ),
        ("test_sce_mean_weight_ii", "nll_reduced_grad"),
        ("test_sce_mean_weight_ii", "log_softmax_grad"),
        (
            "test_sce_NCd1d2d3_none_no_weight_negative_ii",
            "nll_elements_grad",
        ),
    ]);
}

#[test]
fn lp_pooling_reverse_sequence_and_rotary_embedding_train() {
    each_backward_has(&[
        ("test_lppool_2d_pads", "lppool3d_ext_grad"),
        ("test_lppool_1d_default", "lppool3d_ext_grad"),
        ("test_reversesequence_batch", "reverse_sequence"),
        ("test_reversesequence_time", "reverse_sequence"),
        // The input gradient of a rotation is the rotation back.
        ("test_rotary_embedding", "rotary"),
        ("test_rotary_embedding_3d_input", "rotary"),
    ]);
}

#[test]
fn scatter_elements_and_scatter_nd_train() {
    each_backward_has(&[
        (
            "test_scatter_elements_with_axis",
            "scatter_elements_last_grad_data",
        ),
        ("test_scatter_elements_with_duplicate_indices", "identity"),
        ("test_scatter_with_axis", "scatter_elements_last_grad_data"),
        ("test_scatternd", "scatter_nd_1_grad_x"),
    ]);
}
