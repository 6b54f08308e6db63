//! Hand-checked cases of the class-id losses and of max pooling's gradient
//! with tied maxima (issue 38): `cross_entropy`, `count_targets` and the
//! vocabulary-parallel `cross_entropy_parts` / `cross_entropy_combine`
//! against the dense `softmax_cross_entropy` on one-hot rows and against
//! plain loops; `maxpool2d_grad` / `maxpool2d_ext_grad` against gradients
//! worked out by hand. Never computed by the interpreter.

mod common;

use common::{assert_close, data, int, run, t};
use tdl::Tensor;

/// One-hot rows `[targets, n]` of class ids (an id outside `[0, n)` gives a
/// zero row).
fn one_hot(ids: &[f64], n: usize) -> Vec<f64> {
    let mut v = vec![0.0; ids.len() * n];
    for (r, &id) in ids.iter().enumerate() {
        if id >= 0.0 && (id as usize) < n {
            v[r * n + id as usize] = 1.0;
        }
    }
    v
}

/// The vocabulary-parallel class-id loss of logits `lg` at ids `id` with
/// `cnt` targets: the row max, the parts (z, p, sl) and the combined loss.
fn via_parts(lg: &Tensor, id: &Tensor, cnt: &Tensor) -> (Tensor, Vec<Tensor>, Tensor) {
    let m = run("reduce_max", std::slice::from_ref(lg), &[]).remove(0);
    let parts = run(
        "cross_entropy_parts",
        &[lg.clone(), m.clone(), id.clone()],
        &[],
    );
    let mut ins = vec![m.clone()];
    ins.extend(parts.iter().cloned());
    ins.push(cnt.clone());
    let combined = run("cross_entropy_combine", &ins, &[]).remove(0);
    (m, parts, combined)
}

/// Integer targets (issue 38): `cross_entropy(logits, ids)` and its
/// vocabulary-parallel form (`cross_entropy_parts` → `cross_entropy_combine`)
/// equal the dense `softmax_cross_entropy` against the one-hot labels, loss
/// and logits gradient, for `[B]` targets and `[B, S]` targets.
#[test]
fn class_id_targets_equal_the_one_hot_dense_loss_and_gradient() {
    for shape in [vec![3usize], vec![2, 3]] {
        let n = 5usize;
        let rows: usize = shape.iter().product();
        let ids: Vec<f64> = (0..rows).map(|r| ((r * 3 + 1) % n) as f64).collect();
        let logits = data(rows * n, 0.7);
        let mut lshape = shape.clone();
        lshape.push(n);
        let (lg, id) = (t(&lshape, &logits), t(&shape, &ids));
        let dense = t(&lshape, &one_hot(&ids, n));
        let want = run("softmax_cross_entropy", &[lg.clone(), dense.clone()], &[]);
        let cnt = run("count_targets", std::slice::from_ref(&id), &[]).remove(0);
        assert_eq!(cnt.data, [rows as f64]);
        let got = run("cross_entropy", &[lg.clone(), id.clone(), cnt.clone()], &[]);
        assert_close(&got[0].data, &want[0].data);
        let (m, parts, combined) = via_parts(&lg, &id, &cnt);
        assert_close(&combined.data, &want[0].data);
        // Gradients: dense, ids, and through the parts (dz, dp from the combine).
        let dl = t(&[], &[1.3]);
        let gd = run(
            "softmax_cross_entropy_grad",
            &[lg.clone(), dense, dl.clone()],
            &[],
        );
        let gi = run(
            "cross_entropy_grad",
            &[lg.clone(), id.clone(), cnt.clone(), dl.clone()],
            &[],
        );
        assert_close(&gi[0].data, &gd[0].data);
        let dzp = run(
            "cross_entropy_combine_grad",
            &[parts[0].clone(), parts[2].clone(), cnt, dl],
            &[],
        );
        let gp = run(
            "cross_entropy_parts_grad",
            &[lg, m, id, dzp[0].clone(), dzp[1].clone()],
            &[],
        );
        assert_close(&gp[0].data, &gd[0].data);
    }
}

/// Ignored targets (PyTorch's ignore_index -100): they add nothing to the
/// loss, are not counted in its mean, and get a zero gradient; checked
/// against plain loops.
#[test]
fn ignored_class_ids_add_nothing_and_are_not_counted() {
    let (rows, n) = (4usize, 3usize);
    let ids = [2.0, -100.0, 0.0, -100.0];
    let logits = data(rows * n, 1.1);
    let (lg, id) = (t(&[rows, n], &logits), t(&[rows], &ids));
    let mut want = 0.0;
    for (l, &i) in logits.chunks(n).zip(&ids) {
        if i >= 0.0 {
            want += l.iter().map(|v| v.exp()).sum::<f64>().ln() - l[i as usize];
        }
    }
    let cnt = run("count_targets", std::slice::from_ref(&id), &[]).remove(0);
    assert_eq!(cnt.data, [2.0], "two targets counted");
    let got = run("cross_entropy", &[lg.clone(), id.clone(), cnt.clone()], &[]);
    assert_close(&got[0].data, &[want / 2.0]);
    let (_, _, combined) = via_parts(&lg, &id, &cnt);
    assert_close(&combined.data, &[want / 2.0]);
    let g = run("cross_entropy_grad", &[lg, id, cnt, t(&[], &[1.0])], &[]);
    for (r, row) in g[0].data.chunks(n).enumerate() {
        let z: f64 = logits[r * n..(r + 1) * n].iter().map(|v| v.exp()).sum();
        for (j, &gj) in row.iter().enumerate() {
            let want = if ids[r] < 0.0 {
                0.0
            } else {
                (logits[r * n + j].exp() / z - f64::from(ids[r] == j as f64)) / 2.0
            };
            assert!(
                (gj - want).abs() < 1e-12,
                "row {r} class {j}: {gj} vs {want}"
            );
        }
    }
}

/// Max pooling's gradient with tied maxima goes to the window's first maximal
/// element in row-major order only, as PyTorch's max_pool2d backward and ONNX
/// MaxPool's Indices do (issue 38: tofu's losses follow PyTorch's on digits,
/// whose blank borders tie). Worked out by hand.
#[test]
fn max_pool_gradient_goes_to_the_first_maximum_of_a_window() {
    // x [1, 1, 2, 4]: rows [1, 1, 2, 0] and [0, 1, 2, 2]. Kernel 2×2, stride 2:
    // window 0 = [[1, 1], [0, 1]] (three ties), window 1 = [[2, 0], [2, 2]].
    let x = t(&[1, 1, 2, 4], &[1., 1., 2., 0., 0., 1., 2., 2.]);
    let (y, dy) = (t(&[1, 1, 1, 2], &[1., 2.]), t(&[1, 1, 1, 2], &[5., 7.]));
    let k2 = |extra: &[(&'static str, i64)]| {
        let mut a = vec![
            ("kernel_h", int(2)),
            ("kernel_w", int(2)),
            ("stride_h", int(2)),
            ("stride_w", int(2)),
        ];
        a.extend(extra.iter().map(|&(k, v)| (k, int(v))));
        a
    };
    for op in ["maxpool2d_grad", "maxpool2d_ext_grad"] {
        let dx = run(op, &[x.clone(), y.clone(), dy.clone()], &k2(&[]));
        assert_close(&dx[0].data, &[5., 0., 7., 0., 0., 0., 0., 0.]);
    }
    // Overlapping windows (kernel 1×2, stride 1) over [3, 3, 3]: window 0's
    // first maximum is element 0, window 1's element 1.
    let x = t(&[1, 1, 1, 3], &[3., 3., 3.]);
    let (y, dy) = (t(&[1, 1, 1, 2], &[3., 3.]), t(&[1, 1, 1, 2], &[5., 7.]));
    let attrs = [("kernel_h", int(1)), ("kernel_w", int(2))];
    for op in ["maxpool2d_grad", "maxpool2d_ext_grad"] {
        let dx = run(op, &[x.clone(), y.clone(), dy.clone()], &attrs);
        assert_close(&dx[0].data, &[5., 7., 0.]);
    }
    // A padded window (pad 1 before): window 0 covers [pad, 3], its maximum
    // is x[0] = 3; padding never wins.
    let pads = [
        ("kernel_h", int(1)),
        ("kernel_w", int(2)),
        ("stride_w", int(2)),
        ("pad_w", int(1)),
    ];
    let (y, dy) = (t(&[1, 1, 1, 2], &[3., 3.]), t(&[1, 1, 1, 2], &[5., 7.]));
    let dx = run("maxpool2d_grad", &[x.clone(), y, dy], &pads);
    assert_close(&dx[0].data, &[5., 7., 0.]);
}
