//! Helpers shared by the interpreter's hand-checked tests: the shipped
//! library, tensors, running one op through `tdl::evaluate`, and the
//! comparison (1e-12 relative).
#![allow(dead_code)]

use tdl::{evaluate, AttrValue, Attrs, Library, Tensor};

pub fn lib() -> Library {
    Library::shipped().unwrap_or_else(|e| panic!("{}", e_render(&e)))
}

pub fn e_render(e: &tdl::LibraryError) -> String {
    match e {
        tdl::LibraryError::Invalid(d) => d.render(),
        other => other.to_string(),
    }
}

pub fn t(shape: &[usize], data: &[f64]) -> Tensor {
    Tensor::new(shape, data.to_vec()).unwrap()
}

pub fn run(op: &str, inputs: &[Tensor], attrs: &[(&str, AttrValue)]) -> Vec<Tensor> {
    let lib = lib();
    let spec = lib.get(op).unwrap_or_else(|| panic!("no op {op}"));
    let attrs: Attrs = attrs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    evaluate(spec, inputs, &attrs).unwrap_or_else(|e| panic!("{op}: {e}"))
}

pub fn assert_close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-12 * (1.0 + w.abs()),
            "element {i}: got {g}, want {w}"
        );
    }
}

/// Deterministic, irregular test data.
pub fn data(n: usize, salt: f64) -> Vec<f64> {
    (0..n)
        .map(|i| ((i as f64 + 1.0) * 0.731 + salt).sin() * 1.5)
        .collect()
}

pub fn int(v: i64) -> AttrValue {
    AttrValue::Int(v)
}
