//! The Megatron-style baseline (`--search megatron`): the weights of a
//! transformer's matmuls are replicated across the data-parallel levels and
//! split as Megatron-LM splits them inside the tensor-parallel group
//! (column-split first linear, row-split second, vocabulary-split embedding);
//! without `tensor_parallel`, the best t is kept.

use interval::cache::StrategyCache;
use planner::graph::{Graph, Optimizer, TensorId, TensorRole};
use planner::plan::{plan_with, PlanOptions, SearchKind};
use planner::zoo::{self, GptConfig};
use tdl::Library;

fn gpt(lib: &Library) -> Graph {
    let cfg = GptConfig {
        layers: 1,
        d_model: 16,
        heads: 2,
        d_ff: 32,
        seq: 8,
        vocab: 12,
        batch: 4,
    };
    zoo::Model::Gpt(cfg)
        .training(lib, &Optimizer::Sgd { lr: 0.1 })
        .unwrap()
}

fn megatron(g: &Graph, lib: &Library, k: usize, t: Option<usize>) -> planner::plan::Planned {
    let opts = PlanOptions {
        tensor_parallel: t,
        ..PlanOptions::default()
    };
    plan_with(
        g,
        lib,
        &StrategyCache::new(),
        k,
        "megatron".parse().unwrap(),
        opts,
    )
    .unwrap()
}

#[test]
fn megatron_splits_matmul_weights_inside_the_tensor_parallel_group() {
    let lib = Library::shipped().unwrap();
    let g = gpt(&lib);
    let p = megatron(&g, &lib, 4, Some(2));
    assert_eq!(p.factors, vec![2, 2]);
    assert_eq!(p.choice, "tensor parallel 2 × data parallel 2");
    let layout = |name: &str| {
        let t = g.tensors().iter().position(|t| t.name == name).unwrap();
        p.decisions.tensors[t].clone()
    };
    // Outer level: data parallelism (replicated); inner: Megatron's split.
    assert_eq!(
        layout("h0.qkv.w"),
        vec![None, Some(1)],
        "column-split fused qkv"
    );
    assert_eq!(layout("h0.fc1.w"), vec![None, Some(1)], "column-split fc1");
    assert_eq!(layout("h0.proj.w"), vec![None, Some(0)], "row-split proj");
    assert_eq!(layout("h0.fc2.w"), vec![None, Some(0)], "row-split fc2");
    assert_eq!(layout("wte"), vec![None, Some(0)], "vocabulary-split");
    assert_eq!(
        layout("grad/h0.fc2.w"),
        vec![None, Some(0)],
        "gradient follows"
    );
    assert_eq!(layout("h0.ln1.gamma").iter().flatten().count(), 0);
    // Activations are split along the batch at the data-parallel level.
    assert_eq!(layout("ids")[0], Some(0));
}

#[test]
fn megatron_without_t_keeps_the_cheapest_group_size() {
    let lib = Library::shipped().unwrap();
    let g = gpt(&lib);
    let best = megatron(&g, &lib, 4, None);
    let each: Vec<u64> = [1, 2, 4]
        .iter()
        .map(|&t| megatron(&g, &lib, 4, Some(t)).comm_bytes)
        .collect();
    assert_eq!(best.comm_bytes, *each.iter().min().unwrap(), "{each:?}");
    // t = 1 is data parallelism.
    let dp = plan_with(
        &g,
        &lib,
        &StrategyCache::new(),
        4,
        SearchKind::DataParallel,
        PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(each[0], dp.comm_bytes);
}

/// `model`'s training graph with momentum SGD (the optimizer).
fn momentum_training(model: zoo::Model, lib: &Library) -> Graph {
    let opt = Optimizer::Momentum {
        lr: 0.1,
        momentum: 0.9,
    };
    model.training(lib, &opt).unwrap()
}

/// Megatron-LM's bytes per step inside the transformer blocks, counted by
/// hand from the model's dims with ring collectives (2(p−1)·N bytes moved by
/// the p ranks of an all-reduce of N bytes), for tensor parallelism t inside
/// data parallelism dp = k/t (issue 28):
/// * activations: one all-reduce of the group's `[B/dp, S, D]` f32 activation
///   per row-parallel linear in the forward (Megatron's g: the attention
///   output projection, the second MLP matmul) and per column-parallel
///   linear in the backward (Megatron's f, the gradient of its input: the
///   fused, head-interleaved QKV linear and the first MLP matmul), in each
///   of the dp groups: `(row + column linears) · 2(t−1) · B · S · D · 4`;
/// * gradients: every block weight's gradient all-reduced over the dp
///   replicas of its shard: `2(dp−1) · W` for W bytes of block weights (the
///   small replicated ones, norm scales and biases, are all-reduced whole by
///   each of the t ranks: `t · 2(dp−1) · w`).
///
/// Four all-reduces per block: the hand count of 12.88e9 for the
/// activations, and its 31.6e9 for the gradients less the embeddings'.
fn hand_count_blocks(cfg: &GptConfig, g: &Graph, k: usize, t: usize) -> f64 {
    let dp = k / t;
    let (mut linears, mut weights) = (0usize, 0.0);
    for (i, w) in g.tensors().iter().enumerate() {
        if w.role != TensorRole::Weight || !in_block(&w.name) || w.updates.is_some() {
            continue;
        }
        let split = planner::plan::searches::megatron::weight_split(g, TensorId(i as u32));
        // Column-split (1) and row-split (0) matmul weights: one all-reduce each.
        linears += usize::from(split.is_some());
        let copies = if split.is_some() { 1 } else { t };
        weights += (copies * w.bytes() as usize) as f64;
    }
    let activations = (linears * 2 * (t - 1) * cfg.batch * cfg.seq * cfg.d_model * 4) as f64;
    activations + (2 * (dp - 1)) as f64 * weights
}

/// Whether an op belongs to a transformer block (`h<i>.…`, its backward
/// `bwd/h<i>.…`, gradient sums and updates of block tensors).
fn in_block(name: &str) -> bool {
    name.split('/').any(|part| {
        part.strip_prefix('h')
            .and_then(|r| r.split('.').next())
            .is_some_and(|n| !n.is_empty() && n.parse::<usize>().is_ok())
    })
}

/// Megatron-LM's bytes per step outside the blocks (the issue's "embeddings
/// and logits"), by hand as [`hand_count_blocks`]:
/// * the vocabulary-parallel token lookup's forward all-reduce and the
///   logits' (a column-parallel linear) backward all-reduce of the group's
///   `[B/dp, S, D]`: `2 · 2(t−1) · B · S · D · 4`;
/// * the vocabulary-parallel cross-entropy's all-reduces of `[B/dp, S]`
///   (the row max, the sum of exponentials, the labelled logit and the
///   label sum): `4 · 2(t−1) · B · S · 4`;
/// * the gradients of the weights outside the blocks all-reduced over the
///   dp replicas, once per weight: the tied token table split by
///   vocabulary rows (its two contributions summed before the reduction),
///   the position table and the final norm whole on each of the t ranks.
fn hand_count_outside_blocks(cfg: &GptConfig, g: &Graph, k: usize, t: usize) -> f64 {
    let dp = k / t;
    let (b, s, d) = (cfg.batch, cfg.seq, cfg.d_model);
    let activations = 2 * 2 * (t - 1) * b * s * d * 4;
    let cross_entropy = 4 * 2 * (t - 1) * b * s * 4;
    let mut weights = 0usize;
    for (i, w) in g.tensors().iter().enumerate() {
        if w.role != TensorRole::Weight || in_block(&w.name) || w.updates.is_some() {
            continue;
        }
        let split = planner::plan::searches::megatron::weight_split(g, TensorId(i as u32));
        weights += if split.is_some() { 1 } else { t } * w.bytes() as usize;
    }
    (activations + cross_entropy + 2 * (dp - 1) * weights) as f64
}

/// The Megatron baseline against the hand count, blocks and whole plan, and
/// CriticalDP's default plan against it (issue 28: ≤ 45.6e9 bytes, the
/// hand count of 44.7e9 with 2%).
#[test]
fn megatron_blocks_move_the_hand_counted_bytes_on_gpt_24_2048() {
    let lib = Library::shipped().unwrap();
    let cfg = GptConfig::new(24, 2048).unwrap();
    let g = momentum_training(zoo::Model::Gpt(cfg.clone()), &lib);
    let (k, t) = (8, 2);
    let p = megatron(&g, &lib, k, Some(t));
    let blocks: u64 = g
        .ops()
        .iter()
        .zip(&p.op_comm_bytes)
        .filter(|(o, _)| in_block(&o.name))
        .map(|(_, b)| *b)
        .sum();
    let hand = hand_count_blocks(&cfg, &g, k, t);
    let ratio = blocks as f64 / hand;
    println!(
        "gpt-24-2048 b8 k8 t2: blocks {:.3e} bytes, hand count {hand:.3e} ({ratio:.4}×); whole plan {:.3e}",
        blocks as f64, p.comm_bytes as f64
    );
    assert!(
        (ratio - 1.0).abs() <= 0.02,
        "blocks {blocks} vs hand count {hand:.0}: {ratio:.4}×"
    );
    let whole = hand + hand_count_outside_blocks(&cfg, &g, k, t);
    let ratio = p.comm_bytes as f64 / whole;
    println!("whole plan: hand count {whole:.4e} ({ratio:.4}×)");
    assert!(
        (ratio - 1.0).abs() <= 0.02,
        "whole plan {} vs hand count {whole:.0}: {ratio:.4}×",
        p.comm_bytes
    );
    let cdp = plan_with(
        &g,
        &lib,
        &StrategyCache::new(),
        k,
        SearchKind::CriticalDp,
        PlanOptions::default(),
    )
    .unwrap();
    println!(
        "critical-dp: {:.4e} bytes ({}; {:.4}× the hand count)",
        cdp.comm_bytes as f64,
        cdp.choice,
        cdp.comm_bytes as f64 / whole
    );
    assert!(cdp.comm_bytes <= p.comm_bytes);
    assert!(cdp.comm_bytes as f64 <= 1.02 * whole);
}

/// CriticalDP against the Megatron-LM baseline on the three large
/// models at k = 8, 16, 64 (momentum, the zoo's batch): the plan CriticalDP
/// keeps moves no more bytes than the best Megatron plan (over every t
/// dividing k). Where that plan needs more memory per worker than
/// Megatron's (bert-24-1024 at k = 16, run of 2026-11-27: recursion 2·2·2·2
/// with 38.9e9 bytes and 5.617e9 bytes per worker against Megatron's t = 2
/// with 41.9e9 and 5.611e9), CriticalDP given Megatron's peak as the device
/// memory (`--device-memory`, the search's memory price) keeps a plan no
/// worse in both. Heavy in a debug build:
/// `cargo test --release -p planner --test megatron -- --ignored`.
#[test]
#[ignore = "plans three large models at k = 64; run in release (see the doc)"]
fn critical_dp_is_no_worse_than_megatron_on_the_large_models() {
    let lib = Library::shipped().unwrap();
    let cdp = |g: &Graph, k: usize, device_memory: Option<u64>| {
        let opts = PlanOptions {
            device_memory,
            ..PlanOptions::default()
        };
        plan_with(
            g,
            &lib,
            &StrategyCache::new(),
            k,
            SearchKind::CriticalDp,
            opts,
        )
        .unwrap()
    };
    let mut worse = Vec::new();
    for name in ["gpt-24-2048", "bert-24-1024", "wresnet-152-10"] {
        let g = momentum_training(zoo::Model::parse(name).unwrap(), &lib);
        for k in [8, 16, 64] {
            let meg = megatron(&g, &lib, k, None);
            let mm = planner::plan::max_memory(&meg);
            let mut p = cdp(&g, k, None);
            let line = |p: &planner::plan::Planned| {
                format!(
                    "{name} k={k}: critical-dp {:.3e} bytes {:.3e} B/worker ({}); megatron {:.3e} bytes {mm:.3e} B/worker ({})",
                    p.comm_bytes as f64,
                    planner::plan::max_memory(p) as f64,
                    p.choice,
                    meg.comm_bytes as f64,
                    meg.choice
                )
            };
            println!("{}", line(&p));
            if planner::plan::max_memory(&p) > mm {
                p = cdp(&g, k, Some(mm));
                println!("  with --device-memory {mm}: {}", line(&p));
            }
            if p.comm_bytes > meg.comm_bytes || planner::plan::max_memory(&p) > mm {
                worse.push(line(&p));
            }
        }
    }
    assert!(
        worse.is_empty(),
        "critical-dp worse than megatron on {worse:#?}"
    );
}
