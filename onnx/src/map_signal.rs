//! Lowering of ONNX's signal operators: HannWindow, HammingWindow,
//! BlackmanWindow (`*_window` specs), DFT (`dft`, `irfft`), STFT (`stft`)
//! and MelWeightMatrix (`mel_weight_matrix`).
//!
//! A window's size input must be known at import time (a constant, or a
//! value the caller supplied with `--input-value`): it is the output's
//! length. DFT's `dft_length` and (opset 20) `axis` inputs likewise; the
//! signal axis is moved into the middle of a [P, N, Q, C] view (P: the dims
//! before it, Q: the dims between it and the trailing real/imaginary dim C).

use graph::{float, int};

use crate::lower::{unsupported, LResult, Lower, Out};
use crate::map_elementwise::shape;
use crate::mapping::Mapping;
use crate::node::Node;
use crate::tensor::Elem;

/// The scalar integer value of input `i`, which must be known at import.
fn known_int(l: &Lower, n: &Node, i: usize, what: &str) -> LResult<Option<i64>> {
    let Some(name) = n.input(i) else {
        return Ok(None);
    };
    match l.arg_data(name) {
        Some(d) if d.values.len() == 1 => Ok(Some(d.as_i64()[0])),
        Some(d) => unsupported(format!(
            "{what} (`{name}`) must hold one value, it has shape {:?}",
            d.shape
        )),
        None => unsupported(format!(
            "{what} (`{name}`) must be known at import time (a constant, an initializer or \
             --input-value {name}=...); it is computed at run time"
        )),
    }
}

/// HannWindow / HammingWindow / BlackmanWindow (opset 17): `periodic`
/// (default 1) chooses N = size or size - 1; `output_datatype` only changes
/// the element type.
pub fn window(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    let size = known_int(l, n, 0, "the window size")?
        .ok_or_else(|| crate::lower::NodeError::Unsupported("input 0 is missing".into()))?;
    if size < 0 {
        return unsupported(format!("window size {size}"));
    }
    if size == 0 {
        return Ok(vec![Out::C(crate::map_shape::empty(Elem::F32, vec![0]))]);
    }
    let periodic = n.attrs.int("periodic", 1);
    if !(0..=1).contains(&periodic) {
        return unsupported(format!("periodic = {periodic}"));
    }
    let name = n.input(0).expect("checked by known_int");
    let x = l.tensor(name)?;
    let x = l.reshape(x, &[])?;
    let y = l.emit1(
        m.specs[0],
        &[x],
        &[("size", int(size)), ("periodic", int(periodic))],
    )?;
    Ok(vec![Out::T(y)])
}

/// DFT, opset 17 (`axis` attribute, default 1) and 20 (`axis` input, default
/// -2): real (last dim 1) or complex (last dim 2) input, `dft_length`
/// zero-padding or truncating, `inverse`, `onesided` (`dft`); `inverse` and
/// `onesided` together are the inverse of a one-sided spectrum, a real
/// signal of length `dft_length` (default 2 (N - 1)) (`irfft`).
pub fn dft(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let xn = n
        .input(0)
        .ok_or_else(|| crate::lower::NodeError::Unsupported("input 0 is missing".into()))?;
    let sx = shape(l, xn)?;
    let r = sx.len();
    if r < 2 || !(1..=2).contains(&sx[r - 1]) {
        return unsupported(format!(
            "input of shape {sx:?}: the last dim must be 1 (real) or 2 (complex)"
        ));
    }
    let axis = if n.opset >= 20 {
        known_int(l, n, 2, "the axis")?.unwrap_or(-2)
    } else {
        n.attrs.int("axis", 1)
    };
    let a = if axis < 0 { axis + r as i64 } else { axis };
    if a < 0 || a >= r as i64 - 1 {
        return unsupported(format!("axis {axis} of an input of rank {r}"));
    }
    let a = a as usize;
    let (inverse, onesided) = (n.attrs.int("inverse", 0), n.attrs.int("onesided", 0));
    if !(0..=1).contains(&inverse) || !(0..=1).contains(&onesided) {
        return unsupported(format!("inverse = {inverse}, onesided = {onesided}"));
    }
    // The inverse of a one-sided spectrum is real, of length 2 (N - 1) by default.
    let irfft = inverse == 1 && onesided == 1;
    let len = match known_int(l, n, 1, "dft_length")? {
        Some(v) if v > 0 => v as usize,
        Some(v) => return unsupported(format!("dft_length {v}")),
        None if irfft => 2 * sx[a].saturating_sub(1),
        None => sx[a],
    };
    let p: usize = sx[..a].iter().product();
    let q: usize = sx[a + 1..r - 1].iter().product();
    if sx.contains(&0) || len == 0 {
        return unsupported("an empty input");
    }
    let x = l.tensor(xn)?;
    let x = l.reshape(x, &[p, sx[a], q, sx[r - 1]])?;
    let y = if irfft {
        l.emit1("irfft", &[x], &[("len", int(len as i64))])?
    } else {
        l.emit1(
            "dft",
            &[x],
            &[
                ("len", int(len as i64)),
                ("inverse", int(inverse)),
                ("onesided", int(onesided)),
            ],
        )?
    };
    let ys = l.shape(y);
    let mut out: Vec<usize> = sx[..a].to_vec();
    out.push(ys[1]);
    out.extend(&sx[a + 1..r - 1]);
    out.push(ys[3]);
    Ok(vec![Out::T(l.reshape(y, &out)?)])
}

/// STFT (opset 17): signal [B, S, C] (C = 1 real, 2 complex), `frame_step`
/// and `frame_length` known at import, optional window [W] (default ones of
/// the frame length), `onesided` (default 1).
pub fn stft(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let xn = n
        .input(0)
        .ok_or_else(|| crate::lower::NodeError::Unsupported("input 0 is missing".into()))?;
    let sx = shape(l, xn)?;
    if sx.len() != 3 || !(1..=2).contains(&sx[2]) || sx.contains(&0) {
        return unsupported(format!(
            "signal of shape {sx:?}: [batch, length, 1 (real) or 2 (complex)] is mapped"
        ));
    }
    let step = known_int(l, n, 1, "frame_step")?
        .ok_or_else(|| crate::lower::NodeError::Unsupported("frame_step is missing".into()))?;
    let window = n.input(2);
    let wlen = match window {
        Some(w) => {
            let sw = shape(l, w)?;
            if sw.len() != 1 || sw[0] == 0 {
                return unsupported(format!("window of shape {sw:?}"));
            }
            Some(sw[0])
        }
        None => None,
    };
    let len = match known_int(l, n, 3, "frame_length")? {
        Some(v) => v,
        None => wlen.unwrap_or(sx[1]) as i64,
    };
    if step < 1 || len < 1 || len as usize > sx[1] {
        return unsupported(format!(
            "frame_step {step}, frame_length {len} for a signal of length {}",
            sx[1]
        ));
    }
    let onesided = n.attrs.int("onesided", 1);
    if !(0..=1).contains(&onesided) {
        return unsupported(format!("onesided = {onesided}"));
    }
    let x = l.tensor(xn)?;
    let w = match window {
        Some(w) => l.tensor(w)?,
        None => crate::map_elementwise::splat_const(
            l,
            &format!("{}#window", n.name),
            &[len as usize],
            1.0,
        )?,
    };
    let y = l.emit1(
        "stft",
        &[x, w],
        &[
            ("step", int(step)),
            ("len", int(len)),
            ("onesided", int(onesided)),
        ],
    )?;
    Ok(vec![Out::T(y)])
}

/// MelWeightMatrix (opset 17): num_mel_bins, dft_length, sample_rate,
/// lower_edge_hertz and upper_edge_hertz must be known at import (they are
/// the spec's attributes; the output is a constant of the graph).
pub fn mel_weight_matrix(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let mut ints = Vec::new();
    for (i, what) in [(0, "num_mel_bins"), (1, "dft_length"), (2, "sample_rate")] {
        match known_int(l, n, i, what)? {
            Some(v) if v > 0 => ints.push(v),
            Some(v) => return unsupported(format!("{what} = {v}")),
            None => return unsupported(format!("{what} is missing")),
        }
    }
    let mut floats = Vec::new();
    for (i, what) in [(3, "lower_edge_hertz"), (4, "upper_edge_hertz")] {
        let v = n
            .input(i)
            .and_then(|name| l.arg_data(name))
            .filter(|d| d.values.len() == 1)
            .map(|d| d.values[0]);
        match v {
            Some(v) if v >= 0.0 => floats.push(v),
            _ => {
                return unsupported(format!(
                    "{what} must be one non-negative value known at import time"
                ))
            }
        }
    }
    let name = n.input(0).expect("checked by known_int");
    let x = l.tensor(name)?;
    let x = l.reshape(x, &[])?;
    let y = l.emit1(
        "mel_weight_matrix",
        &[x],
        &[
            ("bins", int(ints[0])),
            ("len", int(ints[1])),
            ("rate", int(ints[2])),
            ("lo", float(floats[0])),
            ("hi", float(floats[1])),
        ],
    )?;
    Ok(vec![Out::T(y)])
}
