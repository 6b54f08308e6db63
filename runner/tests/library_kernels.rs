//! Property tests of the CPU library kernels (the GEMM family, convolutions,
//! relu, gelu, erf and their gradients, add, mul, div and its gradient,
//! where and its gradient, bias_add(2) and sum_leading(2),
//! scale, identity, the ONNX shape ops, swap_blocks, optimizer updates, max pooling and its gradient, softmax /
//! log-softmax / layer norm / cross-entropy (soft labels, class ids, and
//! PyTorch-style ids with ignored targets) and their gradients, the
//! vocabulary-parallel cross-entropy's row max / row sums / gradient,
//! embedding, vocab_embedding and gather with their scatter-add gradients)
//! against the interpreter, the
//! oracle: random shapes (ranks 0–4, dims of 1 included, so the
//! merged-ellipsis path runs too), random hyper-parameters, random windows,
//! strides, begin/end pads, dilations and ceil mode, random ids (repeated,
//! so scatter-adds collide). Each case must run its library kernel (no
//! silent fallback to the compiled evaluator).

mod common;

use proptest::prelude::*;
use tdl::{AttrValue, Attrs, Library, Tensor};

fn lib() -> &'static Library {
    static LIB: std::sync::OnceLock<Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| Library::shipped().expect("shipped specs"))
}

/// Run `op` through the default registry (must be a library kernel) and
/// compare with the interpreter on the same inputs.
fn check(op: &str, shapes: &[Vec<usize>], attrs: Attrs, inputs: Vec<Vec<f32>>) {
    let spec = lib().get(op).expect("shipped op");
    common::check_library(spec, shapes, &attrs, inputs, 1e-5);
}

/// [`check`] for kernels that sum up to ~100 products in f32 (GEMM,
/// convolution): within 1e-4 relative, as `kernels_large.rs`.
fn check_sums(op: &str, shapes: &[Vec<usize>], attrs: Attrs, inputs: Vec<Vec<f32>>) {
    let spec = lib().get(op).expect("shipped op");
    common::check_library(spec, shapes, &attrs, inputs, 1e-4);
}

/// The interpreter's first output of one-input op `op` on `x` (shape
/// `shape`), as f32.
fn reference(op: &str, shape: &[usize], x: &[f32], attrs: &Attrs) -> Vec<f32> {
    let spec = lib().get(op).expect("shipped op");
    let t = Tensor::new(shape, x.iter().map(|&v| v as f64).collect()).expect("shape fits");
    tdl::evaluate(spec, &[t], attrs).unwrap_or_else(|e| panic!("{op}: {e}"))[0]
        .data
        .iter()
        .map(|&v| v as f32)
        .collect()
}

fn values(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

fn floats(pairs: &[(&str, f64)]) -> Attrs {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), AttrValue::Float(*v)))
        .collect()
}

fn ints(pairs: &[(&str, i64)]) -> Attrs {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), AttrValue::Int(*v)))
        .collect()
}

/// Output size of a pooling window along one axis (ONNX, with ceil mode).
fn pooled(i: i64, k: i64, s: i64, pb: i64, pe: i64, d: i64, ceil: bool) -> i64 {
    let span = i + pb + pe - d * (k - 1) - 1;
    if !ceil {
        return span.div_euclid(s) + 1;
    }
    let o = (span + s - 1).div_euclid(s) + 1;
    // A last window starting in the end padding is dropped.
    if (o - 1) * s >= i + pb {
        o - 1
    } else {
        o
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn elementwise_ops_and_optimizer_updates_equal_the_interpreter(
        shape in prop::collection::vec(1usize..7, 0..5),
        lr in 0.001f64..1.0,
        mu in 0.0f64..0.99,
        step in 1i64..20,
        seed in any::<u64>(),
    ) {
        let n: usize = shape.iter().product();
        let v = |k: u64, lo: f32, hi: f32| values(n, seed ^ k, lo, hi);
        let two = vec![shape.clone(); 2];
        let three = vec![shape.clone(); 3];
        let four = vec![shape.clone(); 4];
        check("sgd_update", &two, floats(&[("lr", lr)]), vec![v(1, -1.0, 1.0), v(2, -1.0, 1.0)]);
        let one = std::slice::from_ref(&shape);
        check("relu", one, Attrs::new(), vec![v(5, -1.0, 1.0)]);
        check("identity", one, Attrs::new(), vec![v(5, -1.0, 1.0)]);
        check("relu_grad", &two, Attrs::new(), vec![v(5, -1.0, 1.0), v(6, -1.0, 1.0)]);
        check("gelu", one, Attrs::new(), vec![v(5, -4.0, 4.0)]);
        check("gelu_grad", &two, Attrs::new(), vec![v(5, -4.0, 4.0), v(6, -1.0, 1.0)]);
        check("add", &two, Attrs::new(), vec![v(5, -1.0, 1.0), v(6, -1.0, 1.0)]);
        check("mul", &two, Attrs::new(), vec![v(5, -1.0, 1.0), v(6, -1.0, 1.0)]);
        check("div", &two, Attrs::new(), vec![v(5, -1.0, 1.0), v(6, 0.5, 2.0)]);
        check("div_grad_b", &three, Attrs::new(), vec![v(5, -1.0, 1.0), v(6, 0.5, 2.0), v(7, -1.0, 1.0)]);
        check("scale", one, floats(&[("alpha", lr)]), vec![v(5, -1.0, 1.0)]);
        check("scale", one, floats(&[("alpha", lr as f32 as f64)]), vec![v(5, -1.0, 1.0)]);
        check("erf", one, Attrs::new(), vec![v(5, -3.0, 3.0)]);
        let mut with_nans = v(5, -1.0, 1.0);
        with_nans.iter_mut().step_by(3).for_each(|x| *x = f32::NAN);
        check("is_nan", one, Attrs::new(), vec![with_nans]);
        check("erf_grad", &two, Attrs::new(), vec![v(5, -3.0, 3.0), v(6, -1.0, 1.0)]);
        check("erf", one, Attrs::new(), vec![v(5, -6.0, 6.0)]);
        check("erf_grad", &two, Attrs::new(), vec![v(5, -4.0, 4.0), v(6, -1.0, 1.0)]);
        // A condition of zeros, ones, other values and NaNs.
        let cond: Vec<f32> = v(7, -1.0, 1.0)
            .iter()
            .enumerate()
            .map(|(i, &c)| match i % 4 { 0 => 0.0, 1 => f32::NAN, _ if c < 0.0 => 0.0, _ => c })
            .collect();
        check("where", &three, Attrs::new(), vec![cond.clone(), v(5, -1.0, 1.0), v(6, -1.0, 1.0)]);
        check("where_grad", &two, Attrs::new(), vec![cond, v(6, -1.0, 1.0)]);
        // Bias rows over the last one and two dims, and their column sums
        // (a second case with rows longer than a block of columns).
        for (rows, tail) in [(shape.clone(), 1), (shape.clone(), 2), (vec![3, 2, 150], 1)] {
            if rows.len() < tail {
                continue;
            }
            let bias = rows[rows.len() - tail..].to_vec();
            let (add, sum) = if tail == 1 { ("bias_add", "sum_leading") } else { ("bias_add2", "sum_leading2") };
            let r: usize = rows.iter().product();
            check(add, &[rows.clone(), bias.clone()], Attrs::new(),
                vec![values(r, seed ^ 8, -1.0, 1.0), values(bias.iter().product(), seed ^ 9, -1.0, 1.0)]);
            check(sum, std::slice::from_ref(&rows), Attrs::new(), vec![values(r, seed ^ 10, -1.0, 1.0)]);
        }
        check(
            "momentum_update",
            &three,
            floats(&[("lr", lr), ("momentum", mu)]),
            vec![v(1, -1.0, 1.0), v(2, -1.0, 1.0), v(3, -1.0, 1.0)],
        );
        for op in ["adam_update", "adamw_update"] {
            let mut a = floats(&[("lr", lr), ("beta1", mu), ("beta2", 0.999), ("eps", 1e-8)]);
            a.insert("step".into(), AttrValue::Int(step));
            if op == "adamw_update" {
                a.insert("weight_decay".into(), AttrValue::Float(0.01));
            }
            check(op, &four, a, vec![v(1, -1.0, 1.0), v(2, -1.0, 1.0), v(3, -1.0, 1.0), v(4, 0.0, 1.0)]);
        }
        check(
            "adagrad_update",
            &three,
            floats(&[("lr", lr), ("eps", 1e-10)]),
            vec![v(1, -1.0, 1.0), v(2, -1.0, 1.0), v(3, 0.0, 1.0)],
        );
        check(
            "rmsprop_update",
            &three,
            floats(&[("lr", lr), ("alpha", mu), ("eps", 1e-8)]),
            vec![v(1, -1.0, 1.0), v(2, -1.0, 1.0), v(3, 0.0, 1.0)],
        );
    }

    #[test]
    fn max_pooling_and_its_gradient_equal_the_interpreter(
        (bn, c, h, w) in (1usize..3, 1usize..4, 1usize..10, 1usize..10),
        (kh, kw) in (1i64..4, 1i64..4),
        (sh, sw) in (1i64..4, 1i64..4),
        (dh, dw) in (1i64..3, 1i64..3),
        pads in (0i64..3, 0i64..3, 0i64..3, 0i64..3),
        ceil in any::<bool>(),
        levels in 2u32..40,
        seed in any::<u64>(),
    ) {
        // ONNX: every pad is smaller than the kernel.
        let (pt, pl, pb, pr) = (pads.0 % kh, pads.1 % kw, pads.2 % kh, pads.3 % kw);
        let (oh, ow) = (
            pooled(h as i64, kh, sh, pt, pb, dh, ceil),
            pooled(w as i64, kw, sw, pl, pr, dw, ceil),
        );
        prop_assume!(oh > 0 && ow > 0);
        // Few distinct values, so windows have tied maxima.
        let x: Vec<f32> = values(bn * c * h * w, seed, 0.0, levels as f32)
            .into_iter()
            .map(f32::floor)
            .collect();
        let xs = vec![bn, c, h, w];
        let ys = vec![bn, c, oh as usize, ow as usize];
        let ext = ints(&[
            ("kernel_h", kh), ("kernel_w", kw), ("stride_h", sh), ("stride_w", sw),
            ("pad_t", pt), ("pad_l", pl), ("pad_b", pb), ("pad_r", pr),
            ("dilation_h", dh), ("dilation_w", dw), ("ceil_mode", ceil as i64),
        ]);
        check("maxpool2d_ext", std::slice::from_ref(&xs), ext.clone(), vec![x.clone()]);
        // The gradient from the forward's own output (so maxima match).
        let y = reference("maxpool2d_ext", &xs, &x, &ext);
        let dy = values(y.len(), seed ^ 7, -1.0, 1.0);
        let mut grad = ext.clone();
        for k in ["pad_b", "pad_r", "ceil_mode"] {
            grad.remove(k);
        }
        check("maxpool2d_ext_grad", &[xs.clone(), ys.clone(), ys.clone()], grad, vec![x.clone(), y, dy.clone()]);

        // The zoo's symmetric-pad, undilated family on the same data.
        if !ceil {
            let (ph, pw) = (pt, pl);
            let (oh, ow) = (pooled(h as i64, kh, sh, ph, ph, 1, false), pooled(w as i64, kw, sw, pw, pw, 1, false));
            prop_assume!(oh > 0 && ow > 0);
            let a = ints(&[
                ("kernel_h", kh), ("kernel_w", kw), ("stride_h", sh), ("stride_w", sw),
                ("pad_h", ph), ("pad_w", pw),
            ]);
            check("maxpool2d", std::slice::from_ref(&xs), a.clone(), vec![x.clone()]);
            let y = reference("maxpool2d", &xs, &x, &a);
            let ys = vec![bn, c, oh as usize, ow as usize];
            let dy = values(y.len(), seed ^ 9, -1.0, 1.0);
            check("maxpool2d_grad", &[xs.clone(), ys.clone(), ys], a, vec![x, y, dy]);
        }
    }

    #[test]
    fn row_normalisations_and_losses_equal_the_interpreter(
        batch in prop::collection::vec(1usize..5, 0..4),
        n in 1usize..40,
        eps in 1e-6f64..1e-2,
        seed in any::<u64>(),
    ) {
        let shape = [batch.clone(), vec![n]].concat();
        let rows: usize = batch.iter().product();
        let e = rows * n;
        let v = |k: u64, lo: f32, hi: f32, len: usize| values(len, seed ^ k, lo, hi);
        let x = v(1, -4.0, 4.0, e);
        let dy = v(2, -1.0, 1.0, e);
        let two = vec![shape.clone(); 2];
        check("softmax", std::slice::from_ref(&shape), Attrs::new(), vec![x.clone()]);
        check("log_softmax", std::slice::from_ref(&shape), Attrs::new(), vec![x.clone()]);
        // The gradients from outputs of the right kind (probabilities, log-probabilities).
        let soft = v(3, 0.0, 1.0, e);
        check("softmax_grad", &two, Attrs::new(), vec![soft.clone(), dy.clone()]);
        let logp: Vec<f32> = soft.iter().map(|p| (p + 1e-3).ln()).collect();
        check("log_softmax_grad", &two, Attrs::new(), vec![logp, dy.clone()]);
        let ln = floats(&[("eps", eps)]);
        let (gamma, beta) = (v(4, 0.5, 1.5, n), v(5, -1.0, 1.0, n));
        check("layernorm", &[shape.clone(), vec![n], vec![n]], ln.clone(), vec![x.clone(), gamma.clone(), beta]);
        check("layernorm_grad", &[shape.clone(), vec![n], shape.clone()], ln, vec![x.clone(), gamma, dy.clone()]);
        // Soft labels (rows summing to anything), then class ids.
        let labels = v(6, 0.0, 1.0, e);
        let dloss = v(7, 0.5, 2.0, 1);
        check("softmax_cross_entropy", &two, Attrs::new(), vec![x.clone(), labels.clone()]);
        check(
            "softmax_cross_entropy_grad",
            &[shape.clone(), shape.clone(), vec![]],
            Attrs::new(),
            vec![x.clone(), labels, dloss.clone()],
        );
        let ids: Vec<f32> = v(8, 0.0, n as f32, rows).into_iter().map(f32::floor).collect();
        check("sparse_softmax_cross_entropy", &[shape.clone(), batch.clone()], Attrs::new(), vec![x.clone(), ids.clone()]);
        check(
            "sparse_softmax_cross_entropy_grad",
            &[shape.clone(), batch.clone(), vec![]],
            Attrs::new(),
            vec![x.clone(), ids.clone(), dloss.clone()],
        );
        // PyTorch-style class ids: some ignored (-100, past N, not integers).
        let counted: Vec<f32> = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| match i % 4 {
                1 => -100.0,
                3 if i % 8 == 3 => n as f32 + id,
                3 => id + 0.5,
                _ => id,
            })
            .collect();
        // The count of targets: any value, 0 included (the divisor is max(cnt, 1)).
        for cnt in [vec![(rows / 2) as f32], vec![0.0]] {
            let with_cnt = [shape.clone(), batch.clone(), vec![]];
            check("cross_entropy", &with_cnt, Attrs::new(), vec![x.clone(), counted.clone(), cnt.clone()]);
            check(
                "cross_entropy_grad",
                &[shape.clone(), batch.clone(), vec![], vec![]],
                Attrs::new(),
                vec![x.clone(), counted.clone(), cnt, dloss.clone()],
            );
        }
        // The vocabulary-parallel cross-entropy: the row max (exact), the
        // row sums given m (the true row max, as in a training graph, or any
        // value: the f64 exp path), and their gradient.
        check("reduce_max", std::slice::from_ref(&shape), Attrs::new(), vec![x.clone()]);
        check("reduce_min", std::slice::from_ref(&shape), Attrs::new(), vec![x.clone()]);
        let m = reference("reduce_max", &shape, &x, &Attrs::new());
        let labels = v(9, 0.0, 1.0, e);
        let (dz, dp) = (v(10, -1.0, 1.0, rows), v(11, -1.0, 1.0, rows));
        let parts = [shape.clone(), batch.clone(), shape.clone()];
        let grads = [shape.clone(), batch.clone(), shape.clone(), batch.clone(), batch.clone()];
        for m in [m, v(12, -3.0, 3.0, rows)] {
            check("softmax_cross_entropy_parts", &parts, Attrs::new(), vec![x.clone(), m.clone(), labels.clone()]);
            check(
                "softmax_cross_entropy_parts_grad",
                &grads,
                Attrs::new(),
                vec![x.clone(), m.clone(), labels.clone(), dz.clone(), dp.clone()],
            );
            let ids_parts = [shape.clone(), batch.clone(), batch.clone()];
            let ids_grads = [shape.clone(), batch.clone(), batch.clone(), batch.clone(), batch.clone()];
            check("cross_entropy_parts", &ids_parts, Attrs::new(), vec![x.clone(), m.clone(), counted.clone()]);
            check(
                "cross_entropy_parts_grad",
                &ids_grads,
                Attrs::new(),
                vec![x.clone(), m, counted.clone(), dz.clone(), dp.clone()],
            );
        }
    }

    #[test]
    fn gathers_and_scatter_adds_equal_the_interpreter(
        positions in prop::collection::vec(1usize..5, 0..3),
        vocab in 1usize..12,
        d in 1usize..9,
        seed in any::<u64>(),
    ) {
        let t: usize = positions.iter().product();
        // Few distinct rows, so ids repeat and the scatter-add sums.
        let ids: Vec<f32> = values(t, seed, 0.0, vocab as f32).into_iter().map(f32::floor).collect();
        let table = values(vocab * d, seed ^ 1, -1.0, 1.0);
        let dy = values(t * d, seed ^ 2, -1.0, 1.0);
        check("embedding", &[vec![vocab, d], positions.clone()], Attrs::new(), vec![table.clone(), ids.clone()]);
        // Megatron's masked lookup: ids below, inside and above the table,
        // integers and not (zero rows outside, as the spec's `ids == v`).
        let masked: Vec<f32> = values(t, seed ^ 4, -3.0, vocab as f32 + 3.0)
            .into_iter()
            .enumerate()
            .map(|(i, x)| if i % 3 == 2 { x } else { x.floor() })
            .collect();
        check("vocab_embedding", &[vec![vocab, d], positions.clone()], Attrs::new(), vec![table.clone(), masked]);
        let dys = [positions.clone(), vec![d]].concat();
        check(
            "embedding_grad",
            &[positions.clone(), dys],
            ints(&[("vocab", vocab as i64)]),
            vec![ids.clone(), dy.clone()],
        );
        check("gather", &[vec![vocab, d, 2], vec![t]], Attrs::new(), vec![values(vocab * d * 2, seed ^ 3, -1.0, 1.0), ids.clone()]);
        check("gather_grad", &[vec![t], vec![t, d]], ints(&[("n", vocab as i64)]), vec![ids, dy]);
    }

    #[test]
    fn permutations_equal_the_interpreter(
        dims in prop::collection::vec(1usize..6, 4),
        extra in prop::collection::vec(1usize..4, 0..3),
        heads in 1usize..4,
        seed in any::<u64>(),
    ) {
        let v = |shape: &[usize]| values(shape.iter().product(), seed, -1.0, 1.0);
        let m = vec![dims[0], dims[1]];
        check("transpose", std::slice::from_ref(&m), Attrs::new(), vec![v(&m)]);
        let bt = [extra.clone(), m.clone()].concat();
        check("batch_transpose", std::slice::from_ref(&bt), Attrs::new(), vec![v(&bt)]);
        check("transpose_0213", std::slice::from_ref(&dims), Attrs::new(), vec![v(&dims)]);
        check("merge_heads", std::slice::from_ref(&dims), Attrs::new(), vec![v(&dims)]);
        let x = vec![dims[0], dims[1], dims[2] * heads];
        check("split_heads", std::slice::from_ref(&x), ints(&[("heads", heads as i64)]), vec![v(&x)]);
        // Megatron's fused, head-interleaved QKV: [B, S, 3·heads·DH] and back.
        let fused = vec![dims[0], dims[1], 3 * heads * dims[3]];
        check("split_qkv", std::slice::from_ref(&fused), ints(&[("heads", heads as i64)]), vec![v(&fused)]);
        let per_head = vec![dims[0], heads, dims[1], dims[3]];
        let vs = |s: u64| values(per_head.iter().product(), seed ^ s, -1.0, 1.0);
        check("merge_qkv", &vec![per_head.clone(); 3], Attrs::new(), vec![vs(1), vs(2), vs(3)]);
    }

    #[test]
    fn gemm_family_equals_the_interpreter(
        (m, k, n) in (1usize..24, 1usize..24, 1usize..24),
        batch in prop::collection::vec(1usize..4, 0..3),
        seed in any::<u64>(),
    ) {
        let v = |shape: &[usize], s: u64| values(shape.iter().product(), seed ^ s, -1.0, 1.0);
        let sh = |a: usize, b: usize| [batch.clone(), vec![a, b]].concat();
        for (op, a, b) in [
            ("matmul", vec![m, k], vec![k, n]),
            ("matmul_nt", vec![m, k], vec![n, k]),
            ("matmul_tn", vec![k, m], vec![k, n]),
            ("batch_matmul", sh(m, k), sh(k, n)),
            ("batch_matmul_nt", sh(m, k), sh(n, k)),
            ("batch_matmul_tn", sh(k, m), sh(k, n)),
            ("dense", sh(m, k), vec![k, n]),
            ("dense_nt", sh(m, n), vec![k, n]),
            ("dense_grad_w", sh(m, k), sh(m, n)),
        ] {
            let (x, y) = (v(&a, 1), v(&b, 2));
            check_sums(op, &[a, b], Attrs::new(), vec![x, y]);
        }
        // ONNX Gemm with a bias row.
        for (op, b) in [("gemm_bias", vec![k, n]), ("gemm_nt_bias", vec![n, k])] {
            let a = vec![m, k];
            let (x, y, c) = (v(&a, 1), v(&b, 2), v(&[n], 3));
            check_sums(op, &[a, b, vec![n]], Attrs::new(), vec![x, y, c]);
        }
    }

    #[test]
    fn convolutions_equal_the_interpreter(
        (bn, ci, co) in (1usize..4, 1usize..4, 1usize..4),
        (h, w) in (1usize..10, 1usize..10),
        (kh, kw) in (1usize..4, 1usize..4),
        (sh, sw) in (1i64..3, 1i64..3),
        (ph, pw) in (0i64..2, 0i64..2),
        (dh, dw) in (1i64..3, 1i64..3),
        seed in any::<u64>(),
    ) {
        let (oh, ow) = (
            pooled(h as i64, kh as i64, sh, ph, ph, dh, false),
            pooled(w as i64, kw as i64, sw, pw, pw, dw, false),
        );
        prop_assume!(oh > 0 && ow > 0);
        let (oh, ow) = (oh as usize, ow as usize);
        let v = |shape: &[usize], s: u64| values(shape.iter().product(), seed ^ s, -1.0, 1.0);
        let conv = ints(&[
            ("stride_h", sh), ("stride_w", sw), ("pad_h", ph), ("pad_w", pw),
            ("dilation_h", dh), ("dilation_w", dw),
        ]);
        let (x, wt, dy) = (vec![bn, ci, h, w], vec![co, ci, kh, kw], vec![bn, co, oh, ow]);
        check_sums("conv2d", &[x.clone(), wt.clone()], conv.clone(), vec![v(&x, 1), v(&wt, 2)]);
        let mut gx = conv.clone();
        gx.extend(ints(&[("in_h", h as i64), ("in_w", w as i64)]));
        check_sums("conv2d_grad_x", &[dy.clone(), wt.clone()], gx, vec![v(&dy, 3), v(&wt, 2)]);
        let mut gw = conv;
        gw.extend(ints(&[("kernel_h", kh as i64), ("kernel_w", kw as i64)]));
        check_sums("conv2d_grad_w", &[x.clone(), dy.clone()], gw, vec![v(&x, 1), v(&dy, 3)]);
        // The same along the width as a conv1d.
        let c1 = ints(&[("stride", sw), ("pad", pw), ("dilation", dw)]);
        let (x, wt, dy) = (vec![bn, ci, w], vec![co, ci, kw], vec![bn, co, ow]);
        check_sums("conv1d", &[x.clone(), wt.clone()], c1.clone(), vec![v(&x, 1), v(&wt, 2)]);
        let mut gx = c1.clone();
        gx.insert("in_x".into(), AttrValue::Int(w as i64));
        check_sums("conv1d_grad_x", &[dy.clone(), wt.clone()], gx, vec![v(&dy, 3), v(&wt, 2)]);
        let mut gw = c1;
        gw.insert("kernel".into(), AttrValue::Int(kw as i64));
        check_sums("conv1d_grad_w", &[x.clone(), dy.clone()], gw, vec![v(&x, 1), v(&dy, 3)]);
    }

    /// Local response normalisation and its gradient over images of any
    /// rank ≥ 2 (channels second), windows even and odd, wider than C.
    #[test]
    fn local_response_normalisation_equals_the_interpreter(
        (bn, c) in (1usize..3, 1usize..7),
        spatial in prop::collection::vec(1usize..5, 0..3),
        size in 1i64..7,
        (alpha, beta, bias) in (0.0001f64..2.0, 0.1f64..1.5, 0.5f64..3.0),
        seed in any::<u64>(),
    ) {
        let shape = [vec![bn, c], spatial].concat();
        let n: usize = shape.iter().product();
        let mut attrs = floats(&[("alpha", alpha), ("beta", beta), ("bias", bias)]);
        attrs.insert("size".into(), AttrValue::Int(size));
        let (x, dy) = (values(n, seed, -2.0, 2.0), values(n, seed ^ 9, -1.0, 1.0));
        check("lrn", std::slice::from_ref(&shape), attrs.clone(), vec![x.clone()]);
        check("lrn_grad", &[shape.clone(), shape], attrs, vec![x, dy]);
    }

    /// Grouped (depthwise when CIG = 1), biased and asymmetrically padded
    /// convolutions, and the gradients of the grouped and the padded ones
    /// (an asymmetric conv's gradients are the symmetric specs with the
    /// begin pads, whose dy is then not the size the symmetric formula
    /// gives).
    #[test]
    fn grouped_biased_and_padded_convolutions_equal_the_interpreter(
        (bn, groups, cig, cog) in (1usize..3, 1usize..4, 1usize..3, 1usize..3),
        (h, w) in (1usize..9, 1usize..9),
        (kh, kw) in (1usize..4, 1usize..4),
        (sh, sw) in (1i64..3, 1i64..3),
        (pt, pl, pb, pr) in (0i64..3, 0i64..3, 0i64..3, 0i64..3),
        (dh, dw) in (1i64..3, 1i64..3),
        seed in any::<u64>(),
    ) {
        let (oh, ow) = (
            pooled(h as i64, kh as i64, sh, pt, pb, dh, false),
            pooled(w as i64, kw as i64, sw, pl, pr, dw, false),
        );
        prop_assume!(oh > 0 && ow > 0);
        let (oh, ow) = (oh as usize, ow as usize);
        let v = |shape: &[usize], s: u64| values(shape.iter().product(), seed ^ s, -1.0, 1.0);
        let (ci, co) = (groups * cig, groups * cog);
        let (x, wt, b, dy) = (vec![bn, ci, h, w], vec![co, cig, kh, kw], vec![co], vec![bn, co, oh, ow]);
        let g = groups as i64;
        let ext = ints(&[
            ("groups", g), ("stride_h", sh), ("stride_w", sw), ("pad_t", pt), ("pad_l", pl),
            ("pad_b", pb), ("pad_r", pr), ("dilation_h", dh), ("dilation_w", dw),
        ]);
        let inputs = vec![v(&x, 1), v(&wt, 2)];
        check_sums("conv2d_group_ext", &[x.clone(), wt.clone()], ext.clone(), inputs.clone());
        if groups == 1 {
            let mut e = ext.clone();
            e.remove("groups");
            check_sums("conv2d_ext", &[x.clone(), wt.clone()], e, inputs.clone());
        }
        // The gradients: symmetric specs with the begin pads and this dy.
        let sym = ints(&[
            ("groups", g), ("stride_h", sh), ("stride_w", sw), ("pad_h", pt), ("pad_w", pl),
            ("dilation_h", dh), ("dilation_w", dw),
        ]);
        let mut gx = sym.clone();
        gx.extend(ints(&[("in_h", h as i64), ("in_w", w as i64)]));
        check_sums("conv2d_group_grad_x", &[dy.clone(), wt.clone()], gx, vec![v(&dy, 3), v(&wt, 2)]);
        let mut gw = sym.clone();
        gw.extend(ints(&[("kernel_h", kh as i64), ("kernel_w", kw as i64)]));
        check_sums("conv2d_group_grad_w", &[x.clone(), dy.clone()], gw, vec![v(&x, 1), v(&dy, 3)]);
        // Symmetric pads (pt, pl): the grouped and biased forward forms.
        let (sy_oh, sy_ow) = (
            pooled(h as i64, kh as i64, sh, pt, pt, dh, false),
            pooled(w as i64, kw as i64, sw, pl, pl, dw, false),
        );
        if sy_oh > 0 && sy_ow > 0 {
            check_sums("conv2d_group", &[x.clone(), wt.clone()], sym.clone(), inputs.clone());
            let with_b = vec![v(&x, 1), v(&wt, 2), v(&b, 4)];
            check_sums("conv2d_group_bias", &[x.clone(), wt.clone(), b.clone()], sym.clone(), with_b.clone());
            if groups == 1 {
                let mut plain = sym;
                plain.remove("groups");
                check_sums("conv2d_bias", &[x.clone(), wt.clone(), b], plain, with_b);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The ONNX importer's shape ops (`kernels/shape.rs`): a reshape of
    /// equal counts and one that pads or drops, a broadcast from dims of 1,
    /// the same size or a divisor, and its gradient summing back, each over
    /// random leading dims.
    #[test]
    fn shape_ops_equal_the_interpreter(
        lead in prop::collection::vec(1usize..4, 0..3),
        from in prop::collection::vec(1usize..5, 1..4),
        reps in prop::collection::vec(1usize..4, 3),
        ones in prop::collection::vec(any::<bool>(), 3),
        extra in 0usize..4,
        seed in any::<u64>(),
    ) {
        let with = |t: &[usize]| lead.iter().chain(t).copied().collect::<Vec<usize>>();
        let k = from.len();
        let fx: usize = from.iter().product();
        let x = with(&from);
        let xv = values(x.iter().product(), seed, -1.0, 1.0);
        // Reshape to one dim: equal counts, then `extra` more (zero-padded).
        for d0 in [fx, fx + extra] {
            check(&format!("reshape_{k}_1"), std::slice::from_ref(&x), ints(&[("d0", d0 as i64)]), vec![xv.clone()]);
        }
        // Reshape from one dim to `from`.
        let flat = with(&[fx]);
        let mut attrs = Attrs::new();
        for (i, &d) in from.iter().enumerate() {
            attrs.insert(format!("d{i}"), AttrValue::Int(d as i64));
        }
        check(&format!("reshape_1_{k}"), std::slice::from_ref(&flat), attrs, vec![xv.clone()]);
        // Broadcast each dim of `from` (1 where `ones`) to a multiple.
        let small: Vec<usize> = (0..k).map(|i| if ones[i] { 1 } else { from[i] }).collect();
        let big: Vec<usize> = (0..k).map(|i| from[i] * reps[i]).collect();
        let mut n_attrs = Attrs::new();
        let mut a_attrs = Attrs::new();
        for i in 0..k {
            n_attrs.insert(format!("n{i}"), AttrValue::Int(big[i] as i64));
            a_attrs.insert(format!("a{i}"), AttrValue::Int(small[i] as i64));
        }
        let xs = with(&small);
        let xsv = values(xs.iter().product(), seed ^ 1, -1.0, 1.0);
        check(&format!("broadcast_{k}"), std::slice::from_ref(&xs), n_attrs, vec![xsv]);
        let dy = with(&big);
        let dyv = values(dy.iter().product(), seed ^ 2, -1.0, 1.0);
        // A sum over the repeats: f32 cancellation, so check_sums' tolerance
        // (a run at 1e-5 failed at 1.9e-5 on an output of -1.3e-3).
        check_sums(&format!("unbroadcast_{k}"), std::slice::from_ref(&dy), a_attrs, vec![dyv]);
        // swap_blocks over the last three dims of `big`'s prefix: x[..., A, B, C].
        let sw = with(&[from[0], reps[0] + 1, reps[1]]);
        let swv = values(sw.iter().product(), seed ^ 3, -1.0, 1.0);
        check("swap_blocks", std::slice::from_ref(&sw), Attrs::new(), vec![swv]);
    }
}

/// A column sum large enough to run its column blocks in parallel (one
/// case: the interpreter is slow on 270 000 elements).
#[test]
fn a_large_column_sum_equals_the_interpreter() {
    let rows = vec![1800, 150];
    check(
        "sum_leading",
        std::slice::from_ref(&rows),
        Attrs::new(),
        vec![values(1800 * 150, 7, -1.0, 1.0)],
    );
}
