//! egg's limits are counts, and a limit is a result (issue 28): the
//! strategies of every shipped op are identical run after run and on a
//! machine ten times slower; an analysis whose egg runner hit a limit says
//! which, and only rejects what the limit left imprecise.

use interval::{analyse, analyse_with, Canonicaliser, EggLimits, OpStrategies, Saturation};
use tdl::{Library, OpSpec};

/// Everything the analysis found, as text: strategies, rejections, the
/// elementwise flag and egg's stop (or the error).
fn fingerprint(r: &Result<OpStrategies, interval::AnalysisError>) -> String {
    match r {
        Ok(s) => format!(
            "{:?}\n{:?}\n{}\n{:?}",
            s.strategies, s.rejected, s.elementwise, s.saturation
        ),
        Err(e) => format!("error: {e}"),
    }
}

/// Every shipped op at ellipsis rank 2 (rank 0 for ops without one).
fn specs() -> Vec<OpSpec> {
    let lib = Library::shipped().expect("shipped library loads");
    lib.ops().map(|op| op.expand_ellipsis(2)).collect()
}

#[test]
fn strategies_do_not_depend_on_the_machines_speed() {
    let specs = specs();
    let mut limited = 0;
    for spec in &specs {
        let first = fingerprint(&analyse(spec));
        assert_eq!(first, fingerprint(&analyse(spec)), "`{}` twice", spec.name);
        let slow = analyse_with(spec, Canonicaliser::new().slowed_down(10));
        assert_eq!(first, fingerprint(&slow), "`{}` 10× slower", spec.name);
        limited += usize::from(slow.is_ok_and(|s| s.saturation.is_limit()));
    }
    eprintln!(
        "{} ops; egg stopped at a count limit in {limited}",
        specs.len()
    );
}

/// conv1d's input index `o·stride + dx·dilation − pad` needs several
/// rewrites to reach its affine form.
fn conv1d() -> OpSpec {
    let lib = Library::shipped().expect("shipped library loads");
    lib.get("conv1d")
        .expect("shipped conv1d")
        .expand_ellipsis(0)
}

#[test]
fn a_tiny_limit_is_reported_and_only_rejects() {
    let spec = conv1d();
    let full = analyse(&spec).unwrap();
    assert_eq!(full.saturation, Saturation::Saturated);
    // Far slower than any wall-clock budget would allow: the same result.
    let crawl = analyse_with(&spec, Canonicaliser::new().slowed_down(100));
    assert_eq!(fingerprint(&Ok(full.clone())), fingerprint(&crawl));
    for (limits, reason) in [
        (
            EggLimits {
                iterations: 1,
                ..EggLimits::DEFAULT
            },
            Saturation::IterationLimit,
        ),
        (
            EggLimits {
                nodes: 1,
                ..EggLimits::DEFAULT
            },
            Saturation::NodeLimit,
        ),
    ] {
        let run = || analyse_with(&spec, Canonicaliser::with_limits(limits));
        let cut = run().unwrap();
        assert_eq!(cut.saturation, reason, "{limits:?}");
        // The same on every run and on a slower machine.
        assert_eq!(fingerprint(&Ok(cut.clone())), fingerprint(&run()));
        let slow = analyse_with(&spec, Canonicaliser::with_limits(limits).slowed_down(10));
        assert_eq!(fingerprint(&Ok(cut.clone())), fingerprint(&slow));
        // What a limit leaves imprecise is rejected, never reported wrong:
        // every strategy found under it is one of the saturated analysis's.
        for s in &cut.strategies {
            assert!(full.strategies.contains(s), "{limits:?}: {}", s.name);
        }
        assert!(cut.strategies.len() <= full.strategies.len());
    }
}
