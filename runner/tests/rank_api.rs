//! The per-rank API: a schedule that drives each rank itself through
//! [`RankRunner`] (`new`, `set`, `step`, `get`) computes exactly what
//! [`run_programs`] computes, bit for bit, and a rank runs from its program
//! alone (here, one read back from its JSON file).

mod partition;

use std::collections::HashMap;
use std::sync::{Barrier, Mutex};

use codegen::{Program, Region, TensorId};
use interval::cache::StrategyCache;
use partition::{lib, SEED};
use planner::graph::Optimizer;
use planner::plan::{PlanOptions, SearchKind};
use planner::zoo::{self, MlpConfig};
use runner::{
    run_programs, run_programs_given, run_ranks, Communicator, CpuBackend, ExecError, Given,
    LocalCommunicator, RankRunner, RunOptions,
};

/// Programs of the tiny MLP for `k` workers.
fn programs(k: usize) -> Vec<Program> {
    let g = zoo::Model::Mlp(MlpConfig::tiny())
        .training(lib(), &Optimizer::default())
        .unwrap();
    let cache = StrategyCache::new();
    let opts = PlanOptions::default();
    partition::compiled(&g, &cache, k, SearchKind::CriticalDp, opts).programs
}

/// Each rank on its own thread through the per-rank API for `steps` steps,
/// handing moved tiles over between steps itself; gives every kept tensor
/// assembled from the ranks' `get`.
fn drive(progs: &[Program], steps: usize, given: &Given) -> HashMap<TensorId, Vec<f32>> {
    let k = progs.len();
    let numel = |t: TensorId| -> usize {
        let s = &progs.iter().find_map(|p| p.tensor(t)).unwrap().shape;
        s.iter().product()
    };
    let whole: Mutex<HashMap<TensorId, Vec<f32>>> = Mutex::new(HashMap::new());
    let barrier = Barrier::new(k);
    let results = run_ranks(LocalCommunicator::create(k), |comm| {
        let p = &progs[comm.rank().0];
        let mut r = RankRunner::new(p, CpuBackend::new(), comm, SEED)?;
        for (&t, v) in given {
            if let Some(info) = p.tensor(t) {
                r.set(t, &Region::whole(&info.shape), v.clone())?;
            }
        }
        for step in 0..steps {
            if step > 0 {
                // The updated tensor's whole value, set as the tile it replaces.
                for c in &p.carries {
                    if let Some(b) = c.to_buf {
                        let region = p.buffers[b as usize].region.clone();
                        let shape = &p.tensor(c.to).unwrap().shape;
                        let all = whole.lock().unwrap()[&c.from].clone();
                        r.set(
                            c.to,
                            &region,
                            runner::region::slice(&all, shape, &region.0).unwrap(),
                        )?;
                    }
                }
            }
            barrier.wait();
            whole.lock().unwrap().clear();
            barrier.wait();
            r.step()?;
            for &b in &p.keep {
                let t = p.buffers[b as usize].tensor;
                if let Some((region, v)) = r.get(t)? {
                    let shape = &p.tensor(t).unwrap().shape;
                    let mut g = whole.lock().unwrap();
                    let all = g.entry(t).or_insert_with(|| vec![0.0; numel(t)]);
                    runner::region::copy_region(
                        &v,
                        &region.0,
                        all,
                        &Region::whole(shape).0,
                        &region.0,
                        None,
                    )
                    .unwrap();
                }
            }
            barrier.wait();
        }
        Ok::<_, ExecError>(())
    });
    for r in results {
        r.expect("no panic").expect("the rank runs");
    }
    whole.into_inner().unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn driving_each_rank_equals_run_programs_bit_for_bit() {
    for k in [1, 2, 4] {
        let progs = programs(k);
        let steps = 2;
        let report = run_programs(&progs, RunOptions { steps, seed: SEED }, None).unwrap();
        let driven = drive(&progs, steps, &Given::new());
        assert_eq!(report.outputs.len(), driven.len(), "k={k}");
        for (t, v) in &report.outputs {
            assert_eq!(bits(v), bits(&driven[t]), "k={k}: tensor {}", t.0);
        }
    }
}

#[test]
fn set_values_replace_the_fill_as_given_values_do() {
    let progs = programs(2);
    // A weight: the tiny MLP's first leaf whose fill is normal.
    let w = progs[0]
        .instrs
        .iter()
        .find_map(|i| match i {
            codegen::Instr::Alloc {
                buf,
                init: codegen::Init::Fill(s),
            } if matches!(s.fill, codegen::Fill::Normal { .. }) => {
                Some(progs[0].buffers[*buf as usize].tensor)
            }
            _ => None,
        })
        .unwrap();
    let n: usize = progs[0].tensor(w).unwrap().shape.iter().product();
    let mut given = Given::new();
    given.insert(w, (0..n).map(|i| (i % 7) as f32 * 0.1).collect());
    let ranks = LocalCommunicator::create(2)
        .into_iter()
        .map(|c| (CpuBackend::new(), c))
        .collect();
    let opts = RunOptions {
        steps: 2,
        seed: SEED,
    };
    let report = run_programs_given(&progs, opts, None, ranks, &given).unwrap();
    let plain = run_programs(&progs, opts, None).unwrap();
    assert_ne!(
        report.outputs, plain.outputs,
        "the set weight changes the run"
    );
    let driven = drive(&progs, 2, &given);
    for (t, v) in &report.outputs {
        assert_eq!(bits(v), bits(&driven[t]), "tensor {}", t.0);
    }
}

#[test]
fn a_rank_runs_from_its_program_file_alone() {
    let progs = programs(2);
    let read: Vec<Program> = progs
        .iter()
        .enumerate()
        .map(|(r, p)| Program::from_json(&p.to_json(), &format!("rank-{r}.json")).unwrap())
        .collect();
    assert_eq!(read, progs);
    let opts = RunOptions {
        steps: 1,
        seed: SEED,
    };
    let a = run_programs(&read, opts, None).unwrap();
    let b = run_programs(&progs, opts, None).unwrap();
    assert_eq!(a.outputs, b.outputs);
}

#[test]
fn older_program_files_are_rejected_naming_the_file_version_and_command() {
    let p = &programs(1)[0];
    let mut v: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    v["version"] = 2.into();
    let err = Program::from_json(&v.to_string(), "old/rank-0.json")
        .unwrap_err()
        .to_string();
    for want in [
        "old/rank-0.json",
        "version 2",
        "tofu run PLAN.json --save-programs DIR",
    ] {
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn a_moved_tile_that_is_not_handed_over_is_an_error_naming_it() {
    // The tiny MLP's plans keep every carried tile in place; make rank 0
    // keep none of the first updated tensor, as a plan whose tile moves
    // between steps would: its next step needs the value `set`.
    let mut progs = programs(2);
    let c = progs[0]
        .carries
        .iter_mut()
        .find(|c| c.from_buf.is_some() && c.to_buf.is_some())
        .expect("a carried tile");
    c.from_buf = None;
    let to = c.to;
    let name = progs[0].tensor(to).unwrap().name.clone();
    let results = run_ranks(LocalCommunicator::create(2), |comm| {
        let p = &progs[comm.rank().0];
        let mut r = RankRunner::new(p, CpuBackend::new(), comm, SEED)?;
        r.step()?;
        r.step()
    });
    let err = results[0]
        .as_ref()
        .unwrap()
        .as_ref()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("moved between steps") && err.contains(&format!("`{name}`")),
        "{err}"
    );
}
