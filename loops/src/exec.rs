//! Execution of a [`Plan`] on worker threads that share nothing mutable
//! (thesis §5.4, Orion §4.3): array blocks, private copies and results move
//! between a coordinator and the workers as channel messages.
//!
//! Takes the plan, the loop, its iteration space, the arrays and the body;
//! gives the updated arrays, the combined accumulators and (instrumented)
//! the elements each task touched. Plans without a step barrier run in
//! `peer.rs` (workers pass blocks straight to each other); plans with
//! one (served arrays, unimodular steps) run here, through a coordinator.
//! A task is dispatched when it is its
//! worker's next, every block it needs is back and it is that block's next
//! user in plan order, and (with a barrier) the previous step has finished;
//! up to two tasks wait at each worker, so a worker starts on its next time
//! block while the last one travels (pipelining). Served copies' writes and
//! buffered writes are applied in task order, accumulators combined in task
//! order, so a run's result does not depend on thread timing.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crossbeam_channel::unbounded;

use crate::array::{DistArray, IterSpace};
use crate::ctx::{Ctx, Touch, View};
use crate::error::LoopError;
use crate::schedule::{Placement, Plan};
use crate::spec::LoopSpec;

/// Result of one pass.
#[derive(Debug, Clone, Default)]
pub struct RunOutput {
    /// Accumulators, combined over tasks in task order.
    pub accums: Vec<f64>,
    /// Per task (plan order), the elements it touched (instrumented runs).
    pub touched: Option<Vec<Vec<Touch>>>,
}

/// Tasks waiting at a worker at once (the one running and the next).
const QUEUE_DEPTH: usize = 2;

pub(crate) struct Done {
    pub(crate) task: usize,
    pub(crate) views: Vec<View>,
    pub(crate) accums: Vec<f64>,
    pub(crate) buffers: Vec<(usize, usize, f32)>,
    pub(crate) touched: Option<Vec<Touch>>,
    pub(crate) error: Option<LoopError>,
}

/// Run one pass of the loop under `plan`. `log` records touched elements.
/// Errors: arrays that do not match the declared shapes, a body touching
/// what it did not declare, a worker failing.
pub fn run<F>(
    plan: &Plan,
    spec: &LoopSpec,
    space: &IterSpace,
    arrays: &mut [DistArray],
    body: &F,
    log: bool,
) -> Result<RunOutput, LoopError>
where
    F: Fn(&mut Ctx) + Sync,
{
    check_arrays(spec, arrays)?;
    let n_pts: usize = plan.tasks.iter().map(|t| t.points.len()).sum();
    if n_pts != space.len() {
        return Err(LoopError::Declaration(format!(
            "the plan covers {n_pts} iterations but the space has {}; plan again for this space",
            space.len()
        )));
    }
    if plan.workers == 1 && plan.tasks.len() == 1 {
        return run_serial(plan, spec, space, arrays, body, log);
    }
    if !plan.barrier {
        return crate::peer::run_peer(plan, spec, space, arrays, body, log);
    }
    let Travel {
        mut blocks,
        shared,
        mut master,
    } = Travel::split(plan, arrays);
    let users = plan.block_users();
    let mut next_user: Vec<Vec<usize>> = users.iter().map(|u| vec![0; u.len()]).collect();
    let mut worker_tasks: Vec<VecDeque<usize>> = vec![VecDeque::new(); plan.workers];
    for (t, task) in plan.tasks.iter().enumerate() {
        worker_tasks[task.worker].push_back(t);
    }
    let steps = plan.steps();
    let mut left_in_step = vec![0usize; steps];
    for t in &plan.tasks {
        left_in_step[t.step] += 1;
    }
    let mut done_steps = 0usize;
    let mut results: Vec<Option<Done>> = (0..plan.tasks.len()).map(|_| None).collect();
    let mut inflight = vec![0usize; plan.workers];
    let mut completed = 0usize;
    let mut failure: Option<LoopError> = None;

    std::thread::scope(|scope| -> Result<(), LoopError> {
        let (done_tx, done_rx) = unbounded::<Done>();
        let mut to_worker = vec![];
        for _ in 0..plan.workers {
            let (tx, rx) = unbounded::<(usize, Vec<View>)>();
            to_worker.push(tx);
            let done_tx = done_tx.clone();
            scope.spawn(move || {
                for (task, views) in rx {
                    let pts = &plan.tasks[task].points;
                    let d = run_task(
                        spec,
                        space,
                        pts.iter().map(|&p| p as usize),
                        views,
                        body,
                        log,
                        task,
                    );
                    if done_tx.send(d).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        while completed < plan.tasks.len() {
            for w in 0..plan.workers {
                while inflight[w] < QUEUE_DEPTH && failure.is_none() {
                    let Some(&t) = worker_tasks[w].front() else {
                        break;
                    };
                    let task = &plan.tasks[t];
                    let ready = (!plan.barrier || task.step <= done_steps)
                        && task.blocks.iter().all(|&(a, b)| {
                            blocks[a][b].is_some() && users[a][b][next_user[a][b]] == t
                        });
                    if !ready {
                        break;
                    }
                    worker_tasks[w].pop_front();
                    let views =
                        task_views(plan, task, &shared, &master, &mut blocks, &mut next_user);
                    to_worker[w]
                        .send((t, views))
                        .map_err(|_| LoopError::Worker {
                            worker: w,
                            why: "stopped".into(),
                        })?;
                    inflight[w] += 1;
                }
            }
            if failure.is_some() && inflight.iter().all(|&x| x == 0) {
                break;
            }
            let mut d = done_rx.recv().map_err(|_| LoopError::Worker {
                worker: 0,
                why: "all workers stopped".into(),
            })?;
            let task = &plan.tasks[d.task];
            inflight[task.worker] -= 1;
            completed += 1;
            if let Some(e) = d.error.take() {
                failure.get_or_insert(e);
            }
            for &(a, b) in &task.blocks {
                if let View::Block { data, .. } = std::mem::replace(&mut d.views[a], View::Unused) {
                    blocks[a][b] = Some(data);
                }
            }
            left_in_step[task.step] -= 1;
            let id = d.task;
            results[id] = Some(d);
            // Merge served writes of finished steps, in task order.
            while done_steps < steps && left_in_step[done_steps] == 0 {
                merge_served(plan, done_steps, &mut results, &mut master);
                done_steps += 1;
            }
        }
        Ok(())
    })?;
    Travel {
        blocks,
        shared,
        master,
    }
    .rejoin(plan, arrays);
    if let Some(e) = failure {
        return Err(e);
    }
    let done: Vec<Done> = results
        .into_iter()
        .map(|r| r.expect("every task finished"))
        .collect();
    finish(spec, arrays, done)
}

/// The arrays of a barrier run split into what travels: per partitioned
/// array its blocks (`None` while a task holds one), per replicated array
/// one shared copy, per served array the master copy.
struct Travel {
    blocks: Vec<Vec<Option<Vec<f32>>>>,
    shared: Vec<Option<Arc<Vec<f32>>>>,
    master: Vec<Option<Vec<f32>>>,
}

impl Travel {
    /// Take the arrays' data apart by `plan`'s placements.
    fn split(plan: &Plan, arrays: &mut [DistArray]) -> Travel {
        let mut t = Travel {
            blocks: vec![vec![]; arrays.len()],
            shared: vec![None; arrays.len()],
            master: vec![None; arrays.len()],
        };
        for (a, arr) in arrays.iter_mut().enumerate() {
            match plan.placements[a] {
                Placement::Unused => {}
                Placement::Replicated => {
                    t.shared[a] = Some(Arc::new(std::mem::take(&mut arr.data)))
                }
                Placement::Served => t.master[a] = Some(std::mem::take(&mut arr.data)),
                Placement::Partitioned { pos, dim } => {
                    let b = plan.bounds[dim]
                        .as_ref()
                        .expect("partitioned dims have bounds");
                    t.blocks[a] = split(&arr.data, &arr.shape, pos, b)
                        .into_iter()
                        .map(Some)
                        .collect();
                }
            }
        }
        t
    }

    /// Put the arrays back together.
    fn rejoin(mut self, plan: &Plan, arrays: &mut [DistArray]) {
        for (a, arr) in arrays.iter_mut().enumerate() {
            match plan.placements[a] {
                Placement::Unused => {}
                Placement::Replicated => {
                    let s = self.shared[a].take().expect("replicated");
                    arr.data = Arc::try_unwrap(s).unwrap_or_else(|s| (*s).clone());
                }
                Placement::Served => arr.data = self.master[a].take().expect("served"),
                Placement::Partitioned { pos, .. } => {
                    let parts: Vec<Vec<f32>> = self.blocks[a]
                        .iter_mut()
                        .map(|b| b.take().unwrap_or_default())
                        .collect();
                    arr.data = join(&parts, &arr.shape, pos);
                }
            }
        }
    }
}

/// The views task `task` runs on: the shared copies, a copy of each served
/// array (writes tracked), and the blocks it declared, taken out of
/// `blocks` (each block's next user advanced).
fn task_views(
    plan: &Plan,
    task: &crate::schedule::Task,
    shared: &[Option<Arc<Vec<f32>>>],
    master: &[Option<Vec<f32>>],
    blocks: &mut [Vec<Option<Vec<f32>>>],
    next_user: &mut [Vec<usize>],
) -> Vec<View> {
    let mut views: Vec<View> = (0..shared.len()).map(|_| View::Unused).collect();
    for (a, v) in views.iter_mut().enumerate() {
        if let Some(s) = &shared[a] {
            *v = View::Shared(Arc::clone(s));
        } else if let Some(m) = &master[a] {
            *v = View::Full {
                data: m.clone(),
                dirty: vec![],
                track: true,
            };
        }
    }
    for &(a, b) in &task.blocks {
        let Placement::Partitioned { pos, dim } = plan.placements[a] else {
            continue;
        };
        let bd = plan.bounds[dim].as_ref().expect("bounds");
        next_user[a][b] += 1;
        views[a] = View::Block {
            data: blocks[a][b].take().expect("ready"),
            pos,
            lo: bd[b],
            hi: bd[b + 1],
        };
    }
    views
}

/// Copy the served writes of step `step`'s finished tasks into the master
/// copies, in task order, and drop the tasks' copies.
fn merge_served(
    plan: &Plan,
    step: usize,
    results: &mut [Option<Done>],
    master: &mut [Option<Vec<f32>>],
) {
    for (t, task) in plan.tasks.iter().enumerate() {
        if task.step != step {
            continue;
        }
        if let Some(r) = results[t].as_mut() {
            for (a, v) in r.views.iter_mut().enumerate() {
                if let (View::Full { data, dirty, .. }, Some(m)) = (v, master[a].as_mut()) {
                    for &o in dirty.iter() {
                        m[o] = data[o];
                    }
                    *data = vec![];
                }
            }
        }
    }
}

/// One worker's task: the body over `points` with the given views.
pub(crate) fn run_task<F>(
    spec: &LoopSpec,
    space: &IterSpace,
    points: impl Iterator<Item = usize>,
    views: Vec<View>,
    body: &F,
    log: bool,
    task: usize,
) -> Done
where
    F: Fn(&mut Ctx) + Sync,
{
    let mut ctx = Ctx::new(spec, views, log);
    let res = catch_unwind(AssertUnwindSafe(|| {
        for p in points {
            ctx.point.copy_from_slice(space.point(p));
            ctx.value = space.value(p);
            body(&mut ctx);
            if ctx.error.is_some() {
                break;
            }
        }
    }));
    let mut error = ctx.error.take();
    if res.is_err() && error.is_none() {
        error = Some(LoopError::Worker {
            worker: task,
            why: "the loop body panicked".into(),
        });
    }
    Done {
        task,
        views: ctx.views,
        accums: ctx.accums,
        buffers: ctx.buffers,
        touched: ctx.log,
        error,
    }
}

fn run_serial<F>(
    plan: &Plan,
    spec: &LoopSpec,
    space: &IterSpace,
    arrays: &mut [DistArray],
    body: &F,
    log: bool,
) -> Result<RunOutput, LoopError>
where
    F: Fn(&mut Ctx) + Sync,
{
    let views = arrays
        .iter_mut()
        .map(|a| View::Full {
            data: std::mem::take(&mut a.data),
            dirty: vec![],
            track: false,
        })
        .collect();
    let pts = plan.tasks[0].points.iter().map(|&p| p as usize);
    let mut d = run_task(spec, space, pts, views, body, log, 0);
    for (a, v) in d.views.iter_mut().enumerate() {
        if let View::Full { data, .. } = v {
            arrays[a].data = std::mem::take(data);
        }
    }
    if let Some(e) = d.error.take() {
        return Err(e);
    }
    finish(spec, arrays, vec![d])
}

/// Apply buffered writes and combine accumulators, in task order.
pub(crate) fn finish(
    spec: &LoopSpec,
    arrays: &mut [DistArray],
    done: Vec<Done>,
) -> Result<RunOutput, LoopError> {
    let mut accums: Vec<f64> = spec.accums.iter().map(|a| a.init).collect();
    let mut touched = vec![];
    for d in done {
        for (c, v) in d.accums.iter().enumerate() {
            accums[c] = (spec.accums[c].op)(accums[c], *v);
        }
        for &(b, f, v) in &d.buffers {
            let buf = &spec.buffers[b];
            let x = &mut arrays[buf.array].data[f];
            *x = (buf.apply)(*x, v);
        }
        touched.push(d.touched.unwrap_or_default());
    }
    let log = touched.iter().any(|t| !t.is_empty());
    Ok(RunOutput {
        accums,
        touched: log.then_some(touched),
    })
}

fn check_arrays(spec: &LoopSpec, arrays: &[DistArray]) -> Result<(), LoopError> {
    if arrays.len() != spec.shapes.len() {
        return Err(LoopError::Declaration(format!(
            "the loop was declared with {} arrays but {} were given",
            spec.shapes.len(),
            arrays.len()
        )));
    }
    for (a, (arr, shape)) in arrays.iter().zip(&spec.shapes).enumerate() {
        if &arr.shape != shape || arr.data.len() != shape.iter().product::<usize>() {
            return Err(LoopError::Declaration(format!(
                "array {a} (`{}`) has shape {:?}; the loop was declared with {shape:?}",
                arr.name, arr.shape
            )));
        }
    }
    Ok(())
}

/// Split row-major `data` of `shape` at position `pos` into the ranges of
/// `bounds`, each row-major over its own shape.
pub(crate) fn split(data: &[f32], shape: &[usize], pos: usize, bounds: &[usize]) -> Vec<Vec<f32>> {
    let outer: usize = shape[..pos].iter().product();
    let inner: usize = shape[pos + 1..].iter().product();
    let n = shape[pos];
    bounds
        .windows(2)
        .map(|w| {
            let mut v = Vec::with_capacity(outer * (w[1] - w[0]) * inner);
            for o in 0..outer {
                v.extend_from_slice(&data[(o * n + w[0]) * inner..(o * n + w[1]) * inner]);
            }
            v
        })
        .collect()
}

/// Inverse of [`split`].
pub(crate) fn join(parts: &[Vec<f32>], shape: &[usize], pos: usize) -> Vec<f32> {
    let outer: usize = shape[..pos].iter().product();
    let mut out = Vec::with_capacity(shape.iter().product());
    for o in 0..outer {
        for p in parts {
            let w = p.len() / outer.max(1);
            out.extend_from_slice(&p[o * w..(o + 1) * w]);
        }
    }
    out
}
