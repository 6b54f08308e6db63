//! Lowering of the ONNX normalisations: BatchNormalization (inference:
//! running statistics; training: batch statistics), InstanceNormalization,
//! GroupNormalization, LayerNormalization, RMSNormalization,
//! MeanVarianceNormalization and LpNormalization. Re-exported by
//! [`crate::map_nn`], whose table rows name them.

use graph::{float, int, TensorId};

use crate::lower::{unsupported, Kind, LResult, Lower, Out};
use crate::map_elementwise::{input, splat_const};
use crate::map_nn::{as_nchw, norm_axis};
use crate::mapping::Mapping;
use crate::node::Node;

/// BatchNormalization: `batchnorm_inference` (running statistics), or `batchnorm`
/// (batch statistics) when building a training graph or when the node is in
/// training mode (`training_mode = 1`), whose running-mean / running-var
/// outputs come from `batchnorm_running_stats`.
///
/// In a training graph the running statistics train as PyTorch's `train()`
/// updates its buffers: where the node's `mean` and `var` are initializers,
/// `batchnorm_running_stats` (ONNX's rule, momentum from the node, default
/// 0.9 = PyTorch's 0.1) computes their next values and the graph records
/// them as updated in place ([`graph::Tensor::updates`]), so every step
/// carries them and `--save-weights` / `--save-onnx` write them — in either
/// mode, since the dynamo exporter writes a module in `train()` as an
/// inference-mode node.
pub fn batchnorm(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    // Opset ≥ 14 says training mode with the attribute; before, the extra
    // outputs (running mean / var, saved statistics) did.
    let training_mode = n.attrs.int("training_mode", 0) != 0 || (n.opset < 14 && n.n_outputs() > 1);
    if n.opset < 7 && n.attrs.int("spatial", 1) == 0 {
        return unsupported("spatial = 0");
    }
    if (3..5).any(|i| n.wants_output(i)) {
        return unsupported("the saved mean / variance outputs (opset < 14)");
    }
    let eps = n.attrs.float("epsilon", 1e-5);
    let x = input(l, n, 0)?;
    let (v, s) = as_nchw(l, x)?;
    let gamma = input(l, n, 1)?;
    let beta = input(l, n, 2)?;
    if !training_mode && !l.training {
        let mean = input(l, n, 3)?;
        let var = input(l, n, 4)?;
        let y = l.emit1(
            "batchnorm_inference",
            &[v, gamma, beta, mean, var],
            &[("eps", float(eps))],
        )?;
        return Ok(vec![Out::T(l.reshape(y, &s)?)]);
    }
    let y = l.emit1("batchnorm", &[v, gamma, beta], &[("eps", float(eps))])?;
    let mut outs = vec![Out::T(l.reshape(y, &s)?)];
    let wanted = training_mode && (n.wants_output(1) || n.wants_output(2));
    // The running statistics this training graph updates in place.
    let states = l.training && (3..5).all(|i| n.input(i).is_some_and(|v| is_initializer(l, v)));
    if wanted || states {
        let mean = input(l, n, 3)?;
        let var = input(l, n, 4)?;
        let momentum = n.attrs.float("momentum", 0.9);
        let st = l.emit(
            "batchnorm_running_stats",
            &[v, mean, var],
            &[("momentum", float(momentum))],
        )?;
        if states {
            for (&next, state) in st.iter().zip([mean, var]) {
                l.b.set_updates(next, state)?;
            }
        }
        if wanted {
            outs.extend(st.into_iter().map(Out::T));
        }
    }
    Ok(outs)
}

/// Whether the ONNX value `name` is a float initializer (a trainable leaf,
/// [`Kind::Weight`]) that no operator of the graph produces.
fn is_initializer(l: &Lower, name: &str) -> bool {
    l.values.get(name).is_some_and(|e| {
        e.known.as_ref().is_some_and(|k| k.kind == Kind::Weight)
            && e.tensor.is_none_or(|t| l.b.graph().producer(t).is_none())
    })
}

/// InstanceNormalization → `instancenorm` (any rank ≥ 3 via an NCHW view).
pub fn instancenorm(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let eps = n.attrs.float("epsilon", 1e-5);
    let x = input(l, n, 0)?;
    let (v, s) = as_nchw(l, x)?;
    let g = input(l, n, 1)?;
    let b = input(l, n, 2)?;
    let y = l.emit1("instancenorm", &[v, g, b], &[("eps", float(eps))])?;
    Ok(vec![Out::T(l.reshape(y, &s)?)])
}

/// GroupNormalization (scale and bias of shape [C], opset 21) → `groupnorm`.
pub fn groupnorm(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let eps = n.attrs.float("epsilon", 1e-5);
    let groups = n.attrs.int("num_groups", 1);
    let x = input(l, n, 0)?;
    let (v, s) = as_nchw(l, x)?;
    let g = input(l, n, 1)?;
    let b = input(l, n, 2)?;
    if l.shape(g) != [s[1]] {
        return unsupported("scale of shape [num_groups] (opset 18): only per-channel scale (opset 21) maps to `groupnorm`");
    }
    let y = l.emit1(
        "groupnorm",
        &[v, g, b],
        &[("eps", float(eps)), ("groups", int(groups))],
    )?;
    Ok(vec![Out::T(l.reshape(y, &s)?)])
}

/// A normalisation's input x (of shape `s`) viewed as [s[..axis]…, nn]: the
/// dims from the node's `axis` (default -1) on merged into one of `nn`.
struct Normalised {
    s: Vec<usize>,
    axis: usize,
    nn: usize,
    v: TensorId,
}

fn normalised_view(l: &mut Lower, n: &Node) -> LResult<Normalised> {
    let x = input(l, n, 0)?;
    let s = l.shape(x);
    let axis = norm_axis(n.attrs.int("axis", -1), s.len())?;
    let nn: usize = s[axis..].iter().product();
    let mut view = s[..axis].to_vec();
    view.push(nn);
    let v = l.reshape(x, &view)?;
    Ok(Normalised { s, axis, nn, v })
}

/// LayerNormalization over the dims from `axis` on → `layernorm` on a view
/// whose last dim merges them.
pub fn layernorm(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let eps = n.attrs.float("epsilon", 1e-5);
    let Normalised { s, axis, nn, v } = normalised_view(l, n)?;
    let g = input(l, n, 1)?;
    if l.shape(g) != s[axis..] {
        return unsupported("scale that broadcasts (must have the normalised shape)");
    }
    let g = l.reshape(g, &[nn])?;
    let b = match n.input(2) {
        Some(_) => {
            let b = input(l, n, 2)?;
            if l.shape(b) != s[axis..] {
                return unsupported("bias that broadcasts (must have the normalised shape)");
            }
            l.reshape(b, &[nn])?
        }
        None => splat_const(l, &format!("{}.zero_bias", n.name), &[nn], 0.0)?,
    };
    let y = l.emit1("layernorm", &[v, g, b], &[("eps", float(eps))])?;
    let mut outs = vec![Out::T(l.reshape(y, &s)?)];
    if n.wants_output(1) || n.wants_output(2) {
        // Mean and InvStdDev have x's shape with the normalised dims set to 1.
        let st = l.emit("layernorm_stats", &[v], &[("eps", float(eps))])?;
        let mut reduced = s[..axis].to_vec();
        reduced.extend(std::iter::repeat_n(1, s.len() - axis));
        for t in st {
            outs.push(Out::T(l.reshape(t, &reduced)?));
        }
    }
    Ok(outs)
}

/// RMSNormalization → `rmsnorm` over the axes from `axis` on (default -1),
/// viewed as one axis; a scale that broadcasts to the normalised shape is
/// broadcast first. `stash_type` (the precision of the statistics) does not
/// change the f64 interpreter's results.
pub fn rmsnorm(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let eps = n.attrs.float("epsilon", 1e-5);
    let Normalised { s, axis, nn, v } = normalised_view(l, n)?;
    let g = input(l, n, 1)?;
    let g = l.broadcast_to(g, &s[axis..])?;
    let g = l.reshape(g, &[nn])?;
    let y = l.emit1("rmsnorm", &[v, g], &[("eps", float(eps))])?;
    Ok(vec![Out::T(l.reshape(y, &s)?)])
}

/// MeanVarianceNormalization → `layernorm` (scale 1, shift 0) over the
/// `axes` (default [0, 2, 3]) moved last and viewed as one axis. ONNX
/// divides by √var + 1e-9, `layernorm` by √(var + eps): eps = 1e-18.
pub fn mvn(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let s = l.shape(x);
    let mut axes = Vec::new();
    for a in n.attrs.ints("axes").unwrap_or_else(|| vec![0, 2, 3]) {
        let a = norm_axis(a, s.len())?;
        if axes.contains(&a) {
            return unsupported(format!("axis {a} repeated in axes"));
        }
        axes.push(a);
    }
    axes.sort_unstable();
    let perm: Vec<usize> = (0..s.len())
        .filter(|d| !axes.contains(d))
        .chain(axes.iter().copied())
        .collect();
    let xp = l.permute(x, &perm)?;
    let sp = l.shape(xp);
    let keep = s.len() - axes.len();
    let inner: usize = sp[keep..].iter().product();
    let mut view = sp[..keep].to_vec();
    view.push(inner);
    let v = l.reshape(xp, &view)?;
    let one = splat_const(l, &format!("{}.one", n.name), &[inner], 1.0)?;
    let zero = splat_const(l, &format!("{}.zero", n.name), &[inner], 0.0)?;
    let y = l.emit1("layernorm", &[v, one, zero], &[("eps", float(1e-18))])?;
    let y = l.reshape(y, &sp)?;
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    Ok(vec![Out::T(l.permute(y, &inv)?)])
}

/// LpNormalization → `l1_normalize` (p = 1) / `l2_normalize` (p = 2) along `axis`.
pub fn lp_normalization(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let spec = match n.attrs.int("p", 2) {
        1 => "l1_normalize",
        2 => "l2_normalize",
        p => return unsupported(format!("p = {p} (ONNX allows only 1 and 2)")),
    };
    let x = input(l, n, 0)?;
    let s = l.shape(x);
    let axis = norm_axis(n.attrs.int("axis", -1), s.len())?;
    let v = l.axis_to_last(x, axis)?;
    let y = l.emit1(spec, &[v], &[])?;
    Ok(vec![Out::T(l.last_to_axis(y, axis)?)])
}
