//! Every CUDA kernel the backend generates runs on the CPU and computes
//! what the op means, without a GPU (issue 25, item 2): every shipped op ×
//! random small shapes and attributes (`common::sample`) × the three
//! reduction modes (defaults, every reduction a block, split over several
//! blocks) × the whole op and random windows, plus the region-copy kernel
//! on random boxes and reductions.
//!
//! How: the backend's own generator (`codegen::generate`) gives each
//! kernel's source, parameters and launches; the sources compile as C++
//! with g++ after `cuda_shim/cuda_shim.h`, a model of CUDA's execution
//! model (`threadIdx` & co., `__shared__`, `__syncthreads()` as a barrier
//! over the block's GPU threads, each a fiber; atomics; math), and
//! `cuda_shim/driver.h` runs them: each case's buffers in the order of
//! `Generated::params` (the order the backend passes its arguments in), its
//! launches from `Generated::launches` (the grids, blocks and functions the
//! backend launches), outputs, `let` temporaries and scratch filled with
//! NaN and fenced by guard bytes. A whole op's outputs must equal the TDL
//! interpreter's (`tdl::evaluate`, within 1e-4 as `common::compare`
//! judges), a window's the CPU backend's windowed evaluator's
//! (`kernels::compiled::compile_window`), with the error word clear (set,
//! where the evaluator fails); a region copy's destination must equal the
//! host copy's (`runner::region::copy_region`, exactly), with the arguments
//! and launch the backend builds (`RegionArgs::new`).
//!
//! Fast: identical sources are compiled once; sources are batched, each in
//! its own namespace, into a few dozen translation units (`g++ -O1`), each
//! running every case of its sources, on all cores. Negative controls: a
//! kernel writing a wrong value, and one whose barriers are removed, must
//! each be reported as a mismatch naming it.
//!
//! Needs `g++` (the machine's package): without it the test prints
//! `SKIPPED` and passes, and fails when `CI` is set.
#![cfg(feature = "cuda")]

mod common;

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use runner::backend::cuda::codegen::{generate, Generated, Param, ReduceOptions};
use runner::backend::cuda::{RegionArgs, COPY_SRC, MAX_RANK};
use runner::comm::ReduceOp;
use runner::kernels::compiled::{compile_window, window_layouts};
use runner::kernels::KernelImpl;
use runner::{KernelError, Window};
use tdl::{Binding, Library, Tensor};

/// The shim and the driver, compiled into every translation unit.
const SHIM: &str = include_str!("cuda_shim/cuda_shim.h");
const DRIVER: &str = include_str!("cuda_shim/driver.h");

/// Random instances per op (each × every reduction mode × windows).
const CASES_PER_OP: usize = 4;

/// Random windows per instance, besides the whole op.
const WINDOWS_PER_CASE: usize = 2;

/// Largest output of a sampled instance (elements): a block-mode statement
/// runs 256 GPU threads per element.
const MAX_ELEMS: usize = 4096;

/// Random region copies.
const COPIES: usize = 200;

/// A translation unit takes no more sources once it holds this many bytes.
const TU_BYTES: usize = 384 << 10;

/// Most sources per translation unit.
const TU_SOURCES: usize = 96;

/// What starts every kernel function of a generated source.
const KERNEL: &str = "__global__ void ";

/// Tolerance of every comparison with a reference in f64 (as `ops.rs`).
const TOL: f64 = 1e-4;

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
    let generated_s = start.elapsed().as_secs_f64();
    println!(
        "generated {} cases ({} whole, {} windowed, {} region copies) of {} kernel sources, \
         {} distinct ({} ops, {} instances; ops without a CUDA form, run on the host: {:?}) \
         in {generated_s:.1} s",
        suite.cases.len(),
        suite.count(Kind::Whole),
        suite.count(Kind::Window),
        suite.count(Kind::Copy),
        suite.cases.len(),
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
        "negative controls: a wrong value and missing barriers reported ({:.1} s)",
        t.elapsed().as_secs_f64()
    );

    let r = run_all(&suite, &dir, None);
    if r.failures.is_empty() {
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
        r.failures.len(),
        start.elapsed().as_secs_f64(),
        r.compile_s,
        r.run_s
    );
    assert!(
        r.failures.is_empty(),
        "{} failure(s):\n{}",
        r.failures.len(),
        r.failures.join("\n\n")
    );
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

/// One distinct kernel source and how the driver calls its functions.
struct Source {
    text: String,
    /// Its `__global__` functions, in order (a launch names one by index).
    functions: Vec<String>,
    /// The C++ argument of each parameter: `a[j]` (the job's j-th buffer)
    /// cast to its type, or `kid`.
    args: Vec<String>,
}

impl Source {
    /// A generated source, called with its parameters as the backend passes
    /// them.
    fn generated(text: String, params: &[Param]) -> Source {
        let mut next = 0;
        let args = params
            .iter()
            .map(|p| match p {
                Param::KernelId => "kid".to_string(),
                _ => {
                    let decl = p.declaration();
                    let ty = decl.rsplit_once(' ').map_or("", |(ty, _)| ty);
                    next += 1;
                    format!("({ty})a[{}]", next - 1)
                }
            })
            .collect();
        Source::with_args(text, args)
    }

    fn with_args(text: String, args: Vec<String>) -> Source {
        let functions = text
            .split(KERNEL)
            .skip(1)
            .map(|rest| rest[..rest.find('(').unwrap_or(0)].to_string())
            .collect();
        Source {
            text,
            functions,
            args,
        }
    }
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
}

/// One buffer of a case, in the kernel's pointer-parameter order.
#[derive(Clone)]
enum Buf {
    /// `f32` data the kernel reads.
    In(Vec<f32>),
    /// `f32` the kernel writes (NaN at first); returned.
    Out(usize),
    /// `f64` the kernel writes (NaN at first): temporaries, scratch.
    Work(usize),
    /// `i64` parameters.
    Ints(Vec<i64>),
    /// `f64` parameters.
    Reals(Vec<f64>),
    /// The error word (`int[2]`, zero at first); returned.
    ErrorWord,
    /// `f32` data the kernel reads and writes; returned.
    InOut(Vec<f32>),
    /// Bytes passed by value (a struct).
    Bytes(Vec<u8>),
}

impl Buf {
    /// The driver's code for the kind (see `driver.h`).
    fn code(&self) -> u64 {
        match self {
            Buf::In(_) => 0,
            Buf::Out(_) => 1,
            Buf::Work(_) => 2,
            Buf::Ints(_) => 3,
            Buf::Reals(_) => 4,
            Buf::ErrorWord => 5,
            Buf::InOut(_) => 6,
            Buf::Bytes(_) => 7,
        }
    }
}

/// What a case expects.
#[derive(Clone)]
enum Expect {
    /// These outputs (f64 reference) and a clear error word.
    Values(Vec<Tensor>),
    /// The error word set (the evaluator failed with this).
    Failure(String),
}

/// One kernel run: a source, its buffers and launches, the reference.
struct Case {
    kind: Kind,
    origin: String,
    source: usize,
    bufs: Vec<Buf>,
    /// (function index in the source, blocks, threads).
    launches: Vec<(usize, u32, u32)>,
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

    /// Every op × instance × mode × window (seeded by op name).
    fn add_ops(&mut self) -> Stats {
        let lib = Library::shipped().expect("shipped specs load");
        let forced = |split_min| ReduceOptions {
            block_min: 1,
            split_min,
        };
        let modes = [ReduceOptions::default(), forced(usize::MAX), forced(1)];
        let mut stats = Stats::default();
        let mut host = BTreeSet::new();
        for spec in lib.ops() {
            stats.ops += 1;
            let seed = spec
                .name
                .bytes()
                .fold(0x25c0u64, |h, c| h.wrapping_mul(31).wrapping_add(c as u64));
            let mut rng = StdRng::seed_from_u64(seed);
            for _ in 0..CASES_PER_OP {
                let case = match common::sample(spec, &mut rng, 5, MAX_ELEMS) {
                    Ok(c) => c,
                    Err(e) => {
                        stats.failures.push(e);
                        break;
                    }
                };
                stats.instances += 1;
                let b = match spec.bind(&case.shapes, &case.attrs) {
                    Ok(b) => b,
                    Err(e) => {
                        stats.failures.push(format!("`{}`: bind: {e}", spec.name));
                        continue;
                    }
                };
                let whole = match Window::whole(&b) {
                    Ok(w) => w,
                    Err(e) => {
                        stats.failures.push(format!("`{}`: window: {e}", spec.name));
                        continue;
                    }
                };
                let mut windows = vec![(whole.clone(), Expect::Values(case.reference.clone()))];
                for _ in 0..WINDOWS_PER_CASE {
                    let w = sub_window(&whole, &mut rng);
                    let expect = windowed_reference(&b, &w, &case.inputs);
                    windows.push((w, expect));
                }
                for opts in modes {
                    for (wi, (w, expect)) in windows.iter().enumerate() {
                        let origin = format!(
                            "`{}` shapes {:?} attrs {:?} {opts:?} window {}",
                            spec.name,
                            case.shapes,
                            case.attrs,
                            if wi == 0 {
                                "whole".to_string()
                            } else {
                                format!("{:?}", w.vars)
                            }
                        );
                        let layouts = match window_layouts(&b, w) {
                            Ok(l) => l,
                            Err(e) => {
                                stats.failures.push(format!("{origin}: layouts: {e}"));
                                continue;
                            }
                        };
                        let g = match generate(&b, w, &layouts, opts) {
                            Ok(g) => g,
                            Err(KernelError::Unsupported { .. }) => {
                                host.insert(spec.name.clone());
                                continue;
                            }
                            Err(e) => {
                                stats.failures.push(format!("{origin}: {e}"));
                                continue;
                            }
                        };
                        let elems = |(_, e): &(Vec<i64>, Vec<usize>)| e.iter().product::<usize>();
                        let bufs = g
                            .params
                            .iter()
                            .filter_map(|p| {
                                Some(match *p {
                                    // The window's inputs are whole (see `sub_window`).
                                    Param::Input(i) => Buf::In(case.inputs[i].clone()),
                                    Param::Output(o) => Buf::Out(elems(&layouts.outputs[o])),
                                    // As the backend allocates them.
                                    Param::Local(l) => Buf::Work(elems(&layouts.locals[l]).max(1)),
                                    Param::Ints => Buf::Ints(or_zero(&g.ints)),
                                    Param::Reals => Buf::Reals(or_zero(&g.reals)),
                                    Param::Scratch => Buf::Work(g.scratch()),
                                    Param::ErrorWord => Buf::ErrorWord,
                                    Param::KernelId => return None,
                                })
                            })
                            .collect();
                        let kind = if wi == 0 { Kind::Whole } else { Kind::Window };
                        self.add_generated(kind, origin, g, bufs, expect.clone());
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
            origin,
            source,
            bufs,
            launches,
            expect,
        });
    }

    /// Random region copies of rank 0..=4 (and one of [`MAX_RANK`]) with
    /// every reduction, launched with the backend's arguments.
    fn add_copies(&mut self) {
        let mut rng = StdRng::seed_from_u64(0xc0b1);
        let source = self.source(COPY_SRC.to_string(), |t| {
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
                origin,
                source,
                bufs: vec![
                    Buf::In(src),
                    Buf::InOut(dst),
                    Buf::Bytes(args.as_bytes().to_vec()),
                ],
                launches,
                expect: Expect::Values(vec![Tensor::new(
                    &[want.len()],
                    want.iter().map(|&x| x as f64).collect(),
                )
                .expect("sizes")]),
            });
        }
    }
}

/// `v`, or one zero where it is empty (the backend uploads no empty array).
fn or_zero<T: Copy + Default>(v: &[T]) -> Vec<T> {
    if v.is_empty() {
        vec![T::default()]
    } else {
        v.to_vec()
    }
}

/// A random non-empty sub-box of every variable's range; inputs whole (a
/// buffer holding the whole tensor holds every window's reads).
fn sub_window(whole: &Window, rng: &mut StdRng) -> Window {
    let vars = whole
        .vars
        .iter()
        .map(|&(lo, hi)| {
            if hi - lo <= 1 {
                (lo, hi)
            } else {
                let l = rng.gen_range(lo..hi);
                (l, rng.gen_range(l + 1..=hi))
            }
        })
        .collect();
    Window {
        vars,
        inputs: whole.inputs.clone(),
    }
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
        Err(e) => Expect::Failure(e.to_string()),
    }
}

/// Source `i` inside a translation unit: in its own namespace (its helpers
/// and `typedef`s stay its own), its functions C++ functions of that
/// namespace; then the function the driver calls to launch one of them.
fn wrap(i: usize, s: &Source) -> String {
    let text = s.text.replace("extern \"C\" ", "");
    let mut out = format!("namespace b{i} {{\n{text}\n");
    let _ = writeln!(
        out,
        "static int launch(unsigned fn, unsigned blocks, unsigned threads, void* const* a, int kid) {{\n  (void)a; (void)kid;\n  switch (fn) {{"
    );
    for (k, f) in s.functions.iter().enumerate() {
        let _ = writeln!(
            out,
            "    case {k}: return cuda_shim::launch(blocks, threads, [&] {{ {f}({}); }});",
            s.args.join(", ")
        );
    }
    let _ = writeln!(out, "  }}\n  return -1;\n}}\n}}");
    out
}

/// One translation unit: its sources (suite indices) and their cases.
struct Unit {
    sources: Vec<usize>,
    cases: Vec<usize>,
}

/// Sources batched into units, the largest first (big sources dominate
/// g++'s time); every case in the unit of its source.
fn units(suite: &Suite) -> Vec<Unit> {
    let mut ids: Vec<usize> = (0..suite.sources.len()).collect();
    ids.sort_by_key(|&i| std::cmp::Reverse(suite.sources[i].text.len()));
    let mut units: Vec<Unit> = Vec::new();
    let mut bytes = 0;
    let mut unit_of = vec![0; suite.sources.len()];
    for i in ids {
        match units.last_mut() {
            Some(u) if u.sources.len() < TU_SOURCES && bytes < TU_BYTES => u.sources.push(i),
            _ => {
                units.push(Unit {
                    sources: vec![i],
                    cases: vec![],
                });
                bytes = 0;
            }
        }
        bytes += suite.sources[i].text.len();
        unit_of[i] = units.len() - 1;
    }
    for (c, case) in suite.cases.iter().enumerate() {
        units[unit_of[case.source]].cases.push(c);
    }
    units
}

/// Outcome of running cases.
#[derive(Default)]
struct Results {
    /// Each naming its case.
    failures: Vec<String>,
    /// Cases that failed, by suite index.
    failed: BTreeSet<usize>,
    units: usize,
    launches: u64,
    blocks: u64,
    compile_s: f64,
    run_s: f64,
}

impl Results {
    fn merge(&mut self, o: Results) {
        self.failures.extend(o.failures);
        self.failed.extend(o.failed);
        self.launches += o.launches;
        self.blocks += o.blocks;
        self.compile_s += o.compile_s;
        self.run_s += o.run_s;
    }

    fn fail(&mut self, suite: &Suite, c: usize, what: String) {
        self.failed.insert(c);
        self.failures
            .push(format!("{}: {what}", suite.cases[c].origin));
    }
}

/// Compile and run every unit on all cores (or only `only`'s cases, in one
/// unit), comparing each case with its reference.
fn run_all(suite: &Suite, dir: &Path, only: Option<&[usize]>) -> Results {
    let units = match only {
        Some(cases) => {
            let sources: BTreeSet<usize> = cases.iter().map(|&c| suite.cases[c].source).collect();
            vec![Unit {
                sources: sources.into_iter().collect(),
                cases: cases.to_vec(),
            }]
        }
        None => units(suite),
    };
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Results {
        units: units.len(),
        ..Default::default()
    });
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let id = next.fetch_add(1, Ordering::Relaxed);
                let Some(u) = units.get(id) else { break };
                let r = run_unit(suite, u, &dir.join(format!("u{id}")));
                results.lock().expect("results").merge(r);
            });
        }
    });
    results.into_inner().expect("results")
}

/// Write, compile and run one unit; compare its cases.
fn run_unit(suite: &Suite, u: &Unit, dir: &Path) -> Results {
    let mut r = Results::default();
    std::fs::create_dir_all(dir).expect("unit directory");
    let mut cpp = format!("{SHIM}\n");
    for (k, &i) in u.sources.iter().enumerate() {
        cpp.push_str(&wrap(k, &suite.sources[i]));
    }
    let table: Vec<String> = (0..u.sources.len())
        .map(|k| format!("&b{k}::launch"))
        .collect();
    let _ = writeln!(
        cpp,
        "{DRIVER}\nstatic const cuda_shim::Launcher SOURCES[] = {{{}}};\n\
         int main(int argc, char** argv) {{ return cuda_shim::drive(argc, argv, SOURCES, {}); }}",
        table.join(", "),
        u.sources.len()
    );
    let (src, exe, jobs, out) = (
        dir.join("unit.cpp"),
        dir.join("unit"),
        dir.join("jobs.bin"),
        dir.join("results.bin"),
    );
    std::fs::write(&src, &cpp).expect("writing the unit");
    let local: HashMap<usize, usize> = u.sources.iter().enumerate().map(|(k, &i)| (i, k)).collect();
    std::fs::write(&jobs, encode_jobs(suite, &u.cases, &local)).expect("writing the jobs");
    let t = Instant::now();
    let compiled = Command::new("g++")
        .args(["-std=c++17", "-O1", "-fcf-protection=none", "-w", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("running g++");
    r.compile_s = t.elapsed().as_secs_f64();
    if !compiled.status.success() {
        let log = String::from_utf8_lossy(&compiled.stderr);
        let first: Vec<&str> = log.lines().take(40).collect();
        for &c in &u.cases {
            r.failed.insert(c);
        }
        r.failures.push(format!(
            "g++ failed on the unit of sources {:?} ({}): {}",
            u.sources,
            src.display(),
            first.join("\n")
        ));
        return r;
    }
    let t = Instant::now();
    let ran = Command::new(&exe)
        .arg(&jobs)
        .arg(&out)
        .output()
        .expect("running the unit");
    r.run_s = t.elapsed().as_secs_f64();
    if !ran.status.success() {
        let err = String::from_utf8_lossy(&ran.stderr).to_string();
        // The driver names the job it died in.
        let job = err
            .split("job ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse::<usize>().ok());
        let culprit = job.map_or("?".to_string(), |j| suite.cases[u.cases[j]].origin.clone());
        for &c in &u.cases {
            r.failed.insert(c);
        }
        r.failures.push(format!(
            "the unit of sources {:?} failed ({}) in case {culprit}: {err}",
            u.sources, ran.status
        ));
        return r;
    }
    let bytes = std::fs::read(&out).expect("the unit's results");
    let mut at = 0;
    for (j, &c) in u.cases.iter().enumerate() {
        let case = &suite.cases[c];
        r.launches += case.launches.len() as u64;
        r.blocks += case.launches.iter().map(|l| l.1 as u64).sum::<u64>();
        let status = take_u64(&bytes, &mut at);
        let mut got: Vec<Vec<f32>> = Vec::new();
        let mut word = [0i32; 2];
        for b in &case.bufs {
            match b {
                Buf::Out(n) => got.push(take_f32s(&bytes, &mut at, *n)),
                Buf::InOut(v) => got.push(take_f32s(&bytes, &mut at, v.len())),
                Buf::ErrorWord => {
                    for w in &mut word {
                        *w = take_u32(&bytes, &mut at) as i32;
                    }
                }
                _ => {}
            }
        }
        if let Err(e) = judge(case, j, status, &got, word) {
            r.fail(suite, c, e);
        }
    }
    assert_eq!(at, bytes.len(), "the results file has trailing bytes");
    let _ = std::fs::remove_dir_all(dir);
    r
}

/// A case's results against its reference.
fn judge(
    case: &Case,
    kid: usize,
    status: u64,
    got: &[Vec<f32>],
    word: [i32; 2],
) -> Result<(), String> {
    match status {
        0 => {}
        1 => return Err("a divergent __syncthreads (a thread returned while others wait)".into()),
        2 => return Err("the kernel wrote outside a buffer".into()),
        s => return Err(format!("driver status {s}")),
    }
    match &case.expect {
        Expect::Values(want) => {
            if word[0] != 0 {
                return Err(format!(
                    "error word set: code {} (kernel id {}), the reference succeeds",
                    word[0], word[1]
                ));
            }
            let op = case.origin.split('`').nth(1).unwrap_or("copy_region");
            let tol = if case.kind == Kind::Copy { 0.0 } else { TOL };
            if case.kind != Kind::Window {
                return common::compare(op, got, want, tol).map(|_| ());
            }
            // A random window may cut a reduction a later division needs (an
            // average over none of its elements): NaN on both sides agrees.
            let (mut got, mut want) = (got.to_vec(), want.to_vec());
            for (g, w) in got.iter_mut().zip(&mut want) {
                for (a, b) in g.iter_mut().zip(&mut w.data) {
                    if a.is_nan() && b.is_nan() {
                        (*a, *b) = (0.0, 0.0);
                    }
                }
            }
            common::compare(op, &got, &want, tol).map(|_| ())
        }
        Expect::Failure(e) => {
            if word[0] == 0 || word[1] != kid as i32 {
                Err(format!(
                    "the evaluator fails ({e}) but the error word is {word:?} (kernel id {kid})"
                ))
            } else {
                Ok(())
            }
        }
    }
}

/// The jobs file `driver.h` reads (little-endian `u64`s unless said):
/// `njobs`, then per job: its source's index in the unit, its kernel id,
/// `nbufs`, per buffer its kind (`Buf::code`), length and data (kinds 0, 3,
/// 4, 6, 7), then `nlaunch` and per launch the function, blocks and threads.
fn encode_jobs(suite: &Suite, cases: &[usize], local: &HashMap<usize, usize>) -> Vec<u8> {
    let mut v: Vec<u8> = Vec::new();
    let put = |v: &mut Vec<u8>, x: u64| v.extend_from_slice(&x.to_le_bytes());
    put(&mut v, cases.len() as u64);
    for (j, &c) in cases.iter().enumerate() {
        let case = &suite.cases[c];
        put(&mut v, local[&case.source] as u64);
        put(&mut v, j as u64);
        put(&mut v, case.bufs.len() as u64);
        for b in &case.bufs {
            put(&mut v, b.code());
            match b {
                Buf::In(d) | Buf::InOut(d) => {
                    put(&mut v, d.len() as u64);
                    d.iter().for_each(|x| v.extend_from_slice(&x.to_le_bytes()));
                }
                Buf::Out(n) | Buf::Work(n) => put(&mut v, *n as u64),
                Buf::Ints(d) => {
                    put(&mut v, d.len() as u64);
                    d.iter().for_each(|x| v.extend_from_slice(&x.to_le_bytes()));
                }
                Buf::Reals(d) => {
                    put(&mut v, d.len() as u64);
                    d.iter().for_each(|x| v.extend_from_slice(&x.to_le_bytes()));
                }
                Buf::ErrorWord => put(&mut v, 2),
                Buf::Bytes(d) => {
                    put(&mut v, d.len() as u64);
                    v.extend_from_slice(d);
                }
            }
        }
        put(&mut v, case.launches.len() as u64);
        for &(f, blocks, threads) in &case.launches {
            put(&mut v, f as u64);
            put(&mut v, blocks as u64);
            put(&mut v, threads as u64);
        }
    }
    v
}

fn take<const N: usize>(b: &[u8], at: &mut usize) -> [u8; N] {
    let a: [u8; N] = b[*at..*at + N].try_into().expect("N bytes");
    *at += N;
    a
}

fn take_u64(b: &[u8], at: &mut usize) -> u64 {
    u64::from_le_bytes(take(b, at))
}

fn take_u32(b: &[u8], at: &mut usize) -> u32 {
    u32::from_le_bytes(take(b, at))
}

fn take_f32s(b: &[u8], at: &mut usize, n: usize) -> Vec<f32> {
    (0..n).map(|_| f32::from_le_bytes(take(b, at))).collect()
}

/// The harness can fail: a whole op's kernel writing a wrong value, and a
/// block-mode kernel without its barriers, are each reported as a mismatch
/// naming them, and their unbroken twins pass.
fn negative_controls(suite: &Suite, dir: &Path) {
    let store = "out0[t] = (float)(";
    let wrong_value = suite
        .cases
        .iter()
        .position(|c| c.kind == Kind::Whole && suite.sources[c.source].text.contains(store))
        .expect("a whole op's case storing its output 0");
    // The block-mode case (every reduction a block) reading the most input
    // elements: its reductions are long, so partials go missing.
    let barrier = (0..suite.cases.len())
        .filter(|&c| {
            let case = &suite.cases[c];
            case.kind == Kind::Whole
                && case.origin.contains("split_min: 18446744073709551615")
                && suite.sources[case.source].text.contains("__syncthreads")
        })
        .max_by_key(|&c| {
            suite.cases[c]
                .bufs
                .iter()
                .map(|b| match b {
                    Buf::In(v) => v.len(),
                    _ => 0,
                })
                .sum::<usize>()
        })
        .expect("a block-mode case");
    let mut broken = Suite::default();
    let breaks: [(usize, &str, Box<dyn Fn(&str) -> String>); 2] = [
        (
            wrong_value,
            "NEGATIVE CONTROL (wrong value)",
            Box::new(move |t: &str| t.replacen(store, "out0[t] = (float)(0.25 + ", 1)),
        ),
        (
            barrier,
            "NEGATIVE CONTROL (no barriers)",
            Box::new(|t: &str| t.replace("__syncthreads();", "")),
        ),
    ];
    for (c, name, f) in &breaks {
        let case = &suite.cases[*c];
        let good = &suite.sources[case.source];
        for (label, text) in [
            (
                format!("control twin of {}", case.origin),
                good.text.clone(),
            ),
            (format!("{name}: {}", case.origin), f(&good.text)),
        ] {
            assert!(
                label.contains("twin") || text != good.text,
                "{name} changes nothing"
            );
            let args = good.args.clone();
            let source = broken.source(text, |t| Source::with_args(t, args));
            broken.cases.push(Case {
                kind: case.kind,
                origin: label,
                source,
                bufs: case.bufs.clone(),
                launches: case.launches.clone(),
                expect: case.expect.clone(),
            });
        }
    }
    let all: Vec<usize> = (0..broken.cases.len()).collect();
    let r = run_all(&broken, dir, Some(&all));
    let failed: Vec<&str> = r
        .failed
        .iter()
        .map(|&c| broken.cases[c].origin.as_str())
        .collect();
    assert!(
        failed.len() == 2 && failed.iter().all(|o| o.starts_with("NEGATIVE CONTROL")),
        "negative controls: exactly the two broken kernels must fail, failed: {failed:?}; {:?}",
        r.failures
    );
    for f in &r.failures {
        println!("  detected: {}", f.lines().next().unwrap_or_default());
    }
}
