//! Soundness by brute force on random small loops: (1) every pair of
//! conflicting iterations is covered by a computed dependence vector;
//! (2) in an instrumented run, tasks that may run at once (not ordered by
//! worker order, block hand-off or step barrier) never touch the same
//! element with a write (write–write only exempt in unordered loops, as
//! Alg. 2 skips those pairs); (3) ordered loops give bit-identical results to
//! the serial oracle under every schedule that applies.

mod common;

use std::collections::HashMap;

use common::{random_loop, RandomLoop};
use loops::{dependence_vectors, plan, plan_all, run, Choice, Dist, Mode, PlanOptions, Sub};
use proptest::prelude::*;

/// Elements (array, per-position candidate sets) reference k may touch.
fn ref_sets(l: &RandomLoop, k: usize, p: &[usize]) -> Vec<Vec<usize>> {
    let (a, subs, _) = &l.accesses[k];
    subs.iter()
        .enumerate()
        .map(|(pos, s)| {
            let ext = l.arrays[*a][pos];
            match *s {
                Sub::Index { dim, offset } => {
                    let i = p[dim] as i64 + offset;
                    if i >= 0 && (i as usize) < ext {
                        vec![i as usize]
                    } else {
                        vec![]
                    }
                }
                Sub::Const(c) => vec![c],
                Sub::Any => (0..ext).collect(),
            }
        })
        .collect()
}

fn lex_positive(d: &[i64]) -> bool {
    d.iter().find(|&&x| x != 0).is_some_and(|&x| x > 0)
}

fn check_coverage(l: &RandomLoop) -> Result<(), TestCaseError> {
    let spec = l.spec();
    let dvecs = dependence_vectors(&spec);
    for v in &dvecs {
        let first = v.0.iter().find(|c| **c != Dist::Exact(0));
        prop_assert!(
            matches!(first, Some(Dist::Any) | Some(Dist::Exact(1..))),
            "{v} is not lexicographically positive"
        );
    }
    let sp = l.iter_space();
    // (ref, is_write) pairs.
    let refs: Vec<(usize, bool)> = l
        .accesses
        .iter()
        .enumerate()
        .flat_map(|(k, (_, _, m))| {
            let mut r = vec![];
            if *m != Mode::Write {
                r.push((k, false));
            }
            if *m != Mode::Read {
                r.push((k, true));
            }
            r
        })
        .collect();
    for pi in 0..sp.len() {
        for qi in 0..sp.len() {
            let (p, q) = (sp.point(pi), sp.point(qi));
            let d: Vec<i64> = q
                .iter()
                .zip(p)
                .map(|(&a, &b)| a as i64 - b as i64)
                .collect();
            if !lex_positive(&d) {
                continue;
            }
            for &(ka, wa) in &refs {
                for &(kb, wb) in &refs {
                    if l.accesses[ka].0 != l.accesses[kb].0
                        || !(wa || wb)
                        || (!l.ordered && wa && wb)
                    {
                        continue;
                    }
                    let (sa, sb) = (ref_sets(l, ka, p), ref_sets(l, kb, q));
                    let meet = sa
                        .iter()
                        .zip(&sb)
                        .all(|(x, y)| x.iter().any(|i| y.contains(i)));
                    if meet {
                        prop_assert!(
                            dvecs.iter().any(|v| v.covers(&d)),
                            "iterations {p:?} and {q:?} conflict (refs {ka},{kb}) but no vector in {:?} covers {d:?}",
                            dvecs.iter().map(|v| v.to_string()).collect::<Vec<_>>()
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

const CHOICES: [Choice; 5] = [
    Choice::Auto,
    Choice::OneD,
    Choice::TwoD,
    Choice::Unordered2D,
    Choice::Unimodular,
];

fn check_runs(l: &RandomLoop, workers: usize) -> Result<(), TestCaseError> {
    let spec = l.spec();
    let sp = l.iter_space();
    let body = l.body();
    let oracle = l.serial_oracle();
    let mut all = vec![];
    for choice in CHOICES {
        for pipeline in [true, false] {
            let opts = PlanOptions {
                workers,
                choice,
                pipeline,
            };
            for p in plan_all(&spec, &sp, opts).unwrap_or_default() {
                all.push((choice, p));
            }
        }
    }
    for (choice, p) in all {
        let mut arrays = l.init();
        let out = run(&p, &spec, &sp, &mut arrays, &body, true)
            .map_err(|e| TestCaseError::fail(format!("{choice:?}: {e}")))?;
        // Happens-before between tasks (all edges point forward in plan order).
        let n = p.tasks.len();
        let mut reach = vec![vec![false; n]; n];
        for t in 0..n {
            for s in 0..t {
                let (a, b) = (&p.tasks[s], &p.tasks[t]);
                let edge = a.worker == b.worker
                    || a.blocks.iter().any(|x| b.blocks.contains(x))
                    || (p.barrier && a.step < b.step);
                if edge {
                    reach[t][s] = true;
                    let prev = reach[s].clone();
                    for (r, &x) in reach[t].iter_mut().zip(&prev) {
                        *r |= x;
                    }
                }
            }
        }
        let touched = out.touched.unwrap_or_default();
        let sets: Vec<HashMap<(usize, usize), (bool, bool)>> = touched
            .iter()
            .map(|ts| {
                let mut m: HashMap<(usize, usize), (bool, bool)> = HashMap::new();
                for &(a, f, w) in ts {
                    let e = m.entry((a, f)).or_default();
                    if w {
                        e.1 = true
                    } else {
                        e.0 = true
                    }
                }
                m
            })
            .collect();
        for t in 0..sets.len() {
            for s in 0..t {
                if reach[t][s] {
                    continue;
                }
                for (el, &(r1, w1)) in &sets[s] {
                    if let Some(&(r2, w2)) = sets[t].get(el) {
                        let write_only_both = !r1 && !r2;
                        let conflict = (w1 || w2) && !(w1 && w2 && write_only_both && !l.ordered);
                        prop_assert!(
                            !conflict,
                            "{:?}: concurrent tasks {s} and {t} both touch element {el:?}",
                            p.kind
                        );
                    }
                }
            }
        }
        if l.ordered {
            for (a, arr) in arrays.iter().enumerate() {
                prop_assert_eq!(
                    &arr.data,
                    &oracle[a],
                    "{:?} ({:?}) differs from the serial loop on array {}",
                    p.kind,
                    choice,
                    a
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_conflicting_pair_is_covered(l in random_loop()) {
        check_coverage(&l)?;
    }

    #[test]
    fn concurrent_tasks_never_conflict_and_ordered_is_serial(l in random_loop(), workers in 2usize..=4) {
        check_runs(&l, workers)?;
    }
}

/// Skewed stencil `A[i,j] = f(A[i-1,j+1], A[i,j-1])`: dependence vectors
/// (0,1) and (1,-1); no 1D or 2D schedule applies, the unimodular one does,
/// and the ordered result equals the serial loop bit for bit.
#[test]
fn skewed_stencil_runs_unimodular_and_matches_serial() {
    let l = RandomLoop {
        space: vec![5, 6],
        arrays: vec![vec![5, 6]],
        accesses: vec![
            (
                0,
                vec![
                    Sub::Index { dim: 0, offset: -1 },
                    Sub::Index { dim: 1, offset: 1 },
                ],
                Mode::Read,
            ),
            (
                0,
                vec![
                    Sub::Index { dim: 0, offset: 0 },
                    Sub::Index { dim: 1, offset: -1 },
                ],
                Mode::Read,
            ),
            (0, vec![Sub::idx(0), Sub::idx(1)], Mode::Write),
        ],
        ordered: true,
    };
    let spec = l.spec();
    let p = plan(
        &spec,
        &l.iter_space(),
        PlanOptions {
            workers: 3,
            choice: Choice::Auto,
            pipeline: true,
        },
    )
    .unwrap();
    assert!(
        matches!(p.kind, loops::Kind::Unimodular { .. }),
        "{:?}",
        p.kind
    );
    assert!(p.steps() > 1);
    check_runs(&l, 3).unwrap();
}

/// `B[i0, i1] = f(B[i0, i1], B[i0, i1 - 1])` over a 3-D space: vectors (0, 1, *) and
/// (0, 0, *). The wavefront with space i0 and time i2 would read B before
/// its last write; it must be refused, and every schedule that is accepted
/// must match the serial loop.
#[test]
fn ordered_wavefront_refuses_a_time_dim_after_a_carried_distance() {
    let l = RandomLoop {
        space: vec![2, 3, 4],
        arrays: vec![vec![2, 3]],
        accesses: vec![
            (
                0,
                vec![Sub::idx(0), Sub::Index { dim: 1, offset: -1 }],
                Mode::Read,
            ),
            (0, vec![Sub::idx(0), Sub::idx(1)], Mode::ReadWrite),
        ],
        ordered: true,
    };
    let spec = l.spec();
    let vs: Vec<String> = dependence_vectors(&spec)
        .iter()
        .map(|v| v.to_string())
        .collect();
    assert_eq!(vs, ["(0, 0, *)", "(0, 1, *)"]);
    for workers in 2..=4 {
        for p in plan_all(
            &spec,
            &l.iter_space(),
            PlanOptions {
                workers,
                choice: Choice::TwoD,
                pipeline: true,
            },
        )
        .unwrap()
        {
            assert!(
                !matches!(p.kind, loops::Kind::Ordered2D { space: 0, time: 2 }),
                "{:?}",
                p.kind
            );
        }
        check_runs(&l, workers).unwrap();
    }
}
