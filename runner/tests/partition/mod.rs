//! Shared harness of the partitioned-execution tests (`plan_exec.rs`,
//! `random_graphs.rs`): plan a training graph for k workers with a search,
//! generate and validate the programs, run them, and compare with the
//! oracle, the unpartitioned run of the same graph on the same data.
#![allow(dead_code)]

use std::cell::Cell;
use std::sync::OnceLock;

use codegen::{compile, compile_unpartitioned, validate_in, Instr, Programs};
use interval::cache::StrategyCache;
use planner::graph::execute::{execute, synthesize};
use planner::graph::Graph;
use planner::plan::{BoundPlan, Decisions, PlanOptions, SearchKind};
use runner::{max_rel_error, run_programs, RunOptions, RunReport};
use tdl::Library;

/// Tolerance on [`max_rel_error`] (the bound, f32).
pub const TOLERANCE: f64 = 1e-4;

/// The shipped operator library, loaded once per test binary.
pub fn lib() -> &'static Library {
    static LIB: OnceLock<Library> = OnceLock::new();
    LIB.get_or_init(|| Library::shipped().expect("shipped specs load"))
}

thread_local! {
    /// (all-to-all, broadcast) instructions in the programs this thread ran
    /// and checked with [`run_plan_opts`] (a run that failed counts nothing).
    pub static EXCHANGE_COLLECTIVES: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// Runs this thread checked with [`run_plan_opts`] whose plan replicates
    /// an activation (or an activation's gradient) at a level inside one
    /// where it is split: the tensor-parallel layout (issue 28).
    pub static SPLIT_THEN_REPLICATED: Cell<usize> = const { Cell::new(0) };
}

/// Whether a plan replicates some activation or activation gradient at a
/// level inside one that splits it (Megatron's replicated activations within
/// a tensor-parallel group under data parallelism).
pub fn replicates_split_activations(g: &Graph, d: &Decisions) -> bool {
    use planner::graph::TensorRole;
    g.tensors().iter().zip(&d.tensors).any(|(t, levels)| {
        let activation = match t.role {
            TensorRole::Activation => true,
            TensorRole::Gradient => t
                .grad_of
                .is_some_and(|f| g.tensor(f).role != TensorRole::Weight),
            _ => false,
        };
        let first_split = levels.iter().position(Option::is_some);
        activation && first_split.is_some_and(|i| levels[i..].iter().any(Option::is_none))
    })
}

/// Seed of the synthetic data of every run.
pub const SEED: u64 = 7;

/// How a test executes programs (the CPU runner, or another backend).
pub type Exec = dyn Fn(&Graph, &Programs, RunOptions) -> Result<RunReport, String> + Sync;

/// The CPU runner: [`run_programs`].
pub fn cpu(_graph: &Graph, progs: &Programs, opts: RunOptions) -> Result<RunReport, String> {
    run_programs(&progs.programs, opts, None).map_err(|e| e.to_string())
}

/// The unpartitioned plan of `g` (its operators bound once): what
/// [`reference`] runs.
pub fn unpartitioned(g: &Graph, cache: &StrategyCache) -> BoundPlan {
    BoundPlan::unpartitioned(g.clone(), lib(), cache).unwrap()
}

/// `g` planned for `k` workers by `s` with `opts`, compiled (generated and
/// verified) in one call.
pub fn compiled(
    g: &Graph,
    cache: &StrategyCache,
    k: usize,
    s: SearchKind,
    opts: PlanOptions,
) -> Programs {
    let (bound, _) = BoundPlan::search(g.clone(), lib(), cache, k, s, opts).unwrap();
    compile(&bound, lib()).unwrap()
}

/// The oracle: the unpartitioned graph on one rank (programs validated).
pub fn reference(one: &BoundPlan, steps: usize) -> Result<RunReport, String> {
    reference_with(&cpu, one, steps)
}

/// [`reference`] executed by `exec`.
pub fn reference_with(exec: &Exec, one: &BoundPlan, steps: usize) -> Result<RunReport, String> {
    let progs = compile_unpartitioned(one, lib()).map_err(|e| e.to_string())?;
    validate_in(&one.cost(), &one.decisions, &progs).map_err(|e| e.to_string())?;
    exec(&one.graph, &progs, RunOptions { steps, seed: SEED })
}

/// Plan `g` for `k` workers with `s`, generate and validate the programs,
/// run `steps` steps; check that the planner's comm bytes equal the
/// programs' transfers and that every rank sends exactly its predicted
/// bytes. Gives the run, or what failed (naming the case).
pub fn run_plan(
    g: &Graph,
    cache: &StrategyCache,
    k: usize,
    s: SearchKind,
    steps: usize,
) -> Result<RunReport, String> {
    run_plan_with(&cpu, g, cache, k, s, steps)
}

/// [`run_plan`] executed by `exec`.
pub fn run_plan_with(
    exec: &Exec,
    g: &Graph,
    cache: &StrategyCache,
    k: usize,
    s: SearchKind,
    steps: usize,
) -> Result<RunReport, String> {
    run_plan_opts(exec, g, cache, k, s, PlanOptions::default(), steps)
}

/// [`run_plan_with`] with planner options (e.g. a topology).
#[allow(clippy::too_many_arguments)]
pub fn run_plan_opts(
    exec: &Exec,
    g: &Graph,
    cache: &StrategyCache,
    k: usize,
    s: SearchKind,
    opts: PlanOptions,
    steps: usize,
) -> Result<RunReport, String> {
    let case = match opts.topology {
        Some(t) => format!(
            "{} k={k} {} topology {}x{}",
            g.name(),
            s.name(),
            t.nodes,
            t.gpus_per_node
        ),
        None => format!("{} k={k} {}", g.name(), s.name()),
    };
    let (bound, p) = BoundPlan::search(g.clone(), lib(), cache, k, s, opts)
        .map_err(|e| format!("{case}: plan: {e}"))?;
    let progs = compile(&bound, lib()).map_err(|e| format!("{case}: compile: {e}"))?;
    let total: u64 = progs.predicted_bytes_per_rank.iter().sum();
    if total != p.comm_bytes {
        return Err(format!(
            "{case}: transfers sum to {total} bytes, planner says {}",
            p.comm_bytes
        ));
    }
    let r = exec(g, &progs, RunOptions { steps, seed: SEED })
        .map_err(|e| format!("{case}: run: {e}"))?;
    let want: Vec<u64> = progs
        .predicted_bytes_per_rank
        .iter()
        .map(|b| b * steps as u64)
        .collect();
    if r.bytes_sent_per_rank() != want {
        return Err(format!(
            "{case}: measured bytes per rank {:?}, predicted {want:?}",
            r.bytes_sent_per_rank()
        ));
    }
    let instrs = progs.programs.iter().flat_map(|p| &p.instrs);
    let a2a = instrs
        .clone()
        .filter(|i| matches!(i, Instr::AllToAll { .. }))
        .count();
    let bcast = instrs
        .filter(|i| matches!(i, Instr::Broadcast { .. }))
        .count();
    if replicates_split_activations(g, &p.decisions) {
        SPLIT_THEN_REPLICATED.with(|c| c.set(c.get() + 1));
    }
    EXCHANGE_COLLECTIVES.with(|c| {
        let (a, b) = c.get();
        c.set((a + a2a, b + bcast));
    });
    Ok(r)
}

/// [`run_plan`], then compare with `r1` (the oracle) within [`TOLERANCE`].
/// Gives the max relative error, or what failed (naming the case with
/// `name`).
#[allow(clippy::too_many_arguments)]
pub fn check_one(
    name: &str,
    g: &Graph,
    cache: &StrategyCache,
    k: usize,
    s: SearchKind,
    steps: usize,
    r1: &RunReport,
) -> Result<f64, String> {
    check_one_with(&cpu, name, g, cache, k, s, steps, r1)
}

/// [`check_one`] executed by `exec`.
#[allow(clippy::too_many_arguments)]
pub fn check_one_with(
    exec: &Exec,
    name: &str,
    g: &Graph,
    cache: &StrategyCache,
    k: usize,
    s: SearchKind,
    steps: usize,
    r1: &RunReport,
) -> Result<f64, String> {
    check_one_opts(
        exec,
        name,
        g,
        cache,
        k,
        s,
        PlanOptions::default(),
        steps,
        r1,
    )
}

/// [`check_one_with`] with planner options (e.g. a topology).
#[allow(clippy::too_many_arguments)]
pub fn check_one_opts(
    exec: &Exec,
    name: &str,
    g: &Graph,
    cache: &StrategyCache,
    k: usize,
    s: SearchKind,
    opts: PlanOptions,
    steps: usize,
    r1: &RunReport,
) -> Result<f64, String> {
    let r = run_plan_opts(exec, g, cache, k, s, opts, steps).map_err(|e| format!("{name}: {e}"))?;
    let (err, per) = max_rel_error(&r, r1);
    if err > TOLERANCE {
        let worst: Vec<(String, f64)> = per
            .iter()
            .filter(|x| x.1 > TOLERANCE)
            .map(|(t, e)| (g.tensor(*t).name.clone(), *e))
            .take(5)
            .collect();
        return Err(format!(
            "{name} k={k} {}: max rel error {err:e}; worst {worst:?}",
            s.name()
        ));
    }
    Ok(err)
}

/// [`check_one`] for every k of `ks` and every search of `searches`,
/// against one oracle run; panics with the first failure.
pub fn check(name: &str, g: &Graph, ks: &[usize], searches: &[SearchKind], steps: usize) {
    check_with(&cpu, name, g, ks, searches, steps)
}

/// [`check`] executed by `exec` (the oracle too).
pub fn check_with(
    exec: &Exec,
    name: &str,
    g: &Graph,
    ks: &[usize],
    searches: &[SearchKind],
    steps: usize,
) {
    let cache = StrategyCache::new();
    let one = unpartitioned(g, &cache);
    let r1 = reference_with(exec, &one, steps).unwrap_or_else(|e| panic!("{name} k=1 oracle: {e}"));
    for &k in ks {
        for &s in searches {
            if let Err(e) = check_one_with(exec, name, g, &cache, k, s, steps, &r1) {
                panic!("{e}");
            }
        }
    }
}

/// The exact result (to f64 round-off) of one training step: the graph run
/// by the reference interpreter in f64 on the same synthetic data (leaf
/// values rounded to f32 first, as the runner holds them), giving the
/// tensors `like` reports (the kept ones) as f32.
pub fn f64_oracle(g: &Graph, like: &RunReport) -> Result<RunReport, String> {
    let mut vals = synthesize(g, SEED);
    for t in g.tensor_ids() {
        if let Some(v) = vals.get(t) {
            let mut v = v.clone();
            v.data.iter_mut().for_each(|x| *x = *x as f32 as f64);
            vals.set(t, v);
        }
    }
    execute(g, lib(), &mut vals, |_, _| true).map_err(|e| e.to_string())?;
    let outputs = like
        .outputs
        .iter()
        .map(|(t, _)| {
            let v = vals
                .get(*t)
                .ok_or_else(|| format!("no value for tensor {}", t.0))?;
            Ok((*t, v.data.iter().map(|&x| x as f32).collect()))
        })
        .collect::<Result<_, String>>()?;
    Ok(RunReport {
        outputs,
        ..Default::default()
    })
}
