//! The library kernels (gemm for the matmul family, im2col + gemm for
//! convolutions and their gradients) against the interpreter on larger
//! random shapes, with strides, paddings and dilations, using the shipped
//! specs. Every op of `LIBRARY_KERNELS` that the shipped library has must
//! have a case here or in `library_kernels.rs` (the property tests of the
//! other library kernels) and must run its library kernel (no silent
//! fallback to the compiled evaluator).

mod common;

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use runner::ops::LIBRARY_KERNELS;
use tdl::{AttrValue, Attrs, Library};

/// Run op `op` through the registry (must be a library kernel) and compare
/// with the interpreter; gives false if the shipped library lacks the op.
fn check(
    lib: &Library,
    op: &str,
    shapes: &[Vec<usize>],
    attrs: &[(&str, i64)],
    rng: &mut StdRng,
) -> bool {
    let Some(spec) = lib.get(op) else {
        return false;
    };
    let attrs: Attrs = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), AttrValue::Int(*v)))
        .collect();
    let inputs: Vec<Vec<f32>> = shapes
        .iter()
        .map(|s| {
            (0..s.iter().product::<usize>())
                .map(|_| rng.gen_range(-1.0..1.0))
                .collect()
        })
        .collect();
    common::check_library(spec, shapes, &attrs, inputs, 1e-4);
    true
}

fn out(i: usize, k: usize, s: i64, p: i64, d: i64) -> usize {
    ((i as i64 + 2 * p - d * (k as i64 - 1) - 1).div_euclid(s) + 1) as usize
}

#[test]
fn library_kernels_on_larger_shapes() {
    let lib = Library::shipped().unwrap();
    let mut rng = StdRng::seed_from_u64(21);
    let mut covered = BTreeSet::new();
    let mut cover = |op: &'static str, ok: bool| {
        if ok {
            covered.insert(op);
        }
    };
    for (m, k, n) in [(67, 129, 45), (1, 300, 7), (96, 33, 128)] {
        cover(
            "matmul",
            check(&lib, "matmul", &[vec![m, k], vec![k, n]], &[], &mut rng),
        );
        cover(
            "matmul_nt",
            check(&lib, "matmul_nt", &[vec![m, k], vec![n, k]], &[], &mut rng),
        );
        cover(
            "matmul_tn",
            check(&lib, "matmul_tn", &[vec![k, m], vec![k, n]], &[], &mut rng),
        );
        cover(
            "gemm_bias",
            check(
                &lib,
                "gemm_bias",
                &[vec![m, k], vec![k, n], vec![n]],
                &[],
                &mut rng,
            ),
        );
        cover(
            "gemm_nt_bias",
            check(
                &lib,
                "gemm_nt_bias",
                &[vec![m, k], vec![n, k], vec![n]],
                &[],
                &mut rng,
            ),
        );
    }
    for batch in [vec![], vec![3], vec![2, 5]] {
        let (m, k, n) = (17, 40, 23);
        let sh = |a: usize, b: usize| [batch.clone(), vec![a, b]].concat();
        cover(
            "batch_matmul",
            check(&lib, "batch_matmul", &[sh(m, k), sh(k, n)], &[], &mut rng),
        );
        cover(
            "batch_matmul_nt",
            check(
                &lib,
                "batch_matmul_nt",
                &[sh(m, k), sh(n, k)],
                &[],
                &mut rng,
            ),
        );
        cover(
            "batch_matmul_tn",
            check(
                &lib,
                "batch_matmul_tn",
                &[sh(k, m), sh(k, n)],
                &[],
                &mut rng,
            ),
        );
        let bt = |last: usize| [batch.clone(), vec![m, last]].concat();
        cover(
            "dense",
            check(&lib, "dense", &[bt(k), vec![k, n]], &[], &mut rng),
        );
        cover(
            "dense_nt",
            check(&lib, "dense_nt", &[bt(n), vec![k, n]], &[], &mut rng),
        );
        cover(
            "dense_grad_w",
            check(&lib, "dense_grad_w", &[bt(k), bt(n)], &[], &mut rng),
        );
    }
    let (b, k, g, h) = (19, 33, 4, 9);
    cover(
        "gate_matmul",
        check(
            &lib,
            "gate_matmul",
            &[vec![b, k], vec![k, g, h]],
            &[],
            &mut rng,
        ),
    );
    cover(
        "gate_matmul_grad_x",
        check(
            &lib,
            "gate_matmul_grad_x",
            &[vec![b, g, h], vec![k, g, h]],
            &[],
            &mut rng,
        ),
    );
    cover(
        "gate_matmul_grad_w",
        check(
            &lib,
            "gate_matmul_grad_w",
            &[vec![b, k], vec![b, g, h]],
            &[],
            &mut rng,
        ),
    );

    // (B, CI, H, W, CO, KH, KW, stride, pad, dilation); the last one has
    // enough images for the batch-parallel path.
    let cases = [
        (2, 3, 9, 8, 4, 3, 3, (1, 1), (0, 0), (1, 1)),
        (3, 2, 11, 10, 5, 3, 2, (2, 1), (1, 2), (1, 2)),
        (1, 4, 7, 7, 3, 1, 1, (1, 1), (0, 0), (1, 1)),
        (5, 2, 8, 9, 2, 3, 3, (2, 3), (1, 1), (2, 1)),
    ];
    for (bs, ci, hh, ww, co, kh, kw, (sh, sw), (ph, pw), (dh, dw)) in cases {
        let conv = [
            ("stride_h", sh),
            ("stride_w", sw),
            ("pad_h", ph),
            ("pad_w", pw),
            ("dilation_h", dh),
            ("dilation_w", dw),
        ];
        let (oh, ow) = (out(hh, kh, sh, ph, dh), out(ww, kw, sw, pw, dw));
        let (x, wt, dy) = (
            vec![bs, ci, hh, ww],
            vec![co, ci, kh, kw],
            vec![bs, co, oh, ow],
        );
        cover(
            "conv2d",
            check(&lib, "conv2d", &[x.clone(), wt.clone()], &conv, &mut rng),
        );
        let gx = [&conv[..], &[("in_h", hh as i64), ("in_w", ww as i64)]].concat();
        cover(
            "conv2d_grad_x",
            check(
                &lib,
                "conv2d_grad_x",
                &[dy.clone(), wt.clone()],
                &gx,
                &mut rng,
            ),
        );
        let gw = [
            &conv[..],
            &[("kernel_h", kh as i64), ("kernel_w", kw as i64)],
        ]
        .concat();
        cover(
            "conv2d_grad_w",
            check(&lib, "conv2d_grad_w", &[x, dy], &gw, &mut rng),
        );

        // The same along one axis as a conv1d.
        let conv = [("stride", sw), ("pad", pw), ("dilation", dw)];
        let (x, wt, dy) = (vec![bs, ci, ww], vec![co, ci, kw], vec![bs, co, ow]);
        cover(
            "conv1d",
            check(&lib, "conv1d", &[x.clone(), wt.clone()], &conv, &mut rng),
        );
        let gx = [&conv[..], &[("in_x", ww as i64)]].concat();
        cover(
            "conv1d_grad_x",
            check(&lib, "conv1d_grad_x", &[dy.clone(), wt], &gx, &mut rng),
        );
        let gw = [&conv[..], &[("kernel", kw as i64)]].concat();
        cover(
            "conv1d_grad_w",
            check(&lib, "conv1d_grad_w", &[x, dy], &gw, &mut rng),
        );
    }

    // Grouped (AlexNet's two groups; a depthwise 3×3), biased and
    // asymmetrically padded convolutions (TensorFlow's SAME, stride 2).
    for (bs, groups, cig, cog, hw, k, s, (pt, pb)) in [
        (2, 2, 6, 5, 13, 3, 1, (1, 1)),
        (3, 8, 1, 1, 12, 3, 2, (0, 1)),
        (2, 1, 3, 4, 10, 3, 2, (0, 1)),
        (1, 1, 5, 3, 9, 3, 1, (1, 1)),
        // 1×1 with end pads only: the gradients' dy is larger than x.
        (2, 2, 2, 3, 6, 1, 1, (0, 2)),
    ] {
        let g = groups as i64;
        let o = (hw as i64 + pt + pb - k as i64) / s + 1;
        let (x, wt, b, dy) = (
            vec![bs, groups * cig, hw, hw],
            vec![groups * cog, cig, k, k],
            vec![groups * cog],
            vec![bs, groups * cog, o as usize, o as usize],
        );
        let sym = [
            ("groups", g),
            ("stride_h", s),
            ("stride_w", s),
            ("pad_h", pt),
            ("pad_w", pt),
        ];
        let ext = [
            ("groups", g),
            ("stride_h", s),
            ("stride_w", s),
            ("pad_t", pt),
            ("pad_l", pt),
            ("pad_b", pb),
            ("pad_r", pb),
        ];
        let xw = [x.clone(), wt.clone()];
        cover(
            "conv2d_group_ext",
            check(&lib, "conv2d_group_ext", &xw, &ext, &mut rng),
        );
        if groups == 1 {
            cover(
                "conv2d_ext",
                check(&lib, "conv2d_ext", &xw, &ext[1..], &mut rng),
            );
        }
        let gx = [&sym[..], &[("in_h", hw as i64), ("in_w", hw as i64)]].concat();
        let dw = [&dy[..], &wt[..]].map(|v| v.to_vec());
        cover(
            "conv2d_group_grad_x",
            check(&lib, "conv2d_group_grad_x", &dw, &gx, &mut rng),
        );
        let gw = [&sym[..], &[("kernel_h", k as i64), ("kernel_w", k as i64)]].concat();
        let xd = [x.clone(), dy.clone()];
        cover(
            "conv2d_group_grad_w",
            check(&lib, "conv2d_group_grad_w", &xd, &gw, &mut rng),
        );
        if pt == pb {
            cover(
                "conv2d_group",
                check(&lib, "conv2d_group", &xw, &sym, &mut rng),
            );
            let xwb = [x, wt, b];
            cover(
                "conv2d_group_bias",
                check(&lib, "conv2d_group_bias", &xwb, &sym, &mut rng),
            );
            if groups == 1 {
                cover(
                    "conv2d_bias",
                    check(&lib, "conv2d_bias", &xwb, &sym[1..], &mut rng),
                );
            }
        }
    }

    // Megatron's fused QKV at GPT-like proportions (DH = 64, a row per head).
    for (b, sq, nh, dh) in [(2, 33, 4, 64), (1, 7, 3, 1), (3, 5, 1, 17)] {
        let e = 3 * nh * dh;
        cover(
            "split_qkv",
            check(
                &lib,
                "split_qkv",
                &[vec![b, sq, e]],
                &[("heads", nh as i64)],
                &mut rng,
            ),
        );
        let heads = vec![vec![b, nh, sq, dh]; 3];
        cover("merge_qkv", check(&lib, "merge_qkv", &heads, &[], &mut rng));
    }

    // The vocabulary-parallel ops on long rows (a vocabulary of 2053, several
    // parallel blocks of rows): the row max, the cross-entropy row sums and
    // their gradient with m the row max (the f32 exp path) and with m below
    // it (the f64 path), the masked lookup with ids in and out of the table.
    {
        let (batch, n) = (vec![3usize, 7], 2053usize);
        let shape = [batch.clone(), vec![n]].concat();
        let rows: usize = batch.iter().product();
        let mut uniform = |len: usize, lo: f32, hi: f32| -> Vec<f32> {
            (0..len).map(|_| rng.gen_range(lo..hi)).collect()
        };
        let x = uniform(rows * n, -8.0, 8.0);
        let labels = uniform(rows * n, 0.0, 1.0);
        let (dz, dp) = (uniform(rows, -1.0, 1.0), uniform(rows, -1.0, 1.0));
        let low = uniform(rows, -2.0, 2.0);
        let row_max: Vec<f32> = x
            .chunks(n)
            .map(|r| r.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v)))
            .collect();
        let ok = |op: &str, shapes: &[Vec<usize>], inputs: Vec<Vec<f32>>| {
            let spec = lib.get(op).expect("shipped op");
            common::check_library(spec, shapes, &Attrs::new(), inputs, 1e-4);
            true
        };
        for op in ["reduce_max", "reduce_min"] {
            cover(op, ok(op, std::slice::from_ref(&shape), vec![x.clone()]));
        }
        for m in [row_max, low] {
            let parts = [shape.clone(), batch.clone(), shape.clone()];
            let xml = vec![x.clone(), m.clone(), labels.clone()];
            cover(
                "softmax_cross_entropy_parts",
                ok("softmax_cross_entropy_parts", &parts, xml),
            );
            let grads = [parts.to_vec(), vec![batch.clone(), batch.clone()]].concat();
            let xml = vec![x.clone(), m, labels.clone(), dz.clone(), dp.clone()];
            cover(
                "softmax_cross_entropy_parts_grad",
                ok("softmax_cross_entropy_parts_grad", &grads, xml),
            );
        }
        // Class ids over the 2053 classes, a tenth ignored (-100, PyTorch's
        // ignore_index), and the count of targets.
        let class_ids: Vec<f32> = (0..rows)
            .map(|r| {
                if r % 10 == 3 {
                    -100.0
                } else {
                    ((r * 389) % n) as f32
                }
            })
            .collect();
        let cnt = vec![class_ids.iter().filter(|&&v| v >= 0.0).count() as f32];
        let (ce, ce_grad) = (
            [shape.clone(), batch.clone(), vec![]],
            [shape.clone(), batch.clone(), vec![], vec![]],
        );
        cover(
            "cross_entropy",
            ok(
                "cross_entropy",
                &ce,
                vec![x.clone(), class_ids.clone(), cnt.clone()],
            ),
        );
        let dl = vec![x.clone(), class_ids.clone(), cnt.clone(), vec![1.5]];
        cover("cross_entropy_grad", ok("cross_entropy_grad", &ce_grad, dl));
        let m: Vec<f32> = x
            .chunks(n)
            .map(|r| r.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v)))
            .collect();
        let parts = [shape.clone(), batch.clone(), batch.clone()];
        let xmi = vec![x.clone(), m.clone(), class_ids.clone()];
        cover(
            "cross_entropy_parts",
            ok("cross_entropy_parts", &parts, xmi),
        );
        let grads = [parts.to_vec(), vec![batch.clone(), batch.clone()]].concat();
        let xmi = vec![x.clone(), m, class_ids, dz.clone(), dp.clone()];
        cover(
            "cross_entropy_parts_grad",
            ok("cross_entropy_parts_grad", &grads, xmi),
        );
        let (vocab, d, ids) = (1000usize, 64usize, vec![4usize, 37]);
        let table = uniform(vocab * d, -1.0, 1.0);
        let tokens: usize = ids.iter().product();
        let id_values: Vec<f32> = (0..tokens)
            .map(|i| match i % 5 {
                0 => -1.0 - (i % 7) as f32,
                1 => (vocab + i % 11) as f32,
                2 => (i % vocab) as f32 + 0.5,
                _ => ((i * 37) % vocab) as f32,
            })
            .collect();
        cover(
            "vocab_embedding",
            ok(
                "vocab_embedding",
                &[vec![vocab, d], ids],
                vec![table, id_values],
            ),
        );
    }

    // Property-tested in `library_kernels.rs`.
    for op in [
        "relu",
        "relu_grad",
        "gelu",
        "gelu_grad",
        "add",
        "identity",
        "sgd_update",
        "momentum_update",
        "adam_update",
        "adamw_update",
        "adagrad_update",
        "rmsprop_update",
        "maxpool2d",
        "maxpool2d_grad",
        "maxpool2d_ext",
        "maxpool2d_ext_grad",
        "softmax",
        "softmax_grad",
        "log_softmax",
        "log_softmax_grad",
        "layernorm",
        "layernorm_grad",
        "softmax_cross_entropy",
        "softmax_cross_entropy_grad",
        "sparse_softmax_cross_entropy",
        "sparse_softmax_cross_entropy_grad",
        "embedding",
        "embedding_grad",
        "gather",
        "gather_grad",
        "transpose",
        "batch_transpose",
        "transpose_0213",
        "swap_blocks",
        "mul",
        "div",
        "div_grad_b",
        "scale",
        "erf",
        "erf_grad",
        "is_nan",
        "where",
        "where_grad",
        "bias_add",
        "bias_add2",
        "sum_leading",
        "sum_leading2",
        "split_heads",
        "merge_heads",
        "lrn",
        "lrn_grad",
    ] {
        covered.insert(op);
    }
    let missing: Vec<&str> = LIBRARY_KERNELS
        .iter()
        .map(|k| k.op)
        .filter(|n| lib.get(n).is_some() && !covered.contains(n))
        .collect();
    assert!(
        missing.is_empty(),
        "library kernels without a case here: {missing:?}"
    );
}
