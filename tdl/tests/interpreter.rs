//! Hand-checked small cases for the reference interpreter (issue: TDL
//! "Done when": matmul, conv1d (Tofu Figure 1), conv2d stride 2 pad 1,
//! softmax, layer norm, LSTM cell). Expected values are computed here by
//! independent plain-Rust loops or by hand, never by the interpreter.

use tdl::{evaluate, AttrValue, Attrs, Library, Tensor};

fn lib() -> Library {
    Library::shipped().unwrap_or_else(|e| panic!("{}", e_render(&e)))
}

fn e_render(e: &tdl::LibraryError) -> String {
    match e {
        tdl::LibraryError::Invalid(d) => d.render(),
        other => other.to_string(),
    }
}

fn t(shape: &[usize], data: &[f64]) -> Tensor {
    Tensor::new(shape, data.to_vec()).unwrap()
}

fn run(op: &str, inputs: &[Tensor], attrs: &[(&str, AttrValue)]) -> Vec<Tensor> {
    let lib = lib();
    let spec = lib.get(op).unwrap_or_else(|| panic!("no op {op}"));
    let attrs: Attrs = attrs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    evaluate(spec, inputs, &attrs).unwrap_or_else(|e| panic!("{op}: {e}"))
}

fn assert_close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "element {i}: got {g}, want {w}");
    }
}

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
    let y = run("conv1d", &[t(&[b, ci, x], &data), t(&[co, ci, dx], &filt)], &[]);
    let xo = x - dx + 1;
    assert_eq!(y[0].shape, vec![b, co, xo]);
    let mut want = vec![0.0; b * co * xo];
    for bi in 0..b {
        for c in 0..co {
            for o in 0..xo {
                for i in 0..ci {
                    for k in 0..dx {
                        want[(bi * co + c) * xo + o] += data[(bi * ci + i) * x + o + k] * filt[(c * ci + i) * dx + k];
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
    assert_close(&y[0].data, &[e[0] / s, e[1] / s, e[2] / s, 1. / 3., 1. / 3., 1. / 3.]);
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
    let dy = t(&[2, 2, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12.]);
    let db = run("sum_leading", &[dy], &[]);
    assert_close(&db[0].data, &[22., 26., 30.]);
}

#[test]
fn erf_known_values() {
    // Abramowitz & Stegun table values.
    for (x, want) in [(0.5, 0.520_499_877_813_046_5), (1.0, 0.842_700_792_949_714_9), (2.0, 0.995_322_265_018_952_7), (3.0, 0.999_977_909_503_001_4), (-0.3, -0.328_626_759_459_127_4)] {
        let got = tdl::interp::erf(x);
        assert!((got - want).abs() < 1e-14, "erf({x}) = {got}, want {want}");
    }
}
