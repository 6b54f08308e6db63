//! Collectives in the programs: data parallelism's gradient sums are
//! all-reduces (every weight gradient of the zoo models at k = 8), the share
//! of bytes the collectives move is reported for the zoo plans at k = 8, and
//! every program still sends exactly the planner's predicted bytes
//! (`validate` checks that with the ring formulas of `comm::traffic`);
//! exchanges where every pair of ranks moves one message are all-to-alls
//! and one rank feeding all others a flat broadcast (zoo plans at k = 3, 4),
//! with each rank's bytes those of the plan's transfers.

use std::sync::OnceLock;

use codegen::{compile, Instr, Programs};
use comm::traffic::BYTES_PER_ELEMENT;
use interval::cache::StrategyCache;
use planner::graph::{Graph, Optimizer};
use planner::plan::{BoundPlan, PlanOptions, SearchKind};
use planner::zoo::{self, GptConfig, MlpConfig, RnnConfig, WResNetConfig};
use tdl::Library;

fn lib() -> &'static Library {
    static LIB: OnceLock<Library> = OnceLock::new();
    LIB.get_or_init(|| Library::shipped().expect("shipped specs load"))
}

/// `g` planned for `k` workers by `s`, generated and verified in one call.
fn programs(g: &Graph, k: usize, s: SearchKind) -> Programs {
    let cache = StrategyCache::new();
    let opts = PlanOptions::default();
    let (bound, _) = BoundPlan::search(g.clone(), lib(), &cache, k, s, opts).unwrap();
    compile(&bound, lib()).unwrap()
}

/// (bytes by collectives, all bytes) per step, all ranks.
fn share(progs: &Programs) -> (u64, u64) {
    let c = progs
        .programs
        .iter()
        .map(|p| p.collective_bytes_sent())
        .sum();
    let all = progs.programs.iter().map(|p| p.bytes_sent()).sum();
    (c, all)
}

#[test]
fn data_parallel_gradient_sums_are_all_reduces() {
    // A batch large enough that summing weight gradients beats fetching
    // the batch: every gradient is a sum of partial results.
    let cfg = MlpConfig {
        batch: 256,
        ..MlpConfig::new(3, 32)
    };
    let g = zoo::Model::Mlp(cfg)
        .training(lib(), &Optimizer::default())
        .unwrap();
    for k in [2, 4, 8] {
        let progs = programs(&g, k, SearchKind::DataParallel);
        for p in &progs.programs {
            let reduced: Vec<&str> = p
                .instrs
                .iter()
                .filter_map(|i| match i {
                    Instr::AllReduce { dst, .. } => {
                        Some(g.tensor(p.buffers[*dst as usize].tensor).name.as_str())
                    }
                    _ => None,
                })
                .collect();
            for t in g
                .tensors()
                .iter()
                .filter(|t| t.name.ends_with(".w") || t.name.ends_with(".b"))
                .filter(|t| !t.name.starts_with("grad/"))
            {
                let grad = format!("grad/{}", t.name);
                assert!(
                    reduced.contains(&grad.as_str()),
                    "k={k} rank {}: `{grad}` is not all-reduced; all-reduces: {reduced:?}",
                    p.rank
                );
            }
            // Only the scalar loss goes point to point (reduced on rank 0).
            for i in &p.instrs {
                if let Instr::Exchange { sends, recvs, .. } = i {
                    assert!(
                        sends.iter().chain(recvs).all(|m| m.region.volume() == 1),
                        "k={k} rank {}: data parallelism with a point-to-point exchange",
                        p.rank
                    );
                }
            }
        }
        let (c, all) = share(&progs);
        assert!(
            c as f64 >= 0.99 * all as f64,
            "k={k}: collectives move {c} of {all} bytes"
        );
    }
}

#[test]
fn zoo_plans_at_k8_report_the_share_of_collectives() {
    for m in tiny_zoo() {
        let g = m.training(lib(), &Optimizer::default()).unwrap();
        for s in [SearchKind::CriticalDp, SearchKind::DataParallel] {
            let progs = programs(&g, 8, s);
            let (c, all) = share(&progs);
            println!(
                "{:<14} k=8 {:<14} collectives move {:>5.1}% of {all} bytes/step",
                g.name(),
                s.name(),
                100.0 * c as f64 / all.max(1) as f64
            );
            if s == SearchKind::DataParallel {
                assert!(c > 0, "{}: data parallelism without collectives", g.name());
            }
        }
    }
}

/// The zoo models at sizes a debug test plans in seconds.
fn tiny_zoo() -> [zoo::Model; 4] {
    [
        zoo::Model::Mlp(MlpConfig {
            batch: 256,
            ..MlpConfig::new(4, 128)
        }),
        zoo::Model::Rnn(RnnConfig {
            batch: 64,
            ..RnnConfig::tiny()
        }),
        zoo::Model::Gpt(GptConfig {
            batch: 8,
            ..GptConfig::tiny()
        }),
        zoo::Model::WResNet(WResNetConfig {
            batch: 16,
            ..WResNetConfig::tiny()
        }),
    ]
}

#[test]
fn zoo_plans_at_k3_and_k4_use_all_to_all_and_broadcast_with_predicted_bytes() {
    let (mut a2a, mut bcast) = (0usize, 0usize);
    for m in tiny_zoo() {
        let g = m.training(lib(), &Optimizer::default()).unwrap();
        for k in [3, 4] {
            let progs = programs(&g, k, SearchKind::CriticalDp);
            // Oracle: the plan's transfers, summed per source rank.
            let mut want = vec![0u64; k];
            for t in &progs.transfers {
                if t.src != t.dst {
                    want[t.src] += t.region.volume() * BYTES_PER_ELEMENT;
                }
            }
            for p in &progs.programs {
                assert_eq!(
                    p.bytes_sent(),
                    want[p.rank],
                    "{} k={k} rank {}",
                    g.name(),
                    p.rank
                );
                for i in &p.instrs {
                    match i {
                        Instr::AllToAll { sends, recvs, .. } => {
                            assert_eq!((sends.len(), recvs.len()), (k - 1, k - 1));
                            a2a += 1;
                        }
                        Instr::Broadcast { .. } => bcast += 1,
                        _ => {}
                    }
                }
            }
        }
    }
    println!("all-to-all instructions {a2a}, broadcasts {bcast}");
    assert!(a2a > 0, "no all-to-all in the zoo plans at k = 3, 4");
    assert!(bcast > 0, "no broadcast in the zoo plans at k = 3, 4");
}
