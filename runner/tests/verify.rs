//! `--verify`'s sensitivity run (`runner::verify`): the perturbed leaves
//! are the run's own leaves moved by about δ = 2⁻¹⁷ relative (floats only;
//! token ids untouched), and a run on them moves a well-conditioned loss by
//! about that much — not by nothing, and not by more than the perturbation
//! explains.

mod partition;

use codegen::{compile_unpartitioned, Init, Instr};
use interval::cache::StrategyCache;
use partition::lib;
use planner::graph::{DType, Optimizer};
use planner::zoo::{self, GptConfig};
use runner::verify::PERTURBATION;
use runner::{perturbed_leaves, run_programs, run_programs_given, CpuBackend, Given};
use runner::{LocalCommunicator, RunOptions};

#[test]
fn perturbed_leaves_move_floats_by_about_delta_and_leave_ids_alone() {
    let g = zoo::Model::Gpt(GptConfig::tiny())
        .training(lib(), &Optimizer::default())
        .unwrap();
    let cache = StrategyCache::new();
    let one = compile_unpartitioned(&partition::unpartitioned(&g, &cache), lib()).unwrap();
    let p = &one.programs[0];
    let opts = RunOptions { steps: 1, seed: 3 };
    let reference = run_programs(&one.programs, opts, None).unwrap();
    let leaves = perturbed_leaves(p, opts.seed, &Given::new()).unwrap();
    let mut floats = 0;
    for ins in &p.instrs {
        let Instr::Alloc {
            buf,
            init: Init::Fill(_),
        } = ins
        else {
            continue;
        };
        let info = p.tensor(p.buffers[*buf as usize].tensor).unwrap();
        match (info.dtype, leaves.get(&info.id)) {
            (DType::F32, Some(v)) => {
                floats += 1;
                assert_eq!(v.len(), info.shape.iter().product::<usize>());
            }
            (DType::F32, None) => panic!("float leaf `{}` not perturbed", info.name),
            (_, Some(_)) => panic!("integer leaf `{}` perturbed", info.name),
            (_, None) => {}
        }
    }
    assert!(floats > 3, "{floats} float leaves");
    // The largest relative change from the leaves' own values.
    let max_rel = |given: &Given| {
        given
            .iter()
            .flat_map(|(t, v)| {
                let unperturbed = first_values(p, opts.seed, *t);
                v.iter()
                    .zip(unperturbed)
                    .filter(|(_, u)| *u != 0.0)
                    .map(|(a, u)| ((*a as f64 / u as f64) - 1.0).abs())
                    .collect::<Vec<_>>()
            })
            .fold(0.0f64, f64::max)
    };
    let m = max_rel(&leaves);
    assert!(
        m > 0.5 * PERTURBATION && m < 8.0 * PERTURBATION,
        "largest relative change {m:e}"
    );
    // A run on the perturbed leaves moves the loss by round-off-sized
    // amounts: more than zero, far less than 1e-3.
    let ranks = LocalCommunicator::create(1)
        .into_iter()
        .map(|c| (CpuBackend::new(), c))
        .collect();
    let perturbed = run_programs_given(&one.programs, opts, None, ranks, &leaves).unwrap();
    let (e, _) = runner::max_rel_error(&perturbed, &reference);
    assert!(e > 0.0 && e < 1e-3, "perturbed run differs by {e:e}");
}

/// The leaf `t`'s own first values (its synthetic fill).
fn first_values(p: &codegen::Program, seed: u64, t: codegen::TensorId) -> Vec<f32> {
    let info = p.tensor(t).unwrap();
    let whole: Vec<(i64, i64)> = info.shape.iter().map(|&d| (0, d as i64)).collect();
    let syn = p
        .instrs
        .iter()
        .find_map(|i| match i {
            Instr::Alloc {
                buf,
                init: Init::Fill(s),
            } if p.buffers[*buf as usize].tensor == t => Some(*s),
            _ => None,
        })
        .unwrap();
    tdl::fill::fill_region(syn.fill, &info.shape, seed, syn.offset, &whole)
        .into_iter()
        .map(|x| x as f32)
        .collect()
}
