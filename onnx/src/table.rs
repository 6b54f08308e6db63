//! THE mapping table: every ONNX operator tofu imports, the TDL specs it
//! lowers to, and the function that does it.
//!
//! One row per operator: ai.onnx, and the tensor functions of ai.onnx.ml
//! and ai.onnx.preview.training (each row names its domain). `specs` lists every spec the lowering may
//! emit for the operator itself (shape plumbing such as `reshape_A_B`,
//! `swap_blocks` and `broadcast_R` is not listed); a row with no specs is
//! folded at import time ([`crate::fold`]). `attrs` maps ONNX float
//! attributes to spec attributes with ONNX's defaults (used by
//! [`map_elementwise::unary`]). Opset differences are handled inside the
//! lowering functions (their docs say which).
//!
//! Adding an operator: write its spec in `specs/onnx_*.tdl` (or reuse a core
//! one) and add a row here; nothing else changes.

use crate::lower::{LResult, Lower, Out};
use crate::map_conv_transpose as ct;
use crate::map_grid_sample as gs;
use crate::map_nll as nll;
use crate::map_sequence as seq;
use crate::mapping::{LowerFn, Mapping};
use crate::node::Node;
use crate::proto::AI_ONNX;
use crate::{map_bitwise as bit, map_integer as integer, map_ml as ml, map_signal as sig};
use crate::{map_einsum as es, map_gather_elements as ge, map_gather_nd as gnd};
use crate::{map_elementwise as ew, map_nn as nn, map_reduce as red, map_shape as sh};
use crate::{map_quant as quant, map_resize as rs, map_rotary as rot, rnn};
use crate::{map_tensor as tensor, map_training as train};

const fn row(op: &'static str, specs: &'static [&'static str], lower: LowerFn) -> Mapping {
    Mapping {
        op,
        domain: AI_ONNX,
        specs,
        attrs: &[],
        lower,
    }
}

/// A row of another domain (`ai.onnx.ml`, `ai.onnx.preview.training`).
const fn row_in(
    domain: &'static str,
    op: &'static str,
    specs: &'static [&'static str],
    lower: LowerFn,
) -> Mapping {
    Mapping {
        op,
        domain,
        specs,
        attrs: &[],
        lower,
    }
}

const ML: &str = "ai.onnx.ml";
const TRAINING: &str = "ai.onnx.preview.training";

const fn un(op: &'static str, spec: &'static [&'static str]) -> Mapping {
    row(op, spec, ew::unary)
}

const fn una(
    op: &'static str,
    spec: &'static [&'static str],
    attrs: &'static [(&'static str, &'static str, f64)],
) -> Mapping {
    Mapping {
        op,
        domain: AI_ONNX,
        specs: spec,
        attrs,
        lower: ew::unary,
    }
}

/// Folded-only rows never reach a lowering function.
fn folded(_: &mut Lower, n: &Node, _: &Mapping) -> LResult<Vec<Out>> {
    crate::lower::unsupported(format!("{} needs inputs known at import time", n.op_type()))
}

/// Specs an unrolled LSTM / GRU / RNN emits ([`crate::rnn`]).
const RNN_SPECS: &[&str] = &[
    "take_row",
    "matmul_nt",
    "add",
    "sub",
    "mul",
    "bias_add",
    "bias_mul",
    "slice",
    "concat",
    "where",
    "less",
    "clip",
    "scale",
    "sigmoid",
    "tanh",
    "relu",
    "leaky_relu",
    "thresholded_relu",
    "hard_sigmoid",
    "elu",
    "softsign",
    "softplus",
];

/// The table (sorted by op type).
pub const TABLE: &[Mapping] = &[
    un("Abs", &["abs"]),
    row_in(TRAINING, "Adagrad", &["onnx_adagrad"], train::adagrad),
    row_in(TRAINING, "Adam", &["onnx_adam"], train::adam),
    un("Acos", &["acos"]),
    un("Acosh", &["acosh"]),
    row("Add", &["add", "bias_add", "channel_bias_add"], ew::binary),
    row(
        "AffineGrid",
        &["affine_grid_2d", "affine_grid_3d"],
        gs::affine_grid,
    ),
    row("And", &["logical_and"], ew::binary),
    row_in(
        ML,
        "ArrayFeatureExtractor",
        &["take_last"],
        ml::array_feature_extractor,
    ),
    row("ArgMax", &["argmax", "argmax_last"], red::arg),
    row("ArgMin", &["argmin", "argmin_last"], red::arg),
    un("Asin", &["asin"]),
    un("Asinh", &["asinh"]),
    un("Atan", &["atan"]),
    un("Atanh", &["atanh"]),
    row("AveragePool", &["avgpool2d_ext", "avgpool3d_ext"], nn::pool),
    Mapping {
        attrs: &[("threshold", "threshold", 0.0)],
        ..row_in(ML, "Binarizer", &["binarizer"], ew::unary)
    },
    row(
        "BitShift",
        &["bit_shift_left", "bit_shift_right"],
        bit::bit_shift,
    ),
    row("BitwiseAnd", &["bitwise_and"], bit::binary),
    row("BitwiseNot", &["bitwise_not"], bit::not),
    row("BitwiseOr", &["bitwise_or"], bit::binary),
    row("BitwiseXor", &["bitwise_xor"], bit::binary),
    row("BlackmanWindow", &["blackman_window"], sig::window),
    row(
        "BatchNormalization",
        &[
            "batchnorm_inference",
            "batchnorm",
            "batchnorm_running_stats",
        ],
        nn::batchnorm,
    ),
    row("Cast", &["identity", "cast_trunc", "cast_bool"], ew::cast),
    row(
        "CastLike",
        &["identity", "cast_trunc", "cast_bool"],
        ew::cast,
    ),
    un("Ceil", &["ceil"]),
    row("CenterCropPad", &["slice", "pad"], sh::center_crop_pad),
    una("Celu", &["celu"], &[("alpha", "alpha", 1.0)]),
    row("Clip", &["clip"], ew::clip),
    row("Col2Im", &["col2im3d"], ct::col2im),
    row("Compress", &["gather", "embedding"], sh::compress),
    row("Concat", &["concat", "concat_channels"], sh::concat),
    row(
        "ConcatFromSequence",
        &["concat", "concat_channels"],
        seq::concat_from_sequence,
    ),
    row("Constant", &[], folded),
    row("ConstantOfShape", &[], folded),
    row(
        "Conv",
        &[
            "conv2d",
            "conv2d_bias",
            "conv2d_group",
            "conv2d_group_bias",
            "conv1d",
            "conv2d_ext",
            "conv2d_group_ext",
            "conv3d_group_ext",
            "channel_bias_add",
        ],
        nn::conv,
    ),
    row(
        "ConvTranspose",
        &[
            "conv_transpose2d_ext",
            "conv_transpose2d_group_ext",
            "conv_transpose3d_ext",
            "channel_bias_add",
        ],
        ct::conv_transpose,
    ),
    row(
        "ConvInteger",
        &[
            "sub",
            "conv2d",
            "conv2d_group",
            "conv1d",
            "conv2d_ext",
            "conv2d_group_ext",
            "conv3d_group_ext",
        ],
        integer::conv_integer,
    ),
    un("Cos", &["cos"]),
    un("Cosh", &["cosh"]),
    row("CumProd", &["cumprod"], sh::cumsum),
    row("CumSum", &["cumsum"], sh::cumsum),
    row("DepthToSpace", &["swap_blocks"], sh::depth_space),
    row(
        "DequantizeLinear",
        &["dequantize", "dequantize_axis"],
        quant::dequantize,
    ),
    row("Det", &["determinant"], tensor::det),
    row("DFT", &["dft", "irfft"], sig::dft),
    row("Div", &["div", "div_trunc"], ew::binary),
    row("Dropout", &["identity", "dropout"], ew::dropout),
    row(
        "DynamicQuantizeLinear",
        &["dynamic_quantize"],
        quant::dynamic_quantize,
    ),
    row(
        "Einsum",
        &["diagonal", "reduce_sum", "matmul", "batch_matmul"],
        es::einsum,
    ),
    una("Elu", &["elu"], &[("alpha", "alpha", 1.0)]),
    row("Equal", &["equal"], ew::binary),
    un("Erf", &["erf"]),
    un("Exp", &["exp"]),
    row("Expand", &["broadcast_1"], sh::expand),
    row("EyeLike", &["eye_like"], tensor::eye_like),
    row("Flatten", &["reshape_4_2"], sh::view),
    un("Floor", &["floor"]),
    row("Gather", &["gather", "embedding"], sh::gather),
    row(
        "GatherElements",
        &["gather_elements_last"],
        ge::gather_elements,
    ),
    row("GatherND", &["gather_nd_1", "gather_nd_2"], gnd::gather_nd),
    row("Gelu", &["gelu", "gelu_tanh"], ew::gelu),
    row(
        "Gemm",
        &[
            "gemm_nt_bias",
            "gemm_bias",
            "matmul",
            "matmul_nt",
            "matmul_tn",
        ],
        nn::gemm,
    ),
    row("GlobalAveragePool", &["global_avgpool"], nn::global_pool),
    row("GlobalMaxPool", &["global_maxpool"], nn::global_pool),
    row("Greater", &["greater"], ew::binary),
    row("GreaterOrEqual", &["greater_equal"], ew::binary),
    row(
        "GridSample",
        &[
            "grid_sample_nearest_2d",
            "grid_sample_linear_2d",
            "grid_sample_cubic_2d",
            "grid_sample_nearest_3d",
            "grid_sample_linear_3d",
            "grid_sample_cubic_3d",
        ],
        gs::grid_sample,
    ),
    row("GroupNormalization", &["groupnorm"], nn::groupnorm),
    row("GRU", RNN_SPECS, rnn::gru),
    row("HammingWindow", &["hamming_window"], sig::window),
    row("HannWindow", &["hann_window"], sig::window),
    una(
        "HardSigmoid",
        &["hard_sigmoid"],
        &[("alpha", "alpha", 0.2), ("beta", "beta", 0.5)],
    ),
    un("HardSwish", &["hard_swish"]),
    row("Hardmax", &["hardmax"], nn::softmax),
    un("Identity", &["identity"]),
    row("InstanceNormalization", &["instancenorm"], nn::instancenorm),
    row("IsInf", &["is_inf"], nn::is_inf),
    un("IsNaN", &["is_nan"]),
    row("LRN", &["lrn"], nn::lrn),
    row(
        "LayerNormalization",
        &["layernorm", "layernorm_stats"],
        nn::layernorm,
    ),
    una("LeakyRelu", &["leaky_relu"], &[("alpha", "alpha", 0.01)]),
    row("Less", &["less"], ew::binary),
    row("LessOrEqual", &["less_equal"], ew::binary),
    un("Log", &["log"]),
    row("LogSoftmax", &["log_softmax"], nn::softmax),
    row(
        "LpNormalization",
        &["l1_normalize", "l2_normalize"],
        nn::lp_normalization,
    ),
    row("LpPool", &["lppool3d_ext"], nn::pool),
    row("LSTM", RNN_SPECS, rnn::lstm),
    row("MatMul", &["matmul", "dense", "batch_matmul"], nn::matmul),
    row(
        "MatMulInteger",
        &["matmul_integer"],
        integer::matmul_integer,
    ),
    row("Max", &["maximum"], ew::variadic),
    row(
        "MaxPool",
        &["maxpool2d_ext", "maxpool3d_ext", "maxpool2d_ext_indices"],
        nn::pool,
    ),
    row("MaxUnpool", &["maxunpool", "pad"], nn::max_unpool),
    row("Mean", &["add", "scale"], ew::variadic),
    row(
        "MelWeightMatrix",
        &["mel_weight_matrix"],
        sig::mel_weight_matrix,
    ),
    row("MeanVarianceNormalization", &["layernorm"], nn::mvn),
    row("Min", &["minimum"], ew::variadic),
    un("Mish", &["mish"]),
    row("Mod", &["mod_floor", "mod_trunc"], ew::modulo),
    row_in(
        TRAINING,
        "Momentum",
        &["onnx_momentum", "onnx_nesterov"],
        train::momentum,
    ),
    row(
        "Mul",
        &["mul", "bias_mul", "channel_mul", "scale"],
        ew::binary,
    ),
    un("Neg", &["neg"]),
    row(
        "NegativeLogLikelihoodLoss",
        &["nll_elements", "nll_weight_sum", "nll_reduced"],
        nll::nll,
    ),
    un("Not", &["logical_not"]),
    row("OneHot", &["one_hot", "one_hot_values"], sh::one_hot),
    row("Or", &["logical_or"], ew::binary),
    row("PRelu", &["prelu", "prelu_full"], ew::prelu),
    row(
        "Pad",
        &["pad", "pad_edge", "pad_reflect", "pad_wrap"],
        sh::pad,
    ),
    row("Pow", &["pow"], ew::binary),
    row(
        "QLinearConv",
        &[
            "sub",
            "conv2d",
            "conv2d_bias",
            "conv2d_group",
            "conv2d_group_bias",
            "conv1d",
            "conv2d_ext",
            "conv2d_group_ext",
            "conv3d_group_ext",
            "channel_bias_add",
            "scale",
            "channel_mul",
            "quantize",
        ],
        integer::qlinear_conv,
    ),
    row(
        "QLinearMatMul",
        &[
            "matmul_integer",
            "batch_matmul_integer",
            "scale",
            "quantize",
        ],
        integer::qlinear_matmul,
    ),
    row(
        "QuantizeLinear",
        &["quantize", "quantize_axis"],
        quant::quantize,
    ),
    row("Range", &[], folded),
    un("Reciprocal", &["reciprocal"]),
    row("ReduceL1", &["reduce_l1"], red::reduce),
    row("ReduceL2", &["reduce_l2"], red::reduce),
    row("ReduceLogSum", &["reduce_log_sum"], red::reduce),
    row("ReduceLogSumExp", &["reduce_log_sum_exp"], red::reduce),
    row("ReduceMax", &["reduce_max"], red::reduce),
    row("ReduceMean", &["reduce_mean"], red::reduce),
    row("ReduceMin", &["reduce_min"], red::reduce),
    row("ReduceProd", &["reduce_prod"], red::reduce),
    row("ReduceSum", &["reduce_sum"], red::reduce),
    row("ReduceSumSquare", &["reduce_sum_square"], red::reduce),
    un("Relu", &["relu"]),
    row("Reshape", &["reshape_1_1"], sh::view),
    row(
        "Resize",
        &["resample_last", "resample_mid", "upsample_nearest2d"],
        rs::resize,
    ),
    row(
        "ReverseSequence",
        &["reverse_sequence"],
        sh::reverse_sequence,
    ),
    row("RMSNormalization", &["rmsnorm"], nn::rmsnorm),
    row("RNN", RNN_SPECS, rnn::rnn),
    row(
        "RotaryEmbedding",
        &["rotary", "embedding"],
        rot::rotary_embedding,
    ),
    un("Round", &["round"]),
    row("Scatter", &["scatter_elements_last"], ge::scatter_elements),
    row(
        "ScatterElements",
        &["scatter_elements_last", "scatter_elements_add_last"],
        ge::scatter_elements,
    ),
    row(
        "ScatterND",
        &["scatter_nd_1", "scatter_nd_add_1"],
        gnd::scatter_nd,
    ),
    una(
        "Selu",
        &["selu"],
        &[
            ("alpha", "alpha", 1.673_263_192_176_818_8),
            ("gamma", "gamma", 1.050_701_022_148_132_3),
        ],
    ),
    row("SequenceAt", &[], seq::sequence_at),
    row("SequenceConstruct", &[], seq::sequence_construct),
    row("SequenceEmpty", &[], seq::sequence_empty),
    row("SequenceErase", &[], seq::sequence_erase),
    row("SequenceInsert", &[], seq::sequence_insert),
    row("SequenceLength", &[], seq::sequence_length),
    row("Shape", &[], folded),
    una(
        "Shrink",
        &["shrink"],
        &[("bias", "bias", 0.0), ("lambd", "lambd", 0.5)],
    ),
    un("Sigmoid", &["sigmoid"]),
    un("Sign", &["sign"]),
    un("Sin", &["sin"]),
    un("Sinh", &["sinh"]),
    row("Size", &[], folded),
    row("Slice", &["slice", "reverse_last"], sh::slice),
    row("Softmax", &["softmax"], nn::softmax),
    row(
        "SoftmaxCrossEntropyLoss",
        &[
            "log_softmax",
            "nll_elements",
            "nll_weight_sum",
            "nll_reduced",
        ],
        nll::nll,
    ),
    un("Softplus", &["softplus"]),
    un("Softsign", &["softsign"]),
    row("SpaceToDepth", &["swap_blocks"], sh::depth_space),
    row("Split", &["split_last"], sh::split),
    row("SplitToSequence", &["split_last"], seq::split_to_sequence),
    un("Sqrt", &["sqrt"]),
    row("Squeeze", &["reshape_2_1"], sh::view),
    row("STFT", &["stft"], sig::stft),
    row("Sub", &["sub"], ew::binary),
    row("Sum", &["add"], ew::variadic),
    una("Swish", &["swish"], &[("alpha", "alpha", 1.0)]),
    un("Tan", &["tan"]),
    un("Tanh", &["tanh"]),
    una(
        "ThresholdedRelu",
        &["thresholded_relu"],
        &[("alpha", "alpha", 1.0)],
    ),
    row("TensorScatter", &["tensor_scatter"], tensor::tensor_scatter),
    row("Tile", &["tile_last"], sh::tile),
    row("TopK", &["topk"], red::topk),
    row("Transpose", &["swap_blocks", "transpose"], sh::transpose),
    row("Trilu", &["trilu"], sh::trilu),
    row("Unsqueeze", &["reshape_1_2"], sh::view),
    row(
        "Upsample",
        &["resample_last", "resample_mid", "upsample_nearest2d"],
        rs::resize,
    ),
    row("Where", &["where"], ew::where_),
    row("Xor", &["logical_xor"], ew::binary),
];

/// The row of an op type (op types are unique across the table's domains).
pub fn lookup(op: &str) -> Option<&'static Mapping> {
    TABLE.iter().find(|m| m.op == op)
}

/// The row of op type `op` in `domain` (normalised: `""` is ai.onnx).
pub fn lookup_in(domain: &str, op: &str) -> Option<&'static Mapping> {
    lookup(op).filter(|m| m.domain == domain)
}

/// Operators that lower to at least one TDL spec (coverage).
pub fn covered_ops() -> impl Iterator<Item = &'static str> {
    TABLE.iter().filter(|m| !m.specs.is_empty()).map(|m| m.op)
}
