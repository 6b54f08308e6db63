//! Operator domains other than ai.onnx, for the error of a node in one.
//!
//! The mapping table covers ai.onnx and the tensor functions of ai.onnx.ml
//! (Binarizer, ArrayFeatureExtractor) and ai.onnx.preview.training (Adagrad,
//! Adam, Momentum). A node of another domain, or another op of those, is an
//! [`crate::OnnxError::Domain`] error whose text comes from [`explain`]: what
//! the domain is, whether tofu could ever train a model through the node
//! (its parameters are tensors and it is differentiable) and what to do.

/// Whether tofu could ever train through operators of a domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trainable {
    /// Never: not differentiable, or no parameters that are tensors.
    Never,
    /// Once written as ai.onnx operators (or given specs): the math is differentiable.
    AsAiOnnx,
    /// Unknown: tofu does not know what the operators compute.
    Unknown,
}

/// What tofu says about op `op_type` of domain `domain` (not ai.onnx):
/// whether it could ever be trained, and the sentence explaining it and the
/// fix (without the `--opaque-unsupported` advice, which every case shares).
pub fn explain(domain: &str, op_type: &str) -> (Trainable, String) {
    match domain {
        "ai.onnx.ml" => ml(op_type),
        "com.microsoft" | "com.microsoft.nchwc" | "com.ms.internal.nhwc" => (
            Trainable::AsAiOnnx,
            "it is one of onnxruntime's contrib operators (fused or layout-specific kernels that \
             onnxruntime's graph optimizations write, e.g. FusedMatMul, Attention, \
             SkipLayerNormalization); most fuse differentiable ai.onnx operators, so tofu could \
             train the model written in ai.onnx: use the model as exported, before onnxruntime's \
             optimizations (or save it with graph_optimization_level = ORT_DISABLE_ALL)"
                .into(),
        ),
        "ai.onnx.preview.training" => (
            Trainable::AsAiOnnx,
            "it is one of ONNX's training operators (Gradient; tofu maps Momentum, Adagrad and \
             Adam); tofu builds the backward pass itself: import the inference model and pass \
             --training"
                .into(),
        ),
        "org.pytorch.aten" => (
            Trainable::AsAiOnnx,
            "it is a PyTorch ATen fallback operator; export with \
             torch.onnx.export(..., operator_export_type=torch.onnx.OperatorExportTypes.ONNX) \
             so that every operator is ai.onnx, and the differentiable ones train"
                .into(),
        ),
        "ai.onnx.contrib" => (
            Trainable::Never,
            "it is an onnxruntime-extensions pre- or post-processing operator (tokenizers, \
             strings, image decoding): not differentiable, so tofu could never train through it; \
             run it outside the model"
                .into(),
        ),
        _ => (
            Trainable::Unknown,
            format!(
                "it is a custom domain: tofu does not know what its operators compute, so it cannot \
                 tell whether they are differentiable; describe it in TDL: write a spec (with `grad` \
                 declarations to train through it) whose doc has the line `/// onnx: {domain}::{op_type}` \
                 and load it with `--specs PATH`, or map the node to a spec with \
                 `--op-map {domain}::{op_type}=SPEC` (docs/guide/operator-spec.md); or rewrite the node \
                 with ai.onnx operators"
            ),
        ),
    }
}

/// ai.onnx.ml, ONNX's classical machine-learning domain: parameters are
/// node attributes, not tensors, so nothing in it is a weight tofu could update.
fn ml(op_type: &str) -> (Trainable, String) {
    let what = match op_type {
        "TreeEnsembleClassifier" | "TreeEnsembleRegressor" | "TreeEnsemble" => {
            "a decision-tree ensemble: piecewise constant in its inputs (not differentiable), \
             its thresholds and leaf values node attributes, not tensors"
        }
        "SVMClassifier" | "SVMRegressor" => {
            "a support-vector machine whose support vectors and coefficients are node \
             attributes, not tensors"
        }
        "LinearClassifier" | "LinearRegressor" => {
            "a linear model whose coefficients are node attributes, not tensors (to train it, \
             write it as ai.onnx Gemm with initializers)"
        }
        "LabelEncoder" | "CategoryMapper" | "DictVectorizer" | "ZipMap" | "OneHotEncoder"
        => "an encoder of labels, strings or maps: not differentiable",
        _ => "a classical machine-learning operator whose parameters are node attributes, not tensors",
    };
    (
        Trainable::Never,
        format!(
            "ai.onnx.ml is ONNX's classical machine-learning domain, and {op_type} is {what}, \
             so tofu, which trains tensors by gradient descent, could never train it"
        ),
    )
}
