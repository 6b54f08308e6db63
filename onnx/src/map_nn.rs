//! Lowering of neural-network ONNX operators: MatMul, Gemm, Conv, pooling,
//! LRN, Softmax / LogSoftmax; the normalisations live in [`crate::map_norm`]
//! and are re-exported here for the table.
//!
//! Attribute and opset differences handled here: Conv/pool `auto_pad`,
//! `pads` as [begin…, end…]; Softmax's axis semantics (opset < 13 coerces
//! to 2-D at `axis`, default 1; opset ≥ 13 normalises one axis, default -1);
//! BatchNormalization in inference (running statistics) or training (batch
//! statistics) mode.

use graph::{float, int, Attr, TensorId};

use crate::lower::{unsupported, LResult, Lower, Out};
use crate::map_elementwise::{broadcast_binary, input, shape};
pub use crate::map_norm::{
    batchnorm, groupnorm, instancenorm, layernorm, lp_normalization, mvn, rmsnorm,
};
use crate::mapping::Mapping;
use crate::node::Node;

pub(crate) fn norm_axis(axis: i64, rank: usize) -> LResult<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a as usize >= rank.max(1) {
        return unsupported(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(a as usize)
}

/// Normalise a possibly negative axis against a rank.
pub fn axis_of(axis: i64, rank: usize) -> LResult<usize> {
    norm_axis(axis, rank)
}

/// MatMul (numpy semantics): 2-D `matmul`, [..., K]·[K, N] `dense`, batched `batch_matmul`
/// (batch dims broadcast first), 1-D operands promoted and squeezed back.
pub fn matmul(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let mut a = input(l, n, 0)?;
    let mut b = input(l, n, 1)?;
    let (mut sa, mut sb) = (l.shape(a), l.shape(b));
    let (a1, b1) = (sa.len() == 1, sb.len() == 1);
    if a1 {
        sa = vec![1, sa[0]];
        a = l.reshape(a, &sa)?;
    }
    if b1 {
        sb = vec![sb[0], 1];
        b = l.reshape(b, &sb)?;
    }
    if sa.is_empty() || sb.is_empty() {
        return unsupported("scalar operands");
    }
    let y = if sa.len() == 2 && sb.len() == 2 {
        l.emit1("matmul", &[a, b], &[])?
    } else if sb.len() == 2 {
        l.emit1("dense", &[a, b], &[])?
    } else {
        let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
        let batch = crate::lower::broadcast_shape(ba, bb).ok_or_else(|| {
            crate::lower::NodeError::Unsupported(format!(
                "batch dims {ba:?} and {bb:?} do not broadcast"
            ))
        })?;
        let mut ta = batch.clone();
        ta.extend(&sa[sa.len() - 2..]);
        let mut tb = batch.clone();
        tb.extend(&sb[sb.len() - 2..]);
        let a = l.broadcast_to(a, &ta)?;
        let b = l.broadcast_to(b, &tb)?;
        l.emit1("batch_matmul", &[a, b], &[])?
    };
    let mut out = l.shape(y);
    if b1 {
        out.pop();
    }
    if a1 {
        let r = out.len();
        out.remove(r - 1 - usize::from(!b1));
    }
    Ok(vec![Out::T(l.reshape(y, &out)?)])
}

/// Gemm: `gemm_nt_bias` / `gemm_bias` for the fully-connected case (alpha = beta = 1,
/// transA = 0, C of shape [N] or [1, N]); otherwise matmul family + `scale` + broadcast add.
pub fn gemm(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let alpha = n.attrs.float("alpha", 1.0);
    let beta = n.attrs.float("beta", 1.0);
    let (ta, tb) = (n.attrs.int("transA", 0) != 0, n.attrs.int("transB", 0) != 0);
    let a = input(l, n, 0)?;
    let b = input(l, n, 1)?;
    let c_name = n.input(2);
    let (sa, sb) = (l.shape(a), l.shape(b));
    if sa.len() != 2 || sb.len() != 2 {
        return unsupported("Gemm operands must be 2-D");
    }
    let nn = if tb { sb[0] } else { sb[1] };
    if let Some(c) = c_name {
        let sc = shape(l, c)?;
        if alpha == 1.0 && beta == 1.0 && !ta && (sc == [nn] || sc == [1, nn]) {
            let ct = l.tensor(c)?;
            let ct = l.reshape(ct, &[nn])?;
            let spec = if tb { "gemm_nt_bias" } else { "gemm_bias" };
            return Ok(vec![Out::T(l.emit1(spec, &[a, b, ct], &[])?)]);
        }
    }
    let y = match (ta, tb) {
        (false, false) => l.emit1("matmul", &[a, b], &[])?,
        (false, true) => l.emit1("matmul_nt", &[a, b], &[])?,
        (true, false) => l.emit1("matmul_tn", &[a, b], &[])?,
        (true, true) => {
            let at = l.emit1("transpose", &[a], &[])?;
            l.emit1("matmul_nt", &[at, b], &[])?
        }
    };
    let y = if alpha != 1.0 {
        l.emit1("scale", &[y], &[("alpha", float(alpha))])?
    } else {
        y
    };
    let Some(c) = c_name else {
        return Ok(vec![Out::T(y)]);
    };
    let mut c_name = c.to_string();
    if beta != 1.0 {
        let ct = l.tensor(c)?;
        let cs = l.emit1("scale", &[ct], &[("alpha", float(beta))])?;
        c_name = format!("{}#c", n.name);
        l.bind(&c_name, cs);
    }
    let y_name = format!("{}#ab", n.name);
    l.bind(&y_name, y);
    Ok(vec![Out::T(broadcast_binary(l, "add", &y_name, &c_name)?)])
}

/// Pads [begin..., end...] of a conv/pool node for spatial input sizes `sizes`
/// (auto_pad SAME_UPPER/SAME_LOWER/VALID/NOTSET).
fn pads(
    n: &Node,
    sizes: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dil: &[usize],
) -> LResult<Vec<usize>> {
    let k = sizes.len();
    let auto = n.attrs.string("auto_pad", "NOTSET");
    match auto.as_str() {
        "NOTSET" => {
            let p = n.attrs.ints("pads").unwrap_or_else(|| vec![0; 2 * k]);
            if p.len() != 2 * k || p.iter().any(|&x| x < 0) {
                return unsupported(format!("pads {p:?}"));
            }
            Ok(p.iter().map(|&x| x as usize).collect())
        }
        "VALID" => Ok(vec![0; 2 * k]),
        "SAME_UPPER" | "SAME_LOWER" => {
            let mut begin = vec![0; k];
            let mut end = vec![0; k];
            for i in 0..k {
                // Saturating: a zero-size input or kernel (bad input) must not panic.
                let out = sizes[i].div_ceil(strides[i]);
                let eff = kernel[i].saturating_sub(1).saturating_mul(dil[i]) + 1;
                let total = (out.saturating_sub(1) * strides[i] + eff).saturating_sub(sizes[i]);
                let (small, big) = (total / 2, total - total / 2);
                if auto == "SAME_UPPER" {
                    begin[i] = small;
                    end[i] = big;
                } else {
                    begin[i] = big;
                    end[i] = small;
                }
            }
            begin.extend(end);
            Ok(begin)
        }
        other => unsupported(format!("auto_pad = {other}")),
    }
}

/// The node's positive ints attribute `name` of `k` values, or `k` times `default`.
pub fn ints_or(n: &Node, name: &str, k: usize, default: usize) -> LResult<Vec<usize>> {
    match n.attrs.ints(name) {
        None => Ok(vec![default; k]),
        Some(v) if v.len() == k && v.iter().all(|&x| x > 0) => {
            Ok(v.iter().map(|&x| x as usize).collect())
        }
        Some(v) => unsupported(format!("{name} = {v:?}")),
    }
}

/// Conv (1-D, 2-D and 3-D; groups; bias fused into `conv2d_bias` / `conv2d_group_bias`).
/// Begin pads unlike end pads (explicit, or from auto_pad SAME_UPPER / SAME_LOWER)
/// and grouped 1-D convolutions go to [`conv_ext`], 3-D ones to
/// [`crate::map_conv_transpose::conv3d`].
pub fn conv(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let w = input(l, n, 1)?;
    let bias = match n.input(2) {
        Some(b) => Some(l.tensor(b)?),
        None => None,
    };
    Ok(vec![Out::T(conv_of(l, n, x, w, bias)?)])
}

/// [`conv`] of graph tensors x [B, CI, …] and w [CO, CI / group, …] (and a
/// bias [CO]), with the node's attributes (ConvInteger's shifted operands).
pub fn conv_of(
    l: &mut Lower,
    n: &Node,
    x: TensorId,
    w: TensorId,
    bias: Option<TensorId>,
) -> LResult<TensorId> {
    let (sx, sw) = (l.shape(x), l.shape(w));
    let k = sx.len().saturating_sub(2);
    if !(1..=3).contains(&k) || sw.len() != sx.len() {
        return unsupported(format!("{k}-D convolution (1-D, 2-D and 3-D are mapped)"));
    }
    let kernel = sw[2..].to_vec();
    let strides = ints_or(n, "strides", k, 1)?;
    let dil = ints_or(n, "dilations", k, 1)?;
    let p = pads(n, &sx[2..], &kernel, &strides, &dil)?;
    let group = n.attrs.int("group", 1);
    if group < 1 {
        return unsupported(format!("group = {group}"));
    }
    if k == 3 {
        return crate::map_conv_transpose::conv3d(l, x, w, bias, group, (&strides, &dil, &p));
    }
    if p[..k] != p[k..] || (k == 1 && group != 1) {
        let win = Window {
            strides,
            dil,
            pads: p,
        };
        return conv_ext(l, x, w, bias, group, &win);
    }
    if k == 1 {
        let y = l.emit1(
            "conv1d",
            &[x, w],
            &[
                ("stride", int(strides[0] as i64)),
                ("pad", int(p[0] as i64)),
                ("dilation", int(dil[0] as i64)),
            ],
        )?;
        return match bias {
            Some(b) => l.emit1("channel_bias_add", &[y, b], &[]),
            None => Ok(y),
        };
    }
    let mut attrs: Vec<Attr> = vec![
        ("stride_h", int(strides[0] as i64)),
        ("stride_w", int(strides[1] as i64)),
        ("pad_h", int(p[0] as i64)),
        ("pad_w", int(p[1] as i64)),
        ("dilation_h", int(dil[0] as i64)),
        ("dilation_w", int(dil[1] as i64)),
    ];
    let spec = match (group != 1, bias.is_some()) {
        (false, false) => "conv2d",
        (false, true) => "conv2d_bias",
        (true, false) => "conv2d_group",
        (true, true) => "conv2d_group_bias",
    };
    if group != 1 {
        attrs.push(("groups", int(group)));
    }
    let mut ins = vec![x, w];
    ins.extend(bias);
    l.emit1(spec, &ins, &attrs)
}

/// Strides, dilations and pads [begin…, end…] of a 1-D or 2-D convolution.
struct Window {
    strides: Vec<usize>,
    dil: Vec<usize>,
    pads: Vec<usize>,
}

/// A convolution as `conv2d_ext` / `conv2d_group_ext` (separate begin/end
/// pads, read as zero padding), 1-D through a [B, C, 1, X] view of x and
/// w, plus `channel_bias_add` when there is a bias.
fn conv_ext(
    l: &mut Lower,
    x: TensorId,
    w: TensorId,
    bias: Option<TensorId>,
    group: i64,
    win: &Window,
) -> LResult<TensorId> {
    let (sx, sw) = (l.shape(x), l.shape(w));
    let k = sx.len() - 2;
    let lift = 2 - k;
    // 1-D: unit height, stride and dilation 1, no pads along it.
    let ones = |v: &[usize], fill: usize| -> Vec<usize> {
        std::iter::repeat_n(fill, lift)
            .chain(v.iter().copied())
            .collect()
    };
    let view = |s: &[usize]| -> Vec<usize> { [&s[..2], &ones(&s[2..], 1)[..]].concat() };
    let xv = l.reshape(x, &view(&sx))?;
    let wv = l.reshape(w, &view(&sw))?;
    let (strides, dil) = (ones(&win.strides, 1), ones(&win.dil, 1));
    let (begin, end) = (ones(&win.pads[..k], 0), ones(&win.pads[k..], 0));
    let mut attrs: Vec<Attr> = vec![
        ("stride_h", int(strides[0] as i64)),
        ("stride_w", int(strides[1] as i64)),
        ("pad_t", int(begin[0] as i64)),
        ("pad_l", int(begin[1] as i64)),
        ("pad_b", int(end[0] as i64)),
        ("pad_r", int(end[1] as i64)),
        ("dilation_h", int(dil[0] as i64)),
        ("dilation_w", int(dil[1] as i64)),
    ];
    let spec = if group == 1 {
        "conv2d_ext"
    } else {
        attrs.push(("groups", int(group)));
        "conv2d_group_ext"
    };
    let y = l.emit1(spec, &[xv, wv], &attrs)?;
    let y = match bias {
        Some(b) => l.emit1("channel_bias_add", &[y, b], &[])?,
        None => y,
    };
    let mut out = l.shape(y);
    out.drain(2..2 + lift);
    l.reshape(y, &out)
}

/// MaxPool / AveragePool → `maxpool2d_ext` / `avgpool2d_ext` (1-D via a
/// [B, C, 1, X] view, 2-D), `maxpool3d_ext` / `avgpool3d_ext` (3-D, and dilated
/// average pooling of lower rank as a volume with unit leading dims); MaxPool's
/// Indices output (1-D, 2-D) → `maxpool2d_ext_indices`; LpPool (every rank, as a
/// volume) → `lppool3d_ext`.
pub fn pool(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let sx = l.shape(x);
    let k = sx.len().saturating_sub(2);
    if !(1..=3).contains(&k) {
        return unsupported(format!("{k}-D pooling (1-D, 2-D and 3-D are mapped)"));
    }
    let max = m.op == "MaxPool";
    let lp = m.op == "LpPool";
    // storage_order only changes the Indices output (row- or column-major).
    let storage_order = n.attrs.int("storage_order", 0);
    let kernel: Vec<usize> = match n.attrs.ints("kernel_shape") {
        Some(v) if v.len() == k && v.iter().all(|&d| d > 0) => {
            v.iter().map(|&d| d as usize).collect()
        }
        _ => return unsupported("kernel_shape is missing or malformed"),
    };
    let strides = ints_or(n, "strides", k, 1)?;
    let dil = ints_or(n, "dilations", k, 1)?;
    let p = pads(n, &sx[2..], &kernel, &strides, &dil)?;
    let dilated = dil.iter().any(|&d| d != 1);
    // Rank of the spec's spatial block: lift by unit leading spatial dims.
    let rank = if k == 3 || lp || (!max && dilated) {
        3
    } else {
        2
    };
    if max && rank == 3 && n.wants_output(1) {
        return unsupported("the Indices output of 3-D MaxPool");
    }
    let lift = rank - k;
    let ones = |v: &[usize], fill: usize| -> Vec<usize> {
        std::iter::repeat_n(fill, lift)
            .chain(v.iter().copied())
            .collect()
    };
    let (kernel, strides, dil) = (ones(&kernel, 1), ones(&strides, 1), ones(&dil, 1));
    let (begin, end) = (ones(&p[..k], 0), ones(&p[k..], 0));
    let mut view = sx[..2].to_vec();
    view.extend(ones(&sx[2..], 1));
    let xv = l.reshape(x, &view)?;
    let ceil = n.attrs.int("ceil_mode", 0);
    let names: &[&str] = if rank == 3 {
        &["d", "h", "w"]
    } else {
        &["h", "w"]
    };
    let (pb, pe): (&[&str], &[&str]) = if rank == 3 {
        (&["pad_f", "pad_t", "pad_l"], &["pad_k", "pad_b", "pad_r"])
    } else {
        (&["pad_t", "pad_l"], &["pad_b", "pad_r"])
    };
    let keys: Vec<(String, i64)> = names
        .iter()
        .enumerate()
        .flat_map(|(i, a)| {
            [
                (format!("kernel_{a}"), kernel[i] as i64),
                (format!("stride_{a}"), strides[i] as i64),
                (pb[i].to_string(), begin[i] as i64),
                (pe[i].to_string(), end[i] as i64),
            ]
        })
        .collect();
    let mut attrs: Vec<Attr> = keys.iter().map(|(k, v)| (k.as_str(), int(*v))).collect();
    attrs.push(("ceil_mode", int(ceil)));
    let dil_keys: Vec<(String, i64)> = names
        .iter()
        .enumerate()
        .map(|(i, a)| (format!("dilation_{a}"), dil[i] as i64))
        .collect();
    let spec = if lp {
        // `p` is a float before opset 2, an int since.
        let p = if n.opset < 2 {
            n.attrs.float("p", 2.0)
        } else {
            n.attrs.int("p", 2) as f64
        };
        attrs.extend(dil_keys.iter().map(|(k, v)| (k.as_str(), int(*v))));
        attrs.push(("p", float(p)));
        "lppool3d_ext"
    } else if max {
        attrs.extend(dil_keys.iter().map(|(k, v)| (k.as_str(), int(*v))));
        if rank == 3 {
            "maxpool3d_ext"
        } else {
            "maxpool2d_ext"
        }
    } else {
        attrs.push((
            "count_include_pad",
            int(n.attrs.int("count_include_pad", 0)),
        ));
        if rank == 3 {
            attrs.extend(dil_keys.iter().map(|(k, v)| (k.as_str(), int(*v))));
            "avgpool3d_ext"
        } else {
            "avgpool2d_ext"
        }
    };
    let y = l.emit1(spec, &[xv], &attrs)?;
    let mut out = l.shape(y);
    out.drain(2..2 + lift);
    let mut outs = vec![Out::T(l.reshape(y, &out)?)];
    if max && n.wants_output(1) {
        // Flat indices into x: the lifted unit dim does not change them.
        let ia: Vec<Attr> = attrs
            .iter()
            .filter(|(k, _)| {
                !k.starts_with("pad_b") && !k.starts_with("pad_r") && *k != "ceil_mode"
            })
            .cloned()
            .chain([("storage_order", int(storage_order))])
            .collect();
        if storage_order != 0 && lift > 0 {
            return unsupported("storage_order = 1 for 1-D MaxPool Indices");
        }
        let idx = l.emit1("maxpool2d_ext_indices", &[xv, y], &ia)?;
        outs.push(Out::T(l.reshape(idx, &out)?));
    }
    Ok(outs)
}

/// View x as NCHW: [B, C, prod(spatial), 1] unless it is rank 4 already.
pub(crate) fn as_nchw(l: &mut Lower, x: TensorId) -> LResult<(TensorId, Vec<usize>)> {
    let s = l.shape(x);
    if s.len() < 2 {
        return unsupported(format!("input of rank {} (NC… expected)", s.len()));
    }
    if s.len() == 4 {
        return Ok((x, s));
    }
    let hw: usize = s[2..].iter().product();
    Ok((l.reshape(x, &[s[0], s[1], hw, 1])?, s))
}

/// GlobalAveragePool / GlobalMaxPool → `global_avgpool` / `global_maxpool`, then [B, C, 1, …].
pub fn global_pool(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let (v, s) = as_nchw(l, x)?;
    let y = l.emit1(m.specs[0], &[v], &[])?;
    let mut out = vec![s[0], s[1]];
    out.extend(std::iter::repeat_n(1, s.len() - 2));
    Ok(vec![Out::T(l.reshape(y, &out)?)])
}

/// MaxUnpool → `maxunpool` on [N, C, spatial product] views: the indices
/// are positions in the natural output, (in − 1)·stride + kernel −
/// pad_begin − pad_end per spatial dim; a larger `output_shape` (input 2,
/// known at import) zero-pads that at the end of each dim (`pad`).
pub fn max_unpool(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let idx = input(l, n, 1)?;
    let sx = l.shape(x);
    let k = sx.len().saturating_sub(2);
    if k == 0 || l.shape(idx) != sx {
        return unsupported(format!(
            "input of shape {sx:?} with indices {:?}",
            l.shape(idx)
        ));
    }
    let kernel = match n.attrs.ints("kernel_shape") {
        Some(v) if v.len() == k && v.iter().all(|&d| d > 0) => v,
        _ => return unsupported("kernel_shape is missing or malformed"),
    };
    let strides = ints_or(n, "strides", k, 1)?;
    let pads = n.attrs.ints("pads").unwrap_or_else(|| vec![0; 2 * k]);
    if pads.len() != 2 * k {
        return unsupported(format!("pads {pads:?}"));
    }
    let natural: Vec<i64> = (0..k)
        .map(|i| (sx[2 + i] as i64 - 1) * strides[i] as i64 + kernel[i] - pads[i] - pads[k + i])
        .collect();
    let wanted: Vec<i64> = match crate::map_shape::ints_input(l, n, 2)? {
        Some(v) if v.len() == k + 2 => v[2..].to_vec(),
        Some(v) => return unsupported(format!("output_shape {v:?} for a rank-{} input", sx.len())),
        None => natural.clone(),
    };
    if natural.iter().zip(&wanted).any(|(&a, &w)| a < 1 || w < a) {
        return unsupported(format!(
            "output {wanted:?} smaller than the unpooled {natural:?}"
        ));
    }
    let p: usize = sx[2..].iter().product();
    let out: i64 = natural.iter().product();
    let xv = l.reshape(x, &[sx[0], sx[1], p])?;
    let iv = l.reshape(idx, &[sx[0], sx[1], p])?;
    let y = l.emit1("maxunpool", &[xv, iv], &[("out", int(out))])?;
    let shape: Vec<usize> = sx[..2]
        .iter()
        .copied()
        .chain(natural.iter().map(|&d| d as usize))
        .collect();
    let mut y = l.reshape(y, &shape)?;
    for (i, (&a, &w)) in natural.iter().zip(&wanted).enumerate() {
        if w > a {
            let t = l.axis_to_last(y, 2 + i)?;
            let attrs = [
                ("before", int(0)),
                ("after", int(w - a)),
                ("value", float(0.0)),
            ];
            let t = l.emit1("pad", &[t], &attrs)?;
            y = l.last_to_axis(t, 2 + i)?;
        }
    }
    Ok(vec![Out::T(y)])
}

/// IsInf → `is_inf` (detect_positive, detect_negative).
pub fn is_inf(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let attrs = [
        ("detect_positive", int(n.attrs.int("detect_positive", 1))),
        ("detect_negative", int(n.attrs.int("detect_negative", 1))),
    ];
    Ok(vec![Out::T(l.emit1("is_inf", &[x], &attrs)?)])
}

/// LRN → `lrn` (across channels, axis 1).
pub fn lrn(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let size = n.attrs.int("size", 0);
    if size <= 0 {
        return unsupported("size must be positive");
    }
    let attrs = [
        ("size", int(size)),
        ("alpha", float(n.attrs.float("alpha", 1e-4))),
        ("beta", float(n.attrs.float("beta", 0.75))),
        ("bias", float(n.attrs.float("bias", 1.0))),
    ];
    Ok(vec![Out::T(l.emit1("lrn", &[x], &attrs)?)])
}

/// Softmax / LogSoftmax (last-axis specs): opset < 13 coerces to 2-D at `axis`
/// (default 1); opset ≥ 13 normalises along `axis` (default -1).
pub fn softmax(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let s = l.shape(x);
    if s.is_empty() {
        return unsupported("scalar input");
    }
    let spec = m.specs[0];
    if n.opset < 13 {
        let axis = norm_axis(n.attrs.int("axis", 1), s.len())?;
        let outer: usize = s[..axis].iter().product();
        let inner: usize = s[axis..].iter().product();
        let v = l.reshape(x, &[outer, inner])?;
        let y = l.emit1(spec, &[v], &[])?;
        return Ok(vec![Out::T(l.reshape(y, &s)?)]);
    }
    let axis = norm_axis(n.attrs.int("axis", -1), s.len())?;
    let v = l.axis_to_last(x, axis)?;
    let y = l.emit1(spec, &[v], &[])?;
    Ok(vec![Out::T(l.last_to_axis(y, axis)?)])
}
