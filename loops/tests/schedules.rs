//! Schedule structure, checked against brute-force enumeration: unordered
//! 2D runs each (space, time) block exactly once with every step's blocks
//! distinct in both dimensions; the unimodular matrix is integer with
//! determinant ±1 and makes every leading distance positive; balanced
//! partitions hold at most mean + the heaviest index; invalid requests are
//! errors that list the dependence vectors.

use loops::partition::{balanced_bounds, loads, range_of};
use loops::unimodular::find_transform;
use loops::{
    plan, Choice, DepVec, Dist, IterSpace, Kind, LoopBuilder, LoopError, LoopSpec, Mode,
    PlanOptions, Sub,
};
use proptest::prelude::*;

/// The MF loop: W[u, :] and H[i, :] read and written.
fn mf_spec(users: usize, items: usize) -> LoopSpec {
    let mut lb = LoopBuilder::new(2, vec![vec![users, 4], vec![items, 4]]);
    lb.access(0, vec![Sub::idx(0), Sub::Any], Mode::ReadWrite);
    lb.access(1, vec![Sub::idx(1), Sub::Any], Mode::ReadWrite);
    lb.build().unwrap()
}

fn random_space() -> impl Strategy<Value = IterSpace> {
    (3usize..12, 3usize..12).prop_flat_map(|(u, i)| {
        prop::collection::btree_set((0..u, 0..i), 1..(u * i)).prop_map(move |pts| {
            IterSpace::sparse(
                &[u, i],
                pts.into_iter().map(|(a, b)| (vec![a, b], 1.0)).collect(),
            )
            .unwrap()
        })
    })
}

/// Determinant by Laplace expansion (independent of the code under test).
fn det(m: &[Vec<i64>]) -> i64 {
    if m.len() == 1 {
        return m[0][0];
    }
    (0..m.len())
        .map(|c| {
            let minor: Vec<Vec<i64>> = m[1..]
                .iter()
                .map(|r| {
                    r.iter()
                        .enumerate()
                        .filter(|(j, _)| *j != c)
                        .map(|(_, &x)| x)
                        .collect()
                })
                .collect();
            let sign = if c % 2 == 0 { 1 } else { -1 };
            sign * m[0][c] * det(&minor)
        })
        .sum()
}

#[test]
fn mf_loop_has_the_textbook_vectors_and_picks_unordered_2d() {
    let spec = mf_spec(6, 7);
    let sp = IterSpace::dense(&[6, 7]).unwrap();
    let p = plan(
        &spec,
        &sp,
        PlanOptions {
            workers: 3,
            choice: Choice::Auto,
            pipeline: true,
        },
    )
    .unwrap();
    let vs: Vec<String> = p.dvecs.iter().map(|v| v.to_string()).collect();
    assert_eq!(vs, ["(0, *)", "(*, 0)"]);
    assert!(matches!(p.kind, Kind::Unordered2D { .. }), "{:?}", p.kind);
    let one_d = plan(
        &spec,
        &sp,
        PlanOptions {
            workers: 3,
            choice: Choice::OneD,
            pipeline: true,
        },
    );
    match one_d {
        Err(LoopError::Schedule { why, .. }) => assert!(why.contains("(0, *)"), "{why}"),
        other => panic!("1D must be refused: {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn unordered_2d_runs_each_block_once_distinct_per_step(sp in random_space(), workers in 2usize..=4, pipeline in any::<bool>()) {
        let spec = mf_spec(sp.shape()[0], sp.shape()[1]);
        let p = plan(&spec, &sp, PlanOptions { workers, choice: Choice::Unordered2D, pipeline }).unwrap();
        let Kind::Unordered2D { space, time } = p.kind.clone() else { panic!("{:?}", p.kind) };
        let nt = if pipeline { 2 * workers } else { workers };
        let mut seen = vec![vec![0; nt]; workers];
        for t in &p.tasks {
            seen[t.cell[0]][t.cell[1]] += 1;
            prop_assert_eq!(t.cell[0], t.worker);
        }
        prop_assert!(seen.iter().flatten().all(|&c| c == 1), "{:?}", seen);
        for step in 0..p.steps() {
            let cells: Vec<&Vec<usize>> = p.tasks.iter().filter(|t| t.step == step).map(|t| &t.cell).collect();
            for (x, a) in cells.iter().enumerate() {
                for b in &cells[x + 1..] {
                    prop_assert!(a[0] != b[0] && a[1] != b[1], "step {}: {:?} and {:?}", step, a, b);
                }
            }
        }
        // Every point in exactly one task, the one of its blocks.
        let (bs, bt) = (p.bounds[space].clone().unwrap(), p.bounds[time].clone().unwrap());
        let mut count = vec![0; sp.len()];
        for t in &p.tasks {
            for &q in &t.points {
                count[q as usize] += 1;
                let pt = sp.point(q as usize);
                prop_assert_eq!(vec![range_of(&bs, pt[space]), range_of(&bt, pt[time])], t.cell.clone());
            }
        }
        prop_assert!(count.iter().all(|&c| c == 1));
    }

    #[test]
    fn balanced_partitions_hold_at_most_mean_plus_heaviest(hist in prop::collection::vec(0usize..50, 1..40), n in 1usize..9) {
        let b = balanced_bounds(&hist, n);
        prop_assert_eq!(b.len(), n + 1);
        prop_assert_eq!(b[0], 0);
        prop_assert_eq!(b[n], hist.len());
        prop_assert!(b.windows(2).all(|w| w[0] <= w[1]));
        let total: usize = hist.iter().sum();
        let heaviest = *hist.iter().max().unwrap();
        for l in loads(&hist, &b) {
            // max load ≤ total / n + heaviest, in integers.
            prop_assert!(l * n <= total + heaviest * n, "load {} of total {} in {} parts, heaviest {}", l, total, n, heaviest);
        }
    }

    #[test]
    fn unimodular_matrices_are_integer_unimodular_and_lead_positive(
        vs in prop::collection::vec(prop::collection::vec(-2i64..=2, 2..=2), 1..4)
    ) {
        let dvecs: Vec<DepVec> = vs
            .into_iter()
            .filter(|d| d.iter().find(|&&x| x != 0).is_some_and(|&x| x > 0))
            .map(|d| DepVec(d.into_iter().map(Dist::Exact).collect()))
            .collect();
        if let Some(t) = find_transform(2, &dvecs) {
            prop_assert_eq!(det(&t).abs(), 1, "{:?}", t);
            for v in &dvecs {
                let lead: i64 = v.0.iter().zip(&t[0]).map(|(c, h)| match c { Dist::Exact(e) => e * h, Dist::Any => 0 }).sum();
                prop_assert!(lead > 0, "{:?} · {} = {}", t[0], v, lead);
            }
        }
    }
}

#[test]
fn skewed_vectors_get_a_unimodular_transform() {
    let dvecs = vec![
        DepVec(vec![Dist::Exact(0), Dist::Exact(1)]),
        DepVec(vec![Dist::Exact(1), Dist::Exact(-1)]),
    ];
    let t = find_transform(2, &dvecs).expect("a skew exists");
    assert_eq!(det(&t).abs(), 1);
    assert_eq!(t[0], vec![2, 1]);
    let three = vec![
        DepVec(vec![Dist::Exact(1), Dist::Exact(-1), Dist::Exact(0)]),
        DepVec(vec![Dist::Exact(0), Dist::Exact(1), Dist::Exact(-1)]),
        DepVec(vec![Dist::Exact(0), Dist::Exact(0), Dist::Exact(1)]),
    ];
    let t3 = find_transform(3, &three).expect("3-D skew");
    assert_eq!(det(&t3).abs(), 1);
}

#[test]
fn bad_declarations_are_errors_not_panics() {
    let mut lb = LoopBuilder::new(2, vec![vec![3, 3]]);
    lb.access(0, vec![Sub::idx(5), Sub::Any], Mode::Read);
    assert!(matches!(lb.build(), Err(LoopError::Declaration(_))));
    let mut lb = LoopBuilder::new(2, vec![vec![3, 3]]);
    lb.access(0, vec![Sub::Const(9), Sub::Any], Mode::Read);
    assert!(matches!(lb.build(), Err(LoopError::Declaration(_))));
    assert!(IterSpace::sparse(&[2, 2], vec![(vec![0, 5], 1.0)]).is_err());
    assert!(IterSpace::sparse(&[2, 2], vec![(vec![0, 1], 1.0), (vec![0, 1], 2.0)]).is_err());
    let spec = mf_spec(3, 3);
    let p = plan(
        &spec,
        &IterSpace::dense(&[3, 3]).unwrap(),
        PlanOptions {
            workers: 2,
            choice: Choice::Auto,
            pipeline: true,
        },
    )
    .unwrap();
    // An undeclared access is an error from run, not a panic.
    let mut arrays = vec![
        loops::DistArray::zeros("W", &[3, 4]).unwrap(),
        loops::DistArray::zeros("H", &[3, 4]).unwrap(),
    ];
    let err = loops::run(
        &p,
        &spec,
        &IterSpace::dense(&[3, 3]).unwrap(),
        &mut arrays,
        &|ctx: &mut loops::Ctx| {
            let i = ctx.point()[1];
            ctx.set(loops::AccessId(0), &[(i + 1) % 3, 0], 1.0);
        },
        false,
    );
    assert!(
        matches!(err, Err(LoopError::UndeclaredAccess { .. })),
        "{err:?}"
    );
}

/// `randomize`: relabelling a dimension permutes its histogram and moves
/// array slices with it (checked element by element).
#[test]
fn randomize_permutes_space_and_arrays_consistently() {
    let pts = vec![(vec![0, 1], 1.0), (vec![0, 2], 2.0), (vec![2, 0], 3.0)];
    let mut sp = IterSpace::sparse(&[3, 3], pts).unwrap();
    let perm = loops::random_permutation(3, 9);
    let before = sp.histogram(0);
    sp.permute_dim(0, &perm).unwrap();
    let after = sp.histogram(0);
    for (i, &pi) in perm.iter().enumerate() {
        assert_eq!(after[pi], before[i]);
    }
    let mut a = loops::DistArray::zeros("A", &[3, 2]).unwrap();
    a.data = vec![0.0, 1.0, 10.0, 11.0, 20.0, 21.0];
    let orig = a.clone();
    a.permute_axis(0, &perm).unwrap();
    for (i, &pi) in perm.iter().enumerate() {
        for j in 0..2 {
            assert_eq!(
                a.data[a.flat(&[pi, j]).unwrap()],
                orig.data[orig.flat(&[i, j]).unwrap()]
            );
        }
    }
    assert!(a.permute_axis(0, &[0, 0, 1]).is_err());
    assert!(sp.permute_dim(1, &[0, 1]).is_err());
}

/// A body that panics is the run's `LoopError::Worker`, on the peer path
/// (2D, no barrier) and on the coordinator path (a written constant
/// subscript makes C a served array, which forces the barrier); no thread
/// is left waiting.
#[test]
fn a_panicking_body_is_an_error_not_a_hang() {
    let sp = IterSpace::dense(&[4, 4]).unwrap();
    let mut lb = LoopBuilder::new(2, vec![vec![4, 4], vec![4, 4], vec![3]]);
    let w = lb.access(0, vec![Sub::idx(0), Sub::Any], Mode::ReadWrite);
    lb.access(1, vec![Sub::idx(1), Sub::Any], Mode::ReadWrite);
    let spec_peer = lb.clone().build().unwrap();
    lb.access(2, vec![Sub::Const(1)], Mode::Write);
    let spec_hub = lb.build().unwrap();
    let mut barriers: Vec<bool> = vec![];
    for spec in [spec_peer, spec_hub] {
        let p = plan(
            &spec,
            &sp,
            PlanOptions {
                workers: 3,
                choice: Choice::Auto,
                pipeline: true,
            },
        )
        .unwrap();
        let mut arrays = vec![
            loops::DistArray::zeros("W", &[4, 4]).unwrap(),
            loops::DistArray::zeros("H", &[4, 4]).unwrap(),
            loops::DistArray::zeros("C", &[3]).unwrap(),
        ];
        let body = |ctx: &mut loops::Ctx| {
            let (i, j) = (ctx.point()[0], ctx.point()[1]);
            assert!(i + j != 5, "boom");
            let v = ctx.get(w, &[i, 0]);
            ctx.set(w, &[i, 0], v + 1.0);
        };
        let r = loops::run(&p, &spec, &sp, &mut arrays, &body, false);
        assert!(
            matches!(r, Err(LoopError::Worker { .. })),
            "{:?} barrier={}: {r:?}",
            p.kind,
            p.barrier
        );
        barriers.push(p.barrier);
    }
    assert_eq!(barriers, [false, true]);
}
