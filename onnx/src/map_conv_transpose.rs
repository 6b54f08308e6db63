//! Lowering of ONNX ConvTranspose (1-D, 2-D, 3-D) and of 3-D Conv, onto the
//! specs of `specs/onnx_conv_transpose.tdl`.
//!
//! ConvTranspose's `pads`, `output_padding`, `output_shape` and `auto_pad`
//! are resolved here to the begin pads and the output size the specs take
//! (ONNX's formulas: output = stride·(in − 1) + output_padding +
//! dilation·(kernel − 1) + 1 − pad_begin − pad_end; with `output_shape` or
//! SAME_UPPER / SAME_LOWER, the total padding is that natural size minus the
//! wanted one, split with the odd half at the end for SAME_UPPER and at the
//! beginning otherwise, rounding down, so a negative total adds zeros at the
//! end). 1-D goes through a [B, C, 1, X] view; group = 1 in 2-D to
//! `conv_transpose2d_ext` (whose channels the planner can split), group > 1
//! to `conv_transpose2d_group_ext`, 3-D to `conv_transpose3d_ext`; a bias is
//! a `channel_bias_add`. Col2Im (1-D to 3-D, as a volume) goes to `col2im3d`.

use graph::{int, Attr, TensorId};

use crate::lower::{unsupported, LResult, Lower, Out};
use crate::map_elementwise::input;
use crate::map_nn::ints_or;
use crate::mapping::Mapping;
use crate::node::Node;

/// Names of the spatial axes of a `rank`-D spec block, outermost first.
fn axes(rank: usize) -> &'static [&'static str] {
    if rank == 3 {
        &["d", "h", "w"]
    } else {
        &["h", "w"]
    }
}

/// Begin-pad attribute names of a `rank`-D spec block (end pads: [`END_PADS`]).
fn begin_pads(rank: usize) -> &'static [&'static str] {
    if rank == 3 {
        &["pad_f", "pad_t", "pad_l"]
    } else {
        &["pad_t", "pad_l"]
    }
}

/// End-pad attribute names of the 3-D spec block.
const END_PADS: [&str; 3] = ["pad_k", "pad_b", "pad_r"];

/// Per-axis integers of a `rank`-D spec block from the node's `k` spatial
/// values, lifted by leading `fill`s.
fn lift<T: Copy>(v: &[T], rank: usize, fill: T) -> Vec<T> {
    std::iter::repeat_n(fill, rank - v.len())
        .chain(v.iter().copied())
        .collect()
}

/// The begin pads and output sizes of a ConvTranspose node (see the module doc).
fn resolve(
    n: &Node,
    sizes: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dil: &[usize],
) -> LResult<(Vec<i64>, Vec<i64>)> {
    let k = sizes.len();
    let out_pad = match n.attrs.ints("output_padding") {
        None => vec![0; k],
        Some(v) if v.len() == k && v.iter().all(|&x| x >= 0) => v,
        Some(v) => return unsupported(format!("output_padding = {v:?}")),
    };
    let natural: Vec<i64> = (0..k)
        .map(|i| {
            strides[i] as i64 * (sizes[i] as i64 - 1)
                + out_pad[i]
                + dil[i] as i64 * (kernel[i] as i64 - 1)
                + 1
        })
        .collect();
    let auto = n.attrs.string("auto_pad", "NOTSET");
    let wanted = match n.attrs.ints("output_shape") {
        // Some exporters write the whole shape, N and C included.
        Some(v) if v.len() == k || v.len() == k + 2 => Some(v[v.len() - k..].to_vec()),
        Some(v) => return unsupported(format!("output_shape = {v:?} for {k} spatial axes")),
        None if auto == "SAME_UPPER" || auto == "SAME_LOWER" => Some(
            (0..k)
                .map(|i| (sizes[i] * strides[i]) as i64)
                .collect::<Vec<_>>(),
        ),
        None => None,
    };
    let (begin, end): (Vec<i64>, Vec<i64>) = match (wanted, auto.as_str()) {
        (Some(out), _) => (0..k)
            .map(|i| {
                let total = natural[i] - out[i];
                let half = total.div_euclid(2);
                if auto == "SAME_UPPER" {
                    (half, total - half)
                } else {
                    (total - half, half)
                }
            })
            .unzip(),
        (None, "VALID") => (vec![0; k], vec![0; k]),
        (None, "NOTSET") => {
            let p = n.attrs.ints("pads").unwrap_or_else(|| vec![0; 2 * k]);
            if p.len() != 2 * k || p.iter().any(|&x| x < 0) {
                return unsupported(format!("pads {p:?}"));
            }
            (p[..k].to_vec(), p[k..].to_vec())
        }
        (None, other) => return unsupported(format!("auto_pad = {other}")),
    };
    let out: Vec<i64> = (0..k).map(|i| natural[i] - begin[i] - end[i]).collect();
    if out.iter().any(|&o| o < 1) {
        return unsupported(format!("an empty output (sizes {out:?})"));
    }
    Ok((begin, out))
}

/// ConvTranspose (1-D, 2-D, 3-D; groups, strides, dilations, pads,
/// output_padding, output_shape, auto_pad, optional bias B).
pub fn conv_transpose(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let w = input(l, n, 1)?;
    let (sx, sw) = (l.shape(x), l.shape(w));
    let k = sx.len().saturating_sub(2);
    if !(1..=3).contains(&k) || sw.len() != sx.len() {
        return unsupported(format!(
            "{k}-D transposed convolution with a {}-D weight (1-D, 2-D and 3-D are mapped)",
            sw.len()
        ));
    }
    let group = n.attrs.int("group", 1);
    if group < 1 || sx[1] != sw[0] || sx[1] % group as usize != 0 {
        return unsupported(format!(
            "group = {group} with {} input channels and a weight of shape {sw:?}",
            sx[1]
        ));
    }
    let kernel = sw[2..].to_vec();
    if let Some(ks) = n.attrs.ints("kernel_shape") {
        if ks.iter().map(|&d| d as usize).ne(kernel.iter().copied()) {
            return unsupported(format!(
                "kernel_shape {ks:?} unlike the weight's {kernel:?}"
            ));
        }
    }
    let strides = ints_or(n, "strides", k, 1)?;
    let dil = ints_or(n, "dilations", k, 1)?;
    let (begin, out) = resolve(n, &sx[2..], &kernel, &strides, &dil)?;
    let bias = match n.input(2) {
        Some(b) => Some(l.tensor(b)?),
        None => None,
    };
    // 1-D and 2-D as 2-D, 3-D as 3-D; unit leading spatial axes for 1-D.
    let rank = k.max(2);
    let view = |s: &[usize]| -> Vec<usize> { [&s[..2], &lift(&s[2..], rank, 1)[..]].concat() };
    let xv = l.reshape(x, &view(&sx))?;
    let wv = l.reshape(w, &view(&sw))?;
    let (strides, dil) = (lift(&strides, rank, 1), lift(&dil, rank, 1));
    let (begin, out) = (lift(&begin, rank, 0), lift(&out, rank, 1));
    let keys: Vec<(String, i64)> = axes(rank)
        .iter()
        .zip(begin_pads(rank))
        .enumerate()
        .flat_map(|(i, (a, p))| {
            [
                (format!("stride_{a}"), strides[i] as i64),
                (format!("dilation_{a}"), dil[i] as i64),
                (p.to_string(), begin[i]),
                (format!("out_{a}"), out[i]),
            ]
        })
        .collect();
    let mut attrs: Vec<Attr> = keys.iter().map(|(k, v)| (k.as_str(), int(*v))).collect();
    let spec = match (rank, group) {
        (3, _) => "conv_transpose3d_ext",
        (_, 1) => "conv_transpose2d_ext",
        _ => "conv_transpose2d_group_ext",
    };
    if spec != "conv_transpose2d_ext" {
        attrs.push(("groups", int(group)));
    }
    let y = l.emit1(spec, &[xv, wv], &attrs)?;
    let y = match bias {
        Some(b) => l.emit1("channel_bias_add", &[y, b], &[])?,
        None => y,
    };
    let mut shape = l.shape(y);
    shape.drain(2..2 + rank - k);
    Ok(vec![Out::T(l.reshape(y, &shape)?)])
}

/// A 3-D Conv as `conv3d_group_ext` (groups, strides, dilations, begin/end
/// pads already resolved from `pads` / `auto_pad`), plus `channel_bias_add`
/// when there is a bias.
pub fn conv3d(
    l: &mut Lower,
    x: TensorId,
    w: TensorId,
    bias: Option<TensorId>,
    group: i64,
    (strides, dil, pads): (&[usize], &[usize], &[usize]),
) -> LResult<TensorId> {
    let (sx, sw) = (l.shape(x), l.shape(w));
    let g = group as usize;
    if sx[1] != g * sw[1] || sw[0] % g != 0 {
        return unsupported(format!(
            "group = {group} with {} input channels and a weight of shape {sw:?}",
            sx[1]
        ));
    }
    let mut keys: Vec<(String, i64)> = Vec::new();
    for (i, a) in axes(3).iter().enumerate() {
        keys.push((format!("stride_{a}"), strides[i] as i64));
        keys.push((format!("dilation_{a}"), dil[i] as i64));
        keys.push((begin_pads(3)[i].to_string(), pads[i] as i64));
        keys.push((END_PADS[i].to_string(), pads[3 + i] as i64));
    }
    let mut attrs: Vec<Attr> = keys.iter().map(|(k, v)| (k.as_str(), int(*v))).collect();
    attrs.push(("groups", int(group)));
    let y = l.emit1("conv3d_group_ext", &[x, w], &attrs)?;
    match bias {
        Some(b) => l.emit1("channel_bias_add", &[y, b], &[]),
        None => Ok(y),
    }
}

/// Col2Im: input [N, C·Πblock, L] viewed as [N, C, Πblock, L] → `col2im3d`
/// (image_shape and block_shape known at import; 1-D and 2-D images as
/// volumes with unit leading dims), checking that L is the number of blocks.
pub fn col2im(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let sx = l.shape(x);
    let (Some(image), Some(block)) = (
        crate::map_shape::ints_input(l, n, 1)?,
        crate::map_shape::ints_input(l, n, 2)?,
    ) else {
        return unsupported("image_shape or block_shape is missing");
    };
    let k = image.len();
    let kernel: usize = block.iter().product::<i64>().max(0) as usize;
    if !(1..=3).contains(&k)
        || block.len() != k
        || sx.len() != 3
        || block.iter().chain(&image).any(|&d| d < 1)
        || !sx[1].is_multiple_of(kernel)
    {
        return unsupported(format!(
            "input of shape {sx:?} with image_shape {image:?} and block_shape {block:?}"
        ));
    }
    let strides = ints_or(n, "strides", k, 1)?;
    let dil = ints_or(n, "dilations", k, 1)?;
    let pads = n.attrs.ints("pads").unwrap_or_else(|| vec![0; 2 * k]);
    if pads.len() != 2 * k || pads.iter().any(|&p| p < 0) {
        return unsupported(format!("pads {pads:?}"));
    }
    let cols: Vec<i64> = (0..k)
        .map(|i| {
            (image[i] + pads[i] + pads[k + i] - (dil[i] as i64 * (block[i] - 1) + 1))
                .div_euclid(strides[i] as i64)
                + 1
        })
        .collect();
    if cols.iter().any(|&c| c < 1) || cols.iter().product::<i64>() != sx[2] as i64 {
        return unsupported(format!("{} blocks where the image holds {cols:?}", sx[2]));
    }
    let c = sx[1] / kernel;
    let xv = l.reshape(x, &[sx[0], c, kernel, sx[2]])?;
    let (strides, dil) = (lift(&strides, 3, 1), lift(&dil, 3, 1));
    let (block, cols) = (lift(&block, 3, 1), lift(&cols, 3, 1));
    let (begin, image3) = (lift(&pads[..k], 3, 0), lift(&image, 3, 1));
    let mut keys: Vec<(String, i64)> = Vec::new();
    for (i, a) in axes(3).iter().enumerate() {
        keys.push((format!("kernel_{a}"), block[i]));
        keys.push((format!("cols_{a}"), cols[i]));
        keys.push((format!("stride_{a}"), strides[i] as i64));
        keys.push((format!("dilation_{a}"), dil[i] as i64));
        keys.push((begin_pads(3)[i].to_string(), begin[i]));
        keys.push((format!("out_{a}"), image3[i]));
    }
    let attrs: Vec<Attr> = keys.iter().map(|(k, v)| (k.as_str(), int(*v))).collect();
    let y = l.emit1("col2im3d", &[xv], &attrs)?;
    let shape: Vec<usize> = [sx[0], c]
        .into_iter()
        .chain(image.iter().map(|&d| d as usize))
        .collect();
    Ok(vec![Out::T(l.reshape(y, &shape)?)])
}
