//! Every gradient declaration of the shipped library, checked against central
//! finite differences of the forward spec, both run by the reference
//! interpreter (`tdl::evaluate`).
//!
//! For each op with `grad` declarations: random small shapes (1..=4 per dim
//! unless the table below narrows them), random attributes from per-op
//! choices, random inputs from per-input generators (domains of log/sqrt,
//! kinks of relu/abs/max kept away from, class ids, probabilities, masks), a
//! random cotangent per output and L = Σ cotangent · output. Each declared
//! gradient op's result must match (L(x + h) - L(x - h)) / 2h element by
//! element: |g - fd| ≤ 1e-6 · max(1, |fd|) in f64.
//!
//! The library is the shipped one plus `tests/user_specs/` (`swiglu`, the
//! user operator of the guide and of `tests/tests/custom_op_cli.rs`).
//! The test iterates over the library, so a new op with gradients is checked
//! automatically with the default generators; it fails if an op with
//! gradients is not exercised or if the table names an op that is gone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use tdl::{
    AttrValue, Attrs, BinOp, Binding, Builtin, DimEntry, DimExpr, Expr, ExprKind, GradArg, Library,
    OpSpec, Tensor, TensorRef, UnOp,
};

/// Cases per op; `TDL_GRAD_CASES` overrides (e.g. for a long soak run).
fn cases() -> u32 {
    std::env::var("TDL_GRAD_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}
const H: f64 = 1e-5;
const TOL: f64 = 1e-6;

/// How an input's elements are drawn.
#[derive(Clone, Copy, Debug)]
enum Gen {
    /// Uniform in [-2, 2] but at least 0.075 away from every multiple of 0.25,
    /// where the kinks of relu, abs, clip, hard_sigmoid, … are put.
    OffGrid,
    /// Exact multiples of 0.25 in [-2, 2]: paired with an `OffGrid` operand the
    /// two never tie (max/min, l1, huber).
    Grid,
    /// Every element of every `Distinct` input of the case different, at least
    /// 0.05 apart (max pooling, arg-max style gradients, normalisation).
    Distinct,
    /// Uniform in [lo, hi].
    Range(f64, f64),
    /// Uniform in [lo, hi] with a random sign.
    AwayZero(f64, f64),
    /// Integer class ids in [0, dim) for the named dim.
    Ids(&'static str),
    /// 0/1 mask.
    Mask,
    /// Positive rows along the last axis summing to 1.
    Prob,
}

/// A per-op fix-up of the drawn dims and attributes (divisibility and the like).
type Fixup = fn(&mut BTreeMap<String, usize>, &mut Attrs);

/// How to generate cases for one op; ops not in the table use `DEFAULT`.
struct OpCfg {
    op: &'static str,
    /// Input generators by input name (others: `OffGrid`).
    inputs: &'static [(&'static str, Gen)],
    /// Attribute choices by name (others: the spec's default).
    attrs: &'static [(&'static str, &'static [f64])],
    /// Dim ranges by name (others: 1..=4).
    dims: &'static [(&'static str, usize, usize)],
    fixup: Option<Fixup>,
    /// Attributes under which the finite differences are taken instead of
    /// the case's (empty: the case's). For a straight-through gradient (a
    /// rounding cast that passes the gradient through): the attributes that
    /// make the op its unrounded function, whose derivative the gradient is.
    fd_attrs: &'static [(&'static str, f64)],
    /// The op whose finite differences are taken instead (same inputs, its
    /// default attributes): a straight-through gradient's unrounded function
    /// when no attribute makes the op that.
    fd_op: Option<&'static str>,
}

const fn cfg(op: &'static str) -> OpCfg {
    OpCfg {
        op,
        inputs: &[],
        attrs: &[],
        dims: &[],
        fixup: None,
        fd_attrs: &[],
        fd_op: None,
    }
}

const DEFAULT: OpCfg = cfg("");

const CONV2D_ATTRS: &[(&str, &[f64])] = &[
    ("stride_h", &[1.0, 2.0]),
    ("stride_w", &[1.0, 2.0]),
    ("pad_h", &[0.0, 1.0]),
    ("pad_w", &[0.0, 1.0]),
    ("dilation_h", &[1.0, 2.0]),
    ("dilation_w", &[1.0, 2.0]),
];
/// Begin and end pads drawn apart (`pads = [0, 0, 1, 1]`, SAME_UPPER/LOWER).
const CONV2D_EXT_ATTRS: &[(&str, &[f64])] = &[
    ("stride_h", &[1.0, 2.0]),
    ("stride_w", &[1.0, 2.0]),
    ("pad_t", &[0.0, 1.0]),
    ("pad_l", &[0.0, 2.0]),
    ("pad_b", &[0.0, 1.0, 2.0]),
    ("pad_r", &[0.0, 1.0]),
    ("dilation_h", &[1.0, 2.0]),
    ("dilation_w", &[1.0, 2.0]),
];
const CONV2D_DIMS: &[(&str, usize, usize)] = &[
    ("B", 1, 2),
    ("CI", 1, 3),
    ("CO", 1, 3),
    ("CIG", 1, 2),
    ("KH", 1, 3),
    ("KW", 1, 3),
];
const POOL_ATTRS: &[(&str, &[f64])] = &[
    ("kernel_h", &[1.0, 2.0, 3.0]),
    ("kernel_w", &[1.0, 2.0, 3.0]),
    ("stride_h", &[1.0, 2.0]),
    ("stride_w", &[1.0, 2.0]),
    ("pad_h", &[0.0, 1.0]),
    ("pad_w", &[0.0, 1.0]),
];
const NORM_X: &[(&str, Gen)] = &[("x", Gen::Distinct)];
const EPS: &[(&str, &[f64])] = &[("eps", &[1e-5, 1e-2])];
const POSITIVE: &[(&str, Gen)] = &[("x", Gen::Range(0.5, 2.0))];
const UNIT: &[(&str, Gen)] = &[("x", Gen::Range(-0.8, 0.8))];
const VS_GRID: &[(&str, Gen)] = &[("b", Gen::Grid), ("target", Gen::Grid)];
/// GridSample: sampling points inside and just outside [-1, 1], every
/// padding mode and align_corners, one coordinate per spatial dim.
const GRID: &[(&str, Gen)] = &[("grid", Gen::Range(-1.3, 1.3))];
const GRID_ATTRS: &[(&str, &[f64])] = &[("padding", &[0.0, 1.0, 2.0]), ("align", &[0.0, 1.0])];
const GRID_2D: &[(&str, usize, usize)] = &[("K", 2, 2), ("N", 1, 2), ("C", 1, 2)];
const GRID_3D: &[(&str, usize, usize)] = &[
    ("K", 3, 3),
    ("N", 1, 1),
    ("C", 1, 2),
    ("D", 1, 3),
    ("OD", 1, 2),
    ("OH", 1, 2),
    ("OW", 1, 2),
];

fn int(attrs: &Attrs, name: &str) -> i64 {
    match attrs.get(name) {
        Some(v) => v.as_f64() as i64,
        None => 0,
    }
}
fn set(attrs: &mut Attrs, name: &str, v: i64) {
    attrs.insert(name.to_string(), AttrValue::Int(v));
}
/// Reflect padding requires pads smaller than the padded dim.
fn reflect_fixup(d: &mut BTreeMap<String, usize>, a: &mut Attrs) {
    let n = d["N"] as i64;
    for name in ["before", "after"] {
        let p = int(a, name).min(n - 1);
        set(a, name, p);
    }
}
/// ONNX pooling requires pad < kernel.
fn pool_fixup(_: &mut BTreeMap<String, usize>, a: &mut Attrs) {
    for ax in ["h", "w"] {
        let k = int(a, &format!("kernel_{ax}"));
        let p = int(a, &format!("pad_{ax}")).min(k - 1);
        set(a, &format!("pad_{ax}"), p);
    }
}
/// TensorScatter in linear mode needs wi + U ≤ S for every row: ids are
/// drawn in [0, S), so U = 1 and wi < S always fit; circular mode takes U ≤ S.
fn tensor_scatter_fixup(d: &mut BTreeMap<String, usize>, a: &mut Attrs) {
    let (s, u) = (d["S"], d["U"]);
    let u = if int(a, "circular") == 0 { 1 } else { u.min(s) };
    d.insert("U".into(), u);
}
fn group_fixup(d: &mut BTreeMap<String, usize>, a: &mut Attrs) {
    let g = int(a, "groups") as usize;
    for (name, per) in [("CI", "CIG"), ("C", "")] {
        if let Some(v) = d.get(name).copied() {
            let per_group = d.get(per).copied().unwrap_or((v - 1) % 2 + 1);
            d.insert(name.into(), g * per_group);
        }
    }
    if let Some(co) = d.get("CO").copied() {
        d.insert("CO".into(), g * ((co - 1) % 2 + 1));
    }
}

/// ConvTranspose (specs/onnx_conv_transpose.tdl): strides, dilations and
/// begin pads (negative too: a larger `output_shape` split by SAME_UPPER)
/// per axis; the drawn `out_*` is the end pad e, made the output size
/// natural − begin − e (e = −1: output_padding 1, e = 2: cropped).
const CONV_T_ATTRS: &[(&str, &[f64])] = &[
    ("stride_h", &[1.0, 2.0, 3.0]),
    ("stride_w", &[1.0, 2.0]),
    ("dilation_h", &[1.0, 2.0]),
    ("dilation_w", &[1.0, 2.0]),
    ("pad_t", &[0.0, 1.0, 2.0]),
    ("pad_l", &[-1.0, 0.0, 1.0]),
    ("out_h", &[-1.0, 0.0, 1.0, 2.0]),
    ("out_w", &[-1.0, 0.0, 1.0]),
];
const CONV_T_3D_ATTRS: &[(&str, &[f64])] = &[
    ("groups", &[1.0, 2.0]),
    ("stride_d", &[1.0, 2.0]),
    ("stride_h", &[1.0, 2.0]),
    ("stride_w", &[1.0, 3.0]),
    ("dilation_d", &[1.0, 2.0]),
    ("dilation_w", &[1.0, 2.0]),
    ("pad_f", &[0.0, 1.0]),
    ("pad_t", &[-1.0, 0.0, 1.0]),
    ("pad_l", &[0.0, 2.0]),
    ("out_d", &[-1.0, 0.0, 1.0]),
    ("out_h", &[0.0, 1.0]),
    ("out_w", &[-1.0, 0.0]),
];
const CONV_3D_DIMS: &[(&str, usize, usize)] = &[
    ("B", 1, 1),
    ("CI", 1, 2),
    ("CO", 1, 2),
    ("CIG", 1, 1),
    ("COG", 1, 2),
    ("D", 1, 3),
    ("H", 1, 3),
    ("W", 1, 3),
    ("KD", 1, 2),
    ("KH", 1, 2),
    ("KW", 1, 2),
];
/// The attribute `name`, or `default` when the case does not draw it.
fn int_or(attrs: &Attrs, name: &str, default: i64) -> i64 {
    attrs.get(name).map_or(default, |v| v.as_f64() as i64)
}
/// Groups divide the channels; each `out_*` drawn as an end pad becomes the
/// output size (see [`CONV_T_ATTRS`]), at least 1.
fn conv_t_fixup(d: &mut BTreeMap<String, usize>, a: &mut Attrs) {
    if a.contains_key("groups") {
        group_fixup(d, a);
    }
    for (ax, dim, kernel, pad) in [
        ("d", "D", "KD", "pad_f"),
        ("h", "H", "KH", "pad_t"),
        ("w", "W", "KW", "pad_l"),
    ] {
        let (Some(&x), Some(&k)) = (d.get(dim), d.get(kernel)) else {
            continue;
        };
        let s = int_or(a, &format!("stride_{ax}"), 1);
        let dil = int_or(a, &format!("dilation_{ax}"), 1);
        let natural = s * (x as i64 - 1) + dil * (k as i64 - 1) + 1;
        let end = int_or(a, &format!("out_{ax}"), 0);
        let out = (natural - int_or(a, pad, 0) - end).max(1);
        set(a, &format!("out_{ax}"), out);
    }
}

/// Per-op generators; everything else is `OffGrid` inputs, default attributes, dims 1..=4.
const TABLE: &[OpCfg] = &[
    OpCfg {
        inputs: POSITIVE,
        ..cfg("log")
    },
    OpCfg {
        inputs: POSITIVE,
        ..cfg("sqrt")
    },
    OpCfg {
        inputs: POSITIVE,
        ..cfg("reciprocal")
    },
    OpCfg {
        inputs: POSITIVE,
        attrs: &[("exponent", &[-1.5, 0.5, 2.0, 3.0])],
        ..cfg("pow_scalar")
    },
    OpCfg {
        inputs: &[("a", Gen::Range(0.5, 2.0)), ("b", Gen::Range(-2.0, 2.0))],
        ..cfg("pow")
    },
    OpCfg {
        inputs: UNIT,
        ..cfg("asin")
    },
    OpCfg {
        inputs: UNIT,
        ..cfg("acos")
    },
    OpCfg {
        inputs: UNIT,
        ..cfg("atanh")
    },
    OpCfg {
        inputs: UNIT,
        ..cfg("tan")
    },
    OpCfg {
        inputs: &[("x", Gen::Range(1.2, 3.0))],
        ..cfg("acosh")
    },
    OpCfg {
        inputs: &[("b", Gen::AwayZero(0.5, 2.0))],
        ..cfg("div")
    },
    OpCfg {
        inputs: &[("b", Gen::AwayZero(0.5, 2.0))],
        ..cfg("mod_floor")
    },
    OpCfg {
        inputs: &[("b", Gen::AwayZero(0.5, 2.0))],
        ..cfg("mod_trunc")
    },
    OpCfg {
        inputs: VS_GRID,
        ..cfg("maximum")
    },
    OpCfg {
        inputs: VS_GRID,
        ..cfg("minimum")
    },
    OpCfg {
        inputs: &[("cond", Gen::Mask)],
        ..cfg("where")
    },
    OpCfg {
        // Infinite bounds: a one-sided clamp (ONNX Clip with `max = inf`).
        attrs: &[
            ("min", &[-1.0, -0.5, f64::NEG_INFINITY]),
            ("max", &[0.5, 1.0, f64::INFINITY]),
        ],
        ..cfg("clip")
    },
    OpCfg {
        inputs: &[("mask", Gen::Mask)],
        attrs: &[("ratio", &[0.0, 0.25, 0.5])],
        ..cfg("dropout")
    },
    OpCfg {
        attrs: &[("alpha", &[-1.5, 0.5, 2.0])],
        ..cfg("scale")
    },
    OpCfg {
        attrs: &[("alpha", &[0.01, 0.2])],
        ..cfg("leaky_relu")
    },
    OpCfg {
        attrs: &[("alpha", &[-0.5, 1.0, 1.702])],
        ..cfg("swish")
    },
    OpCfg {
        attrs: &[("alpha", &[-1.5, 0.5, 2.0])],
        ..cfg("swiglu")
    },
    OpCfg {
        inputs: &[("x", Gen::Distinct)],
        ..cfg("hardmax")
    },
    OpCfg {
        inputs: &[("x", Gen::Distinct)],
        attrs: &[("k", &[1.0, 2.0, 3.0]), ("largest", &[0.0, 1.0])],
        dims: &[("N", 3, 4)],
        ..cfg("topk")
    },
    OpCfg {
        attrs: &[("alpha", &[0.5, 1.0])],
        ..cfg("elu")
    },
    OpCfg {
        attrs: &[("alpha", &[0.5, 1.0, 2.0])],
        ..cfg("celu")
    },
    OpCfg {
        attrs: &[("alpha", &[0.5, 1.0])],
        ..cfg("thresholded_relu")
    },
    OpCfg {
        attrs: &[("lambd", &[0.25, 0.5]), ("bias", &[0.0, 0.5])],
        ..cfg("shrink")
    },
    OpCfg {
        attrs: &[("alpha", &[0.2, 0.25, 0.5])],
        ..cfg("hard_sigmoid")
    },
    OpCfg {
        attrs: &[
            ("stride", &[1.0, 2.0, 3.0]),
            ("pad", &[0.0, 1.0, 2.0]),
            ("dilation", &[1.0, 2.0]),
        ],
        dims: &[("B", 1, 2), ("CI", 1, 3), ("CO", 1, 3), ("DX", 1, 3)],
        ..cfg("conv1d")
    },
    OpCfg {
        attrs: CONV2D_ATTRS,
        dims: CONV2D_DIMS,
        ..cfg("conv2d")
    },
    OpCfg {
        attrs: &[
            ("groups", &[1.0, 2.0]),
            CONV2D_ATTRS[0],
            CONV2D_ATTRS[2],
            CONV2D_ATTRS[5],
        ],
        dims: CONV2D_DIMS,
        fixup: Some(group_fixup),
        ..cfg("conv2d_group")
    },
    // ONNX Conv with separate begin/end pads (specs/onnx_nn.tdl).
    OpCfg {
        attrs: CONV2D_EXT_ATTRS,
        dims: CONV2D_DIMS,
        ..cfg("conv2d_ext")
    },
    OpCfg {
        attrs: &[
            ("groups", &[1.0, 2.0]),
            CONV2D_ATTRS[0],
            CONV2D_EXT_ATTRS[2],
            CONV2D_EXT_ATTRS[3],
            CONV2D_EXT_ATTRS[4],
            CONV2D_EXT_ATTRS[5],
            CONV2D_ATTRS[5],
        ],
        dims: CONV2D_DIMS,
        fixup: Some(group_fixup),
        ..cfg("conv2d_group_ext")
    },
    // ONNX Conv with bias and group > 1 (specs/onnx_nn.tdl).
    OpCfg {
        attrs: &[
            ("groups", &[1.0, 2.0]),
            CONV2D_ATTRS[0],
            CONV2D_ATTRS[2],
            CONV2D_ATTRS[5],
        ],
        dims: CONV2D_DIMS,
        fixup: Some(group_fixup),
        ..cfg("conv2d_group_bias")
    },
    OpCfg {
        attrs: &[
            CONV2D_ATTRS[0],
            CONV2D_ATTRS[1],
            CONV2D_ATTRS[2],
            CONV2D_ATTRS[3],
            CONV2D_ATTRS[4],
            ("output_pad_h", &[0.0, 1.0]),
        ],
        dims: CONV2D_DIMS,
        fixup: Some(|_, a| {
            let s = int(a, "stride_h");
            let p = int(a, "output_pad_h").min(s - 1);
            set(a, "output_pad_h", p);
        }),
        ..cfg("conv_transpose2d")
    },
    OpCfg {
        attrs: CONV_T_ATTRS,
        dims: CONV2D_DIMS,
        fixup: Some(conv_t_fixup),
        ..cfg("conv_transpose2d_ext")
    },
    OpCfg {
        attrs: &[
            ("groups", &[1.0, 2.0, 3.0]),
            CONV_T_ATTRS[0],
            CONV_T_ATTRS[3],
            CONV_T_ATTRS[4],
            CONV_T_ATTRS[5],
            CONV_T_ATTRS[6],
            CONV_T_ATTRS[7],
        ],
        dims: &[
            ("B", 1, 2),
            ("CI", 1, 3),
            ("COG", 1, 2),
            ("KH", 1, 3),
            ("KW", 1, 3),
        ],
        fixup: Some(conv_t_fixup),
        ..cfg("conv_transpose2d_group_ext")
    },
    OpCfg {
        attrs: CONV_T_3D_ATTRS,
        dims: CONV_3D_DIMS,
        fixup: Some(conv_t_fixup),
        ..cfg("conv_transpose3d_ext")
    },
    OpCfg {
        attrs: &[
            ("groups", &[1.0, 2.0]),
            ("stride_d", &[1.0, 2.0]),
            ("stride_w", &[1.0, 2.0]),
            ("dilation_h", &[1.0, 2.0]),
            ("pad_f", &[0.0, 1.0]),
            ("pad_t", &[0.0, 1.0]),
            ("pad_l", &[0.0, 1.0]),
            ("pad_k", &[0.0, 1.0]),
            ("pad_b", &[0.0, 2.0]),
            ("pad_r", &[0.0, 1.0]),
        ],
        dims: CONV_3D_DIMS,
        fixup: Some(group_fixup),
        ..cfg("conv3d_group_ext")
    },
    OpCfg {
        inputs: &[("x", Gen::Distinct)],
        attrs: POOL_ATTRS,
        dims: &[("B", 1, 2), ("C", 1, 2)],
        fixup: Some(pool_fixup),
        ..cfg("maxpool2d")
    },
    OpCfg {
        attrs: &[
            POOL_ATTRS[0],
            POOL_ATTRS[1],
            POOL_ATTRS[2],
            POOL_ATTRS[3],
            POOL_ATTRS[4],
            POOL_ATTRS[5],
            ("count_include_pad", &[0.0, 1.0]),
        ],
        dims: &[("B", 1, 2), ("C", 1, 2)],
        fixup: Some(pool_fixup),
        ..cfg("avgpool2d")
    },
    OpCfg {
        inputs: &[("x", Gen::Distinct)],
        ..cfg("global_maxpool")
    },
    OpCfg {
        inputs: &[("x", Gen::Distinct)],
        attrs: &[("kernel", &[1.0, 2.0, 3.0]), ("stride", &[1.0, 2.0])],
        ..cfg("maxpool1d")
    },
    OpCfg {
        inputs: NORM_X,
        attrs: EPS,
        ..cfg("batchnorm")
    },
    OpCfg {
        inputs: &[("var", Gen::Range(0.5, 2.0))],
        attrs: EPS,
        ..cfg("batchnorm_inference")
    },
    OpCfg {
        inputs: NORM_X,
        attrs: EPS,
        ..cfg("layernorm")
    },
    OpCfg {
        inputs: NORM_X,
        attrs: EPS,
        ..cfg("rmsnorm")
    },
    OpCfg {
        inputs: NORM_X,
        attrs: EPS,
        ..cfg("instancenorm")
    },
    OpCfg {
        inputs: NORM_X,
        attrs: &[("groups", &[1.0, 2.0]), EPS[0]],
        fixup: Some(group_fixup),
        ..cfg("groupnorm")
    },
    OpCfg {
        inputs: NORM_X,
        ..cfg("l2_normalize")
    },
    OpCfg {
        inputs: &[("labels", Gen::Prob)],
        ..cfg("softmax_cross_entropy")
    },
    OpCfg {
        inputs: &[("ids", Gen::Ids("N"))],
        ..cfg("sparse_softmax_cross_entropy")
    },
    OpCfg {
        inputs: &[("labels", Gen::Prob)],
        ..cfg("softmax_cross_entropy_parts")
    },
    OpCfg {
        inputs: &[("z", Gen::Range(0.5, 3.0)), ("sl", Gen::Range(0.0, 1.0))],
        ..cfg("softmax_cross_entropy_combine")
    },
    OpCfg {
        inputs: &[("ids", Gen::Ids("N")), ("cnt", Gen::Range(1.5, 4.0))],
        ..cfg("cross_entropy")
    },
    OpCfg {
        inputs: &[("ids", Gen::Ids("N"))],
        ..cfg("cross_entropy_parts")
    },
    OpCfg {
        inputs: &[
            ("z", Gen::Range(0.5, 3.0)),
            ("sl", Gen::Mask),
            ("cnt", Gen::Range(1.5, 4.0)),
        ],
        ..cfg("cross_entropy_combine")
    },
    OpCfg {
        inputs: &[("ids", Gen::Ids("N"))],
        ..cfg("nll_loss")
    },
    OpCfg {
        inputs: VS_GRID,
        ..cfg("l1_loss")
    },
    OpCfg {
        inputs: VS_GRID,
        attrs: &[("delta", &[0.5, 1.0])],
        ..cfg("huber_loss")
    },
    OpCfg {
        inputs: &[("p", Gen::Range(0.1, 0.9)), ("t", Gen::Range(0.0, 1.0))],
        ..cfg("binary_cross_entropy")
    },
    OpCfg {
        inputs: &[("x", Gen::Distinct)],
        ..cfg("reduce_max")
    },
    OpCfg {
        inputs: &[("x", Gen::Distinct)],
        ..cfg("reduce_min")
    },
    OpCfg {
        inputs: POSITIVE,
        ..cfg("reduce_log_sum")
    },
    OpCfg {
        attrs: &[("reverse", &[0.0, 1.0]), ("exclusive", &[0.0, 1.0])],
        ..cfg("cumsum")
    },
    OpCfg {
        attrs: &[("n", &[1.0, 2.0, 3.0])],
        ..cfg("broadcast_last")
    },
    OpCfg {
        attrs: &[
            ("start", &[0.0, 1.0, 2.0]),
            ("end", &[1.0, 2.0, 3.0, 5.0]),
            ("step", &[1.0, 2.0]),
        ],
        ..cfg("slice")
    },
    OpCfg {
        attrs: &[
            ("before", &[0.0, 1.0, 2.0]),
            ("after", &[0.0, 1.0]),
            ("value", &[0.0, 1.5]),
        ],
        ..cfg("pad")
    },
    OpCfg {
        attrs: &[("before", &[0.0, 1.0, 2.0]), ("after", &[0.0, 1.0, 3.0])],
        ..cfg("pad_edge")
    },
    OpCfg {
        attrs: &[
            ("before", &[0.0, 1.0, 2.0, 3.0]),
            ("after", &[0.0, 1.0, 2.0, 3.0]),
        ],
        fixup: Some(reflect_fixup),
        ..cfg("pad_reflect")
    },
    OpCfg {
        attrs: &[
            ("before", &[0.0, 1.0, 2.0, 5.0]),
            ("after", &[0.0, 1.0, 4.0]),
        ],
        ..cfg("pad_wrap")
    },
    OpCfg {
        // f16, bf16, f8e4m3fn, f4e2m1; finite differences of the unrounded
        // conversion (52 mantissa bits: exact in f64), since the gradient is
        // straight-through.
        attrs: &[
            ("mant", &[10.0, 7.0, 3.0, 1.0]),
            ("emin", &[-14.0, -126.0, -6.0, 0.0]),
            ("maxv", &[65504.0, 448.0, 6.0]),
            ("saturate", &[0.0, 1.0]),
        ],
        fd_attrs: &[("mant", 52.0), ("emin", -1022.0), ("maxv", 1e300)],
        ..cfg("cast_float_round")
    },
    OpCfg {
        attrs: &[("bits", &[2.0, 4.0]), ("signed", &[0.0, 1.0])],
        ..cfg("cast_int_wrap")
    },
    OpCfg {
        // Powers of two from positive reals; straight-through: finite
        // differences of the identity (the unrounded conversion).
        inputs: &[("x", Gen::Range(0.1, 3.0))],
        attrs: &[("saturate", &[0.0, 1.0])],
        fd_op: Some("identity"),
        ..cfg("cast_e8m0")
    },
    OpCfg {
        attrs: &[("pad_h", &[0.0, 1.0]), ("pad_w", &[0.0, 1.0])],
        ..cfg("pad2d")
    },
    OpCfg {
        attrs: &[("pad_h", &[0.0, 1.0]), ("pad_w", &[0.0, 1.0])],
        ..cfg("crop2d")
    },
    OpCfg {
        attrs: &[
            ("channels", &[1.0, 2.0, 3.0]),
            ("height", &[1.0, 2.0]),
            ("width", &[1.0, 2.0, 3.0]),
        ],
        fixup: Some(|d, a| {
            let k = int(a, "channels") * int(a, "height") * int(a, "width");
            d.insert("K".into(), k as usize);
        }),
        ..cfg("unflatten")
    },
    OpCfg {
        attrs: &[("reps", &[1.0, 2.0, 3.0])],
        ..cfg("tile_last")
    },
    OpCfg {
        attrs: &[("upper", &[0.0, 1.0]), ("k", &[-1.0, 0.0, 1.0])],
        ..cfg("trilu")
    },
    OpCfg {
        attrs: &[("n", &[0.0, 1.0, 2.0, 3.0])],
        ..cfg("split_last")
    },
    OpCfg {
        attrs: &[("n", &[0.0, 1.0, 2.0, 3.0])],
        ..cfg("split_channels")
    },
    // ONNX NegativeLogLikelihoodLoss (specs/onnx_loss.tdl): targets are class
    // ids, some ignored; the divisor of the reduced loss is an input.
    OpCfg {
        attrs: &[("reverse", &[0.0, 1.0]), ("exclusive", &[0.0, 1.0])],
        ..cfg("cumprod")
    },
    OpCfg {
        inputs: &[("lens", Gen::Ids("T"))],
        ..cfg("reverse_sequence")
    },
    // ONNX Col2Im: the columns' dims are the kernel's and the blocks' products.
    OpCfg {
        attrs: &[
            ("kernel_d", &[1.0, 2.0]),
            ("kernel_h", &[1.0, 2.0]),
            ("kernel_w", &[2.0, 3.0]),
            ("cols_d", &[1.0, 2.0]),
            ("cols_h", &[1.0, 3.0]),
            ("cols_w", &[2.0, 3.0]),
            ("stride_h", &[1.0, 2.0]),
            ("stride_w", &[1.0, 2.0]),
            ("pad_t", &[0.0, 1.0]),
            ("pad_l", &[0.0, 2.0]),
            ("dilation_w", &[1.0, 2.0]),
            ("out_d", &[1.0, 2.0]),
            ("out_h", &[2.0, 4.0]),
            ("out_w", &[3.0, 5.0]),
        ],
        dims: &[("N", 1, 1), ("C", 1, 2)],
        fixup: Some(|d, a| {
            let k = ["kernel_d", "kernel_h", "kernel_w"].map(|n| int(a, n) as usize);
            let m = ["cols_d", "cols_h", "cols_w"].map(|n| int(a, n) as usize);
            d.insert("K".into(), k.iter().product());
            d.insert("M".into(), m.iter().product());
        }),
        ..cfg("col2im3d")
    },
    // ONNX MaxUnpool: one (b, c) row, so the indices are positions of the
    // output row (duplicates sum).
    OpCfg {
        inputs: &[("idx", Gen::Ids("P"))],
        attrs: &[("out", &[0.0, 1.0, 2.0])],
        dims: &[("B", 1, 1), ("C", 1, 1)],
        fixup: Some(|d, a| {
            let extra = int(a, "out");
            set(a, "out", d["P"] as i64 + extra);
        }),
        ..cfg("maxunpool")
    },
    // ONNX RotaryEmbedding: an even rotary dim within the head, caches at
    // least half as wide.
    OpCfg {
        attrs: &[
            ("rot", &[2.0, 4.0]),
            ("interleaved", &[0.0, 1.0]),
            ("sign", &[1.0, -1.0]),
        ],
        dims: &[
            ("B", 1, 2),
            ("S", 1, 2),
            ("H", 1, 2),
            ("D", 2, 6),
            ("R2", 1, 3),
        ],
        fixup: Some(|d, a| {
            let rot = int(a, "rot") as usize;
            let dd = d["D"].max(rot);
            d.insert("D".into(), dd);
            let r2 = d["R2"].max(rot / 2);
            d.insert("R2".into(), r2);
        }),
        ..cfg("rotary")
    },
    OpCfg {
        attrs: &[
            ("out_h", &[1.0, 2.0, 3.0]),
            ("out_w", &[1.0, 4.0]),
            ("align", &[0.0, 1.0]),
        ],
        ..cfg("affine_grid_2d")
    },
    OpCfg {
        attrs: &[
            ("out_d", &[1.0, 2.0]),
            ("out_h", &[1.0, 3.0]),
            ("out_w", &[2.0, 3.0]),
            ("align", &[0.0, 1.0]),
        ],
        ..cfg("affine_grid_3d")
    },
    // ONNX LpPool: inputs away from 0 (|x|^(p-1) has a kink there for p = 1).
    OpCfg {
        inputs: &[("x", Gen::AwayZero(0.3, 2.0))],
        attrs: &[
            ("kernel_d", &[1.0, 2.0]),
            ("kernel_h", &[1.0, 2.0]),
            ("kernel_w", &[1.0, 3.0]),
            ("stride_h", &[1.0, 2.0]),
            ("stride_w", &[1.0, 2.0]),
            ("pad_t", &[0.0, 1.0]),
            ("pad_r", &[0.0, 1.0]),
            ("dilation_w", &[1.0, 2.0]),
            ("ceil_mode", &[0.0, 1.0]),
            ("p", &[1.0, 2.0, 3.0]),
        ],
        dims: &[
            ("B", 1, 1),
            ("C", 1, 2),
            ("D", 1, 2),
            ("H", 1, 3),
            ("W", 1, 4),
        ],
        ..cfg("lppool3d_ext")
    },
    OpCfg {
        inputs: &[("t", Gen::Ids("C")), ("w", Gen::Range(0.5, 2.0))],
        attrs: &[("ignore_index", &[-1e9, 0.0, 1.0])],
        ..cfg("nll_elements")
    },
    OpCfg {
        inputs: &[
            ("t", Gen::Ids("C")),
            ("w", Gen::Range(0.5, 2.0)),
            ("den", Gen::Range(0.5, 3.0)),
        ],
        attrs: &[("ignore_index", &[-1e9, 0.0, 1.0])],
        ..cfg("nll_reduced")
    },
    OpCfg {
        inputs: &[("ids", Gen::Ids("N"))],
        ..cfg("gather")
    },
    OpCfg {
        inputs: &[("ids", Gen::Ids("V"))],
        ..cfg("embedding")
    },
    OpCfg {
        inputs: &[("ids", Gen::Ids("V"))],
        ..cfg("vocab_embedding")
    },
    OpCfg {
        inputs: &[("ids", Gen::Ids("N"))],
        ..cfg("take_last")
    },
    // Binarizer: piecewise constant; inputs kept off its threshold.
    OpCfg {
        attrs: &[("threshold", &[0.0, 0.5])],
        ..cfg("binarizer")
    },
    OpCfg {
        attrs: &[("k", &[-1.0, 0.0, 2.0])],
        ..cfg("eye_like")
    },
    // TensorScatter: write positions anywhere in the cache (circular) or
    // where the update fits (linear, U ≤ S - max(wi) by the fixup).
    OpCfg {
        inputs: &[("wi", Gen::Ids("S"))],
        attrs: &[("circular", &[0.0, 1.0])],
        dims: &[("S", 2, 4), ("U", 1, 2)],
        fixup: Some(tensor_scatter_fixup),
        ..cfg("tensor_scatter")
    },
    // DFT: real and complex input, padded and truncated lengths, forward,
    // inverse and one-sided.
    OpCfg {
        attrs: &[
            ("len", &[1.0, 3.0, 4.0, 5.0]),
            ("inverse", &[0.0, 1.0]),
            ("onesided", &[0.0, 1.0]),
        ],
        dims: &[("C", 1, 2)],
        ..cfg("dft")
    },
    OpCfg {
        attrs: &[("len", &[1.0, 4.0, 5.0, 6.0])],
        dims: &[("C", 1, 2)],
        ..cfg("irfft")
    },
    // STFT: frames overlapping (step < len) or not, windows shorter and
    // longer than the DFT, real and complex signals.
    OpCfg {
        attrs: &[
            ("step", &[1.0, 2.0]),
            ("len", &[1.0, 2.0, 3.0]),
            ("onesided", &[0.0, 1.0]),
        ],
        dims: &[("C", 1, 2), ("S", 3, 5)],
        ..cfg("stft")
    },
    OpCfg {
        inputs: &[("idx", Gen::Ids("D0"))],
        dims: &[("K", 1, 1)],
        ..cfg("gather_nd_1")
    },
    // ONNX ScatterND (tuples of length 1): repeats included.
    OpCfg {
        inputs: &[("idx", Gen::Ids("D0"))],
        dims: &[("K", 1, 1)],
        ..cfg("scatter_nd_1")
    },
    OpCfg {
        inputs: &[("idx", Gen::Ids("D0"))],
        dims: &[("K", 1, 1)],
        ..cfg("scatter_nd_add_1")
    },
    OpCfg {
        inputs: &[("idx", Gen::Ids("D0"))],
        dims: &[("K", 2, 2)],
        fixup: Some(|d, _| {
            d.insert("D1".into(), d["D0"]);
        }),
        ..cfg("gather_nd_2")
    },
    OpCfg {
        attrs: &[("sh", &[1.0, 2.0, 3.0]), ("sw", &[1.0, 2.0])],
        ..cfg("upsample_nearest2d")
    },
    OpCfg {
        inputs: &[("idx", Gen::Ids("D"))],
        ..cfg("gather_elements_last")
    },
    // ONNX ScatterElements: indices into the last axis, repeats included
    // (the last update wins, resp. updates add up).
    OpCfg {
        inputs: &[("idx", Gen::Ids("D"))],
        ..cfg("scatter_elements_last")
    },
    OpCfg {
        inputs: &[("idx", Gen::Ids("D"))],
        ..cfg("scatter_elements_add_last")
    },
    OpCfg {
        inputs: GRID,
        attrs: GRID_ATTRS,
        dims: GRID_2D,
        ..cfg("grid_sample_nearest_2d")
    },
    OpCfg {
        inputs: GRID,
        attrs: GRID_ATTRS,
        dims: GRID_2D,
        ..cfg("grid_sample_linear_2d")
    },
    OpCfg {
        inputs: GRID,
        attrs: GRID_ATTRS,
        dims: GRID_2D,
        ..cfg("grid_sample_cubic_2d")
    },
    OpCfg {
        inputs: GRID,
        attrs: GRID_ATTRS,
        dims: GRID_3D,
        ..cfg("grid_sample_nearest_3d")
    },
    OpCfg {
        inputs: GRID,
        attrs: GRID_ATTRS,
        dims: GRID_3D,
        ..cfg("grid_sample_linear_3d")
    },
    OpCfg {
        inputs: GRID,
        attrs: GRID_ATTRS,
        dims: GRID_3D,
        ..cfg("grid_sample_cubic_3d")
    },
    OpCfg {
        attrs: &[("heads", &[1.0, 2.0])],
        fixup: Some(|d, a| {
            let h = int(a, "heads") as usize;
            let dd = d["D"];
            d.insert("D".into(), h * ((dd - 1) % 2 + 1));
        }),
        ..cfg("split_heads")
    },
    OpCfg {
        attrs: &[("heads", &[1.0, 2.0])],
        fixup: Some(|d, a| {
            let h = int(a, "heads") as usize;
            let dd = d["E"];
            d.insert("E".into(), 3 * h * ((dd - 1) % 2 + 1));
        }),
        ..cfg("split_qkv")
    },
    OpCfg {
        attrs: &[("scale", &[0.5, 1.0]), ("causal", &[0.0, 1.0])],
        ..cfg("attention")
    },
    OpCfg {
        dims: &[("G", 4, 4)],
        ..cfg("lstm_cell")
    },
    OpCfg {
        dims: &[("G", 3, 3)],
        ..cfg("gru_cell")
    },
];

/// One drawn case: raw dim sizes, ellipsis rank, attribute choices, data seed.
type Raw = (Vec<usize>, usize, Vec<usize>, u64);

fn raw_strategy() -> impl Strategy<Value = Raw> {
    (
        prop::collection::vec(1usize..=4, 16),
        0usize..=2,
        prop::collection::vec(0usize..64, 16),
        any::<u64>(),
    )
}

/// splitmix64: a tiny deterministic generator for the data of a case.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A concrete case for one op.
#[derive(Debug)]
struct Case {
    attrs: Attrs,
    inputs: Vec<Tensor>,
}

fn build_case(spec: &OpSpec, cfg: &OpCfg, raw: &Raw) -> Result<(Case, Binding), String> {
    let (dim_raw, ell_rank, attr_raw, seed) = raw;
    let mut dims: BTreeMap<String, usize> = BTreeMap::new();
    for (i, d) in spec.dims.iter().enumerate() {
        let (lo, hi) = cfg
            .dims
            .iter()
            .find(|(n, _, _)| *n == d.name)
            .map(|&(_, lo, hi)| (lo, hi))
            .unwrap_or((1, 4));
        dims.insert(
            d.name.clone(),
            lo + (dim_raw[i % dim_raw.len()] - 1) % (hi - lo + 1),
        );
    }
    let ell: Vec<usize> = (0..*ell_rank)
        .map(|i| dim_raw[dim_raw.len() - 1 - i])
        .collect();
    let mut attrs = Attrs::new();
    for (i, (name, choices)) in cfg.attrs.iter().enumerate() {
        let a = spec
            .attr(name)
            .ok_or_else(|| format!("table: `{}` has no attribute `{name}`", spec.name))?;
        let v = choices[attr_raw[i % attr_raw.len()] % choices.len()];
        let v = match spec.attrs[a.0 as usize].ty {
            tdl::AttrType::Int => AttrValue::Int(v as i64),
            tdl::AttrType::Float => AttrValue::Float(v),
        };
        attrs.insert(name.to_string(), v);
    }
    // Required attributes the table does not choose: 1.
    for a in &spec.attrs {
        if a.default.is_none() && !attrs.contains_key(&a.name) {
            attrs.insert(a.name.clone(), AttrValue::Int(1));
        }
    }
    if let Some(f) = cfg.fixup {
        f(&mut dims, &mut attrs);
    }
    let shapes: Vec<Vec<usize>> = spec
        .inputs
        .iter()
        .map(|t| {
            t.dims
                .iter()
                .flat_map(|d| match d {
                    DimEntry::Ellipsis => ell.clone(),
                    DimEntry::Dim(DimExpr::Dim(id)) => vec![dims[&spec.dims[id.0 as usize].name]],
                    DimEntry::Dim(_) => unreachable!("input dims are names"),
                })
                .collect()
        })
        .collect();
    let binding = spec.bind(&shapes, &attrs).map_err(|e| e.to_string())?;
    let mut rng = Rng(*seed);
    let gens: Vec<Gen> = spec
        .inputs
        .iter()
        .map(|t| {
            cfg.inputs
                .iter()
                .find(|(n, _)| *n == t.name)
                .map(|(_, g)| *g)
                .unwrap_or(Gen::OffGrid)
        })
        .collect();
    // The pool of distinct values shared by all `Distinct` inputs.
    let n_distinct: usize = shapes
        .iter()
        .zip(&gens)
        .filter(|(_, g)| matches!(g, Gen::Distinct))
        .map(|(s, _)| s.iter().product::<usize>())
        .sum();
    // |v| = 0.3 + k · spacing with a random sign: distinct, at least 0.05 apart
    // and away from 0 (where normalisations are steep).
    let mut pool: Vec<f64> = {
        let spacing = (3.0 / n_distinct.max(1) as f64).max(0.05);
        (0..n_distinct)
            .map(|k| (0.3 + k as f64 * spacing) * if rng.below(2) == 0 { -1.0 } else { 1.0 })
            .collect()
    };
    for k in (1..pool.len()).rev() {
        let j = rng.below(k + 1);
        pool.swap(k, j);
    }
    let mut inputs = Vec::new();
    for (shape, gen) in shapes.iter().zip(&gens) {
        let n: usize = shape.iter().product();
        let data: Vec<f64> = match gen {
            Gen::OffGrid => (0..n)
                .map(|_| 0.25 * (rng.below(16) as f64 - 8.0) + 0.125 + rng.uniform(-0.05, 0.05))
                .collect(),
            Gen::Grid => (0..n)
                .map(|_| 0.25 * (rng.below(17) as f64 - 8.0))
                .collect(),
            Gen::Distinct => (0..n)
                .map(|_| pool.pop().expect("pool sized for every distinct element"))
                .collect(),
            Gen::Range(lo, hi) => (0..n).map(|_| rng.uniform(*lo, *hi)).collect(),
            Gen::AwayZero(lo, hi) => (0..n)
                .map(|_| rng.uniform(*lo, *hi) * if rng.below(2) == 0 { -1.0 } else { 1.0 })
                .collect(),
            Gen::Ids(dim) => {
                let m = *dims
                    .get(*dim)
                    .ok_or_else(|| format!("table: `{}` has no dim `{dim}`", spec.name))?;
                (0..n).map(|_| rng.below(m) as f64).collect()
            }
            Gen::Mask => (0..n).map(|_| rng.below(2) as f64).collect(),
            Gen::Prob => {
                let row = shape.last().copied().unwrap_or(1).max(1);
                let mut v: Vec<f64> = (0..n).map(|_| rng.uniform(0.1, 1.0)).collect();
                for r in v.chunks_mut(row) {
                    let s: f64 = r.iter().sum();
                    r.iter_mut().for_each(|x| *x /= s);
                }
                v
            }
        };
        inputs.push(Tensor::new(shape, data)?);
    }
    Ok((Case { attrs, inputs }, binding))
}

/// Value of a gradient declaration's attribute expression (dims and attributes of the forward op).
fn const_eval(e: &Expr, b: &Binding) -> f64 {
    let ev = |x: &Expr| const_eval(x, b);
    match &e.kind {
        ExprKind::Int(i) => *i as f64,
        ExprKind::Real(r) => *r,
        ExprKind::Dim(d) => b.dims[d.0 as usize] as f64,
        ExprKind::Attr(a) => b.attrs[a.0 as usize].as_f64(),
        ExprKind::Unary(UnOp::Neg, a) => -ev(a),
        ExprKind::Unary(UnOp::Not, a) => (ev(a) == 0.0) as i64 as f64,
        ExprKind::Binary(op, x, y) => {
            let (x, y) = (ev(x), ev(y));
            match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => x / y,
                BinOp::FloorDiv => (x / y).floor(),
                BinOp::Mod => x - y * (x / y).floor(),
                BinOp::Lt => (x < y) as i64 as f64,
                BinOp::Le => (x <= y) as i64 as f64,
                BinOp::Gt => (x > y) as i64 as f64,
                BinOp::Ge => (x >= y) as i64 as f64,
                BinOp::Eq => (x == y) as i64 as f64,
                BinOp::Ne => (x != y) as i64 as f64,
                BinOp::And => (x != 0.0 && y != 0.0) as i64 as f64,
                BinOp::Or => (x != 0.0 || y != 0.0) as i64 as f64,
            }
        }
        ExprKind::Call(Builtin::Max, a) => ev(&a[0]).max(ev(&a[1])),
        ExprKind::Call(Builtin::Min, a) => ev(&a[0]).min(ev(&a[1])),
        other => panic!("unsupported expression in a gradient attribute: {other:?}"),
    }
}

fn eval_bound(b: &Binding, inputs: &[Tensor]) -> Vec<Tensor> {
    tdl::evaluate_traced(b, inputs, &HashMap::new(), &mut |_, _| {})
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The binding finite differences are taken under: `binding` itself, or
/// the case's shapes with `cfg.fd_attrs` over the case's attributes.
fn fd_binding(
    lib: &Library,
    spec: &OpSpec,
    cfg: &OpCfg,
    case: &Case,
    binding: &Binding,
) -> Binding {
    let shapes: Vec<Vec<usize>> = case.inputs.iter().map(|t| t.shape.clone()).collect();
    if let Some(op) = cfg.fd_op {
        let other = lib.get(op).unwrap_or_else(|| {
            panic!(
                "table: `{}`'s fd_op `{op}` is not in the library",
                spec.name
            )
        });
        return other
            .bind(&shapes, &Attrs::new())
            .unwrap_or_else(|e| panic!("`{}`'s fd_op `{op}`: {e}", spec.name));
    }
    if cfg.fd_attrs.is_empty() {
        return binding.clone();
    }
    let mut attrs = case.attrs.clone();
    for &(name, v) in cfg.fd_attrs {
        let a = spec
            .attr(name)
            .unwrap_or_else(|| panic!("table: `{}` has no attribute `{name}`", spec.name));
        let v = match spec.attrs[a.0 as usize].ty {
            tdl::AttrType::Int => AttrValue::Int(v as i64),
            tdl::AttrType::Float => AttrValue::Float(v),
        };
        attrs.insert(name.to_string(), v);
    }
    spec.bind(&shapes, &attrs)
        .unwrap_or_else(|e| panic!("`{}` with fd_attrs: {e}", spec.name))
}

/// Check every gradient declaration of `spec` on one case (finite
/// differences of the op bound by `fd`, see [`fd_binding`]).
fn check_case(
    lib: &Library,
    spec: &OpSpec,
    case: &Case,
    (binding, fd): (&Binding, &Binding),
    seed: u64,
) -> Result<(), TestCaseError> {
    let outputs = eval_bound(binding, &case.inputs);
    let mut rng = Rng(seed ^ 0x5555_AAAA_1234_5678);
    let cot: Vec<Tensor> = outputs
        .iter()
        .map(|o| Tensor {
            shape: o.shape.clone(),
            data: (0..o.len()).map(|_| rng.uniform(-1.0, 1.0)).collect(),
        })
        .collect();
    for g in &spec.grads {
        let gop = lib.get(&g.op).expect("library checks gradient ops exist");
        let args: Vec<Tensor> = g
            .args
            .iter()
            .map(|a| match a {
                GradArg::Tensor(TensorRef::Input(i)) => case.inputs[*i as usize].clone(),
                GradArg::Tensor(TensorRef::Output(o)) => outputs[*o as usize].clone(),
                GradArg::Tensor(TensorRef::Local(_)) => unreachable!("checked by lowering"),
                GradArg::OutputGrad(o) => cot[*o as usize].clone(),
            })
            .collect();
        let gattrs: Attrs = g
            .attrs
            .iter()
            .map(|(n, e)| {
                let v = const_eval(e, binding);
                (
                    n.clone(),
                    if e.ty == tdl::Type::Int {
                        AttrValue::Int(v as i64)
                    } else {
                        AttrValue::Float(v)
                    },
                )
            })
            .collect();
        let grads = tdl::evaluate(gop, &args, &gattrs).map_err(|e| {
            TestCaseError::fail(format!(
                "gradient op `{}` of `{}` failed: {e}",
                g.op, spec.name
            ))
        })?;
        for (j, &wrt) in g.wrt.iter().enumerate() {
            let x = &case.inputs[wrt as usize];
            let name = &spec.inputs[wrt as usize].name;
            let got = &grads[j];
            prop_assert_eq!(
                &got.shape,
                &x.shape,
                "`{}`: gradient `{}` of input `{}` has the wrong shape",
                spec.name,
                g.op,
                name
            );
            for k in 0..x.len() {
                let mut plus = case.inputs.clone();
                plus[wrt as usize].data[k] += H;
                let mut minus = case.inputs.clone();
                minus[wrt as usize].data[k] -= H;
                let (yp, ym) = (eval_bound(fd, &plus), eval_bound(fd, &minus));
                // Σ cot · (y+ - y-) element by element, so that outputs that do
                // not depend on x (e.g. masked to -1e9) cancel exactly.
                let mut diff = 0.0;
                for ((c, p), m) in cot.iter().zip(&yp).zip(&ym) {
                    for ((c, p), m) in c.data.iter().zip(&p.data).zip(&m.data) {
                        diff += c * (p - m);
                    }
                }
                let fd = diff / (2.0 * H);
                let g = got.data[k];
                prop_assert!(
                    (g - fd).abs() <= TOL * fd.abs().max(1.0),
                    "`{}`: d/d{}[{}] by `{}` = {}, finite differences = {} (attrs {:?}, shapes {:?})",
                    spec.name,
                    name,
                    k,
                    gop.name,
                    g,
                    fd,
                    case.attrs,
                    case.inputs.iter().map(|t| t.shape.clone()).collect::<Vec<_>>()
                );
            }
        }
    }
    Ok(())
}

/// Run the property for one op; gives the number of cases checked.
fn check_op(lib: &Library, spec: &OpSpec) -> Result<u32, String> {
    let cfg = TABLE.iter().find(|c| c.op == spec.name).unwrap_or(&DEFAULT);
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        max_global_rejects: 4096,
        failure_persistence: None,
        ..Config::default()
    });
    let checked = std::cell::Cell::new(0u32);
    let result = runner.run(&raw_strategy(), |raw| {
        let (case, binding) = match build_case(spec, cfg, &raw) {
            Ok(c) => c,
            Err(e) if e.starts_with("table:") => return Err(TestCaseError::fail(e)),
            Err(e) => return Err(TestCaseError::reject(e)),
        };
        let fd = fd_binding(lib, spec, cfg, &case, &binding);
        check_case(lib, spec, &case, (&binding, &fd), raw.3)?;
        checked.set(checked.get() + 1);
        Ok(())
    });
    match result {
        Ok(()) => Ok(checked.get()),
        Err(e) => Err(format!("`{}`: {e}", spec.name)),
    }
}

#[test]
fn every_gradient_matches_finite_differences() {
    // The shipped library and the user spec of the guide and the CLI tests
    // (`tests/user_specs/`, an op a user writes and loads with --specs).
    let user = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/user_specs");
    let user = tdl::read_sources(&[user]).expect("the user specs");
    let lib = Library::shipped_with(&user).unwrap_or_else(|e| match e {
        tdl::LibraryError::Invalid(d) => panic!("{}", d.render()),
        other => panic!("{other}"),
    });
    for c in TABLE {
        let spec = lib.get(c.op).unwrap_or_else(|| {
            panic!(
                "generator table names `{}`, which is not in the library",
                c.op
            )
        });
        assert!(
            !spec.grads.is_empty(),
            "generator table names `{}`, which has no gradient declarations",
            c.op
        );
    }
    let with_grads: Vec<&OpSpec> = lib.ops().filter(|o| !o.grads.is_empty()).collect();
    assert!(
        with_grads.len() >= 60,
        "only {} ops with gradients",
        with_grads.len()
    );
    // Two workers over the ops (the interpreter is single-threaded and slow).
    let results: Vec<(String, Result<u32, String>)> = std::thread::scope(|s| {
        let chunks: Vec<Vec<&OpSpec>> = (0..2)
            .map(|w| with_grads.iter().skip(w).step_by(2).copied().collect())
            .collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|ops| {
                let lib = &lib;
                s.spawn(move || {
                    ops.into_iter()
                        .map(|op| (op.name.clone(), check_op(lib, op)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    let mut failures = Vec::new();
    let mut exercised = BTreeSet::new();
    for (name, r) in &results {
        match r {
            Ok(n) if *n >= cases() => {
                exercised.insert(name.clone());
            }
            Ok(n) => failures.push(format!("`{name}`: only {n} of {} cases ran", cases())),
            Err(e) => failures.push(e.clone()),
        }
    }
    let missing: Vec<&str> = with_grads
        .iter()
        .map(|o| o.name.as_str())
        .filter(|n| !exercised.contains(*n))
        .collect();
    assert!(
        failures.is_empty(),
        "{} op(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        missing.is_empty(),
        "ops with gradients not exercised: {missing:?}"
    );
    eprintln!(
        "checked the gradients of {} ops, {} cases each",
        exercised.len(),
        cases()
    );
}
