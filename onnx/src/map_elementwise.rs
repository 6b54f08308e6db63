//! Lowering of elementwise ONNX operators: unary functions (with their float
//! attributes), binary and variadic arithmetic, comparisons and logic with
//! numpy broadcasting, Where, Clip, PRelu, Dropout.
//!
//! Broadcasting picks the most specific spec: equal shapes → the plain
//! spec (`add`, `mul`, ...); an operand of shape [N] along the last axis →
//! `bias_add` / `bias_mul`; an operand of shape [C, 1, …, 1] against an NCHW
//! tensor → `channel_bias_add` / `channel_mul`; a known scalar factor →
//! `scale`; anything else → explicit `broadcast_R` of each operand to the
//! common shape, then the plain spec.

use graph::{float, int, Attr, Fill, TensorId};
use tdl::AttrValue;

use crate::lower::{broadcast_shape, unsupported, Kind, Known, LResult, Lower, Out, Src};
use crate::mapping::Mapping;
use crate::node::Node;
use crate::tensor::{Elem, FloatFormat, F8};

/// A unary op: one spec, float attributes copied from ONNX (with ONNX's defaults).
pub fn unary(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    let xn = required(n, 0)?;
    let s = shape(l, xn)?;
    if s.contains(&0) {
        // An empty tensor maps to an empty tensor.
        return Ok(vec![Out::C(crate::map_shape::empty(l.elem_of(xn), s))]);
    }
    let x = l.tensor(xn)?;
    let attrs: Vec<(&str, AttrValue)> = m
        .attrs
        .iter()
        .map(|&(onnx, tdl, default)| (tdl, float(n.attrs.float(onnx, default))))
        .collect();
    Ok(vec![Out::T(l.emit1(m.specs[0], &[x], &attrs)?)])
}

/// Gelu: `approximate = "none"` → `gelu`, `"tanh"` → `gelu_tanh`.
pub fn gelu(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let spec = match n.attrs.string("approximate", "none").as_str() {
        "none" => "gelu",
        "tanh" => "gelu_tanh",
        other => return unsupported(format!("approximate = \"{other}\"")),
    };
    Ok(vec![Out::T(l.emit1(spec, &[x], &[])?)])
}

/// A graph tensor for input `i` (required).
pub fn input(l: &mut Lower, n: &Node, i: usize) -> LResult<TensorId> {
    match n.input(i) {
        Some(name) => l.tensor(name),
        None => unsupported(format!("input {i} is missing")),
    }
}

/// Binary op with broadcasting (see the module doc).
pub fn binary(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    let (a, b) = (required(n, 0)?, required(n, 1)?);
    // Integer Div truncates toward zero.
    let spec = if m.op == "Div" && (l.elem_of(a).is_integer() || l.elem_of(b).is_integer()) {
        "div_trunc"
    } else {
        m.specs[0]
    };
    // A known scalar exponent (GELU's x³ whose 3 an exporter lifted into an
    // initializer, a square): `pow_scalar`, the exponent an attribute and not
    // trained — its gradient, ln of a possibly negative base, would be NaN.
    let (sa, sb) = (shape(l, a)?, shape(l, b)?);
    if m.op == "Pow" && broadcast_shape(&sa, &sb) == Some(sa) {
        if let Some(d) = l.const_data(b).filter(|d| d.values.len() == 1) {
            let ta = l.tensor(a)?;
            return Ok(vec![Out::T(l.emit1(
                "pow_scalar",
                &[ta],
                &[("exponent", float(d.values[0]))],
            )?)]);
        }
    }
    Ok(vec![Out::T(broadcast_binary(l, spec, a, b)?)])
}

/// Mod with broadcasting: `mod_trunc` (C's fmod) when `fmod = 1`, else
/// `mod_floor` (the divisor's sign, ONNX's integer default).
pub fn modulo(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let (a, b) = (required(n, 0)?, required(n, 1)?);
    let spec = match n.attrs.int("fmod", 0) {
        0 => "mod_floor",
        1 => "mod_trunc",
        other => return unsupported(format!("fmod = {other}")),
    };
    Ok(vec![Out::T(broadcast_binary(l, spec, a, b)?)])
}

fn required<'a>(n: &Node<'a>, i: usize) -> LResult<&'a str> {
    n.input(i)
        .map_or_else(|| unsupported(format!("input {i} is missing")), Ok)
}

/// `spec(a, b)` with numpy broadcasting of the two named values.
pub fn broadcast_binary(l: &mut Lower, spec: &str, a: &str, b: &str) -> LResult<TensorId> {
    let (sa, sb) = (shape(l, a)?, shape(l, b)?);
    if sa == sb {
        let (ta, tb) = (l.tensor(a)?, l.tensor(b)?);
        return l.emit1(spec, &[ta, tb], &[]);
    }
    let out = broadcast_shape(&sa, &sb).ok_or_else(|| {
        crate::lower::NodeError::Unsupported(format!("shapes {sa:?} and {sb:?} do not broadcast"))
    })?;
    let commutative = matches!(spec, "add" | "mul");
    // Which operand is the big one and which the small one.
    for (x, small, swapped) in [(a, b, false), (b, a, true)] {
        if swapped && !commutative {
            break;
        }
        let sx = shape(l, x)?;
        if !commutative && spec != "mul" {
            break;
        }
        if sx != out {
            continue;
        }
        let ss = shape(l, small)?;
        let r = sx.len();
        if ss.len() > r {
            continue;
        }
        let mut padded = vec![1; r - ss.len()];
        padded.extend(&ss);
        let numel: usize = ss.iter().product();
        // Known scalar factor.
        if spec == "mul" && numel == 1 {
            if let Some(d) = l.const_data(small) {
                let tx = l.tensor(x)?;
                return l.emit1("scale", &[tx], &[("alpha", float(d.values[0]))]);
            }
        }
        let only = |axis: usize| {
            (0..r).all(|i| i == axis || padded[i] == 1) && padded[axis] == sx[axis] && sx[axis] > 1
        };
        if !commutative {
            break;
        }
        // [N] along the last axis.
        if r >= 2 && only(r - 1) {
            let bias_spec = if spec == "add" {
                "bias_add"
            } else {
                "bias_mul"
            };
            let tx = l.tensor(x)?;
            let ts = l.tensor(small)?;
            let ts = l.reshape(ts, &[sx[r - 1]])?;
            return l.emit1(bias_spec, &[tx, ts], &[]);
        }
        // [C, 1, ..., 1] against [B, C, ...].
        if r >= 3 && only(1) {
            let chan_spec = if spec == "add" {
                "channel_bias_add"
            } else {
                "channel_mul"
            };
            let tx = l.tensor(x)?;
            let ts = l.tensor(small)?;
            let ts = l.reshape(ts, &[sx[1]])?;
            return l.emit1(chan_spec, &[tx, ts], &[]);
        }
    }
    let (ta, tb) = (l.tensor(a)?, l.tensor(b)?);
    let ta = l.broadcast_to(ta, &out)?;
    let tb = l.broadcast_to(tb, &out)?;
    l.emit1(spec, &[ta, tb], &[])
}

/// Shape of a named value.
pub fn shape(l: &Lower, name: &str) -> LResult<Vec<usize>> {
    l.shape_of(name)
        .map_or_else(|| unsupported(format!("value `{name}` is not defined")), Ok)
}

/// Variadic Sum / Max / Min / Mean: a chain of binary ops (Mean then scales by 1/n).
pub fn variadic(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    let names: Vec<&str> = (0..n.n_inputs()).filter_map(|i| n.input(i)).collect();
    let Some(&first) = names.first() else {
        return unsupported("no inputs");
    };
    if names.len() == 1 {
        let t = l.tensor(first)?;
        let t = l.emit1("identity", &[t], &[])?;
        return Ok(vec![Out::T(t)]);
    }
    let mut acc_name = first.to_string();
    let mut acc = None;
    for (k, &next) in names[1..].iter().enumerate() {
        let t = broadcast_binary(l, m.specs[0], &acc_name, next)?;
        acc_name = format!("{}#acc{k}", n.name);
        l.bind(&acc_name, t);
        acc = Some(t);
    }
    let mut t = acc.expect("two or more inputs");
    if m.op == "Mean" {
        t = l.emit1("scale", &[t], &[("alpha", float(1.0 / names.len() as f64))])?;
    }
    Ok(vec![Out::T(t)])
}

/// Where(cond, a, b) with broadcasting of all three.
pub fn where_(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let names = [required(n, 0)?, required(n, 1)?, required(n, 2)?];
    let shapes: Vec<Vec<usize>> = names.iter().map(|x| shape(l, x)).collect::<LResult<_>>()?;
    let out = broadcast_shape(&shapes[0], &shapes[1])
        .and_then(|s| broadcast_shape(&s, &shapes[2]))
        .ok_or_else(|| {
            crate::lower::NodeError::Unsupported(format!("shapes {shapes:?} do not broadcast"))
        })?;
    let mut ts = Vec::new();
    for x in names {
        let t = l.tensor(x)?;
        ts.push(l.broadcast_to(t, &out)?);
    }
    Ok(vec![Out::T(l.emit1("where", &ts, &[])?)])
}

/// Clip: bounds from attributes (opset < 11) or inputs (a missing bound is
/// ±3.4e38): known ones to the `clip` spec, a run-time scalar bound to
/// `maximum` / `minimum` against it broadcast. Errors: a bound input of more
/// than one element.
pub fn clip(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    if n.opset < 11 {
        let (lo, hi) = (n.attrs.float("min", -3.4e38), n.attrs.float("max", 3.4e38));
        let t = l.emit1("clip", &[x], &[("min", float(lo)), ("max", float(hi))])?;
        return Ok(vec![Out::T(t)]);
    }
    let lo = clip_bound(l, n, 1, -3.4e38)?;
    let hi = clip_bound(l, n, 2, 3.4e38)?;
    if let (Bound::Known(lo), Bound::Known(hi)) = (&lo, &hi) {
        let t = l.emit1("clip", &[x], &[("min", float(*lo)), ("max", float(*hi))])?;
        return Ok(vec![Out::T(t)]);
    }
    // A bound computed at run time (e.g. `max(x) − 80` in a decibel
    // spectrogram): min(max(x, lo), hi) as `maximum` / `minimum` with the
    // scalar broadcast, a known bound as a one-sided `clip`.
    let mut t = x;
    for (k, b) in [lo, hi].into_iter().enumerate() {
        let lower = k == 0;
        t = match b {
            Bound::Known(v) => {
                let (min, max) = if lower { (v, 3.4e38) } else { (-3.4e38, v) };
                l.emit1("clip", &[t], &[("min", float(min)), ("max", float(max))])?
            }
            Bound::RunTime(name) => {
                let acc = format!("{}#clip{k}", n.name);
                l.bind(&acc, t);
                let spec = if lower { "maximum" } else { "minimum" };
                broadcast_binary(l, spec, &acc, &name)?
            }
        };
    }
    Ok(vec![Out::T(t)])
}

/// A Clip bound: known at import, or a run-time scalar (its value name).
enum Bound {
    Known(f64),
    RunTime(String),
}

/// Clip's bound input `i` (`default` when absent). Errors: a bound of more
/// than one element.
fn clip_bound(l: &Lower, n: &Node, i: usize, default: f64) -> LResult<Bound> {
    let Some(name) = n.input(i) else {
        return Ok(Bound::Known(default));
    };
    if let Some(v) = l.arg_data(name).filter(|v| v.numel() == 1) {
        return Ok(Bound::Known(v.values[0]));
    }
    match l.shape_of(name) {
        Some(s) if s.iter().product::<usize>() == 1 => Ok(Bound::RunTime(name.to_string())),
        _ => unsupported(format!("bound input {i} must be a scalar")),
    }
}

/// PRelu: a per-channel slope ([C], [C, 1, …, 1] or [1, C, 1, …, 1] against
/// x of shape [B, C, …]) → `prelu`; any other slope that broadcasts to x
/// (numpy rules) → `broadcast_R` of the slope, then `prelu_full`.
pub fn prelu(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let (xn, sn) = (required(n, 0)?, required(n, 1)?);
    let (sx, ss) = (shape(l, xn)?, shape(l, sn)?);
    let per_channel = sx.len() >= 2 && sx[1] > 1 && {
        // The slope padded to x's rank has C at axis 1 and 1 elsewhere.
        let mut padded = vec![1; sx.len().saturating_sub(ss.len())];
        padded.extend(&ss);
        let channel_first = ss.len() < sx.len()
            && !ss.is_empty()
            && ss[0] == sx[1]
            && ss[1..].iter().all(|&d| d == 1)
            && ss.len() == sx.len() - 1;
        channel_first
            || (padded.len() == sx.len()
                && padded[1] == sx[1]
                && padded.iter().enumerate().all(|(i, &d)| i == 1 || d == 1))
    };
    let x = l.tensor(xn)?;
    let s = l.tensor(sn)?;
    if per_channel {
        let s = l.reshape(s, &[sx[1]])?;
        return Ok(vec![Out::T(l.emit1("prelu", &[x, s], &[])?)]);
    }
    if broadcast_shape(&sx, &ss).as_deref() != Some(&sx[..]) {
        return unsupported(format!(
            "slope of shape {ss:?} does not broadcast to x of shape {sx:?}"
        ));
    }
    let s = l.broadcast_to(s, &sx)?;
    Ok(vec![Out::T(l.emit1("prelu_full", &[x, s], &[])?)])
}

/// Dropout: identity when not training or when ratio = 0 (mask output: all
/// ones); when training, `dropout` with a random 0/1 keep-mask that is a
/// per-step graph input (`<node>.mask`, drawn by the runtime), which is also
/// the node's Mask output.
pub fn dropout(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let name = required(n, 0)?;
    let x = l.tensor(name)?;
    let mut training = l.training;
    if let Some(tm) = n.input(2) {
        match l.arg_data(tm) {
            Some(d) if d.numel() == 1 => training = d.values[0] != 0.0,
            _ => return unsupported("training_mode must be a known scalar"),
        }
    }
    let shape = l.shape(x);
    let mut outs = Vec::new();
    let ratio = if !training {
        0.0
    } else if n.opset >= 12 {
        match n.input(1).map(|r| l.arg_data(r)) {
            None => 0.5,
            Some(Some(d)) if d.numel() == 1 => d.values[0],
            Some(_) => return unsupported("ratio must be a known scalar"),
        }
    } else {
        n.attrs.float("ratio", 0.5)
    };
    // ONNX: with ratio 0 nothing is dropped, even in training mode.
    if training && ratio != 0.0 {
        if !(0.0..1.0).contains(&ratio) {
            return unsupported(format!("ratio {ratio} (must be in [0, 1))"));
        }
        // The random keep-mask is a per-step input of the graph (drawn by the
        // runtime); the Mask output is that input.
        let mask_name = format!("{}.mask", n.name);
        let mask = l.b.input(
            &mask_name,
            &shape,
            graph::DType::F32,
            Fill::Indices { bound: 2 },
        )?;
        outs.push(Out::T(l.emit1(
            "dropout",
            &[x, mask],
            &[("ratio", float(ratio))],
        )?));
        if n.wants_output(1) {
            outs.push(Out::T(mask));
        }
    } else {
        outs.push(Out::T(l.emit1("identity", &[x], &[])?));
        if n.wants_output(1) {
            outs.push(Out::C(crate::tensor::Data {
                elem: Elem::Bool,
                shape: shape.clone(),
                values: vec![1.0; shape.iter().product()],
            }));
        }
    }
    Ok(outs)
}

/// A known all-`value` constant of `shape`, defined under `name` (for optional inputs).
pub fn splat_const(l: &mut Lower, name: &str, shape: &[usize], value: f64) -> LResult<TensorId> {
    l.define_known(
        name,
        Known {
            elem: Elem::F32,
            shape: shape.to_vec(),
            src: Src::Splat(value),
            kind: Kind::Constant,
        },
    );
    l.tensor(name)
}

/// Cast / CastLike of a run-time tensor: to a float format narrower than the
/// source (f16, bf16, the 8- and 4-bit floats) → `cast_float_round` (round to
/// nearest even, `saturate`); to int4/uint4/int2/uint2 → `cast_int_wrap`; to
/// E8M0 → `cast_e8m0`; float → other integers truncates → `cast_trunc`; → bool
/// → `cast_bool`; otherwise the values do not change → `identity`. Constants
/// and weights are folded instead ([`crate::tensor::round_to`]).
pub fn cast(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    let name = required(n, 0)?;
    let from = l.elem_of(name);
    let to = if m.op == "CastLike" {
        l.elem_of(required(n, 1)?)
    } else {
        match Elem::from_code(n.attrs.int("to", 1) as i32) {
            Some(e) => e,
            None => return unsupported("target type tofu does not hold"),
        }
    };
    let saturate = int(i64::from(n.attrs.int("saturate", 1) != 0));
    let x = l.tensor(name)?;
    // Formats whose values every source value may not fit: round onto their grid.
    let grid = match to {
        Elem::F16 => Some(FloatFormat {
            mant: 10,
            emin: -14,
            max: 65504.0,
            has_inf: true,
            has_nan: true,
        }),
        Elem::BF16 => Some(FloatFormat {
            mant: 7,
            emin: -126,
            max: 3.389_531_389_251_535_5e38,
            has_inf: true,
            has_nan: true,
        }),
        other => other.float_format(),
    };
    let (spec, attrs): (&str, Vec<Attr>) = if to == from {
        ("identity", vec![])
    } else if let Some(f) = grid.filter(|_| from.float_format() != grid) {
        // f16 and bf16 have infinities and no saturation in ONNX.
        let sat = if to.float_format().is_some() {
            saturate
        } else {
            int(0)
        };
        (
            "cast_float_round",
            vec![
                ("mant", int(f.mant.into())),
                ("emin", int(f.emin.into())),
                ("maxv", float(f.max)),
                ("saturate", sat),
                ("has_inf", int(i64::from(f.has_inf))),
                ("has_nan", int(i64::from(f.has_nan))),
            ],
        )
    } else if let Some((bits, signed)) = to.small_int() {
        (
            "cast_int_wrap",
            vec![
                ("bits", int(bits.into())),
                ("signed", int(i64::from(signed))),
            ],
        )
    } else if to == Elem::F8(F8::E8M0) {
        ("cast_e8m0", vec![("saturate", saturate)])
    } else if to == Elem::Bool && from != Elem::Bool {
        ("cast_bool", vec![])
    } else if to.is_integer() && !from.is_integer() {
        ("cast_trunc", vec![])
    } else {
        ("identity", vec![])
    };
    Ok(vec![Out::T(l.emit1(spec, &[x], &attrs)?)])
}
