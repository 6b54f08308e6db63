//! Schedules (thesis §5.3.3, Orion §4): from the dependence vectors to a
//! plan of tasks (one block of iterations for one worker at one step).
//!
//! Takes a [`LoopSpec`], its [`IterSpace`] and the worker count; gives a
//! [`Plan`]: the schedule kind, where each DistArray lives (partitioned along
//! a loop dimension, replicated read-only, or served as per-task copies),
//! the balanced bounds, the tasks and the elements it communicates per pass.
//! Candidates: 1D (a dimension with distance 0 in every vector), 2D with a
//! space and a time dimension — ordered as a wavefront (step = space block +
//! time block) or unordered as rotations (step s: worker i takes time block
//! (i + s) mod T; pipelined with T = 2M, worker i takes (2i + s) mod 2M, so
//! the block it needs next is idle one step early, Figure 5.13) — and a
//! unimodular transformation ([`crate::unimodular`]) when neither applies;
//! `auto` keeps the candidate that communicates the fewest elements. Keeps
//! true: iterations of tasks that may run at once never conflict (checked by
//! an instrumented run in `tests/soundness.rs`).

use std::fmt;

use crate::array::IterSpace;
use crate::depend::{dependence_vectors, DepVec};
use crate::error::LoopError;
use crate::partition::{balanced_bounds, range_of};
use crate::spec::{LoopSpec, Sub};
use crate::unimodular::find_transform;

/// Which schedule a plan follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// One worker, lexicographic order.
    Serial,
    /// All blocks of `dim` at once (thesis §5.3.3 "1D").
    OneD {
        /// The partitioned dimension.
        dim: usize,
    },
    /// Wavefront over (space block + time block): serial-equivalent.
    Ordered2D {
        /// Space dimension (one range per worker).
        space: usize,
        /// Time dimension.
        time: usize,
    },
    /// Rotations: every step's blocks distinct in both dimensions.
    Unordered2D {
        /// Space dimension (one range per worker).
        space: usize,
        /// Time dimension (time blocks move between workers).
        time: usize,
    },
    /// Hyperplane steps `t = row₀ · p` of an integer matrix with
    /// determinant ±1; iterations of one step are independent.
    Unimodular {
        /// The matrix, row-major, `ndim × ndim`.
        matrix: Vec<Vec<i64>>,
    },
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Serial => write!(f, "serial"),
            Kind::OneD { .. } => write!(f, "1d"),
            Kind::Ordered2D { .. } => write!(f, "2d"),
            Kind::Unordered2D { .. } => write!(f, "unordered-2d"),
            Kind::Unimodular { .. } => write!(f, "unimodular"),
        }
    }
}

/// What the caller asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The valid candidate communicating the fewest elements.
    Auto,
    /// One worker.
    Serial,
    /// 1D.
    OneD,
    /// Ordered 2D (wavefront).
    TwoD,
    /// Unordered 2D (rotation).
    Unordered2D,
    /// Unimodular transformation.
    Unimodular,
}

/// Where a DistArray lives during a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// No access names it.
    Unused,
    /// Range-partitioned at position `pos` like loop dimension `dim`.
    Partitioned {
        /// Array position.
        pos: usize,
        /// Loop dimension whose bounds it follows.
        dim: usize,
    },
    /// Never written by the loop: one shared read-only copy.
    Replicated,
    /// Written but not aligned: each task gets a copy; its writes are merged
    /// when its step ends (steps then run one after another).
    Served,
}

/// One block of iterations run by one worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The worker.
    pub worker: usize,
    /// The step (tasks of one step may run at once).
    pub step: usize,
    /// The iterations, as point numbers of the space, in lexicographic order.
    pub points: Vec<u32>,
    /// The array blocks it holds: (array, block).
    pub blocks: Vec<(usize, usize)>,
    /// Its block of the iteration space: `[i]` (1D), `[space, time]` (2D),
    /// `[]` (serial, unimodular).
    pub cell: Vec<usize>,
}

/// Options of [`plan`].
#[derive(Debug, Clone, Copy)]
pub struct PlanOptions {
    /// Workers (≥ 1).
    pub workers: usize,
    /// Schedule asked for.
    pub choice: Choice,
    /// Unordered 2D with two time blocks per worker (Figure 5.13).
    pub pipeline: bool,
}

/// A schedule with its tasks.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The schedule.
    pub kind: Kind,
    /// Workers.
    pub workers: usize,
    /// The loop's dependence vectors.
    pub dvecs: Vec<DepVec>,
    /// Per array.
    pub placements: Vec<Placement>,
    /// Per loop dimension: balanced bounds when it is partitioned.
    pub bounds: Vec<Option<Vec<usize>>>,
    /// Tasks sorted by (step, worker).
    pub tasks: Vec<Task>,
    /// True when a step may start only after the previous one finished.
    pub barrier: bool,
    /// DistArray elements sent between workers per pass (block moves,
    /// served copies out and back, replicated copies).
    pub comm_elements: u64,
}

impl Plan {
    /// Task ids in order of use, per (array, block).
    pub fn block_users(&self) -> Vec<Vec<Vec<usize>>> {
        let mut users: Vec<Vec<Vec<usize>>> = vec![vec![]; self.placements.len()];
        for (t, task) in self.tasks.iter().enumerate() {
            for &(a, b) in &task.blocks {
                if users[a].len() <= b {
                    users[a].resize(b + 1, vec![]);
                }
                users[a][b].push(t);
            }
        }
        users
    }

    /// Number of steps.
    pub fn steps(&self) -> usize {
        self.tasks.iter().map(|t| t.step + 1).max().unwrap_or(0)
    }
}

/// The plan for `spec` over `space` (see the module docs): of
/// [`plan_all`]'s candidates, the first that communicates the fewest
/// elements. Errors as [`plan_all`].
pub fn plan(spec: &LoopSpec, space: &IterSpace, opts: PlanOptions) -> Result<Plan, LoopError> {
    let mut best: Option<Plan> = None;
    for p in plan_all(spec, space, opts)? {
        if best
            .as_ref()
            .map(|b| p.comm_elements < b.comm_elements)
            .unwrap_or(true)
        {
            best = Some(p);
        }
    }
    best.ok_or_else(|| LoopError::Declaration("no candidate schedule".into()))
}

/// Every candidate plan the request allows, in order (1D by dimension, then
/// 2D by (space, time), or the unimodular one, or serial). Errors when the
/// space's rank differs from the spec's, or the requested schedule does not
/// apply (the message lists the dependence vectors).
pub fn plan_all(
    spec: &LoopSpec,
    space: &IterSpace,
    opts: PlanOptions,
) -> Result<Vec<Plan>, LoopError> {
    if space.ndim() != spec.ndim {
        return Err(LoopError::Declaration(format!(
            "the loop is declared over rank {} but the iteration space has rank {}",
            spec.ndim,
            space.ndim()
        )));
    }
    let dvecs = dependence_vectors(spec);
    let m = opts.workers.max(1);
    let n = spec.ndim;
    let one_d: Vec<usize> = (0..n)
        .filter(|&d| dvecs.iter().all(|v| v.is_zero(d)))
        .collect();
    let pairs = || (0..n).flat_map(|s| (0..n).filter(move |&t| t != s).map(move |t| (s, t)));
    let unordered_ok = |s: usize, t: usize| dvecs.iter().all(|v| v.is_zero(s) || v.is_zero(t));
    let ordered_ok = |s: usize, t: usize| {
        dvecs.iter().all(|v| {
            (v.is_zero(s) && !v.may_be_negative(t)) || (v.is_zero(t) && !v.may_be_negative(s))
        })
    };
    let wave = |s, t| {
        if spec.ordered {
            ordered_ok(s, t)
        } else {
            unordered_ok(s, t)
        }
    };
    let mut kinds: Vec<Kind> = vec![];
    let want = if m == 1 { Choice::Serial } else { opts.choice };
    match want {
        Choice::Serial => kinds.push(Kind::Serial),
        Choice::OneD => kinds.extend(one_d.iter().map(|&dim| Kind::OneD { dim })),
        Choice::TwoD => kinds.extend(
            pairs()
                .filter(|&(s, t)| wave(s, t))
                .map(|(space, time)| Kind::Ordered2D { space, time }),
        ),
        Choice::Unordered2D if !spec.ordered => kinds.extend(
            pairs()
                .filter(|&(s, t)| unordered_ok(s, t))
                .map(|(space, time)| Kind::Unordered2D { space, time }),
        ),
        Choice::Unordered2D => {}
        Choice::Unimodular => {
            kinds.extend(find_transform(n, &dvecs).map(|matrix| Kind::Unimodular { matrix }))
        }
        Choice::Auto => {
            kinds.extend(one_d.iter().map(|&dim| Kind::OneD { dim }));
            for (space, time) in pairs() {
                if spec.ordered && ordered_ok(space, time) {
                    kinds.push(Kind::Ordered2D { space, time });
                } else if !spec.ordered && unordered_ok(space, time) {
                    kinds.push(Kind::Unordered2D { space, time });
                }
            }
            if kinds.is_empty() {
                kinds.extend(find_transform(n, &dvecs).map(|matrix| Kind::Unimodular { matrix }));
            }
            if kinds.is_empty() {
                kinds.push(Kind::Serial);
            }
        }
    }
    if kinds.is_empty() {
        let vs: Vec<String> = dvecs.iter().map(|v| v.to_string()).collect();
        return Err(LoopError::Schedule {
            requested: format!("{want:?}"),
            why: format!(
                "the dependence vectors are [{}] ({} loop); try auto",
                vs.join(", "),
                if spec.ordered { "ordered" } else { "unordered" }
            ),
        });
    }
    Ok(kinds
        .into_iter()
        .map(|kind| build(spec, space, &dvecs, kind, m, opts.pipeline))
        .collect())
}

/// The position where every access of `array` subscripts loop dimension
/// `dim` with offset 0, if any (and the extents agree).
fn aligned_pos(spec: &LoopSpec, space: &IterSpace, array: usize, dim: usize) -> Option<usize> {
    let shape = &spec.shapes[array];
    (0..shape.len()).find(|&k| {
        shape[k] == space.shape()[dim]
            && spec
                .accesses
                .iter()
                .filter(|a| a.array == array)
                .all(|a| a.subs[k] == Sub::Index { dim, offset: 0 })
    })
}

/// Where each array lives: unused, partitioned along the first of
/// `part_dims` it is aligned with, replicated when only read, else served.
fn placements_of(spec: &LoopSpec, space: &IterSpace, part_dims: &[usize]) -> Vec<Placement> {
    (0..spec.shapes.len())
        .map(|a| {
            let accessed: Vec<_> = spec.accesses.iter().filter(|x| x.array == a).collect();
            if accessed.is_empty() {
                Placement::Unused
            } else if let Some((pos, dim)) = part_dims
                .iter()
                .find_map(|&d| aligned_pos(spec, space, a, d).map(|pos| (pos, d)))
            {
                Placement::Partitioned { pos, dim }
            } else if accessed.iter().all(|x| !x.mode.writes()) {
                Placement::Replicated
            } else {
                Placement::Served
            }
        })
        .collect()
}

/// A unimodular schedule's tasks: the points grouped by their time `h · p`
/// (one step per distinct time, in order), each step's points dealt in
/// `m` chunks, one per worker.
fn wavefront_tasks(space: &IterSpace, h: &[i64], m: usize) -> Vec<Task> {
    let mut by_t: Vec<(i64, u32)> = (0..space.len())
        .map(|i| {
            (
                space
                    .point(i)
                    .iter()
                    .zip(h)
                    .map(|(&x, &c)| x as i64 * c)
                    .sum(),
                i as u32,
            )
        })
        .collect();
    by_t.sort();
    let mut tasks = vec![];
    let mut k = 0;
    let mut step = 0;
    while k < by_t.len() {
        let end = k + by_t[k..].partition_point(|x| x.0 == by_t[k].0);
        let pts: Vec<u32> = by_t[k..end].iter().map(|x| x.1).collect();
        let chunk = pts.len().div_ceil(m);
        for (w, c) in pts.chunks(chunk).enumerate() {
            tasks.push(Task {
                worker: w,
                step,
                points: c.to_vec(),
                blocks: vec![],
                cell: vec![],
            });
        }
        step += 1;
        k = end;
    }
    tasks
}

fn build(
    spec: &LoopSpec,
    space: &IterSpace,
    dvecs: &[DepVec],
    kind: Kind,
    m: usize,
    pipeline: bool,
) -> Plan {
    let n = spec.ndim;
    let (m, part_dims): (usize, Vec<usize>) = match kind {
        Kind::Serial => (1, vec![]),
        Kind::OneD { dim } => (m, vec![dim]),
        Kind::Ordered2D { space, time } | Kind::Unordered2D { space, time } => {
            (m, vec![space, time])
        }
        Kind::Unimodular { .. } => (m, vec![]),
    };
    let placements = placements_of(spec, space, &part_dims);
    let mut bounds: Vec<Option<Vec<usize>>> = vec![None; n];
    let time_blocks = if pipeline { 2 * m } else { m };
    let mut tasks: Vec<Task> = vec![];
    match &kind {
        Kind::Serial => tasks.push(Task {
            worker: 0,
            step: 0,
            points: (0..space.len() as u32).collect(),
            blocks: vec![],
            cell: vec![],
        }),
        Kind::OneD { dim } => {
            let b = balanced_bounds(&space.histogram(*dim), m);
            tasks = (0..m)
                .map(|w| Task {
                    worker: w,
                    step: 0,
                    points: vec![],
                    blocks: vec![],
                    cell: vec![w],
                })
                .collect();
            for i in 0..space.len() {
                tasks[range_of(&b, space.point(i)[*dim])]
                    .points
                    .push(i as u32);
            }
            bounds[*dim] = Some(b);
        }
        Kind::Ordered2D { space: s, time: t } | Kind::Unordered2D { space: s, time: t } => {
            let ordered = matches!(kind, Kind::Ordered2D { .. });
            let nt = if ordered { m } else { time_blocks };
            let bs = balanced_bounds(&space.histogram(*s), m);
            let bt = balanced_bounds(&space.histogram(*t), nt);
            // Task of (space block i, time block j).
            let mut cell = vec![vec![0usize; nt]; m];
            for (i, row) in cell.iter_mut().enumerate() {
                for st in 0..nt {
                    let j = if ordered {
                        st
                    } else if pipeline {
                        (2 * i + st) % nt
                    } else {
                        (i + st) % nt
                    };
                    let step = if ordered { i + st } else { st };
                    row[j] = tasks.len();
                    tasks.push(Task {
                        worker: i,
                        step,
                        points: vec![],
                        blocks: vec![],
                        cell: vec![i, j],
                    });
                }
            }
            for p in 0..space.len() {
                let pt = space.point(p);
                tasks[cell[range_of(&bs, pt[*s])][range_of(&bt, pt[*t])]]
                    .points
                    .push(p as u32);
            }
            for i in 0..m {
                for j in 0..nt {
                    let task = &mut tasks[cell[i][j]];
                    for (a, pl) in placements.iter().enumerate() {
                        if let Placement::Partitioned { dim, .. } = pl {
                            task.blocks.push((a, if dim == s { i } else { j }));
                        }
                    }
                }
            }
            bounds[*s] = Some(bs);
            bounds[*t] = Some(bt);
        }
        Kind::Unimodular { matrix } => tasks = wavefront_tasks(space, &matrix[0], m),
    }
    if let Kind::OneD { .. } = kind {
        for (w, task) in tasks.iter_mut().enumerate() {
            for (a, pl) in placements.iter().enumerate() {
                if matches!(pl, Placement::Partitioned { .. }) {
                    task.blocks.push((a, w));
                }
            }
        }
    }
    tasks.sort_by_key(|t| (t.step, t.worker));
    let barrier =
        placements.contains(&Placement::Served) || matches!(kind, Kind::Unimodular { .. });
    let mut p = Plan {
        kind,
        workers: m,
        dvecs: dvecs.to_vec(),
        placements,
        bounds,
        tasks,
        barrier,
        comm_elements: 0,
    };
    p.comm_elements = comm_elements(spec, &p);
    p
}

/// Elements sent per pass: each block move between different workers, each
/// served copy out and back, each replicated copy beyond the first.
fn comm_elements(spec: &LoopSpec, p: &Plan) -> u64 {
    let users = p.block_users();
    let mut total = 0u64;
    for (a, pl) in p.placements.iter().enumerate() {
        let size: usize = spec.shapes[a].iter().product();
        match *pl {
            Placement::Unused => {}
            Placement::Replicated => total += (size * (p.workers - 1)) as u64,
            Placement::Served => total += (2 * size * p.tasks.len()) as u64,
            Placement::Partitioned { pos, dim } => {
                let b = p.bounds[dim]
                    .as_ref()
                    .expect("partitioned dims have bounds");
                let row: usize = size / spec.shapes[a][pos];
                for (blk, us) in users[a].iter().enumerate() {
                    let moves = us
                        .windows(2)
                        .filter(|w| p.tasks[w[0]].worker != p.tasks[w[1]].worker)
                        .count();
                    total += (moves * row * (b[blk + 1] - b[blk])) as u64;
                }
            }
        }
    }
    total
}
