//! The Rust side of the CUDA emulation (`cuda_emulated.rs`): kernel sources
//! and jobs (buffers in the kernels' pointer-parameter order, launches) in,
//! each job's status, returned buffers and error word out.
//!
//! Sources are batched, the largest first, into translation units of
//! `cuda_shim.h` + the sources (each in its own namespace, with a launcher
//! that calls its functions) + `driver.h`, compiled with `g++ -O1` and run
//! on all cores, each unit on a jobs file of every job of its sources
//! (format: [`encode_jobs`]). A unit that does not compile or crashes fails
//! every job in it, once with the compiler's log or the driver's last words.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use runner::backend::cuda::codegen::Param;

/// The shim and the driver, compiled into every translation unit.
const SHIM: &str = include_str!("cuda_shim.h");
const DRIVER: &str = include_str!("driver.h");

/// A translation unit takes no more sources once it holds this many bytes.
const UNIT_BYTES: usize = 384 << 10;

/// Most sources per translation unit.
const UNIT_SOURCES: usize = 96;

/// What starts every kernel function of a generated source.
const KERNEL: &str = "__global__ void ";

/// One distinct kernel source and how the driver calls its functions.
pub struct Source {
    pub text: String,
    /// Its `__global__` functions, in order (a launch names one by index).
    pub functions: Vec<String>,
    /// The C++ argument of each parameter: `a[j]` (the job's j-th buffer)
    /// cast to its type, or `kid`.
    pub args: Vec<String>,
}

impl Source {
    /// A generated source, called with its parameters as the backend passes
    /// them: every pointer from the job's buffers in order, the kernel id
    /// by value.
    pub fn generated(text: String, params: &[Param]) -> Source {
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

    /// A source whose functions all take `args`.
    pub fn with_args(text: String, args: Vec<String>) -> Source {
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

/// One buffer of a job, in the kernel's pointer-parameter order.
#[derive(Clone)]
pub enum Buf {
    /// `f32` data the kernel reads.
    In(Vec<f32>),
    /// `f32` the kernel writes (NaN at first); returned.
    Out(usize),
    /// `f32` the kernel writes (NaN at first): temporaries, scratch.
    Work(usize),
    /// `i64` parameters.
    Ints(Vec<i64>),
    /// `f32` parameters.
    Reals(Vec<f32>),
    /// The error word (`int[2]`, zero at first); returned.
    ErrorWord,
    /// `f32` data the kernel reads and writes; returned.
    InOut(Vec<f32>),
    /// Bytes passed by value (a struct).
    Bytes(Vec<u8>),
}

impl Buf {
    /// The driver's code for the kind (`driver.h`'s `Kind`).
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

/// One kernel run: a source (index into the sources), its buffers and its
/// launches.
#[derive(Clone)]
pub struct Job {
    pub source: usize,
    pub bufs: Vec<Buf>,
    /// (function index in the source, blocks, threads).
    pub launches: Vec<(usize, u32, u32)>,
}

/// What a job gave.
pub struct Ran {
    /// 0, or what the shim caught ([`status_text`]).
    pub status: u64,
    /// The kernel id it was launched with.
    pub kid: i32,
    /// The `Out` and `InOut` buffers, in order.
    pub returned: Vec<Vec<f32>>,
    /// The error word: code, kernel id.
    pub word: [i32; 2],
}

/// What a non-zero [`Ran::status`] means (`cuda_shim.h`, `driver.h`).
pub fn status_text(status: u64) -> String {
    match status {
        1 => "a divergent __syncthreads (a thread returned while others wait)".into(),
        2 => "the kernel wrote outside a buffer".into(),
        3 => "a launch configuration CUDA refuses (blocks, threads)".into(),
        s => format!("driver status {s}"),
    }
}

/// Every job's outcome (by job index) and what the runs took.
#[derive(Default)]
pub struct Report {
    /// A job of a unit that failed as a whole names it.
    pub ran: Vec<Option<Result<Ran, String>>>,
    /// Units that did not compile or crashed, with the log.
    pub unit_failures: Vec<String>,
    pub units: usize,
    pub launches: u64,
    pub blocks: u64,
    /// Seconds in g++ and in the drivers, summed over threads.
    pub compile_s: f64,
    pub run_s: f64,
}

/// One translation unit: its sources and jobs (indices).
struct Unit {
    sources: Vec<usize>,
    jobs: Vec<usize>,
}

/// Run every job (see the module doc), in batched units or, with
/// `one_unit`, all in one; the units' files go under `dir` and are removed
/// where the unit ran.
pub fn run(sources: &[Source], jobs: &[Job], dir: &Path, one_unit: bool) -> Report {
    let units = if one_unit {
        let mut used: Vec<usize> = jobs.iter().map(|j| j.source).collect();
        used.sort_unstable();
        used.dedup();
        vec![Unit {
            sources: used,
            jobs: (0..jobs.len()).collect(),
        }]
    } else {
        units(sources, jobs)
    };
    let next = AtomicUsize::new(0);
    let report = Mutex::new(Report {
        ran: (0..jobs.len()).map(|_| None).collect(),
        units: units.len(),
        ..Default::default()
    });
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let id = next.fetch_add(1, Ordering::Relaxed);
                let Some(u) = units.get(id) else { break };
                run_unit(sources, jobs, u, &dir.join(format!("u{id}")), &report);
            });
        }
    });
    report.into_inner().expect("report")
}

/// Sources batched into units, the largest first (big sources dominate
/// g++'s time); every job in the unit of its source.
fn units(sources: &[Source], jobs: &[Job]) -> Vec<Unit> {
    let mut ids: Vec<usize> = (0..sources.len()).collect();
    ids.sort_by_key(|&i| std::cmp::Reverse(sources[i].text.len()));
    let mut units: Vec<Unit> = Vec::new();
    let mut bytes = 0;
    let mut unit_of = vec![0; sources.len()];
    for i in ids {
        match units.last_mut() {
            Some(u) if u.sources.len() < UNIT_SOURCES && bytes < UNIT_BYTES => u.sources.push(i),
            _ => {
                units.push(Unit {
                    sources: vec![i],
                    jobs: vec![],
                });
                bytes = 0;
            }
        }
        bytes += sources[i].text.len();
        unit_of[i] = units.len() - 1;
    }
    for (j, job) in jobs.iter().enumerate() {
        units[unit_of[job.source]].jobs.push(j);
    }
    units.retain(|u| !u.jobs.is_empty());
    units
}

/// Source `i` inside a translation unit: in its own namespace (its helpers
/// and `typedef`s stay its own), its functions C++ functions of that
/// namespace; then `launch`, which the driver calls to launch one of them.
fn wrap(i: usize, s: &Source) -> String {
    let text = s.text.replace("extern \"C\" ", "");
    let mut out = format!("namespace b{i} {{\n{text}\n");
    let _ = writeln!(
        out,
        "static int launch(unsigned fn, unsigned blocks, unsigned threads, void* const* a, \
         int kid) {{\n  (void)a; (void)kid;\n  switch (fn) {{"
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

/// Write, compile and run one unit into `report`.
fn run_unit(sources: &[Source], jobs: &[Job], u: &Unit, dir: &Path, report: &Mutex<Report>) {
    std::fs::create_dir_all(dir).expect("unit directory");
    let mut cpp = format!("{SHIM}\n");
    for (k, &i) in u.sources.iter().enumerate() {
        cpp.push_str(&wrap(k, &sources[i]));
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
    let (src, exe, jobs_file, out) = (
        dir.join("unit.cpp"),
        dir.join("unit"),
        dir.join("jobs.bin"),
        dir.join("results.bin"),
    );
    std::fs::write(&src, &cpp).expect("writing the unit");
    std::fs::write(&jobs_file, encode_jobs(jobs, u)).expect("writing the jobs");
    let t = Instant::now();
    let compiled = Command::new("g++")
        .args(["-std=c++17", "-O1", "-fcf-protection=none", "-w", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("running g++");
    let compile_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let ran = compiled.status.success().then(|| {
        Command::new(&exe)
            .arg(&jobs_file)
            .arg(&out)
            .output()
            .expect("running the unit")
    });
    let run_s = t.elapsed().as_secs_f64();
    let mut r = report.lock().expect("report");
    r.compile_s += compile_s;
    r.run_s += run_s;
    let failed = match &ran {
        None => Some(format!(
            "g++ failed on unit {} (sources {:?}):\n{}",
            src.display(),
            u.sources,
            String::from_utf8_lossy(&compiled.stderr)
                .lines()
                .take(40)
                .collect::<Vec<_>>()
                .join("\n")
        )),
        Some(o) if !o.status.success() => Some(format!(
            "unit {} failed ({}): {}",
            src.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr)
        )),
        Some(_) => None,
    };
    if let Some(why) = failed {
        // The driver names the job it died in.
        let culprit = why
            .split("in job ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse::<usize>().ok());
        for (k, &j) in u.jobs.iter().enumerate() {
            let what = if Some(k) == culprit {
                "its unit crashed in it"
            } else {
                "its unit failed"
            };
            r.ran[j] = Some(Err(format!("{what} (see {})", src.display())));
        }
        r.unit_failures.push(why);
        return;
    }
    let bytes = std::fs::read(&out).expect("the unit's results");
    let mut at = 0;
    for (k, &j) in u.jobs.iter().enumerate() {
        let job = &jobs[j];
        r.launches += job.launches.len() as u64;
        r.blocks += job.launches.iter().map(|l| l.1 as u64).sum::<u64>();
        let mut ran = Ran {
            status: take_u64(&bytes, &mut at),
            kid: k as i32,
            returned: Vec::new(),
            word: [0; 2],
        };
        for b in &job.bufs {
            match b {
                Buf::Out(n) => ran.returned.push(take_f32s(&bytes, &mut at, *n)),
                Buf::InOut(v) => ran.returned.push(take_f32s(&bytes, &mut at, v.len())),
                Buf::ErrorWord => {
                    for w in &mut ran.word {
                        *w = take_u32(&bytes, &mut at) as i32;
                    }
                }
                _ => {}
            }
        }
        r.ran[j] = Some(Ok(ran));
    }
    assert_eq!(at, bytes.len(), "the results file has trailing bytes");
    drop(r);
    let _ = std::fs::remove_dir_all(dir);
}

/// The jobs file `driver.h` reads (little-endian `u64`s, data in its own
/// type): `njobs`, then per job: its source's index in the unit, its kernel
/// id (its index in the unit), `nbufs`, per buffer its kind (`Buf::code`),
/// length and data (kinds with data), then `nlaunch` and per launch the
/// function, blocks and threads.
fn encode_jobs(jobs: &[Job], u: &Unit) -> Vec<u8> {
    let mut v: Vec<u8> = Vec::new();
    let put = |v: &mut Vec<u8>, x: u64| v.extend_from_slice(&x.to_le_bytes());
    put(&mut v, u.jobs.len() as u64);
    for (k, &j) in u.jobs.iter().enumerate() {
        let job = &jobs[j];
        let local = u.sources.iter().position(|&s| s == job.source);
        put(
            &mut v,
            local.expect("the job's source is in its unit") as u64,
        );
        put(&mut v, k as u64);
        put(&mut v, job.bufs.len() as u64);
        for b in &job.bufs {
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
        put(&mut v, job.launches.len() as u64);
        for &(f, blocks, threads) in &job.launches {
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
