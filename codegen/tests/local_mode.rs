//! Which shares run as the op on local shapes (`KernelMode::Local`, where
//! a backend's library kernels — cuBLAS, cuDNN — can take them) rather than
//! windowed (generated code in global coordinates): a batch-split CNN at
//! k = 2 runs every convolution and pooling share locally, including
//! `maxpool2d_grad`, whose `let first[b, c, oh, ow]` temporary binds
//! variables of its own that the share's box leaves whole (issue 37 item 4:
//! before `codegen::local`'s `let` boxes, each rank's pooling gradient ran
//! windowed and never reached cuDNN); and a batch-split GPT's softmax and
//! layer norm, whose temporaries read one another.
//!
//! Soundness of the local runs is checked end to end elsewhere: the
//! partitioned programs against the unpartitioned run (`tofu run --verify`,
//! `tests/cpu_cuda.rs`) and the CUDA losses against the CPU backend's
//! (`tests/cpu_cuda_train.rs::a_cnn_through_cudnn_gives_the_cpu_losses`).

use std::collections::BTreeMap;

use codegen::{compile, Instr, KernelMode};
use interval::cache::StrategyCache;
use planner::graph::Optimizer;
use planner::plan::{BoundPlan, PlanOptions, SearchKind};
use planner::zoo::{self, CnnConfig, GptConfig};
use tdl::Library;

/// (op, local) -> shares on both ranks of `m` planned data-parallel at
/// k = 2.
fn modes(m: zoo::Model) -> BTreeMap<(String, bool), usize> {
    let lib = Library::shipped().expect("shipped specs load");
    let g = m.training(&lib, &Optimizer::default()).unwrap();
    let cache = StrategyCache::new();
    let opts = PlanOptions::default();
    let (bound, _) = BoundPlan::search(g, &lib, &cache, 2, SearchKind::DataParallel, opts).unwrap();
    let progs = compile(&bound, &lib).unwrap();
    let mut seen: BTreeMap<(String, bool), usize> = BTreeMap::new();
    for p in &progs.programs {
        for i in &p.instrs {
            if let Instr::Compute { spec, mode, .. } = i {
                let name = p.specs[*spec as usize].name.clone();
                *seen.entry((name, *mode == KernelMode::Local)).or_default() += 1;
            }
        }
    }
    seen
}

/// Every share of each of `ops` in `seen` is local, and there is one.
fn all_local(seen: &BTreeMap<(String, bool), usize>, ops: &[&str]) {
    for op in ops {
        assert!(
            seen.contains_key(&(op.to_string(), true)),
            "no local {op}: {seen:?}"
        );
        assert!(
            !seen.contains_key(&(op.to_string(), false)),
            "windowed {op}: {seen:?}"
        );
    }
}

#[test]
fn a_batch_split_cnn_runs_its_convolutions_and_poolings_locally() {
    let cfg = CnnConfig {
        batch: 8,
        ..CnnConfig::new(2, 8)
    };
    let seen = modes(zoo::Model::Cnn(cfg));
    println!("{seen:?}");
    let ops = [
        "conv2d",
        "conv2d_grad_x",
        "conv2d_grad_w",
        "maxpool2d",
        "maxpool2d_grad",
    ];
    all_local(&seen, &ops);
}

/// Softmax's temporaries (`mx`, `e`, `s`) are read by one another with
/// their own variables: they line up through the variables' roots (the
/// output's cut batch variable), so a batch-split GPT's softmax, its
/// gradient and layer norm run locally (before the roots: windowed).
#[test]
fn a_batch_split_gpt_runs_softmax_and_layer_norm_locally() {
    let seen = modes(zoo::Model::Gpt(GptConfig {
        batch: 8,
        ..GptConfig::tiny()
    }));
    println!("{seen:?}");
    all_local(&seen, &["softmax", "softmax_grad", "layernorm"]);
}
