//! The bitwise specs of `specs/onnx_bitwise.tdl` against Rust's integer
//! operators (the oracle): every pair of 8-bit signed values, every 8-bit
//! unsigned value, and 32-bit values of both signs up to ±2^31.

use tdl::{evaluate, AttrValue, Attrs, Library, Tensor};

fn run(op: &str, inputs: &[Tensor], attrs: &[(&str, i64)]) -> Vec<f64> {
    let lib = Library::shipped().expect("shipped specs load");
    let spec = lib.get(op).unwrap_or_else(|| panic!("no op {op}"));
    let attrs: Attrs = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), AttrValue::Int(*v)))
        .collect();
    let out = evaluate(spec, inputs, &attrs).unwrap_or_else(|e| panic!("{op}: {e}"));
    out[0].data.clone()
}

fn tensor(v: &[i64]) -> Tensor {
    Tensor::new(&[v.len()], v.iter().map(|&x| x as f64).collect()).expect("shape fits")
}

fn check(op: &str, bits: i64, a: &[i64], b: &[i64], f: fn(i64, i64) -> i64) {
    let got = run(op, &[tensor(a), tensor(b)], &[("bits", bits)]);
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        assert_eq!(got[i], f(x, y) as f64, "{op}({x}, {y})");
    }
}

#[test]
fn and_or_xor_of_every_i8_pair() {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for x in -128..128i64 {
        for y in -128..128i64 {
            a.push(x);
            b.push(y);
        }
    }
    check("bitwise_and", 8, &a, &b, |x, y| x & y);
    check("bitwise_or", 8, &a, &b, |x, y| x | y);
    check("bitwise_xor", 8, &a, &b, |x, y| x ^ y);
}

#[test]
fn and_or_xor_of_i32_and_u32_extremes() {
    let vals: Vec<i64> = vec![
        0,
        1,
        -1,
        i32::MAX as i64,
        i32::MIN as i64,
        123_456_789,
        -987_654_321,
        0x5555_5555,
        -0x2AAA_AAAB,
        u32::MAX as i64,
        0xF0F0_F0F0,
    ];
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for &x in &vals {
        for &y in &vals {
            // Unsigned values only with unsigned partners (ONNX's operands share a type).
            if (x > i32::MAX as i64) != (y > i32::MAX as i64) && (x < 0 || y < 0) {
                continue;
            }
            a.push(x);
            b.push(y);
        }
    }
    check("bitwise_and", 32, &a, &b, |x, y| x & y);
    check("bitwise_or", 32, &a, &b, |x, y| x | y);
    check("bitwise_xor", 32, &a, &b, |x, y| x ^ y);
}

#[test]
fn not_and_shifts_of_every_u8_and_i8() {
    let u: Vec<i64> = (0..256).collect();
    let got = run("bitwise_not", &[tensor(&u)], &[("bits", 8), ("signed", 0)]);
    for (&x, g) in u.iter().zip(got) {
        assert_eq!(g, (!(x as u8)) as f64, "~{x}u8");
    }
    let s: Vec<i64> = (-128..128).collect();
    let got = run("bitwise_not", &[tensor(&s)], &[("bits", 8), ("signed", 1)]);
    for (&x, g) in s.iter().zip(got) {
        assert_eq!(g, (!(x as i8)) as f64, "~{x}i8");
    }
    for sh in 0..8i64 {
        let k = vec![sh; 256];
        let left = run("bit_shift_left", &[tensor(&u), tensor(&k)], &[("bits", 8)]);
        let right = run("bit_shift_right", &[tensor(&u), tensor(&k)], &[]);
        for (i, &x) in u.iter().enumerate() {
            assert_eq!(left[i], ((x as u8) << sh) as f64, "{x} << {sh}");
            assert_eq!(right[i], ((x as u8) >> sh) as f64, "{x} >> {sh}");
        }
    }
}
