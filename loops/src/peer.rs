//! Peer-to-peer execution of plans without a step barrier (1D, ordered and
//! unordered 2D; Orion §4.3, thesis Figure 5.13): each worker runs its own
//! tasks in plan order and, when a task ends, sends each array block it
//! held straight to the worker of that block's next user (or home to the
//! coordinator after its last use). With two time blocks per worker, the
//! block a worker needs next arrives while it works on the other.
//!
//! Takes the same inputs as [`crate::exec::run`]; gives the same output.
//! Keeps true: a block is held by one worker at a time and visits its users
//! in plan order, so the happens-before of the plan is the one checked in
//! `tests/soundness.rs`; nothing mutable is shared (blocks are moved in
//! messages, read-only arrays are shared behind `Arc`).

use std::collections::HashMap;
use std::sync::Arc;

use crossbeam_channel::{unbounded, Sender};

use crate::array::{DistArray, IterSpace};
use crate::ctx::{Ctx, View};
use crate::error::LoopError;
use crate::exec::{finish, join, run_task, split, Done, RunOutput};
use crate::schedule::{Placement, Plan};
use crate::spec::LoopSpec;

/// A block on its way: (array, block, data).
type BlockMsg = (usize, usize, Vec<f32>);

enum ToCoord {
    Done(Box<Done>),
    Home(BlockMsg),
}

/// Run a barrier-free plan with workers passing blocks to each other.
pub(crate) fn run_peer<F>(
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
    let users = plan.block_users();
    let next = next_users(plan, &users);
    let mut shared: Vec<Option<Arc<Vec<f32>>>> = vec![None; arrays.len()];
    let mut initial: Vec<(usize, BlockMsg)> = vec![];
    for (a, arr) in arrays.iter_mut().enumerate() {
        match plan.placements[a] {
            Placement::Replicated => shared[a] = Some(Arc::new(std::mem::take(&mut arr.data))),
            Placement::Partitioned { pos, dim } => {
                let b = plan.bounds[dim]
                    .as_ref()
                    .expect("partitioned dims have bounds");
                for (blk, data) in split(&arr.data, &arr.shape, pos, b).into_iter().enumerate() {
                    match users[a].get(blk).and_then(|u| u.first()) {
                        Some(&t) => initial.push((plan.tasks[t].worker, (a, blk, data))),
                        None => initial.push((usize::MAX, (a, blk, data))),
                    }
                }
                arr.data = vec![];
            }
            Placement::Unused | Placement::Served => {}
        }
    }
    let mut home: Vec<Vec<Option<Vec<f32>>>> = arrays
        .iter()
        .enumerate()
        .map(|(a, _)| vec![None; users[a].len().max(blocks_of(plan, a))])
        .collect();
    let mut results: Vec<Option<Done>> = (0..plan.tasks.len()).map(|_| None).collect();
    let shared = &shared;
    let next = &next;
    std::thread::scope(|scope| -> Result<(), LoopError> {
        let (to_coord, from_workers) = unbounded::<ToCoord>();
        let (txs, rxs): (Vec<Sender<BlockMsg>>, Vec<_>) =
            (0..plan.workers).map(|_| unbounded::<BlockMsg>()).unzip();
        for (w, data) in initial {
            match txs.get(w) {
                Some(tx) => tx.send(data).map_err(|_| stopped(w))?,
                None => home[data.0][data.1] = Some(data.2),
            }
        }
        for (w, rx) in rxs.into_iter().enumerate() {
            let (txs, to_coord) = (txs.clone(), to_coord.clone());
            scope.spawn(move || {
                let mut have: HashMap<(usize, usize), Vec<f32>> = HashMap::new();
                for (t, task) in plan.tasks.iter().enumerate().filter(|(_, t)| t.worker == w) {
                    while !task.blocks.iter().all(|k| have.contains_key(k)) {
                        let Ok((a, b, d)) = rx.recv() else { return };
                        have.insert((a, b), d);
                    }
                    let views = peer_views(plan, task, shared, &mut have);
                    let pts = task.points.iter().map(|&p| p as usize);
                    let mut d = run_task(spec, space, pts, views, body, log, t);
                    for (k, &(a, b)) in task.blocks.iter().enumerate() {
                        let View::Block { data, .. } =
                            std::mem::replace(&mut d.views[a], View::Unused)
                        else {
                            continue;
                        };
                        let sent = match next[t][k] {
                            Some(u) if plan.tasks[u].worker == w => {
                                have.insert((a, b), data);
                                Ok(())
                            }
                            Some(u) => txs[plan.tasks[u].worker].send((a, b, data)).map_err(|_| ()),
                            None => to_coord.send(ToCoord::Home((a, b, data))).map_err(|_| ()),
                        };
                        if sent.is_err() {
                            return;
                        }
                    }
                    if to_coord.send(ToCoord::Done(Box::new(d))).is_err() {
                        return;
                    }
                }
            });
        }
        drop(txs);
        drop(to_coord);
        for msg in from_workers {
            match msg {
                ToCoord::Done(d) => {
                    let t = d.task;
                    results[t] = Some(*d);
                }
                ToCoord::Home((a, b, data)) => home[a][b] = Some(data),
            }
        }
        Ok(())
    })?;
    let mut failure = rejoin(plan, arrays, shared, &mut home);
    let mut done = vec![];
    for (t, r) in results.into_iter().enumerate() {
        match r {
            Some(mut d) => {
                if let Some(e) = d.error.take() {
                    failure.get_or_insert(e);
                }
                done.push(d);
            }
            None => {
                failure.get_or_insert(LoopError::Worker {
                    worker: plan.tasks[t].worker,
                    why: format!("task {t} did not finish"),
                });
            }
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    finish(spec, arrays, done)
}

/// Per task, per held block: the task that uses the block next, if any.
fn next_users(plan: &Plan, users: &[Vec<Vec<usize>>]) -> Vec<Vec<Option<usize>>> {
    let mut next: Vec<Vec<Option<usize>>> = plan
        .tasks
        .iter()
        .map(|t| vec![None; t.blocks.len()])
        .collect();
    for (t, task) in plan.tasks.iter().enumerate() {
        for (k, &(a, b)) in task.blocks.iter().enumerate() {
            let us = &users[a][b];
            let at = us
                .iter()
                .position(|&u| u == t)
                .expect("a task is a user of its blocks");
            next[t][k] = us.get(at + 1).copied();
        }
    }
    next
}

/// The views `task` runs on: the shared copies and its blocks, taken out of
/// the worker's `have`.
fn peer_views(
    plan: &Plan,
    task: &crate::schedule::Task,
    shared: &[Option<Arc<Vec<f32>>>],
    have: &mut HashMap<(usize, usize), Vec<f32>>,
) -> Vec<View> {
    let mut views: Vec<View> = shared
        .iter()
        .map(|s| {
            s.as_ref()
                .map_or(View::Unused, |s| View::Shared(Arc::clone(s)))
        })
        .collect();
    for &(a, b) in &task.blocks {
        let Placement::Partitioned { pos, dim } = plan.placements[a] else {
            continue;
        };
        let bd = plan.bounds[dim].as_ref().expect("bounds");
        let data = have.remove(&(a, b)).expect("waited for it");
        views[a] = View::Block {
            data,
            pos,
            lo: bd[b],
            hi: bd[b + 1],
        };
    }
    views
}

/// Put the arrays back together from the shared copies and the blocks
/// that came home; an error when a block did not come back.
fn rejoin(
    plan: &Plan,
    arrays: &mut [DistArray],
    shared: &[Option<Arc<Vec<f32>>>],
    home: &mut [Vec<Option<Vec<f32>>>],
) -> Option<LoopError> {
    let mut failure = None;
    for (a, arr) in arrays.iter_mut().enumerate() {
        match plan.placements[a] {
            Placement::Replicated => {
                let s = Arc::clone(shared[a].as_ref().expect("replicated"));
                arr.data = Arc::try_unwrap(s).unwrap_or_else(|s| (*s).clone());
            }
            Placement::Partitioned { pos, .. } => {
                if home[a].iter().any(Option::is_none) {
                    failure.get_or_insert(LoopError::Worker {
                        worker: 0,
                        why: "a block did not come back".into(),
                    });
                }
                let parts: Vec<Vec<f32>> = home[a]
                    .iter_mut()
                    .map(|b| b.take().unwrap_or_default())
                    .collect();
                arr.data = join(&parts, &arr.shape, pos);
            }
            Placement::Unused | Placement::Served => {}
        }
    }
    failure
}

fn blocks_of(plan: &Plan, a: usize) -> usize {
    match plan.placements[a] {
        Placement::Partitioned { dim, .. } => plan.bounds[dim].as_ref().map_or(0, |b| b.len() - 1),
        _ => 0,
    }
}

fn stopped(w: usize) -> LoopError {
    LoopError::Worker {
        worker: w,
        why: "stopped before the pass began".into(),
    }
}
