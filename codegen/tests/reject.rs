//! Malformed or mismatched plans are rejected before anything runs.
//!
//! Library path, against the plan that was really made (the oracle):
//! * the plan loader ([`PlanFile::load`]) rejects an embedded graph that does
//!   not match its SHA-256 and a plan whose graph is another model's;
//! * [`codegen::check_recorded`] rejects a plan file whose tiles or
//!   strategies were edited to other *valid* values (which the loader's
//!   structural checks cannot see): the recorded bytes or memory no longer
//!   follow from the decisions;
//! * [`codegen::validate`] rejects programs in which a tile is assembled
//!   twice, an element is read that nothing produced, a send has no matching
//!   receive, or the tiles are not the plan's; and, one test per further
//!   check family of the verifier, programs with a wrong header, a buffer
//!   never freed or allocated twice, a compute over another share, an
//!   exchange or collective out of the global order, or ranks that call
//!   different collectives.
//!
//! The CLI path (`tofu run tampered.json`) is tested in `tests/tests/run_cli.rs`.

use std::path::PathBuf;
use std::sync::OnceLock;

use codegen::{check_recorded, compile, generate, validate, CodegenError, Instr, Programs};
use interval::cache::StrategyCache;
use planner::graph::{Graph, Optimizer};
use planner::plan::model::Model;
use planner::plan::{BoundPlan, OpChoice, PlanFile, PlanOptions, Planned, SearchKind};
use planner::zoo::{self, GptConfig, MlpConfig};
use tdl::Library;

fn lib() -> &'static Library {
    static LIB: OnceLock<Library> = OnceLock::new();
    LIB.get_or_init(|| Library::shipped().expect("shipped specs load"))
}

struct Case {
    g: Graph,
    model: Model,
    p: Planned,
    progs: Programs,
}

/// Tiny MLP planned for `k` workers with CriticalDP, its programs validated.
fn case(k: usize, cache: &StrategyCache) -> Case {
    case_with(k, cache, SearchKind::CriticalDp)
}

/// [`case`] planned by `search`.
fn case_with(k: usize, cache: &StrategyCache, search: SearchKind) -> Case {
    let g = zoo::Model::Mlp(MlpConfig::tiny())
        .training(lib(), &Optimizer::Sgd { lr: 0.1 })
        .unwrap();
    let opts = PlanOptions::default();
    let (bound, p) = BoundPlan::search(g, lib(), cache, k, search, opts).unwrap();
    let progs = compile(&bound, lib()).expect("untampered programs pass");
    Case {
        g: bound.graph,
        model: bound.ops,
        p,
        progs,
    }
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tofu-codegen-reject-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// `progs` are rejected with an error whose message holds every one of
/// `needles`.
fn rejected(c: &Case, progs: &Programs, needles: &[&str]) {
    let err = invalid(c, progs);
    assert!(needles.iter().all(|n| err.contains(n)), "{err}");
}

fn invalid(c: &Case, progs: &Programs) -> String {
    match validate(&c.g, &c.model, &c.p.factors, &c.p.decisions, progs) {
        Err(e @ CodegenError::Invalid { .. }) => e.to_string(),
        other => panic!("tampered programs accepted or wrong error: {other:?}"),
    }
}

#[test]
fn loader_rejects_a_graph_that_does_not_match_its_hash() {
    let cache = StrategyCache::new();
    let c = case(2, &cache);
    let file = PlanFile::new(&c.g, &c.model, &c.p);
    let path = temp("hash.json");
    // One tensor's shape edited in the embedded graph, hash left alone.
    let mut bad = file.clone();
    let tensors = bad.graph["tensors"].as_array_mut().expect("graph tensors");
    let shape = tensors[0]["shape"].as_array_mut().expect("a shape");
    shape[0] = serde_json::json!(shape[0].as_u64().unwrap() + 1);
    bad.save(&path).unwrap();
    let err = PlanFile::load(&path, lib(), &cache)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("does not match its graph") && err.contains("hash.json"),
        "{err}"
    );
}

#[test]
fn loader_rejects_a_plan_for_another_graph() {
    let cache = StrategyCache::new();
    let c = case(2, &cache);
    let file = PlanFile::new(&c.g, &c.model, &c.p);
    // Graph B (a tiny GPT), embedded with its own correct hash, under the
    // decisions made for graph A (the tiny MLP).
    let other = zoo::Model::Gpt(GptConfig::tiny())
        .training(lib(), &Optimizer::Sgd { lr: 0.1 })
        .unwrap();
    let mut bad = file.clone();
    bad.graph = serde_json::from_str(&planner::graph::format::to_json(&other)).unwrap();
    bad.graph_sha256 = planner::plan::file::graph_sha256(&other);
    let path = temp("other.json");
    bad.save(&path).unwrap();
    let err = PlanFile::load(&path, lib(), &cache)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("does not match its graph") && err.contains("in the plan"),
        "{err}"
    );
}

#[test]
fn edited_tiles_and_strategies_are_rejected_by_the_recorded_costs() {
    let cache = StrategyCache::new();
    let c = case(2, &cache);
    let file = PlanFile::new(&c.g, &c.model, &c.p);
    let path = temp("edited.json");
    file.save(&path).unwrap();
    let b = PlanFile::load(&path, lib(), &cache).unwrap();
    let (f, g, d) = (
        b.recorded.expect("loaded from a file"),
        b.graph,
        b.decisions,
    );
    check_recorded(&f, &g, &c.model, &d).expect("the untampered file passes");

    // Edits of one tensor's split at the first level to another valid
    // value (another dim, or replicated). Those of the first layer's weight
    // must all be caught; any edit that is not caught changed nothing the
    // plan records (same bytes per op, same memory per worker), and the
    // programs built from it are still consistent or refused by the
    // validator's carry check.
    let (mut caught, mut total) = (0, 0);
    for (i, t) in file.tensors.iter().enumerate() {
        for alt in (0..t.shape.len() as u32).map(Some).chain([None]) {
            if alt == t.splits[0] {
                continue;
            }
            let mut bad = file.clone();
            bad.tensors[i].splits[0] = alt;
            bad.save(&path).unwrap();
            let b = PlanFile::load(&path, lib(), &cache).expect("structurally valid");
            let (f, g, d) = (
                b.recorded.expect("loaded from a file"),
                b.graph,
                b.decisions,
            );
            total += 1;
            match check_recorded(&f, &g, &c.model, &d) {
                Err(e) => {
                    assert!(matches!(e, CodegenError::Tampered(_)), "{e:?}");
                    assert!(e.to_string().contains("tofu plan"), "{e}");
                    caught += 1;
                }
                Ok(()) => {
                    assert_ne!(
                        t.name, "fc0.w",
                        "edited split {alt:?} of fc0.w went through"
                    );
                    // Either the programs are consistent, or the edit split
                    // an updated tensor unlike the one it replaces, which
                    // the validator refuses (the runner would keep the old
                    // value: `verify::buffers::check_carries`).
                    let progs = generate(&g, lib(), &c.model, &f.factors, &d).unwrap();
                    if let Err(e) = validate(&g, &c.model, &f.factors, &d, &progs) {
                        let e = e.to_string();
                        assert!(
                            e.contains("must have the layout of the tensor it replaces"),
                            "{e}"
                        );
                    }
                }
            }
        }
    }
    assert!(
        caught * 10 >= total * 9,
        "only {caught} of {total} edits caught"
    );

    // An operator's strategy swapped for another valid one.
    let (i, n) = c
        .model
        .ops
        .iter()
        .enumerate()
        .map(|(i, m)| (i, m.strategies.strategies.len() as u32))
        .find(|&(i, n)| n >= 2 && matches!(file.ops[i].choices[0], OpChoice::Strategy(_)))
        .expect("an op with two strategies");
    let OpChoice::Strategy(s) = file.ops[i].choices[0] else {
        unreachable!()
    };
    let mut any = false;
    for alt in (0..n).filter(|&a| a != s) {
        let mut bad = file.clone();
        bad.ops[i].choices[0] = OpChoice::Strategy(alt);
        bad.save(&path).unwrap();
        let b = PlanFile::load(&path, lib(), &cache).unwrap();
        let (f, g, d) = (
            b.recorded.expect("loaded from a file"),
            b.graph,
            b.decisions,
        );
        any |= check_recorded(&f, &g, &c.model, &d).is_err();
    }
    assert!(
        any,
        "no edit of `{}`'s strategy was caught",
        file.ops[i].name
    );
}

#[test]
fn validator_rejects_a_tile_assembled_twice() {
    let cache = StrategyCache::new();
    let c = case(2, &cache);
    // Duplicate the first plain (non-reducing) copy into a buffer.
    let mut progs = c.progs.clone();
    let (r, at) = progs
        .programs
        .iter()
        .enumerate()
        .find_map(|(r, p)| {
            p.instrs
                .iter()
                .position(|i| matches!(i, Instr::Copy { reduce: None, .. }))
                .map(|at| (r, at))
        })
        .expect("a plain copy at k = 2");
    let ins = progs.programs[r].instrs[at].clone();
    progs.programs[r].instrs.insert(at, ins);
    let err = invalid(&c, &progs);
    assert!(err.contains("assembled twice"), "{err}");
}

#[test]
fn validator_rejects_a_tile_never_produced() {
    let cache = StrategyCache::new();
    let c = case(2, &cache);
    // Drop every compute of rank 1: its tiles are read but never written.
    let mut progs = c.progs.clone();
    progs.programs[1]
        .instrs
        .retain(|i| !matches!(i, Instr::Compute { .. }));
    let err = invalid(&c, &progs);
    assert!(
        err.contains("rank 1") && err.contains("before anything writes them"),
        "{err}"
    );
}

#[test]
fn validator_rejects_a_send_without_its_receive() {
    let cache = StrategyCache::new();
    // AllRow-Greedy's plan at k = 3 exchanges rows point to point
    // (CriticalDP's plan of this MLP moves its bytes by collectives only).
    let c = case_with(3, &cache, "allrow-greedy".parse().unwrap());
    // Redirect one send to the third rank: same bytes, same data flow on
    // the sender, but the receiver's receive has no send and the third rank
    // gets a send it does not receive.
    let mut progs = c.progs.clone();
    let (r, at, j) = progs
        .programs
        .iter()
        .enumerate()
        .find_map(|(r, p)| {
            p.instrs.iter().enumerate().find_map(|(at, i)| match i {
                Instr::Exchange { sends, .. } if !sends.is_empty() => Some((r, at, 0)),
                _ => None,
            })
        })
        .expect("a send at k = 3");
    let Instr::Exchange { sends, .. } = &mut progs.programs[r].instrs[at] else {
        unreachable!()
    };
    let peer = sends[j].peer;
    sends[j].peer = (0..3).find(|&x| x != r && x != peer).unwrap();
    let err = invalid(&c, &progs);
    assert!(err.contains("does not match"), "{err}");

    // Drop one send instead: the bytes no longer add up.
    let mut progs = c.progs.clone();
    let Instr::Exchange { sends, .. } = &mut progs.programs[r].instrs[at] else {
        unreachable!()
    };
    sends.remove(j);
    let err = invalid(&c, &progs);
    assert!(
        err.contains(&format!("rank {r}")) && err.contains("bytes"),
        "{err}"
    );
}

#[test]
fn validator_rejects_programs_of_other_tiles() {
    let cache = StrategyCache::new();
    let c = case(2, &cache);
    // Programs generated from decisions with one weight's tile changed,
    // validated against the plan: the tile is not the plan's.
    let t = c.g.tensor_by_name("fc0.w").unwrap();
    let mut d = c.p.decisions.clone();
    d.tensors[t.index()][0] = match d.tensors[t.index()][0] {
        Some(0) => Some(1),
        _ => Some(0),
    };
    let progs = generate(&c.g, lib(), &c.model, &c.p.factors, &d).unwrap();
    let err = invalid(&c, &progs);
    assert!(
        err.contains("tile of `fc0.w`") && err.contains("the plan gives"),
        "{err}"
    );
}

#[test]
fn validator_rejects_wrong_headers() {
    let cache = StrategyCache::new();
    let c = case(2, &cache);
    let mut progs = c.progs.clone();
    progs.programs.pop();
    rejected(&c, &progs, &["1 programs for 2 ranks"]);

    // Rank 1's program claims to be rank 0's.
    let mut progs = c.progs.clone();
    progs.programs[1].rank = 0;
    rejected(&c, &progs, &["rank 1", "header", "rank 0 of 2"]);
}

#[test]
fn validator_rejects_a_buffer_never_freed_or_allocated_twice() {
    let cache = StrategyCache::new();
    let c = case(2, &cache);
    let mut progs = c.progs.clone();
    let at = progs.programs[0]
        .instrs
        .iter()
        .position(|i| matches!(i, Instr::Free { .. }))
        .expect("a free");
    progs.programs[0].instrs.remove(at);
    rejected(&c, &progs, &["rank 0", "is never freed"]);

    let mut progs = c.progs.clone();
    let at = progs.programs[1]
        .instrs
        .iter()
        .position(|i| matches!(i, Instr::Alloc { .. }))
        .expect("an alloc");
    let ins = progs.programs[1].instrs[at].clone();
    progs.programs[1].instrs.insert(at + 1, ins);
    rejected(
        &c,
        &progs,
        &[
            format!("instruction {} (alloc)", at + 1).as_str(),
            "while it is not alive (or allocates it twice)",
        ],
    );
}

#[test]
fn validator_rejects_a_compute_over_another_share() {
    let cache = StrategyCache::new();
    let c = case(2, &cache);
    let mut progs = c.progs.clone();
    let var_box = progs.programs[1]
        .instrs
        .iter_mut()
        .find_map(|i| match i {
            Instr::Compute { var_box, .. } => Some(var_box),
            _ => None,
        })
        .expect("a compute");
    var_box[0].1 += 1;
    rejected(&c, &progs, &["rank 1", "but this rank's share is"]);
}

#[test]
fn validator_rejects_an_exchange_out_of_the_global_order() {
    let cache = StrategyCache::new();
    // AllRow-Greedy's plan at k = 3 exchanges by all-to-alls and point to
    // point.
    let c = case_with(3, &cache, "allrow-greedy".parse().unwrap());
    // The first and the last exchange of a rank trade their (op, phase):
    // same messages and data flow, but the last now comes first in the
    // global order.
    let mut progs = c.progs.clone();
    let (r, at) = progs
        .programs
        .iter()
        .enumerate()
        .find_map(|(r, p)| {
            let at: Vec<usize> = (0..p.instrs.len())
                .filter(|&k| key(&p.instrs[k]).is_some())
                .collect();
            (at.len() >= 2 && key(&p.instrs[at[0]]) != key(&p.instrs[*at.last().unwrap()]))
                .then(|| (r, [at[0], *at.last().unwrap()]))
        })
        .expect("a rank with two exchanges at k = 3");
    let instrs = &mut progs.programs[r].instrs;
    let (first, last) = (key(&instrs[at[0]]), key(&instrs[at[1]]));
    for (k, new) in [(at[0], last), (at[1], first)] {
        if let Instr::Exchange { op, phase, .. } | Instr::AllToAll { op, phase, .. } =
            &mut instrs[k]
        {
            (*op, *phase) = new.unwrap();
        }
    }
    rejected(
        &c,
        &progs,
        &[format!("rank {r}").as_str(), "is out of the global order"],
    );
}

#[test]
fn validator_rejects_a_collective_out_of_the_global_order() {
    let cache = StrategyCache::new();
    // Data parallelism at k = 2 sums the weight gradients by all-reduces.
    let c = case_with(2, &cache, SearchKind::DataParallel);
    // The last all-reduce of rank 0 names the first op, after collectives
    // of later ops.
    let mut progs = c.progs.clone();
    let op = progs.programs[0]
        .instrs
        .iter_mut()
        .rev()
        .find_map(|i| match i {
            Instr::AllReduce { op, .. } => Some(op),
            _ => None,
        })
        .expect("an all-reduce at k = 2");
    assert!(op.0 > 0, "the last all-reduce is of op 0");
    *op = planner::graph::OpId(0);
    rejected(
        &c,
        &progs,
        &[
            "rank 0",
            format!("collective of op `{}`", c.g.ops()[0].name).as_str(),
            "is out of the global order",
        ],
    );
}

#[test]
fn validator_rejects_ranks_that_call_different_collectives() {
    let cache = StrategyCache::new();
    let c = case_with(2, &cache, SearchKind::DataParallel);
    // Rank 1 runs its first all-reduce as a reduce-scatter (rank 0 gets
    // the whole region) and an all-gather: the same bytes and the same data
    // flow on rank 1, but rank 0 calls an all-reduce (a deadlock on NCCL).
    let mut progs = c.progs.clone();
    let instrs = &mut progs.programs[1].instrs;
    let at = instrs
        .iter()
        .position(|i| matches!(i, Instr::AllReduce { .. }))
        .expect("an all-reduce at k = 2");
    let Instr::AllReduce {
        op,
        src,
        dst,
        region,
        reduce,
    } = instrs[at].clone()
    else {
        unreachable!()
    };
    let empty = codegen::Region(region.0.iter().map(|&(l, _)| (l, l)).collect());
    let blocks = vec![region, empty];
    instrs[at] = Instr::ReduceScatter {
        op,
        src,
        dst,
        blocks: blocks.clone(),
        reduce,
    };
    instrs.insert(
        at + 1,
        Instr::AllGather {
            op,
            buf: dst,
            blocks,
        },
    );
    rejected(&c, &progs, &["rank 1", "differ from rank 0's"]);
}

/// The (operator, phase) of an exchange or all-to-all.
fn key(i: &Instr) -> Option<(planner::graph::OpId, planner::plan::Phase)> {
    match i {
        Instr::Exchange { op, phase, .. } | Instr::AllToAll { op, phase, .. } => {
            Some((*op, *phase))
        }
        _ => None,
    }
}
