//! Shared helpers of the loops tests: random small loops, the serial
//! oracle that interprets them on plain vectors, and the MovieLens path.

#![allow(dead_code)]

use std::path::PathBuf;

use loops::{Ctx, DistArray, IterSpace, LoopBuilder, LoopSpec, Mode, Sub};
use proptest::prelude::*;

/// A random loop: iteration space shape, array shapes, accesses, ordered.
#[derive(Debug, Clone)]
pub struct RandomLoop {
    pub space: Vec<usize>,
    pub arrays: Vec<Vec<usize>>,
    pub accesses: Vec<(usize, Vec<Sub>, Mode)>,
    pub ordered: bool,
}

fn sub_strategy(ndim: usize, extent: usize) -> impl Strategy<Value = Sub> {
    prop_oneof![
        4 => (0..ndim, -1i64..=1).prop_map(|(dim, offset)| Sub::Index { dim, offset }),
        1 => (0..extent).prop_map(Sub::Const),
        1 => Just(Sub::Any),
    ]
}

/// Random loops of rank 1–3 (extents 2–4) over 1–3 arrays of rank 1–2.
pub fn random_loop() -> impl Strategy<Value = RandomLoop> {
    (
        prop::collection::vec(2usize..=4, 1..=3),
        prop::collection::vec(prop::collection::vec(2usize..=5, 1..=2), 1..=3),
        any::<bool>(),
    )
        .prop_flat_map(|(space, arrays, ordered)| {
            let ndim = space.len();
            let acc = (0..arrays.len()).prop_flat_map({
                let arrays = arrays.clone();
                move |a| {
                    let subs: Vec<_> = arrays[a].iter().map(|&e| sub_strategy(ndim, e)).collect();
                    (
                        Just(a),
                        subs,
                        prop_oneof![Just(Mode::Read), Just(Mode::Write), Just(Mode::ReadWrite)],
                    )
                }
            });
            (
                Just(space),
                Just(arrays),
                prop::collection::vec(acc, 1..=4),
                Just(ordered),
            )
        })
        .prop_map(|(space, arrays, accesses, ordered)| RandomLoop {
            space,
            arrays,
            accesses,
            ordered,
        })
}

impl RandomLoop {
    pub fn spec(&self) -> LoopSpec {
        let mut lb = LoopBuilder::new(self.space.len(), self.arrays.clone());
        for (a, subs, m) in &self.accesses {
            lb.access(*a, subs.clone(), *m);
        }
        lb.ordered(self.ordered);
        lb.build().expect("random loops are well-formed")
    }

    pub fn iter_space(&self) -> IterSpace {
        IterSpace::dense(&self.space).unwrap()
    }

    /// Initial arrays: element k of array a holds a + k / 8.
    pub fn init(&self) -> Vec<DistArray> {
        self.arrays
            .iter()
            .enumerate()
            .map(|(a, s)| {
                let mut d = DistArray::zeros(&format!("A{a}"), s).unwrap();
                for (k, x) in d.data.iter_mut().enumerate() {
                    *x = a as f32 + k as f32 / 8.0;
                }
                d
            })
            .collect()
    }

    /// The concrete index access `k` uses at `point`, or `None` when a
    /// `loop index ± c` subscript falls outside the array.
    pub fn index(&self, k: usize, point: &[usize]) -> Option<Vec<usize>> {
        let (a, subs, _) = &self.accesses[k];
        let mut idx = vec![];
        for (pos, s) in subs.iter().enumerate() {
            let ext = self.arrays[*a][pos];
            let i = match *s {
                Sub::Index { dim, offset } => point[dim] as i64 + offset,
                Sub::Const(c) => c as i64,
                Sub::Any => (point.iter().fold(7 * k + pos, |h, &x| h * 31 + x) % ext) as i64,
            };
            if i < 0 || i as usize >= ext {
                return None;
            }
            idx.push(i as usize);
        }
        Some(idx)
    }

    /// The body through the loop API: reads fold into `acc`, writes store
    /// `acc + k + 1 + stamp(point)` (so the order of writers shows).
    pub fn body(&self) -> impl Fn(&mut Ctx) + Sync + '_ {
        move |ctx: &mut Ctx| {
            let point = ctx.point().to_vec();
            let mut acc = 1.0f32;
            for k in 0..self.accesses.len() {
                let Some(idx) = self.index(k, &point) else {
                    continue;
                };
                let m = self.accesses[k].2;
                if m != Mode::Write {
                    acc = acc * 0.5 + ctx.get(loops::AccessId(k), &idx);
                }
                if m != Mode::Read {
                    ctx.set(
                        loops::AccessId(k),
                        &idx,
                        acc + k as f32 + 1.0 + stamp(&point),
                    );
                }
            }
        }
    }

    /// The oracle: the same body on plain vectors, points in lexicographic
    /// order, no loop machinery.
    pub fn serial_oracle(&self) -> Vec<Vec<f32>> {
        let mut arrs: Vec<Vec<f32>> = self.init().into_iter().map(|a| a.data).collect();
        let sp = self.iter_space();
        for p in 0..sp.len() {
            let point = sp.point(p).to_vec();
            let mut acc = 1.0f32;
            for k in 0..self.accesses.len() {
                let Some(idx) = self.index(k, &point) else {
                    continue;
                };
                let (a, _, m) = &self.accesses[k];
                let f = idx
                    .iter()
                    .zip(&self.arrays[*a])
                    .fold(0, |f, (&i, &n)| f * n + i);
                if *m != Mode::Write {
                    acc = acc * 0.5 + arrs[*a][f];
                }
                if *m != Mode::Read {
                    arrs[*a][f] = acc + k as f32 + 1.0 + stamp(&point);
                }
            }
        }
        arrs
    }
}

/// A per-iteration value that makes each writer's value distinct.
pub fn stamp(point: &[usize]) -> f32 {
    point.iter().fold(0usize, |h, &x| h * 5 + x + 1) as f32 / 64.0
}

/// The MovieLens file, or `None` (after printing SKIPPED) when it is
/// missing locally. Panics under CI when it is missing.
pub fn movielens() -> Option<PathBuf> {
    let p = datasets::movielens::default_path();
    if p.is_file() {
        return Some(p);
    }
    let msg = format!("MovieLens-100K not found at {}: run `bash scripts/fetch-movielens.sh` (or set TOFU_DATA_CACHE)", p.display());
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
}
