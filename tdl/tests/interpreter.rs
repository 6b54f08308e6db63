//! Hand-checked small cases for the reference interpreter and the shipped
//! specs: matmul, conv1d (Tofu Figure 1), conv2d stride 2 pad 1 (and
//! dilated, grouped), softmax, layer norm, batch norm, LSTM cell (gate order
//! i, f, g, o), max and average pooling, cross-entropy, embedding. Expected
//! values are computed here by independent plain-Rust loops or by hand,
//! never by the interpreter.

mod common;

use common::{assert_close, data, int, run, t};
use tdl::AttrValue;

#[test]
fn matmul_2x3_times_3x2() {
    let a = t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let b = t(&[3, 2], &[7., 8., 9., 10., 11., 12.]);
    let c = run("matmul", &[a, b], &[]);
    assert_eq!(c[0].shape, vec![2, 2]);
    // By hand: [1*7+2*9+3*11, 1*8+2*10+3*12; 4*7+5*9+6*11, 4*8+5*10+6*12]
    assert_close(&c[0].data, &[58., 64., 139., 154.]);
}

/// Tofu Figure 1: the naive conv1d loop nest, written out here as the oracle.
#[test]
fn conv1d_matches_figure_1_loops() {
    let (b, ci, co, x, dx) = (2usize, 3usize, 2usize, 6usize, 3usize);
    let data: Vec<f64> = (0..b * ci * x).map(|i| (i as f64 * 0.37).sin()).collect();
    let filt: Vec<f64> = (0..co * ci * dx).map(|i| (i as f64 * 0.11).cos()).collect();
    let y = run(
        "conv1d",
        &[t(&[b, ci, x], &data), t(&[co, ci, dx], &filt)],
        &[],
    );
    let xo = x - dx + 1;
    assert_eq!(y[0].shape, vec![b, co, xo]);
    let mut want = vec![0.0; b * co * xo];
    for bi in 0..b {
        for c in 0..co {
            for o in 0..xo {
                for i in 0..ci {
                    for k in 0..dx {
                        want[(bi * co + c) * xo + o] +=
                            data[(bi * ci + i) * x + o + k] * filt[(c * ci + i) * dx + k];
                    }
                }
            }
        }
    }
    assert_close(&y[0].data, &want);
}

#[test]
fn softmax_rows_by_hand() {
    let x = t(&[2, 3], &[1., 2., 3., 0., 0., 0.]);
    let y = run("softmax", &[x], &[]);
    let e: Vec<f64> = [1f64, 2., 3.].iter().map(|v| v.exp()).collect();
    let s: f64 = e.iter().sum();
    assert_close(
        &y[0].data,
        &[e[0] / s, e[1] / s, e[2] / s, 1. / 3., 1. / 3., 1. / 3.],
    );
}

#[test]
fn batch_cholesky_opaque() {
    // [[4, 2], [2, 3]] = L Lᵀ with L = [[2, 0], [1, sqrt 2]].
    let m = t(&[1, 2, 2], &[4., 2., 2., 3.]);
    let l = run("batch_cholesky", &[m], &[]);
    assert_close(&l[0].data, &[2., 0., 1., 2f64.sqrt()]);
}

#[test]
fn reduction_over_ellipsis() {
    let dy = t(
        &[2, 2, 3],
        &[1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12.],
    );
    let db = run("sum_leading", &[dy], &[]);
    assert_close(&db[0].data, &[22., 26., 30.]);
}

#[test]
fn erf_known_values() {
    // Abramowitz & Stegun table values.
    for (x, want) in [
        (0.5, 0.520_499_877_813_046_5),
        (1.0, 0.842_700_792_949_714_9),
        (2.0, 0.995_322_265_018_952_7),
        (3.0, 0.999_977_909_503_001_4),
        (-0.3, -0.328_626_759_459_127_4),
    ] {
        let got = tdl::interp::erf(x);
        assert!((got - want).abs() < 1e-14, "erf({x}) = {got}, want {want}");
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Plain-loop NCHW convolution with zero padding, stride, dilation and groups.
#[allow(clippy::too_many_arguments)]
fn conv2d_ref(
    x: &[f64],
    xs: [usize; 4],
    w: &[f64],
    ws: [usize; 4],
    stride: (usize, usize),
    pad: (usize, usize),
    dil: (usize, usize),
    groups: usize,
) -> (Vec<f64>, [usize; 4]) {
    let [b, ci, h, wd] = xs;
    let [co, cig, kh, kw] = ws;
    let oh = (h + 2 * pad.0 - dil.0 * (kh - 1) - 1) / stride.0 + 1;
    let ow = (wd + 2 * pad.1 - dil.1 * (kw - 1) - 1) / stride.1 + 1;
    assert_eq!(ci, cig * groups);
    let cog = co / groups;
    let mut y = vec![0.0; b * co * oh * ow];
    for n in 0..b {
        for o in 0..co {
            let g = o / cog;
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = 0.0;
                    for c in 0..cig {
                        for p in 0..kh {
                            for q in 0..kw {
                                let r = (i * stride.0 + p * dil.0) as i64 - pad.0 as i64;
                                let s = (j * stride.1 + q * dil.1) as i64 - pad.1 as i64;
                                if r < 0 || s < 0 || r >= h as i64 || s >= wd as i64 {
                                    continue;
                                }
                                let xi =
                                    ((n * ci + g * cig + c) * h + r as usize) * wd + s as usize;
                                acc += x[xi] * w[((o * cig + c) * kh + p) * kw + q];
                            }
                        }
                    }
                    y[((n * co + o) * oh + i) * ow + j] = acc;
                }
            }
        }
    }
    (y, [b, co, oh, ow])
}

#[test]
fn conv2d_stride_2_pad_1() {
    let (xs, ws) = ([2, 3, 5, 6], [4, 3, 3, 3]);
    let x = data(xs.iter().product(), 0.1);
    let w = data(ws.iter().product(), 0.7);
    let y = run(
        "conv2d",
        &[t(&xs, &x), t(&ws, &w)],
        &[
            ("stride_h", int(2)),
            ("stride_w", int(2)),
            ("pad_h", int(1)),
            ("pad_w", int(1)),
        ],
    );
    let (want, shape) = conv2d_ref(&x, xs, &w, ws, (2, 2), (1, 1), (1, 1), 1);
    // (5 + 2 - 3) / 2 + 1 = 3, (6 + 2 - 3) / 2 + 1 = 3.
    assert_eq!(shape, [2, 4, 3, 3]);
    assert_eq!(y[0].shape, shape.to_vec());
    assert_close(&y[0].data, &want);
}

#[test]
fn conv2d_dilated_and_grouped() {
    let (xs, ws) = ([1, 4, 6, 5], [6, 2, 2, 2]);
    let x = data(xs.iter().product(), 0.3);
    let w = data(ws.iter().product(), 1.9);
    let attrs = [
        ("groups", int(2)),
        ("stride_h", int(1)),
        ("stride_w", int(2)),
        ("pad_h", int(1)),
        ("pad_w", int(0)),
        ("dilation_h", int(2)),
        ("dilation_w", int(1)),
    ];
    let y = run("conv2d_group", &[t(&xs, &x), t(&ws, &w)], &attrs);
    let (want, shape) = conv2d_ref(&x, xs, &w, ws, (1, 2), (1, 0), (2, 1), 2);
    assert_eq!(y[0].shape, shape.to_vec());
    assert_close(&y[0].data, &want);
}

/// The input gradient of a strided, padded conv2d is its adjoint:
/// <conv2d(x), dy> = <x, conv2d_grad_x(dy)> for every x, dy (checked on unit vectors).
#[test]
fn conv2d_grad_x_is_the_adjoint() {
    let (xs, ws) = ([1, 2, 5, 4], [3, 2, 3, 2]);
    let w = data(ws.iter().product(), 0.2);
    let (_, ys) = conv2d_ref(
        &vec![0.0; xs.iter().product()],
        xs,
        &w,
        ws,
        (2, 2),
        (1, 1),
        (1, 1),
        1,
    );
    let dy = data(ys.iter().product(), 2.5);
    let dx = run(
        "conv2d_grad_x",
        &[t(&ys, &dy), t(&ws, &w)],
        &[
            ("stride_h", int(2)),
            ("stride_w", int(2)),
            ("pad_h", int(1)),
            ("pad_w", int(1)),
            ("in_h", int(5)),
            ("in_w", int(4)),
        ],
    );
    let n: usize = xs.iter().product();
    let want: Vec<f64> = (0..n)
        .map(|k| {
            let mut e = vec![0.0; n];
            e[k] = 1.0;
            let (y, _) = conv2d_ref(&e, xs, &w, ws, (2, 2), (1, 1), (1, 1), 1);
            y.iter().zip(&dy).map(|(a, b)| a * b).sum()
        })
        .collect();
    assert_eq!(dx[0].shape, xs.to_vec());
    assert_close(&dx[0].data, &want);
}

#[test]
fn layernorm_rows() {
    let (rows, n) = (3usize, 5usize);
    let x = data(rows * n, 0.4);
    let gamma = data(n, 1.1);
    let beta = data(n, 2.3);
    let eps = 1e-5;
    let y = run(
        "layernorm",
        &[t(&[rows, n], &x), t(&[n], &gamma), t(&[n], &beta)],
        &[("eps", AttrValue::Float(eps))],
    );
    let mut want = Vec::new();
    for r in x.chunks(n) {
        let mean = r.iter().sum::<f64>() / n as f64;
        let var = r.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        for (i, v) in r.iter().enumerate() {
            want.push(gamma[i] * (v - mean) / (var + eps).sqrt() + beta[i]);
        }
    }
    assert_close(&y[0].data, &want);
}

#[test]
fn batchnorm_training_statistics() {
    let xs = [3usize, 2, 2, 3];
    let [b, c, h, w] = xs;
    let x = data(xs.iter().product(), 0.9);
    let gamma = [1.5, -0.5];
    let beta = [0.25, 2.0];
    let y = run(
        "batchnorm",
        &[t(&xs, &x), t(&[c], &gamma), t(&[c], &beta)],
        &[("eps", AttrValue::Float(1e-3))],
    );
    let at = |n: usize, ch: usize, i: usize| x[(n * c + ch) * h * w + i];
    let mut want = vec![0.0; x.len()];
    for ch in 0..c {
        let vals: Vec<f64> = (0..b)
            .flat_map(|n| (0..h * w).map(move |i| (n, i)))
            .map(|(n, i)| at(n, ch, i))
            .collect();
        let mean = vals.iter().sum::<f64>() / vals.len() as f64;
        let var = vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / vals.len() as f64;
        for n in 0..b {
            for i in 0..h * w {
                want[(n * c + ch) * h * w + i] =
                    gamma[ch] * (at(n, ch, i) - mean) / (var + 1e-3).sqrt() + beta[ch];
            }
        }
    }
    assert_close(&y[0].data, &want);
}

#[test]
fn lstm_cell_gate_order_ifgo() {
    let (b, hd) = (2usize, 3usize);
    let gates = data(b * 4 * hd, 0.6);
    let c_prev = data(b * hd, 1.7);
    let out = run(
        "lstm_cell",
        &[t(&[b, 4, hd], &gates), t(&[b, hd], &c_prev)],
        &[],
    );
    let (mut h_want, mut c_want) = (Vec::new(), Vec::new());
    for n in 0..b {
        for j in 0..hd {
            let gate = |k: usize| gates[(n * 4 + k) * hd + j];
            let (i, f, g, o) = (
                sigmoid(gate(0)),
                sigmoid(gate(1)),
                gate(2).tanh(),
                sigmoid(gate(3)),
            );
            let c = f * c_prev[n * hd + j] + i * g;
            c_want.push(c);
            h_want.push(o * c.tanh());
        }
    }
    assert_eq!(out[0].shape, vec![b, hd]);
    assert_close(&out[0].data, &h_want);
    assert_close(&out[1].data, &c_want);
}

#[test]
fn maxpool2d_3x3_stride_2_pad_1() {
    let xs = [1usize, 2, 5, 5];
    let x = data(xs.iter().product(), 0.2);
    let y = run(
        "maxpool2d",
        &[t(&xs, &x)],
        &[
            ("kernel_h", int(3)),
            ("kernel_w", int(3)),
            ("stride_h", int(2)),
            ("stride_w", int(2)),
            ("pad_h", int(1)),
            ("pad_w", int(1)),
        ],
    );
    let o = (5 + 2 - 3) / 2 + 1;
    assert_eq!(y[0].shape, vec![1, 2, o, o]);
    let mut want = Vec::new();
    for c in 0..2 {
        for i in 0..o {
            for j in 0..o {
                let mut m = f64::NEG_INFINITY;
                for p in 0..3 {
                    for q in 0..3 {
                        let (r, s) = ((2 * i + p) as i64 - 1, (2 * j + q) as i64 - 1);
                        if (0..5).contains(&r) && (0..5).contains(&s) {
                            m = m.max(x[(c * 5 + r as usize) * 5 + s as usize]);
                        }
                    }
                }
                want.push(m);
            }
        }
    }
    assert_close(&y[0].data, &want);
}

#[test]
fn avgpool2d_excludes_padding_by_default() {
    // 1 x 1 x 2 x 2 input, 2x2 kernel, stride 1, pad 1: 3 x 3 output; the corner
    // windows see one element, the edge windows two, the centre all four.
    let x = t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let attrs = [
        ("kernel_h", int(2)),
        ("kernel_w", int(2)),
        ("pad_h", int(1)),
        ("pad_w", int(1)),
    ];
    let y = run("avgpool2d", std::slice::from_ref(&x), &attrs);
    assert_close(&y[0].data, &[1., 1.5, 2., 2., 2.5, 3., 3., 3.5, 4.]);
    let mut with_pad = attrs.to_vec();
    with_pad.push(("count_include_pad", int(1)));
    let y = run("avgpool2d", &[x], &with_pad);
    assert_close(&y[0].data, &[0.25, 0.75, 0.5, 1., 2.5, 1.5, 0.75, 1.75, 1.]);
}

#[test]
fn softmax_cross_entropy_mean_over_batch() {
    let (b, n) = (3usize, 4usize);
    let logits = data(b * n, 0.5);
    let mut labels = data(b * n, 3.3)
        .iter()
        .map(|v| v.abs() + 0.1)
        .collect::<Vec<_>>();
    for r in labels.chunks_mut(n) {
        let s: f64 = r.iter().sum();
        r.iter_mut().for_each(|v| *v /= s);
    }
    let loss = run(
        "softmax_cross_entropy",
        &[t(&[b, n], &logits), t(&[b, n], &labels)],
        &[],
    );
    assert!(loss[0].shape.is_empty());
    let mut want = 0.0;
    for (l, p) in logits.chunks(n).zip(labels.chunks(n)) {
        let lse = l.iter().map(|v| v.exp()).sum::<f64>().ln();
        want += l.iter().zip(p).map(|(v, q)| -q * (v - lse)).sum::<f64>();
    }
    assert_close(&loss[0].data, &[want / b as f64]);
    // Class ids: the same loss with one-hot labels.
    let ids = [2.0, 0.0, 3.0];
    let sparse = run(
        "sparse_softmax_cross_entropy",
        &[t(&[b, n], &logits), t(&[b], &ids)],
        &[],
    );
    let mut want = 0.0;
    for (l, &id) in logits.chunks(n).zip(&ids) {
        want += l.iter().map(|v| v.exp()).sum::<f64>().ln() - l[id as usize];
    }
    assert_close(&sparse[0].data, &[want / b as f64]);
}

#[test]
fn embedding_lookup_and_gradient() {
    let (v, d) = (4usize, 3usize);
    let table = data(v * d, 0.8);
    let ids = [3.0, 1.0, 3.0, 0.0];
    let y = run("embedding", &[t(&[v, d], &table), t(&[2, 2], &ids)], &[]);
    assert_eq!(y[0].shape, vec![2, 2, d]);
    let want: Vec<f64> = ids
        .iter()
        .flat_map(|&i| table[i as usize * d..(i as usize + 1) * d].to_vec())
        .collect();
    assert_close(&y[0].data, &want);
    // The gradient scatter-adds rows: row 3 is used twice, row 2 never.
    let dy = data(4 * d, 5.0);
    let dt = run(
        "embedding_grad",
        &[t(&[2, 2], &ids), t(&[2, 2, d], &dy)],
        &[("vocab", int(v as i64))],
    );
    let mut want = vec![0.0; v * d];
    for (p, &i) in ids.iter().enumerate() {
        for k in 0..d {
            want[i as usize * d + k] += dy[p * d + k];
        }
    }
    assert_close(&dt[0].data, &want);
}

#[test]
fn attention_matches_softmax_of_scores() {
    let (s, dk, e) = (3usize, 2usize, 2usize);
    let q = data(s * dk, 0.1);
    let k = data(s * dk, 0.2);
    let v = data(s * e, 0.3);
    let o = run(
        "attention",
        &[t(&[1, s, dk], &q), t(&[1, s, dk], &k), t(&[1, s, e], &v)],
        &[("scale", AttrValue::Float(0.5)), ("causal", int(1))],
    );
    let mut want = Vec::new();
    for i in 0..s {
        let sc: Vec<f64> = (0..=i)
            .map(|j| 0.5 * (0..dk).map(|d| q[i * dk + d] * k[j * dk + d]).sum::<f64>())
            .collect();
        let z: f64 = sc.iter().map(|x| x.exp()).sum();
        for c in 0..e {
            want.push((0..=i).map(|j| sc[j].exp() / z * v[j * e + c]).sum());
        }
    }
    assert_close(&o[0].data, &want);
}
