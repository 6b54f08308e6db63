//! Which shares run as the op on local shapes (`KernelMode::Local`, where
//! a backend's library kernels — cuBLAS, cuDNN — can take them) rather than
//! windowed (generated code in global coordinates): a batch-split CNN at
//! k = 2 runs every convolution and pooling share locally, including
//! `maxpool2d_grad`, whose `let first[b, c, oh, ow]` temporary binds
//! variables of its own that the share's box leaves whole (issue 37 item 4:
//! before `codegen::local`'s `let` boxes, each rank's pooling gradient ran
//! windowed and never reached cuDNN).
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
use planner::zoo::{self, CnnConfig};
use tdl::Library;

#[test]
fn a_batch_split_cnn_runs_its_convolutions_and_poolings_locally() {
    let lib = Library::shipped().expect("shipped specs load");
    let cfg = CnnConfig {
        batch: 8,
        ..CnnConfig::new(2, 8)
    };
    let g = zoo::Model::Cnn(cfg)
        .training(&lib, &Optimizer::default())
        .unwrap();
    let cache = StrategyCache::new();
    let opts = PlanOptions::default();
    let (bound, _) = BoundPlan::search(g, &lib, &cache, 2, SearchKind::DataParallel, opts).unwrap();
    let progs = compile(&bound, &lib).unwrap();
    // (op, mode) -> shares, both ranks.
    let mut seen: BTreeMap<(String, bool), usize> = BTreeMap::new();
    for p in &progs.programs {
        for i in &p.instrs {
            if let Instr::Compute { spec, mode, .. } = i {
                let name = &p.specs[*spec as usize].name;
                if name.starts_with("conv2d") || name.starts_with("maxpool2d") {
                    let local = *mode == KernelMode::Local;
                    *seen.entry((name.clone(), local)).or_default() += 1;
                }
            }
        }
    }
    println!("{seen:?}");
    let windowed: Vec<_> = seen.keys().filter(|(_, local)| !local).collect();
    assert!(windowed.is_empty(), "windowed shares: {seen:?}");
    for op in [
        "conv2d",
        "conv2d_grad_x",
        "conv2d_grad_w",
        "maxpool2d",
        "maxpool2d_grad",
    ] {
        assert!(
            seen.contains_key(&(op.to_string(), true)),
            "no local {op}: {seen:?}"
        );
    }
}
