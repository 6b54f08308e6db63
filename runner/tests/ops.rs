//! Every op of the shipped spec library (`tdl::Library::shipped()`, whatever
//! it holds) on random small shapes: the CPU kernels — library kernel where
//! registered, compiled evaluator otherwise, and the compiled evaluator alone
//! — equal the reference interpreter within 1e-4 relative (f32 vs f64).

mod common;

use rand::rngs::StdRng;
use rand::SeedableRng;
use runner::ops::LIBRARY_KERNELS;
use runner::{Provider, Registry};

/// Random instances per op (override with `TOFU_OPS_CASES` for a soak run).
fn cases() -> usize {
    std::env::var("TOFU_OPS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

#[test]
fn every_shipped_op_matches_the_interpreter() {
    let lib = tdl::Library::shipped().expect("the shipped specs load");
    assert!(!lib.is_empty());
    let with_library = Registry::default();
    let compiled_only = Registry::empty();
    let mut failures = Vec::new();
    let mut report = Vec::new();
    for spec in lib.ops() {
        let seed = spec
            .name
            .bytes()
            .fold(0x7f00u64, |h, c| h.wrapping_mul(31).wrapping_add(c as u64));
        let mut rng = StdRng::seed_from_u64(seed);
        let mut worst: f64 = 0.0;
        let mut providers = Vec::new();
        for _ in 0..cases() {
            let case = match common::sample(spec, &mut rng, 5, 4096) {
                Ok(c) => c,
                Err(e) => {
                    failures.push(e);
                    break;
                }
            };
            for reg in [&with_library, &compiled_only] {
                match common::run(reg, spec, &case) {
                    Ok((k, got)) => {
                        providers.push(k.provider());
                        match common::compare(&spec.name, &got, &case.reference, 1e-4) {
                            Ok(w) => worst = worst.max(w),
                            Err(e) => failures.push(format!(
                                "{e} [{:?}, shapes {:?}, attrs {:?}]",
                                k.provider(),
                                case.shapes,
                                case.attrs
                            )),
                        }
                    }
                    Err(e) => {
                        failures.push(format!("`{}`: {e} (shapes {:?})", spec.name, case.shapes))
                    }
                }
            }
        }
        let lib_runs = providers
            .iter()
            .filter(|p| matches!(p, Provider::Library(_)))
            .count();
        if LIBRARY_KERNELS.iter().any(|k| k.op == spec.name) {
            // Random shapes may be ones a library kernel declines (e.g. a
            // gradient's output size that no forward produces); consistent
            // instances must use it, which kernels_large.rs checks.
            report.push(format!(
                "{:<28} library kernel on {lib_runs}/{} runs",
                spec.name,
                providers.len() / 2
            ));
        }
        report.push(format!("{:<28} max rel err {worst:.2e}", spec.name));
    }
    println!("{}", report.join("\n"));
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
