//! The CUDA backend (feature `cuda`) against the same oracles as the CPU:
//! every op of the shipped library equals the reference interpreter, and
//! every tiny zoo model × every search × k ∈ {1, 2, 3, 4, 8} (ranks sharing
//! device 0 through host-staged communication) equals the unpartitioned run
//! on the device, with exactly the predicted bytes per rank.
//!
//! Without a device these tests print `SKIPPED` and the reason, and pass;
//! with `TOFU_REQUIRE_GPU=1` they fail instead.
#![cfg(feature = "cuda")]

mod common;
mod partition;

use codegen::Programs;
use partition::{check_with, lib};
use planner::graph::{Graph, Optimizer};
use planner::plan::SearchKind;
use planner::zoo::{self, GptConfig, MlpConfig, RnnConfig, WResNetConfig};
use rand::rngs::StdRng;
use rand::SeedableRng;
use runner::backend::cuda::{device_count, CudaBackend, HostStaged, NcclCommunicator};
use runner::{
    run_programs_on, Backend, Collectives, Communicator, LocalCommunicator, ReduceOp, RunOptions,
    RunReport,
};

const KS: [usize; 5] = [1, 2, 3, 4, 8];

/// Whether device 0 can be used; prints why not (and fails under
/// `TOFU_REQUIRE_GPU=1`).
fn gpu(test: &str) -> bool {
    let why = match device_count() {
        Ok(n) if n > 0 => return true,
        Ok(_) => "the driver sees no CUDA device".to_string(),
        Err(e) => e.to_string(),
    };
    if std::env::var("TOFU_REQUIRE_GPU").as_deref() == Ok("1") {
        panic!("{test}: TOFU_REQUIRE_GPU=1 but no GPU: {why}");
    }
    println!("SKIPPED {test}: {why}");
    false
}

/// Programs on device 0, one backend per rank, host-staged communication.
fn on_cuda(_graph: &Graph, progs: &Programs, opts: RunOptions) -> Result<RunReport, String> {
    let ranks = LocalCommunicator::create(progs.programs.len())
        .into_iter()
        .map(|c| CudaBackend::new(0).map(|b| (b, HostStaged::new(c))))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    run_programs_on(&progs.programs, opts, None, ranks).map_err(|e| e.to_string())
}

#[test]
fn every_shipped_op_matches_the_interpreter_on_cuda() {
    if !gpu("every_shipped_op_matches_the_interpreter_on_cuda") {
        return;
    }
    use runner::backend::cuda::codegen::ReduceOptions;
    // Default kernels, then every reduction as a block reduction, then
    // split over several blocks (shapes here are too small to choose those
    // by themselves).
    let forced = |split_min| ReduceOptions {
        block_min: 1,
        split_min,
    };
    let modes = [ReduceOptions::default(), forced(usize::MAX), forced(1)];
    let ops: Vec<_> = lib().ops().collect();
    // (mode, op) pairs dealt round-robin to one thread per CPU, each with
    // its own backend on device 0: NVRTC compiles (~1,300 distinct sources)
    // dominate, and the module cache compiles different sources at once.
    let work: Vec<(usize, usize)> = (0..modes.len())
        .flat_map(|m| (0..ops.len()).map(move |o| (m, o)))
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .min(16);
    let started = std::time::Instant::now();
    let results: Vec<(Vec<String>, std::collections::BTreeMap<&'static str, usize>)> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (work, ops, modes) = (&work, &ops, &modes);
                    scope.spawn(move || {
                        let backend = CudaBackend::new(0).unwrap();
                        let mut failures = Vec::new();
                        let mut providers = std::collections::BTreeMap::new();
                        for &(m, o) in work.iter().skip(t).step_by(threads) {
                            backend.set_reduce_options(modes[m]);
                            check_op(&backend, ops[o], &mut failures, &mut providers);
                        }
                        (failures, providers)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
    let mut failures = Vec::new();
    let mut providers = std::collections::BTreeMap::new();
    for (f, p) in results {
        failures.extend(f);
        for (k, n) in p {
            *providers.entry(k).or_insert(0usize) += n;
        }
    }
    println!(
        "{} ops x {} reduction modes on {threads} threads in {:.1} s; kernels by provider: {providers:?}",
        ops.len(),
        modes.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Four random cases of `spec` on `backend` against the interpreter.
fn check_op(
    backend: &CudaBackend,
    spec: &tdl::OpSpec,
    failures: &mut Vec<String>,
    providers: &mut std::collections::BTreeMap<&'static str, usize>,
) {
    let seed = spec
        .name
        .bytes()
        .fold(0x7f00u64, |h, c| h.wrapping_mul(31).wrapping_add(c as u64));
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..4 {
        let case = match common::sample(spec, &mut rng, 5, 4096) {
            Ok(c) => c,
            Err(e) => {
                failures.push(e);
                break;
            }
        };
        if let Ok(k) = runner::Backend::prepare(backend, spec, &case.shapes, &case.attrs) {
            *providers.entry(k.provider()).or_insert(0usize) += 1;
        }
        match common::run_on(backend, spec, &case) {
            Ok(got) => {
                if let Err(e) = common::compare(&spec.name, &got, &case.reference, 1e-4) {
                    failures.push(format!("{e} [shapes {:?}]", case.shapes));
                }
            }
            Err(e) => failures.push(format!(
                "`{}`: {e} (shapes {:?}, {:?})",
                spec.name,
                case.shapes,
                backend.reduce_options()
            )),
        }
    }
}

#[test]
fn mlp_tiny_every_search_every_k_on_cuda() {
    if !gpu("mlp_tiny_every_search_every_k_on_cuda") {
        return;
    }
    let g = zoo::Model::Mlp(MlpConfig::tiny())
        .training(lib(), &Optimizer::default())
        .unwrap();
    check_with(&on_cuda, "mlp", &g, &KS, &SearchKind::ALL, 2);
}

#[test]
fn rnn_tiny_every_search_every_k_on_cuda() {
    if !gpu("rnn_tiny_every_search_every_k_on_cuda") {
        return;
    }
    let g = zoo::Model::Rnn(RnnConfig::tiny())
        .training(lib(), &Optimizer::Sgd { lr: 0.1 })
        .unwrap();
    check_with(&on_cuda, "rnn", &g, &KS, &SearchKind::ALL, 1);
}

#[test]
fn gpt_tiny_every_search_every_k_on_cuda() {
    if !gpu("gpt_tiny_every_search_every_k_on_cuda") {
        return;
    }
    let g = zoo::Model::Gpt(GptConfig::tiny())
        .training(lib(), &Optimizer::Sgd { lr: 0.1 })
        .unwrap();
    check_with(&on_cuda, "gpt", &g, &KS, &SearchKind::ALL, 1);
}

#[test]
fn wresnet_tiny_every_search_every_k_on_cuda() {
    if !gpu("wresnet_tiny_every_search_every_k_on_cuda") {
        return;
    }
    // Batch 5, as in plan_exec.rs (batch 3 is ill-conditioned in f32).
    let cfg = WResNetConfig {
        batch: 5,
        ..WResNetConfig::tiny()
    };
    let g = zoo::Model::WResNet(cfg)
        .training(lib(), &Optimizer::Sgd { lr: 0.1 })
        .unwrap();
    check_with(&on_cuda, "wresnet", &g, &KS, &SearchKind::ALL, 1);
}

/// NCCL with one rank (all this one-GPU machine allows): its collectives
/// leave the data as the single rank's, count no bytes, and a tiny MLP step
/// through the executor equals the host-staged run exactly.
#[test]
fn nccl_world_size_one() {
    if !gpu("nccl_world_size_one") {
        return;
    }
    let b = CudaBackend::new(0).unwrap();
    let mut comms = NcclCommunicator::for_backends(std::slice::from_ref(&b)).unwrap();
    let mut c = comms.pop().unwrap();
    assert_eq!((c.rank().0, c.world_size()), (0, 1));
    let data = [1.0f32, -2.0, 3.5];
    let mut x = b.upload(&data).unwrap();
    c.all_reduce(&mut x, ReduceOp::Sum).unwrap();
    let mut y = b.alloc(3).unwrap();
    c.all_gather(&x, &mut y, &[3]).unwrap();
    let mut z = b.alloc(3).unwrap();
    c.reduce_scatter(&y, &mut z, &[3], ReduceOp::Max).unwrap();
    c.synchronize().unwrap();
    let mut host = [0.0f32; 3];
    b.download(&z, &mut host).unwrap();
    assert_eq!(host, data);
    assert_eq!(c.counters().sent, 0);

    let g = zoo::Model::Mlp(MlpConfig::tiny())
        .training(lib(), &Optimizer::default())
        .unwrap();
    let cache = interval::cache::StrategyCache::new();
    let one = partition::unpartitioned(&g, &cache);
    let progs = codegen::compile_unpartitioned(&one, lib()).unwrap();
    let opts = RunOptions {
        steps: 2,
        seed: partition::SEED,
    };
    let backends = vec![CudaBackend::new(0).unwrap()];
    let comms = NcclCommunicator::for_backends(&backends).unwrap();
    let ranks = backends.into_iter().zip(comms).collect();
    let nccl = run_programs_on(&progs.programs, opts, None, ranks).unwrap();
    let staged = on_cuda(&g, &progs, opts).unwrap();
    assert_eq!(nccl.outputs, staged.outputs);
}
