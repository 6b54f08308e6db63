//! Resize (opsets 10–19) and Upsample (opsets 7–9) → `specs/onnx_resize.tdl`.
//!
//! Takes X and constant scales or sizes (and roi for `tf_crop_and_resize`);
//! gives X resized. Every ONNX interpolation is separable, so for each
//! resized axis this module computes at import time the weight matrix
//! `w[O, I]` that ONNX's reference algorithm (`_interpolate_1d_with_x`:
//! coordinate transformation, neighbour choice with edge padding,
//! nearest / linear / cubic coefficients, antialias, `exclude_outside`)
//! applies along it, and emits `resample_last` (last axis) or `resample_mid`
//! (any other axis, later dims flattened) with `w` as a constant input.
//! Nearest upsampling whose index map is `o ↦ o // f` for integer f on the
//! last two axes only emits `upsample_nearest2d` (no weight matrix; the
//! interval analysis splits it along h and w). Output elements that
//! `tf_crop_and_resize` puts outside the input get `extrapolation_value`
//! (an `add` of a constant). Scales and sizes must be known at import.

use crate::lower::Out;
use crate::lower::{unsupported, Kind, Known, LResult, Lower, NodeError, Src};
use crate::map_elementwise::{broadcast_binary, input};
use crate::mapping::Mapping;
use crate::node::Node;
use crate::tensor::{Data, Elem};
use graph::TensorId;
use tdl::AttrValue;

/// How output coordinates map to input coordinates (ONNX
/// `coordinate_transformation_mode`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

/// Interpolation (ONNX `mode`, `nearest_mode`, `cubic_coeff_a`, `antialias`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Interp {
    Nearest(Rounding),
    Linear { antialias: bool },
    Cubic { a: f64, antialias: bool },
}

/// ONNX `nearest_mode`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rounding {
    PreferFloor,
    PreferCeil,
    Floor,
    Ceil,
}

/// One resized axis: weights `w[o][i]` and whether output index o lies inside
/// the input (only `tf_crop_and_resize` has rows outside).
struct AxisWeights {
    w: Vec<Vec<f64>>,
    inside: Vec<bool>,
}

/// Interpolation coefficients for the neighbours of a point at `ratio`
/// ∈ (0, 1] past the neighbour on its left (ONNX reference `_*_coeffs`).
fn coeffs(interp: Interp, ratio: f64, scale: f64) -> Vec<f64> {
    let b = |v: bool| f64::from(u8::from(v));
    match interp {
        Interp::Nearest(_) if ratio.fract() == 0.0 => vec![0.0, 1.0],
        Interp::Nearest(Rounding::PreferFloor) => vec![b(ratio <= 0.5), b(ratio > 0.5)],
        Interp::Nearest(Rounding::PreferCeil) => vec![b(ratio < 0.5), b(ratio >= 0.5)],
        Interp::Nearest(Rounding::Floor) => vec![1.0, 0.0],
        Interp::Nearest(Rounding::Ceil) => vec![0.0, 1.0],
        Interp::Linear { antialias: false } => vec![1.0 - ratio, ratio],
        Interp::Linear { antialias: true } => {
            let s = scale.min(1.0);
            let start = (-1.0 / s).floor() as i64 + 1;
            let c: Vec<f64> = (start..start + 2 - 2 * start)
                .map(|i| (1.0 - ((i as f64 - ratio) * s).abs()).clamp(0.0, 1.0))
                .collect();
            normalised(c)
        }
        Interp::Cubic {
            a,
            antialias: false,
        } => {
            let (r, q) = (ratio, 1.0 - ratio);
            vec![
                ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
                ((a * (q + 1.0) - 5.0 * a) * (q + 1.0) + 8.0 * a) * (q + 1.0) - 4.0 * a,
            ]
        }
        Interp::Cubic { a, antialias: true } => {
            let s = scale.min(1.0);
            let kernel = |x: f64| {
                let x = x.abs();
                if x <= 1.0 {
                    (a + 2.0) * x * x * x - (a + 3.0) * x * x + 1.0
                } else if x < 2.0 {
                    a * x * x * x - 5.0 * a * x * x + 8.0 * a * x - 4.0 * a
                } else {
                    0.0
                }
            };
            let start = (-2.0 / s).floor() as i64 + 1;
            let c: Vec<f64> = (start..2 - start)
                .map(|i| kernel(s * (i as f64 - ratio)))
                .collect();
            normalised(c)
        }
    }
}

fn normalised(c: Vec<f64>) -> Vec<f64> {
    let s: f64 = c.iter().sum();
    c.into_iter().map(|v| v / s).collect()
}

/// The weights of one axis of `input` elements resized to `out` elements
/// with scale `scale` (ONNX reference `_interpolate_1d_with_x`, per output index).
#[allow(clippy::too_many_arguments)]
fn axis_weights(
    input: usize,
    out: usize,
    scale: f64,
    coord: Coord,
    interp: Interp,
    roi: (f64, f64),
    exclude_outside: bool,
) -> AxisWeights {
    let (inw, outw) = (input as f64, scale * input as f64);
    let mut w = vec![vec![0.0; input]; out];
    let mut inside = vec![true; out];
    for (o, row) in w.iter_mut().enumerate() {
        let x = o as f64;
        let x_ori = match coord {
            Coord::AlignCorners if outw == 1.0 => 0.0,
            Coord::AlignCorners => x * (inw - 1.0) / (outw - 1.0),
            Coord::Asymmetric => x / scale,
            Coord::TfCropAndResize => {
                let base = if outw == 1.0 {
                    (roi.1 - roi.0) * (inw - 1.0) / 2.0
                } else {
                    x * (roi.1 - roi.0) * (inw - 1.0) / (outw - 1.0)
                };
                base + roi.0 * (inw - 1.0)
            }
            Coord::PytorchHalfPixel if outw == 1.0 => -0.5,
            Coord::PytorchHalfPixel | Coord::HalfPixel => (x + 0.5) / scale - 0.5,
            Coord::HalfPixelSymmetric => {
                let offset = inw / 2.0 * (1.0 - out as f64 / outw);
                offset + (x + 0.5) / scale - 0.5
            }
        };
        if coord == Coord::TfCropAndResize && (x_ori < 0.0 || x_ori > inw - 1.0) {
            inside[o] = false;
            continue;
        }
        let ratio = if x_ori.fract() == 0.0 {
            1.0
        } else {
            x_ori - x_ori.floor()
        };
        let mut c = coeffs(interp, ratio, scale);
        let n = c.len();
        let pad = n.div_ceil(2) as i64;
        let idx = nearest_indices(x_ori + pad as f64, n, input as i64 + 2 * pad);
        let orig: Vec<i64> = idx.iter().map(|&i| i - pad).collect();
        if exclude_outside {
            for (ci, &i) in c.iter_mut().zip(&orig) {
                if i < 0 || i >= input as i64 {
                    *ci = 0.0;
                }
            }
            c = normalised(c);
        }
        for (ci, &i) in c.iter().zip(&orig) {
            row[i.clamp(0, input as i64 - 1) as usize] += ci;
        }
    }
    AxisWeights { w, inside }
}

/// The `n` integers of [0, limit) nearest to `x` (ties to the smaller), ascending.
fn nearest_indices(x: f64, n: usize, limit: i64) -> Vec<i64> {
    let f = x.floor() as i64;
    let lo = (f - n as i64 - 1).clamp(0, (limit - n as i64).max(0));
    let hi = (f + n as i64 + 2).clamp(lo + n as i64, limit.max(lo + n as i64));
    let mut cand: Vec<i64> = (lo..hi.min(limit)).collect();
    cand.sort_by(|a, b| {
        ((x - *a as f64).abs(), *a)
            .partial_cmp(&((x - *b as f64).abs(), *b))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    cand.truncate(n);
    cand.sort_unstable();
    cand
}

fn floats_input(l: &Lower, n: &Node, i: usize) -> LResult<Option<Vec<f64>>> {
    let Some(name) = n.input(i) else {
        return Ok(None);
    };
    match l.arg_data(name) {
        Some(d) if d.numel() == 0 => Ok(None),
        Some(d) => Ok(Some(d.values)),
        None => unsupported(format!(
            "input {i} (`{name}`) is computed at run time; Resize needs its scales, sizes and roi known at import (fix the input shapes)"
        )),
    }
}

/// The coordinate transformation and interpolation of a Resize node
/// (Upsample and opset < 11: asymmetric coordinates, floor rounding).
///
/// Errors: an unknown `coordinate_transformation_mode`, `nearest_mode` or
/// `mode`.
fn modes(n: &Node, legacy: bool) -> LResult<(Coord, Interp)> {
    let mode = n.attrs.string("mode", "nearest");
    let coord = if legacy {
        Coord::Asymmetric
    } else {
        match n
            .attrs
            .string("coordinate_transformation_mode", "half_pixel")
            .as_str()
        {
            "half_pixel" => Coord::HalfPixel,
            "half_pixel_symmetric" => Coord::HalfPixelSymmetric,
            "pytorch_half_pixel" => Coord::PytorchHalfPixel,
            "align_corners" => Coord::AlignCorners,
            "asymmetric" => Coord::Asymmetric,
            "tf_crop_and_resize" => Coord::TfCropAndResize,
            other => return unsupported(format!("coordinate_transformation_mode `{other}`")),
        }
    };
    let antialias = n.attrs.int("antialias", 0) != 0;
    let interp = match mode.as_str() {
        "nearest" if legacy => Interp::Nearest(Rounding::Floor),
        "nearest" => Interp::Nearest(
            match n
                .attrs
                .string("nearest_mode", "round_prefer_floor")
                .as_str()
            {
                "round_prefer_floor" => Rounding::PreferFloor,
                "round_prefer_ceil" => Rounding::PreferCeil,
                "floor" => Rounding::Floor,
                "ceil" => Rounding::Ceil,
                other => return unsupported(format!("nearest_mode `{other}`")),
            },
        ),
        "linear" | "bilinear" | "trilinear" => Interp::Linear { antialias },
        "cubic" | "bicubic" => Interp::Cubic {
            a: n.attrs.float("cubic_coeff_a", -0.75),
            antialias,
        },
        other => return unsupported(format!("mode `{other}`")),
    };
    Ok((coord, interp))
}

/// Each axis's scale and output extent from `sizes` (with
/// `keep_aspect_ratio_policy`) or else `scales`, for input shape `s`;
/// axes not in `axes` keep scale 1.
///
/// Errors: a count that is not one per axis, an unknown policy, neither
/// input given.
fn output_shape(
    n: &Node,
    s: &[usize],
    axes: &[usize],
    scales: Option<Vec<f64>>,
    sizes: Option<Vec<f64>>,
) -> LResult<(Vec<f64>, Vec<usize>)> {
    let r = s.len();
    let mut scale = vec![1.0; r];
    let mut out = s.to_vec();
    match (scales, sizes) {
        (_, Some(sz)) => {
            if sz.len() != axes.len() {
                return unsupported(format!("{} sizes for {} axes", sz.len(), axes.len()));
            }
            for (i, &d) in axes.iter().enumerate() {
                out[d] = sz[i].max(0.0) as usize;
                scale[d] = sz[i] / s[d] as f64;
            }
            let policy = n.attrs.string("keep_aspect_ratio_policy", "stretch");
            if policy != "stretch" {
                let it = axes.iter().map(|&d| scale[d]);
                let k = match policy.as_str() {
                    "not_larger" => it.fold(f64::INFINITY, f64::min),
                    "not_smaller" => it.fold(f64::NEG_INFINITY, f64::max),
                    other => return unsupported(format!("keep_aspect_ratio_policy `{other}`")),
                };
                for &d in axes {
                    scale[d] = k;
                    out[d] = (k * s[d] as f64 + 0.5) as usize;
                }
            }
        }
        (Some(sc), None) => {
            if sc.len() != axes.len() {
                return unsupported(format!("{} scales for {} axes", sc.len(), axes.len()));
            }
            for (i, &d) in axes.iter().enumerate() {
                scale[d] = sc[i];
                out[d] = (sc[i] * s[d] as f64).max(0.0) as usize;
            }
        }
        (None, None) => return unsupported("neither scales nor sizes is given"),
    }
    Ok((scale, out))
}

/// Lower Resize or Upsample (see the module doc).
///
/// Errors (unsupported uses): scales or sizes not known at import, an
/// unknown mode, a 0-sized output.
pub fn resize(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let s = l.shape(x);
    let r = s.len();
    let legacy = n.op_type() == "Upsample" || n.opset < 11;
    let (roi, scales, sizes) = if legacy {
        let scales = match n.attrs.floats("scales") {
            Some(v) => Some(v),
            None => floats_input(l, n, 1)?,
        };
        (None, scales, None)
    } else {
        (
            floats_input(l, n, 1)?,
            floats_input(l, n, 2)?,
            floats_input(l, n, 3)?,
        )
    };
    let (coord, interp) = modes(n, legacy)?;
    let axes: Vec<usize> = match n.attrs.ints("axes") {
        Some(a) => a
            .iter()
            .map(|&v| {
                let v = if v < 0 { v + r as i64 } else { v };
                usize::try_from(v)
                    .ok()
                    .filter(|&v| v < r)
                    .ok_or_else(|| NodeError::Unsupported(format!("axis {v} out of range")))
            })
            .collect::<LResult<_>>()?,
        None => (0..r).collect(),
    };
    let mut roi_full: Vec<(f64, f64)> = vec![(0.0, 1.0); r];
    if let Some(roi) = &roi {
        if roi.len() == 2 * axes.len() {
            for (i, &d) in axes.iter().enumerate() {
                roi_full[d] = (roi[i], roi[axes.len() + i]);
            }
        }
    }
    let (scale, out) = output_shape(n, &s, &axes, scales, sizes)?;
    if out.contains(&0) || scale.iter().any(|&v| !(v > 0.0 && v.is_finite())) {
        return unsupported(format!("output shape {out:?} with scales {scale:?}"));
    }
    let exclude = n.attrs.int("exclude_outside", 0) != 0;
    let weights: Vec<Option<AxisWeights>> = (0..r)
        .map(|d| {
            let identity = out[d] == s[d] && scale[d] == 1.0 && coord != Coord::TfCropAndResize;
            (!identity)
                .then(|| axis_weights(s[d], out[d], scale[d], coord, interp, roi_full[d], exclude))
        })
        .collect();
    // Nearest upsampling by integer factors on the last two axes: index-only spec.
    let factor = |d: usize| -> Option<usize> {
        let Some(aw) = &weights[d] else {
            return Some(1);
        };
        let f = out[d] / s[d];
        let ok = f >= 1
            && out[d] == f * s[d]
            && aw.inside.iter().all(|&v| v)
            && aw.w.iter().enumerate().all(|(o, row)| {
                row.iter()
                    .enumerate()
                    .all(|(i, &v)| v == f64::from(u8::from(i == o / f)))
            });
        ok.then_some(f)
    };
    if r >= 2 && (0..r - 2).all(|d| weights[d].is_none()) {
        if let (Some(sh), Some(sw)) = (factor(r - 2), factor(r - 1)) {
            let attrs = [
                ("sh", AttrValue::Int(sh as i64)),
                ("sw", AttrValue::Int(sw as i64)),
            ];
            return Ok(vec![Out::T(l.emit1("upsample_nearest2d", &[x], &attrs)?)]);
        }
    }
    let mut cur = x;
    let mut shape = s.clone();
    for d in (0..r).rev() {
        let Some(aw) = &weights[d] else { continue };
        let flat: Vec<f64> = aw.w.iter().flatten().copied().collect();
        let wname = format!("{}.weights{d}", n.name);
        l.define_known(
            &wname,
            Known {
                elem: Elem::F32,
                shape: vec![out[d], s[d]],
                src: Src::Dense(Data {
                    elem: Elem::F32,
                    shape: vec![out[d], s[d]],
                    values: flat,
                }),
                kind: Kind::Constant,
            },
        );
        let w = l.tensor(&wname)?;
        if d == r - 1 {
            cur = l.emit1("resample_last", &[cur, w], &[])?;
        } else {
            let mut view = shape[..=d].to_vec();
            view.push(shape[d + 1..].iter().product());
            let v = l.reshape(cur, &view)?;
            let y = l.emit1("resample_mid", &[v, w], &[])?;
            shape[d] = out[d];
            cur = l.reshape(y, &shape)?;
        }
        shape[d] = out[d];
    }
    let cur = extrapolate(l, n, cur, &weights, &out)?;
    Ok(vec![Out::T(cur)])
}

/// tf_crop_and_resize: elements outside the input along any axis get
/// `extrapolation_value` (added as a constant over the resampled axes);
/// gives `cur` unchanged when nothing is outside or the value is 0.
fn extrapolate(
    l: &mut Lower,
    n: &Node,
    mut cur: TensorId,
    weights: &[Option<AxisWeights>],
    out: &[usize],
) -> LResult<TensorId> {
    let r = out.len();
    let e = n.attrs.float("extrapolation_value", 0.0);
    let outside = weights
        .iter()
        .any(|w| w.as_ref().is_some_and(|w| w.inside.iter().any(|&v| !v)));
    if outside && e != 0.0 {
        let fill_shape: Vec<usize> = (0..r)
            .map(|d| if weights[d].is_some() { out[d] } else { 1 })
            .collect();
        let total: usize = fill_shape.iter().product();
        let mut values = vec![0.0; total];
        for (flat, v) in values.iter_mut().enumerate() {
            let mut rem = flat;
            let mut all_inside = true;
            for d in (0..r).rev() {
                let i = rem % fill_shape[d];
                rem /= fill_shape[d];
                if let Some(w) = &weights[d] {
                    all_inside &= w.inside[i];
                }
            }
            if !all_inside {
                *v = e;
            }
        }
        let (yname, fname) = (
            format!("{}.interpolated", n.name),
            format!("{}.extrapolation", n.name),
        );
        l.bind(&yname, cur);
        l.define_known(
            &fname,
            Known {
                elem: Elem::F32,
                shape: fill_shape.clone(),
                src: Src::Dense(Data {
                    elem: Elem::F32,
                    shape: fill_shape,
                    values,
                }),
                kind: Kind::Constant,
            },
        );
        cur = broadcast_binary(l, "add", &yname, &fname)?;
    }
    Ok(cur)
}
