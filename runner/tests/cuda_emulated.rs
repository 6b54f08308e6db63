//! Every CUDA kernel the backend generates runs on the CPU and computes
//! what the op means, without a GPU (issue 25, item 2): every shipped op ×
//! random small shapes and attributes (`common::instances`, the instances
//! `cuda_compile.rs` compiles) × the three reduction modes (defaults, every
//! reduction a block, split over several blocks) × the whole op and random
//! windows, plus per op with an index input a whole instance with an index
//! out of range, plus the region-copy kernel on random boxes and
//! reductions.
//!
//! How: the backend's own generator (`codegen::generate`) gives each
//! kernel's source, parameters and launches; the sources compile as C++
//! with g++ after `cuda_shim/cuda_shim.h`, a model of CUDA's execution
//! model (`threadIdx` & co., `__shared__`, `__syncthreads()` as a barrier
//! over the block's GPU threads, each a fiber, divergent barriers caught;
//! atomics; math), and `cuda_shim/driver.h` runs them: each case's buffers
//! in the order of `Generated::params` (the order the backend passes its
//! arguments in), its launches from `Generated::launches` (the functions,
//! grids and blocks the backend launches), outputs, `let` temporaries and
//! scratch filled with NaN and fenced by guard bytes. A whole op's outputs
//! must equal the TDL interpreter's (`tdl::evaluate`, f64) within the f32
//! tolerance [`TOL`] (`f32_tolerance`: 1e-5 relative plus 1e-6 of the
//! tensor's scale; the cases nearest their bound are printed), a window's
//! the CPU backend's windowed
//! evaluator's (`kernels::compiled::compile_window`; each input buffer the
//! box the window reads, as codegen assembles a share's inputs), with the
//! error word clear; where the evaluator fails (an index out of range),
//! the error word must hold its code and the kernel's id. A region copy's
//! destination must equal the host copy's (`runner::region::copy_region`,
//! exactly), launched with the arguments the backend builds
//! (`RegionArgs::new`).
//!
//! Fast: identical sources are compiled once; sources are batched, each in
//! its own namespace, into a few dozen translation units (`g++ -O1`), each
//! running every case of its sources, on all cores (`cuda_shim/mod.rs`).
//! Negative controls: a kernel writing a wrong value, one whose result is
//! off by 1e-4 relative (10× the tolerance), one writing past its output,
//! one without its barriers and one with a thread leaving before them are
//! each reported, naming them and what is wrong.
//!
//! Needs `g++` (the machine's package): without it the test prints
//! `SKIPPED` and passes, and fails when `CI` is set.
#![cfg(feature = "cuda")]

mod common;
mod cuda_shim;
mod f32_tolerance;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use runner::backend::cuda::codegen::{
    generate, Generated, Param, ReduceOptions, ERR_DIV_BY_ZERO, ERR_OUT_OF_BOUNDS,
};
use runner::backend::cuda::scatter::{ScatterArgs, SCATTER_SRC};
use runner::backend::cuda::{RegionArgs, COPY_SRC, MAX_RANK};
use runner::comm::ReduceOp;
use runner::kernels::compiled::compile_window;
use runner::kernels::KernelImpl;
use runner::ops::{scatter_rows_shape, window_layouts};
use runner::{KernelError, Window};
use tdl::{Binding, Library, Tensor, VarId};

use cuda_shim::{status_text, Buf, Job, Ran, Source};
use f32_tolerance::{Tolerance, Worst};

/// Random instances per op (each × every reduction mode × windows); the
/// instances `cuda_compile.rs` compiles. `TOFU_EMULATED_CASES` overrides it
/// for a soak run.
fn cases_per_op() -> usize {
    std::env::var("TOFU_EMULATED_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4)
}

/// Random windows per instance, besides the whole op.
const WINDOWS_PER_CASE: usize = 2;

/// Largest output of a sampled instance (elements): a block-mode statement
/// runs 256 GPU threads per element.
const MAX_ELEMS: usize = 4096;

/// Random region copies.
const COPIES: usize = 200;

/// The f32 tolerance of a generated kernel against the f64 reference
/// (`f32_tolerance`: `|got − want| ≤ rtol·|want| + atol·max(1, S)`).
/// The kernels compute in f32 (each operation within 1/2 ulp = 6e-8
/// relative, libm's functions within 1 ulp, CUDA's within 4; sums
/// compensated), the reference in f64: rtol 1e-5 is ~170 ulps, room for a
/// chain of a few dozen roundings; atol 1e-6 of the terms' scale covers
/// cancellation (0.42 − 0.5 + 0.08 in `blackman_window`, `rmsnorm_grad` at
/// N = 1). Measured (`TOFU_EMULATED_CASES` unset; `cargo test --workspace --features
/// tofu/cuda --test cuda_emulated -- --nocapture` prints the cases
/// nearest their bound): at most 0.57 of the bound (`grid_sample_cubic_3d`,
/// error 9.3e-7, 2.1e-5 relative), `onnx_adam` aside.
const TOL: Tolerance = Tolerance {
    rtol: 1e-5,
    atol: 1e-6,
};

/// `onnx_adam`'s tolerance: its bias correction `1 − βᵗ` reads the step
/// `t` from a tensor, so it is computed in f32 (the other optimizers'
/// `1 − β^step` folds to a constant computed in f64 on the host), and loses
/// ~6e-8 / (1 − βᵗ) relative: 6e-5 at β = 0.999, t = 1, more for the
/// fractional `t ∈ (0, 1)` the test samples (measured: 9.8e-5 relative).
/// PyTorch's fused f32 Adam computes it in f32 as well.
const ONNX_ADAM_TOL: Tolerance = Tolerance {
    rtol: 1e-3,
    atol: 1e-6,
};

/// The tolerance of `op`'s kernels.
fn tolerance(op: &str) -> Tolerance {
    if op == "onnx_adam" {
        ONNX_ADAM_TOL
    } else {
        TOL
    }
}

#[test]
fn every_generated_kernel_runs_under_emulation() {
    let start = Instant::now();
    if let Err(why) = gxx_version() {
        let why = format!("cuda_emulated: g++ is not usable ({why}); install the g++ package");
        if std::env::var_os("CI").is_some() {
            panic!("{why}; CI is set, so this is a failure");
        }
        println!("SKIPPED: {why}");
        return;
    }
    let mut suite = Suite::default();
    let stats = suite.add_ops();
    suite.add_copies();
    let scatters = suite.add_scatters();
    let generated_s = start.elapsed().as_secs_f64();
    println!(
        "generated {} cases ({} whole, {} windowed of which {} with inputs as read, {} with an \
         index out of range, {} region copies, {scatters} scatter-adds) of {} distinct kernel sources ({} ops, {} \
         instances; ops without a CUDA form, run on the host: {:?}) in {generated_s:.1} s",
        suite.cases.len(),
        suite.count(Kind::Whole),
        suite.count(Kind::Window),
        stats.read_boxes,
        suite.count(Kind::Fault),
        suite.count(Kind::Copy),
        suite.sources.len(),
        stats.ops,
        stats.instances,
        stats.host_ops
    );
    assert!(
        stats.failures.is_empty(),
        "{} generation failure(s):\n{}",
        stats.failures.len(),
        stats.failures.join("\n")
    );

    let dir = std::env::temp_dir().join(format!("tofu-cuda-emulated-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");

    let t = Instant::now();
    negative_controls(&suite, &dir);
    println!(
        "negative controls: broken kernels reported ({:.1} s)",
        t.elapsed().as_secs_f64()
    );

    let Judged {
        report: r,
        failures,
        mut passed,
        ..
    } = run_and_judge(&suite, &dir, false);
    // The measured errors: the cases closest to their bound.
    passed.sort_by(|a, b| b.1.share.total_cmp(&a.1.share));
    for (c, w) in passed.iter().take(8) {
        println!(
            "  {:.2} of the bound: error {:.2e} (relative {:.2e}) at output {} element {}: {}",
            w.share, w.abs, w.rel, w.at.0, w.at.1, suite.cases[*c].origin
        );
    }
    if failures.is_empty() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("the failing units' files are kept in {}", dir.display());
    }
    println!(
        "cuda_emulated: {} kernel sources in {} translation units, {} cases, {} launches, \
         {} blocks: {} failure(s) in {:.1} s (g++ {:.1} s, running {:.1} s, summed over threads)",
        suite.sources.len(),
        r.units,
        suite.cases.len(),
        r.launches,
        r.blocks,
        failures.len(),
        start.elapsed().as_secs_f64(),
        r.compile_s,
        r.run_s
    );
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// What [`run_and_judge`] found.
struct Judged {
    /// The run's report.
    report: cuda_shim::Report,
    /// The failures, each naming its case (units that failed as a whole
    /// once).
    failures: Vec<String>,
    /// The failed cases.
    failed: BTreeSet<usize>,
    /// Each passing case and its worst element.
    passed: Vec<(usize, Worst)>,
}

/// Run every case of `suite` (in one unit with `one_unit`) and judge it.
fn run_and_judge(suite: &Suite, dir: &Path, one_unit: bool) -> Judged {
    let jobs: Vec<Job> = suite.cases.iter().map(|c| c.job.clone()).collect();
    let mut r = cuda_shim::run(&suite.sources, &jobs, dir, one_unit);
    let mut failures = std::mem::take(&mut r.unit_failures);
    let mut failed = BTreeSet::new();
    let mut passed = Vec::new();
    for (c, (case, ran)) in suite.cases.iter().zip(&r.ran).enumerate() {
        let verdict = match ran {
            Some(Ok(ran)) => judge(case, ran),
            Some(Err(e)) => Err(e.clone()),
            None => Err("not run".into()),
        };
        match verdict {
            Ok(w) => passed.push((c, w)),
            Err(e) => {
                failures.push(format!("{}: {e}", case.origin));
                failed.insert(c);
            }
        }
    }
    Judged {
        report: r,
        failures,
        failed,
        passed,
    }
}

/// `g++ --version`'s first line, or why it cannot run.
fn gxx_version() -> Result<String, String> {
    let out = Command::new("g++")
        .arg("--version")
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("g++ --version: {}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string())
}

/// What a case's outputs are compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The whole op: the interpreter.
    Whole,
    /// A window: the CPU backend's windowed evaluator.
    Window,
    /// A region copy: the host copy.
    Copy,
    /// The whole op with an index input out of range: the evaluator's
    /// failure.
    Fault,
}

/// What a case expects.
#[derive(Clone)]
enum Expect {
    /// These outputs (f64 reference) and a clear error word.
    Values(Vec<Tensor>),
    /// The error word set to `code` (any, where 0) and the case's kernel
    /// id: the evaluator failed with `what`.
    Failure { what: String, code: i32 },
}

/// What an op instance's kernels run on: a window, its input buffers and
/// the reference.
struct Share {
    kind: Kind,
    window: Window,
    inputs: Vec<Vec<f32>>,
    /// Whether each input buffer is the box the window reads.
    as_read: bool,
    expect: Expect,
}

/// One kernel run: a source, its buffers and launches, the reference.
struct Case {
    kind: Kind,
    /// The reduction mode it was generated in (none for a region copy).
    opts: Option<ReduceOptions>,
    origin: String,
    job: Job,
    expect: Expect,
}

/// Every case and distinct source.
#[derive(Default)]
struct Suite {
    sources: Vec<Source>,
    by_text: HashMap<String, usize>,
    cases: Vec<Case>,
}

/// What [`Suite::add_ops`] saw besides the cases.
#[derive(Default)]
struct Stats {
    ops: usize,
    instances: usize,
    host_ops: Vec<String>,
    failures: Vec<String>,
    /// Windowed cases whose input buffers hold only what they read.
    read_boxes: usize,
}

impl Suite {
    fn count(&self, k: Kind) -> usize {
        self.cases.iter().filter(|c| c.kind == k).count()
    }

    /// The index of a source (added if new).
    fn source(&mut self, text: String, make: impl FnOnce(String) -> Source) -> usize {
        if let Some(&i) = self.by_text.get(&text) {
            return i;
        }
        self.sources.push(make(text.clone()));
        self.by_text.insert(text, self.sources.len() - 1);
        self.sources.len() - 1
    }

    /// Every op × instance × mode × window (`common::instances`), and per op
    /// one whole instance with an index out of range where it has one.
    fn add_ops(&mut self) -> Stats {
        let lib = Library::shipped().expect("shipped specs load");
        let mut stats = Stats {
            ops: lib.ops().count(),
            ..Default::default()
        };
        let (instances, failures) =
            common::instances(&lib, cases_per_op(), WINDOWS_PER_CASE, MAX_ELEMS);
        stats.failures = failures;
        stats.instances = instances.len();
        let mut host = BTreeSet::new();
        let mut last_op = "";
        let mut rng = StdRng::seed_from_u64(0xe3b7);
        for inst in &instances {
            let (b, case) = (&inst.binding, &inst.case);
            let mut windows = vec![Share {
                kind: Kind::Whole,
                window: inst.windows[0].clone(),
                inputs: case.inputs.clone(),
                as_read: false,
                expect: Expect::Values(case.reference.clone()),
            }];
            // Besides the random windows, one with a variable over no
            // values (a share of a dim shorter than the workers splitting
            // it): empty outputs, or reductions over nothing.
            let mut empty = inst.windows[0].clone();
            if !empty.vars.is_empty() {
                let v = rng.gen_range(0..empty.vars.len());
                let (lo, hi) = empty.vars[v];
                let at = rng.gen_range(lo..=hi);
                empty.vars[v] = (at, at);
            }
            for w in inst.windows[1..].iter().chain([&empty]) {
                // The share's inputs as codegen assembles them: what it
                // reads; whole where the evaluator needs more (a `let`
                // temporary computed over the hull of its reads).
                let (tight, ins) = read_boxes(b, w, &case.inputs);
                let expect = windowed_reference(b, &tight, &ins);
                windows.push(match expect {
                    Expect::Values(_) => Share {
                        kind: Kind::Window,
                        window: tight,
                        inputs: ins,
                        as_read: true,
                        expect,
                    },
                    Expect::Failure { .. } => Share {
                        kind: Kind::Window,
                        window: w.clone(),
                        inputs: case.inputs.clone(),
                        as_read: false,
                        expect: windowed_reference(b, w, &case.inputs),
                    },
                });
            }
            if inst.spec.name != last_op {
                windows.extend(fault(b, &inst.windows[0], &case.inputs));
                last_op = &inst.spec.name;
            }
            for opts in common::reduce_modes() {
                for sh in &windows {
                    let w = &sh.window;
                    let origin = format!(
                        "`{}` shapes {:?} attrs {:?} {opts:?} window {}",
                        inst.spec.name,
                        case.shapes,
                        case.attrs,
                        match sh.kind {
                            Kind::Window => format!("{:?} inputs {:?}", w.vars, w.inputs),
                            Kind::Fault => "whole, an index out of range".to_string(),
                            _ => "whole".to_string(),
                        }
                    );
                    match generate_case(b, w, &sh.inputs, opts) {
                        Ok(Some((g, bufs))) => {
                            stats.read_boxes += sh.as_read as usize;
                            self.add_generated(sh.kind, opts, origin, g, bufs, sh.expect.clone())
                        }
                        Ok(None) => {
                            host.insert(inst.spec.name.clone());
                        }
                        Err(e) => stats.failures.push(format!("{origin}: {e}")),
                    }
                }
            }
        }
        stats.host_ops = host.into_iter().collect();
        stats
    }

    /// A case of a generated source, launched as [`Generated::launches`] says.
    fn add_generated(
        &mut self,
        kind: Kind,
        opts: ReduceOptions,
        origin: String,
        g: Generated,
        bufs: Vec<Buf>,
        expect: Expect,
    ) {
        let params = g.params.clone();
        let source = self.source(g.source.clone(), |t| Source::generated(t, &params));
        let launches = g
            .launches()
            .iter()
            .map(|l| {
                let f = self.sources[source]
                    .functions
                    .iter()
                    .position(|f| *f == l.function)
                    .unwrap_or_else(|| panic!("{origin}: no function `{}`", l.function));
                (f, l.blocks, l.threads)
            })
            .collect();
        self.cases.push(Case {
            kind,
            opts: Some(opts),
            origin,
            job: Job {
                source,
                bufs,
                launches,
            },
            expect,
        });
    }

    /// The scatter-add library kernel (`embedding_grad`, `gather_grad`) on
    /// random instances against the interpreter, launched with the
    /// backend's arguments on a zeroed output (the backend's memset). The
    /// sampled ids are valid rows, with repeats (`common::sample`).
    fn add_scatters(&mut self) -> usize {
        let lib = Library::shipped().expect("shipped specs load");
        let layout = format!(
            "{SCATTER_SRC}static_assert(sizeof(ScatterArgs) == {}, \
             \"ScatterArgs differs from the backend's\");\n",
            std::mem::size_of::<ScatterArgs>(),
        );
        let source = self.source(layout, |t| {
            Source::with_args(
                t,
                vec![
                    "(const float*)a[0]".into(),
                    "(const float*)a[1]".into(),
                    "(float*)a[2]".into(),
                    "*(const ScatterArgs*)a[3]".into(),
                ],
            )
        });
        let mut added = 0;
        for op in ["embedding_grad", "gather_grad"] {
            let spec = lib.get(op).expect("a shipped scatter op");
            let mut rng = StdRng::seed_from_u64(0x5ca7);
            for _ in 0..8 {
                let case = common::sample(spec, &mut rng, 5, MAX_ELEMS).expect("an instance");
                let b = spec.bind(&case.shapes, &case.attrs).expect("binds");
                let shape = scatter_rows_shape(&b).expect("the library kernel takes it");
                let out = vec![0.0f32; shape.rows * shape.width];
                let (bytes, launches) = match ScatterArgs::new(&shape) {
                    Some((a, l)) => (a.as_bytes().to_vec(), vec![(0, l.blocks, l.threads)]),
                    None => (vec![0; std::mem::size_of::<ScatterArgs>()], vec![]),
                };
                self.cases.push(Case {
                    kind: Kind::Whole,
                    opts: None,
                    origin: format!("`{op}` scatter-add (shapes {:?})", case.shapes),
                    job: Job {
                        source,
                        bufs: vec![
                            Buf::In(case.inputs[0].clone()),
                            Buf::In(case.inputs[1].clone()),
                            Buf::InOut(out),
                            Buf::Bytes(bytes),
                        ],
                        launches,
                    },
                    expect: Expect::Values(case.reference.clone()),
                });
                added += 1;
            }
        }
        added
    }

    /// Random region copies of rank 0..=4 (and one of [`MAX_RANK`]) with
    /// every reduction, launched with the backend's arguments.
    fn add_copies(&mut self) {
        let mut rng = StdRng::seed_from_u64(0xc0b1);
        // The kernel's `RegionArgs` is laid out as the backend's bytes.
        let layout = format!(
            "{COPY_SRC}static_assert(sizeof(RegionArgs) == {} && offsetof(RegionArgs, op) == {} \
             && offsetof(RegionArgs, n) == {} && offsetof(RegionArgs, d) == {}, \
             \"RegionArgs differs from the backend's\");\n",
            std::mem::size_of::<RegionArgs>(),
            std::mem::offset_of!(RegionArgs, op),
            std::mem::offset_of!(RegionArgs, n),
            std::mem::offset_of!(RegionArgs, d),
        );
        let source = self.source(layout, |t| {
            Source::with_args(
                t,
                vec![
                    "(const float*)a[0]".into(),
                    "(float*)a[1]".into(),
                    "*(const RegionArgs*)a[2]".into(),
                ],
            )
        });
        let ops = [
            None,
            Some(ReduceOp::Sum),
            Some(ReduceOp::Prod),
            Some(ReduceOp::Max),
            Some(ReduceOp::Min),
        ];
        for c in 0..COPIES {
            let rank = if c == 0 {
                MAX_RANK
            } else {
                rng.gen_range(0..=4)
            };
            let mut region = Vec::new();
            let (mut src_r, mut dst_r) = (Vec::new(), Vec::new());
            for _ in 0..rank {
                let max = if rank > 4 { 2 } else { 6 };
                let lo = rng.gen_range(0..4);
                let hi = lo + rng.gen_range(1..=max);
                region.push((lo, hi));
                src_r.push((lo - rng.gen_range(0..=2), hi + rng.gen_range(0..=2)));
                dst_r.push((lo - rng.gen_range(0..=2), hi + rng.gen_range(0..=2)));
            }
            let op = ops[rng.gen_range(0..ops.len())];
            let fill = |r: &[(i64, i64)], rng: &mut StdRng| -> Vec<f32> {
                let n = runner::region::volume(r) as usize;
                (0..n).map(|_| rng.gen_range(-2.0f32..2.0)).collect()
            };
            let src = fill(&src_r, &mut rng);
            let dst = fill(&dst_r, &mut rng);
            let mut want = dst.clone();
            runner::region::copy_region(&src, &src_r, &mut want, &dst_r, &region, op)
                .expect("the host copies a region inside both boxes");
            let (args, launch) = RegionArgs::new(&src_r, &dst_r, &region, op)
                .expect("the region is inside both boxes");
            let origin = format!("copy_region {region:?} from {src_r:?} to {dst_r:?} op {op:?}");
            let launches = if runner::region::volume(&region) == 0 {
                vec![] // as the backend: nothing to launch
            } else {
                vec![(0, launch.blocks, launch.threads)]
            };
            self.cases.push(Case {
                kind: Kind::Copy,
                opts: None,
                origin,
                job: Job {
                    source,
                    bufs: vec![
                        Buf::In(src),
                        Buf::InOut(dst),
                        Buf::Bytes(args.as_bytes().to_vec()),
                    ],
                    launches,
                },
                expect: Expect::Values(vec![Tensor::new(
                    &[want.len()],
                    want.iter().map(|&x| x as f64).collect(),
                )
                .expect("sizes")]),
            });
        }
    }
}

/// The backend's kernels for window `w` of `b` in mode `opts` and their
/// buffers (inputs `inputs`) in parameter order, as the backend allocates
/// them; `None` where the op has no CUDA form (the backend runs it on the
/// host).
fn generate_case(
    b: &Binding,
    w: &Window,
    inputs: &[Vec<f32>],
    opts: ReduceOptions,
) -> Result<Option<(Generated, Vec<Buf>)>, KernelError> {
    let layouts = window_layouts(b, w)?;
    let g = match generate(b, w, &layouts, opts) {
        Ok(g) => g,
        Err(KernelError::Unsupported { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let elems = |(_, e): &(Vec<i64>, Vec<usize>)| e.iter().product::<usize>();
    let bufs = g
        .params
        .iter()
        .filter_map(|p| {
            Some(match *p {
                Param::Input(i) => Buf::In(inputs[i].clone()),
                Param::Output(o) => Buf::Out(elems(&layouts.outputs[o])),
                Param::Local(l) => Buf::Work(elems(&layouts.locals[l]).max(1)),
                Param::Ints => Buf::Ints(or_zero(&g.ints)),
                Param::Reals => Buf::Reals(or_zero(&g.reals)),
                Param::Scratch => Buf::Work(g.scratch()),
                Param::ErrorWord => Buf::ErrorWord,
                Param::KernelId => return None,
            })
        })
        .collect();
    Ok(Some((g, bufs)))
}

/// `v`, or one zero where it is empty (the backend uploads no empty array).
fn or_zero<T: Copy + Default>(v: &[T]) -> Vec<T> {
    if v.is_empty() {
        vec![T::default()]
    } else {
        v.to_vec()
    }
}

/// The whole op with element 0 of its first index input (one whose huge
/// value makes the evaluator read out of range) set so: the case and the
/// evaluator's failure; `None` where no input is read as an index.
fn fault(b: &Binding, whole: &Window, inputs: &[Vec<f32>]) -> Option<Share> {
    (0..inputs.len()).find_map(|i| {
        let mut bad = inputs.to_vec();
        *bad[i].first_mut()? = 1e6;
        match windowed_reference(b, whole, &bad) {
            e @ Expect::Failure {
                code: ERR_OUT_OF_BOUNDS,
                ..
            } => Some(Share {
                kind: Kind::Fault,
                window: whole.clone(),
                inputs: bad,
                as_read: false,
                expect: e,
            }),
            _ => None,
        }
    })
}

/// Window `w` with each input's buffer the box of the elements the
/// interpreter reads for it (empty where it reads none), and those boxes of
/// `inputs`.
fn read_boxes(b: &Binding, w: &Window, inputs: &[Vec<f32>]) -> (Window, Vec<Vec<f32>>) {
    let tensors: Vec<Tensor> = inputs
        .iter()
        .zip(&b.input_shapes)
        .map(|(v, s)| Tensor::new(s, v.iter().map(|&x| x as f64).collect()).expect("sizes"))
        .collect();
    let restrict: HashMap<VarId, (i64, i64)> = w
        .vars
        .iter()
        .enumerate()
        .map(|(v, &r)| (VarId(v as u32), r))
        .collect();
    let mut boxes: Vec<Option<Vec<(i64, i64)>>> = vec![None; inputs.len()];
    let mut on_read = |i: u32, index: &[i64]| {
        let shape = &b.input_shapes[i as usize];
        if index
            .iter()
            .zip(shape)
            .any(|(&x, &n)| x < 0 || x >= n as i64)
        {
            return; // a padded input's zero
        }
        let bx =
            boxes[i as usize].get_or_insert_with(|| index.iter().map(|&x| (x, x + 1)).collect());
        for (d, &x) in bx.iter_mut().zip(index) {
            *d = (d.0.min(x), d.1.max(x + 1));
        }
    };
    if tdl::evaluate_traced(b, &tensors, &restrict, &mut on_read).is_err() {
        return (w.clone(), inputs.to_vec());
    }
    let regions: Vec<Vec<(i64, i64)>> = boxes
        .into_iter()
        .zip(&b.input_shapes)
        .map(|(bx, s)| bx.unwrap_or_else(|| vec![(0, 0); s.len()]))
        .collect();
    let data = regions
        .iter()
        .zip(inputs.iter().zip(&b.input_shapes))
        .map(|(r, (v, s))| {
            let whole: Vec<(i64, i64)> = s.iter().map(|&n| (0, n as i64)).collect();
            let mut out = vec![0.0; runner::region::volume(r) as usize];
            runner::region::copy_region(v, &whole, &mut out, r, r, None)
                .expect("a box inside the input");
            out
        })
        .collect();
    (
        Window {
            vars: w.vars.clone(),
            inputs: regions,
        },
        data,
    )
}

/// The CPU backend's windowed evaluator on window `w` of `b`.
fn windowed_reference(b: &Binding, w: &Window, inputs: &[Vec<f32>]) -> Expect {
    let run = || -> Result<Vec<Tensor>, KernelError> {
        let k = compile_window(b, w)?;
        let shapes: Vec<Vec<usize>> = (0..b.output_shapes.len())
            .map(|o| {
                w.output_region(b, o)
                    .iter()
                    .map(|&(l, h)| (h - l).max(0) as usize)
                    .collect()
            })
            .collect();
        let mut outs: Vec<Vec<f32>> = shapes
            .iter()
            .map(|s| vec![f32::NAN; s.iter().product()])
            .collect();
        {
            let ins: Vec<&[f32]> = inputs.iter().map(|v| &v[..]).collect();
            let mut o: Vec<&mut [f32]> = outs.iter_mut().map(|v| &mut v[..]).collect();
            k.run(&ins, &mut o)?;
        }
        Ok(outs
            .iter()
            .zip(&shapes)
            .map(|(v, s)| Tensor::new(s, v.iter().map(|&x| x as f64).collect()).expect("sizes"))
            .collect())
    };
    match run() {
        Ok(v) => Expect::Values(v),
        Err(e) => Expect::Failure {
            code: match e {
                KernelError::OutOfBounds { .. } => ERR_OUT_OF_BOUNDS,
                KernelError::DivByZero { .. } => ERR_DIV_BY_ZERO,
                _ => 0,
            },
            what: e.to_string(),
        },
    }
}

/// A case's results against its reference: the worst element (none for
/// an expected failure).
fn judge(case: &Case, ran: &Ran) -> Result<Worst, String> {
    if ran.status != 0 {
        return Err(status_text(ran.status));
    }
    let (got, word, kid) = (&ran.returned, ran.word, ran.kid);
    match &case.expect {
        Expect::Values(want) => {
            if word[0] != 0 {
                return Err(format!(
                    "error word set: code {} (kernel id {}), the reference succeeds",
                    word[0], word[1]
                ));
            }
            let op = case.origin.split('`').nth(1).unwrap_or("copy_region");
            let tol = if case.kind == Kind::Copy {
                Tolerance::EXACT
            } else {
                tolerance(op)
            };
            // A random window may cut a reduction a later division needs (an
            // average over none of its elements): NaN on both sides agrees.
            f32_tolerance::check(op, got, want, tol, case.kind == Kind::Window)
        }
        Expect::Failure { what, code } => {
            if word[0] == 0 || (*code != 0 && word[0] != *code) || word[1] != kid {
                Err(format!(
                    "the evaluator fails ({what}, code {code}) but the error word is {word:?} \
                     (kernel id {kid})"
                ))
            } else {
                Ok(Worst::default())
            }
        }
    }
}

/// The harness can fail: a whole op's kernel writing a wrong value, one
/// off by 1e-4 relative (10× [`TOL`]'s rtol), one writing each element
/// one place further (past its buffer's end), and a
/// block-mode kernel without its barriers, or with a thread leaving before
/// them, are each reported naming them, for what is wrong with them; their
/// unbroken twins pass.
fn negative_controls(suite: &Suite, dir: &Path) {
    let store = "out0[t] = (float)(";
    let thread = suite
        .cases
        .iter()
        .position(|c| c.kind == Kind::Whole && suite.sources[c.job.source].text.contains(store))
        .expect("a whole op's case storing its output 0");
    // The block-mode case (every reduction a block) reading the most input
    // elements: its reductions are long, so partials go missing.
    let block = (0..suite.cases.len())
        .filter(|&c| {
            let case = &suite.cases[c];
            case.kind == Kind::Whole
                && case.opts == Some(common::reduce_modes()[1])
                && suite.sources[case.job.source]
                    .text
                    .contains("__syncthreads")
        })
        .max_by_key(|&c| {
            suite.cases[c]
                .job
                .bufs
                .iter()
                .map(|b| match b {
                    Buf::In(v) => v.len(),
                    _ => 0,
                })
                .sum::<usize>()
        })
        .expect("a block-mode case");
    let text = |c: usize| &suite.sources[suite.cases[c].job.source].text;
    let breaks = [
        (
            thread,
            "wrong value",
            text(thread).replacen(store, "out0[t] = (float)(0.25 + ", 1),
            "relative error",
        ),
        (
            thread,
            "1e-4 relative, 10× the tolerance",
            text(thread).replacen(store, "out0[t] = 1.0001f * (float)(", 1),
            "relative error",
        ),
        (
            thread,
            "index + 1",
            text(thread).replacen("out0[t] = ", "out0[t + 1] = ", 1),
            "wrote outside a buffer",
        ),
        (
            block,
            "no barriers",
            text(block).replace("__syncthreads();", ""),
            "relative error",
        ),
        (
            block,
            "thread 1 leaves early",
            text(block).replacen(
                "red[threadIdx.x] = ",
                "if (threadIdx.x == 1) return;\n  red[threadIdx.x] = ",
                1,
            ),
            "divergent __syncthreads",
        ),
    ];
    let mut broken = Suite::default();
    let mut wanted = Vec::new();
    for (c, name, bad, why) in breaks {
        let case = &suite.cases[c];
        let good = &suite.sources[case.job.source];
        assert_ne!(
            &bad, &good.text,
            "negative control `{name}` changes nothing"
        );
        for (label, text) in [
            (
                format!("control twin of {}", case.origin),
                good.text.clone(),
            ),
            (format!("NEGATIVE CONTROL ({name}): {}", case.origin), bad),
        ] {
            let args = good.args.clone();
            let source = broken.source(text, |t| Source::with_args(t, args));
            broken.cases.push(Case {
                kind: case.kind,
                opts: case.opts,
                origin: label,
                job: Job {
                    source,
                    ..case.job.clone()
                },
                expect: case.expect.clone(),
            });
        }
        wanted.push((broken.cases.len() - 1, why));
    }
    let Judged {
        failures, failed, ..
    } = run_and_judge(&broken, dir, true);
    assert_eq!(
        failed,
        wanted.iter().map(|w| w.0).collect(),
        "negative controls: exactly the broken kernels must fail; {failures:#?}"
    );
    for ((c, why), f) in wanted.iter().zip(&failures) {
        assert!(
            f.starts_with(&broken.cases[*c].origin) && f.contains(why),
            "negative control: `{f}` should name the case and say `{why}`"
        );
        println!("  detected: {}", f.lines().next().unwrap_or_default());
    }
}
