//! [`tdl::is_linear_in`] against the interpreter (issue 41): for the ops a
//! partial sum must flow through (add, sub, scale, the matmuls in each
//! operand, reshape, transpose, slice, concat, the sums) and for nonlinear
//! ones, the syntactic answer agrees with a numeric check of
//! f(x + x′) = f(x) + f(x′) and f(2.5·x) = 2.5·f(x) on irregular data,
//! the other inputs held fixed. Soundness (said linear ⇒ numerically
//! linear) is checked for every input set of every listed op; the listed
//! linear sets must also be found.

mod common;

use common::{data, int, lib, t};
use std::sync::OnceLock;

use tdl::{evaluate, AttrValue, Attrs, Library, Tensor};

/// The shipped library, read once.
fn shipped() -> &'static Library {
    static LIB: OnceLock<Library> = OnceLock::new();
    LIB.get_or_init(lib)
}

/// Evaluate `op` on `inputs`.
fn eval(op: &str, inputs: &[Tensor], attrs: &Attrs) -> Vec<f64> {
    let spec = shipped().get(op).unwrap();
    evaluate(spec, inputs, attrs)
        .unwrap_or_else(|e| panic!("{op}: {e}"))
        .into_iter()
        .flat_map(|t| t.data)
        .collect()
}

/// Whether `op` is numerically homogeneous linear in the inputs of `mask`.
fn numerically_linear(op: &str, shapes: &[&[usize]], attrs: &Attrs, mask: u32) -> bool {
    let make = |salt: f64, scale: f64| -> Vec<Tensor> {
        shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let n = s.iter().product();
                let chosen = mask & (1 << i) != 0;
                let d: Vec<f64> = if chosen {
                    data(n, salt + i as f64).iter().map(|v| v * scale).collect()
                } else {
                    data(n, 10.0 + i as f64)
                };
                t(s, &d)
            })
            .collect()
    };
    let (x, x2) = (make(0.3, 1.0), make(1.7, 1.0));
    let sum: Vec<Tensor> = x
        .iter()
        .zip(&x2)
        .enumerate()
        .map(|(i, (a, b))| {
            if mask & (1 << i) != 0 {
                let d: Vec<f64> = a.data.iter().zip(&b.data).map(|(p, q)| p + q).collect();
                t(shapes[i], &d)
            } else {
                a.clone()
            }
        })
        .collect();
    let close = |g: &[f64], w: &[f64]| {
        g.len() == w.len()
            && g.iter()
                .zip(w)
                .all(|(g, w)| (g - w).abs() <= 1e-9 * (1.0 + w.abs()))
    };
    let (fx, fx2, fsum) = (
        eval(op, &x, attrs),
        eval(op, &x2, attrs),
        eval(op, &sum, attrs),
    );
    let added: Vec<f64> = fx.iter().zip(&fx2).map(|(a, b)| a + b).collect();
    let scaled: Vec<f64> = fx.iter().map(|v| 2.5 * v).collect();
    close(&fsum, &added) && close(&eval(op, &make(0.3, 2.5), attrs), &scaled)
}

/// One case: op, input shapes, attributes, the input sets (masks) it must
/// be found linear in.
type Case = (&'static str, Vec<&'static [usize]>, Attrs, Vec<u32>);

/// The ops checked.
fn cases() -> Vec<Case> {
    let a = |kv: &[(&str, AttrValue)]| -> Attrs {
        kv.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    };
    vec![
        ("add", vec![&[2, 3], &[2, 3]], a(&[]), vec![0b11]),
        ("sub", vec![&[2, 3], &[2, 3]], a(&[]), vec![0b11]),
        ("mul", vec![&[2, 3], &[2, 3]], a(&[]), vec![0b01, 0b10]),
        (
            "scale",
            vec![&[2, 3]],
            a(&[("alpha", AttrValue::Float(0.5))]),
            vec![0b1],
        ),
        ("identity", vec![&[2, 3]], a(&[]), vec![0b1]),
        ("dense", vec![&[2, 3], &[3, 4]], a(&[]), vec![0b01, 0b10]),
        ("dense_nt", vec![&[2, 4], &[3, 4]], a(&[]), vec![0b01, 0b10]),
        (
            "dense_grad_w",
            vec![&[2, 3], &[2, 4]],
            a(&[]),
            vec![0b01, 0b10],
        ),
        ("sum_leading", vec![&[2, 3]], a(&[]), vec![0b1]),
        ("bias_add", vec![&[2, 3], &[3]], a(&[]), vec![0b11]),
        ("concat", vec![&[2, 3], &[2, 2]], a(&[]), vec![0b11]),
        (
            "slice",
            vec![&[2, 5]],
            a(&[("start", int(1)), ("end", int(4))]),
            vec![0b1],
        ),
        (
            "reshape_1_2",
            vec![&[2, 6]],
            a(&[("d0", int(2)), ("d1", int(3))]),
            vec![0b1],
        ),
        ("swap_blocks", vec![&[2, 3, 2]], a(&[]), vec![0b1]),
        (
            "where",
            vec![&[2, 3], &[2, 3], &[2, 3]],
            a(&[]),
            vec![0b110],
        ),
        ("relu", vec![&[2, 3]], a(&[]), vec![]),
        ("softmax", vec![&[2, 3]], a(&[]), vec![]),
        ("layernorm", vec![&[2, 3], &[3], &[3]], a(&[]), vec![]),
    ]
}

#[test]
fn linear_sets_agree_with_the_interpreter() {
    let lib = shipped();
    let mut checked = 0;
    for (op, shapes, attrs, must) in cases() {
        let spec = lib.get(op).unwrap_or_else(|| panic!("no op {op}"));
        assert_eq!(spec.inputs.len(), shapes.len(), "{op}");
        let found = tdl::linear_input_sets(spec);
        for mask in 1u32..(1 << shapes.len()) {
            let numeric = numerically_linear(op, &shapes, &attrs, mask);
            let said = found.contains(&mask);
            assert!(!said || numeric, "{op}: said linear in {mask:b}, it is not");
            if must.contains(&mask) {
                assert!(numeric, "{op} {mask:b}: the case is wrong");
                assert!(said, "{op}: linear in {mask:b}, not found");
            }
            checked += 1;
        }
        println!("{op}: linear in {found:?}");
    }
    assert!(checked > 40, "{checked}");
}

/// The negative control of the numeric check: it tells a nonlinear op.
#[test]
fn the_numeric_check_rejects_nonlinear_ops() {
    let none = Attrs::new();
    assert!(!numerically_linear("relu", &[&[2, 3]], &none, 1));
    assert!(!numerically_linear("add", &[&[2, 3], &[2, 3]], &none, 0b01));
    assert!(!numerically_linear("mul", &[&[2, 3], &[2, 3]], &none, 0b11));
}
