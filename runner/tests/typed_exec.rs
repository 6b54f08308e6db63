//! Element types end to end (issue 27 item 1): a training graph whose
//! leaves are i64 row ids, i32 and u8 integers, a bool mask, f16 and bf16
//! values, partitioned at k ∈ {1, 2, 4, 8} by every search, computes what
//! the unpartitioned graph computes (≤ 1e-4 relative), each rank sends
//! exactly the bytes the planner predicts with each type's size, and the
//! integer tensors cross the wire (so the typed messages are exercised).

mod partition;

use std::collections::BTreeMap;

use codegen::{wire, DType};
use interval::cache::StrategyCache;
use partition::{check, lib};
use planner::graph::{float, Fill, Graph, GraphBuilder, Optimizer};
use planner::plan::{PlanOptions, SearchKind};

const KS: [usize; 4] = [1, 2, 4, 8];

/// `cross_entropy((where(mask, table[ids], h16) + bf + 0.01·u8 + 0.1·i32) · w, labels)`
/// plus `cross_entropy((Σ_leaf q · leaf) · w2, labels2)`.
fn typed_graph() -> Graph {
    let mut b = GraphBuilder::new(lib(), "typed");
    let (n, d, v) = (32, 16, 12);
    let ids = b
        .input("ids", &[n], DType::I64, Fill::Indices { bound: v })
        .unwrap();
    let table = b.weight("table", &[v, d], 0.5).unwrap();
    let e = b.op1("embedding", "embed", &[table, ids], &[]).unwrap();
    let mask = b
        .input("mask", &[n, d], DType::Bool, Fill::Indices { bound: 2 })
        .unwrap();
    let h16 = b
        .input("h16", &[n, d], DType::F16, Fill::Normal { std: 1.0 })
        .unwrap();
    let z = b.op1("where", "select", &[mask, e, h16], &[]).unwrap();
    let bf = b
        .input("bf", &[n, d], DType::Bf16, Fill::Normal { std: 1.0 })
        .unwrap();
    let z = b.op1("add", "plus_bf", &[z, bf], &[]).unwrap();
    let bytes = b
        .input("bytes", &[n, d], DType::U8, Fill::Indices { bound: 256 })
        .unwrap();
    let sb = b
        .op1("scale", "scale_u8", &[bytes], &[("alpha", float(0.01))])
        .unwrap();
    let z = b.op1("add", "plus_u8", &[z, sb], &[]).unwrap();
    let counts = b
        .input("counts", &[n, d], DType::I32, Fill::Indices { bound: 7 })
        .unwrap();
    let sc = b
        .op1("scale", "scale_i32", &[counts], &[("alpha", float(0.1))])
        .unwrap();
    let z = b.op1("add", "plus_i32", &[z, sc], &[]).unwrap();
    let w = b.weight("w", &[d, 8], 0.5).unwrap();
    let logits = b.op1("matmul", "fc", &[z, w], &[]).unwrap();
    let labels = b
        .input("labels", &[n, 8], DType::F32, Fill::Probabilities)
        .unwrap();
    let loss = b
        .op1("softmax_cross_entropy", "loss", &[logits, labels], &[])
        .unwrap();
    // Each typed leaf also read whole along its rows, as a matmul's K
    // operand: plans that split the rows above must move it.
    let q = b.weight("q", &[4, n], 0.5).unwrap();
    let mut side = None;
    for (name, leaf) in [
        ("mask", mask),
        ("h16", h16),
        ("bf", bf),
        ("u8", bytes),
        ("i32", counts),
    ] {
        let r = b
            .op1("matmul", &format!("read_{name}"), &[q, leaf], &[])
            .unwrap();
        side = Some(match side {
            None => r,
            Some(acc) => b
                .op1("add", &format!("sum_{name}"), &[acc, r], &[])
                .unwrap(),
        });
    }
    let w2 = b.weight("w2", &[d, 8], 0.5).unwrap();
    let logits2 = b.op1("matmul", "fc2", &[side.unwrap(), w2], &[]).unwrap();
    let labels2 = b
        .input("labels2", &[4, 8], DType::F32, Fill::Probabilities)
        .unwrap();
    let loss2 = b
        .op1("softmax_cross_entropy", "loss2", &[logits2, labels2], &[])
        .unwrap();
    let loss = b.op1("add", "total", &[loss, loss2], &[]).unwrap();
    let fwd = b.finish(loss).unwrap();
    planner::graph::training_graph(&fwd, lib(), &Optimizer::Sgd { lr: 0.1 }).unwrap()
}

#[test]
fn typed_leaves_every_search_every_k() {
    check("typed", &typed_graph(), &KS, &SearchKind::ALL, 2);
}

/// Some plan moves each 8-, 2- and 1-byte tensor between ranks, and the
/// planner counts each at its type's size: an i64 element is 8 bytes.
#[test]
fn typed_leaves_cross_the_wire_at_their_size() {
    let g = typed_graph();
    let cache = StrategyCache::new();
    let mut moved: BTreeMap<DType, u64> = BTreeMap::new();
    for k in [2, 4, 8] {
        for s in SearchKind::ALL {
            let progs = partition::compiled(&g, &cache, k, s, PlanOptions::default());
            for t in &progs.transfers {
                let dtype = g.tensor(t.tensor).dtype;
                let elems = t.region.volume();
                assert_eq!(
                    wire::message_bytes(elems, dtype),
                    elems * dtype.size_bytes(),
                    "a {dtype} message of {elems} elements is not whole words"
                );
                *moved.entry(dtype).or_default() += elems;
            }
        }
    }
    // (i32 words cross the wire as f32 words do; `codegen::wire`'s tests
    // cover its encoding.)
    for dtype in [DType::I64, DType::Bool, DType::F16, DType::Bf16, DType::U8] {
        assert!(
            moved.get(&dtype).copied().unwrap_or(0) > 0,
            "no plan moves a {dtype} tensor: {moved:?}"
        );
    }
}
