//! Elementary functions in f32 as straight-line arithmetic (polynomials,
//! bit operations, selects: no calls, no branches that block vectorisation),
//! for the library kernels whose time is these functions: `erf`,
//! `erf_grad`, `softmax`. Each is within a few 1e-7 relative of the f64
//! function the interpreter uses (the tests compare within 1e-5).

/// erf(x) in f32: `x·P(x²) / Q(x²)` (Eigen's `generic_fast_erf_float`,
/// the one PyTorch's CPU kernels vectorise) on x clamped to ±4, where erf
/// is 1 to within f32's precision; within 5e-7 of f64 libm's erf over all
/// f32 inputs, NaN to NaN.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    const ALPHA: [f32; 7] = [
        -2.72614225801306e-10_f64 as f32,
        2.77068142495902e-08_f64 as f32,
        -2.10102402082508e-06_f64 as f32,
        -5.69250639462346e-05_f64 as f32,
        -7.34990630326855e-04_f64 as f32,
        -2.95459980854025e-03_f64 as f32,
        -1.60960333262415e-02_f64 as f32,
    ];
    const BETA: [f32; 5] = [
        -1.45660718464996e-05_f64 as f32,
        -2.13374055278905e-04_f64 as f32,
        -1.68282697438203e-03_f64 as f32,
        -7.37332916720468e-03_f64 as f32,
        -1.42647390514189e-02_f64 as f32,
    ];
    // `clamp` keeps a NaN a NaN.
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let p = ALPHA[1..].iter().fold(ALPHA[0], |p, &a| p * x2 + a) * x;
    let q = BETA[1..].iter().fold(BETA[0], |q, &c| q * x2 + c);
    p / q
}

/// e^x for x ≤ 0 in f32 (Cephes' `expf`: x = k·ln 2 + r, a degree-7
/// polynomial in r, times 2^k from the exponent bits), within 1e-7 relative
/// of f64 libm's exp over [−87, 0]; 0 below −87 (where e^x is below f32's
/// normal range) and for −∞, NaN to NaN. Positive x are not in its range.
#[inline(always)]
pub fn exp_nonpositive(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 · 2^23: adding it rounds to an integer, kept in the low mantissa bits.
    const SHIFTER: f32 = 12_582_912.0;
    const P: [f32; 6] = [
        1.987_569_1e-4,
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5, // Cephes: 5.0000001201e-1, the same f32
    ];
    // A comparison, not `max`, so NaN stays NaN.
    let xc = if x < -87.0 { -87.0 } else { x };
    let t = xc * std::f32::consts::LOG2_E + SHIFTER;
    let k = t - SHIFTER;
    let ki = (t.to_bits() as i32).wrapping_sub(SHIFTER.to_bits() as i32);
    let r = xc - k * LN2_HI - k * LN2_LO;
    let p = P[1..].iter().fold(P[0], |p, &c| p * r + c);
    let y = p * r * r + r + 1.0;
    let scale = f32::from_bits(((ki + 127) << 23) as u32);
    if x < -87.0 {
        0.0
    } else {
        y * scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 200 001 points of [lo, hi], both ends included.
    fn grid(lo: f32, hi: f32) -> impl Iterator<Item = f32> {
        (0..=200_000).map(move |i| lo + (hi - lo) * (i as f32 / 200_000.0))
    }

    #[test]
    fn exp_is_within_2e7_of_f64_libm_on_its_range() {
        for x in grid(-87.0, 0.0).chain([-1e-30, -f32::MIN_POSITIVE, -0.0]) {
            let want = (x as f64).exp();
            let err = (exp_nonpositive(x) as f64 - want).abs() / want;
            assert!(err < 2e-7, "exp({x}): {} vs {want}", exp_nonpositive(x));
        }
        assert_eq!(exp_nonpositive(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_nonpositive(-100.0), 0.0);
        assert!(exp_nonpositive(f32::NAN).is_nan());
    }

    #[test]
    fn erf_is_within_6e7_of_f64_libm() {
        for x in grid(-6.0, 6.0).chain([1e-30, -1e-20, 1e-6, 30.0, f32::INFINITY]) {
            let want = libm_erf(x as f64);
            let err = (erf(x) as f64 - want).abs() / want.abs().max(1e-30);
            assert!(err < 6e-7, "erf({x}): {} vs {want}", erf(x));
        }
        assert!(erf(f32::NAN).is_nan());
    }

    fn libm_erf(x: f64) -> f64 {
        tdl::interp::erf(x)
    }
}
