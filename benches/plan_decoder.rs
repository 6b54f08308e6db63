//! The planner at cluster scale (issue 44): CriticalDP plans the
//! LLaMA-7B-shaped decoder (`onnx::synth`, 32 layers, 2,048 tokens, graph
//! only) at 256, 1,024 and 4,096 workers, with and without `--topology`,
//! and prints one Markdown row per case: the plan time (the planning call),
//! the wall time of the whole case (import, binding and planning), its CPU
//! time (user + system, all threads: less sensitive than wall time to other
//! work on the machine), the case's peak resident memory, the plan kept and
//! its estimate per link level. Each case runs in a child process of its own, so that its peak
//! resident memory is its own.
//!
//! ```sh
//! cargo bench -p tofu --bench plan_decoder
//! TOFU_BENCH_CASES=1024:128x8 cargo bench -p tofu --bench plan_decoder
//! ```
//!
//! `TOFU_BENCH_CASES`: comma-separated `WORKERS[:NODESxGPUS]` (default
//! `256,256:32x8,1024:128x8,4096:512x8`); the batch is WORKERS / 4 below
//! 1,024 workers and WORKERS / 8 from there (64, 128, 512), as in issue 44.

use std::process::Command;
use std::time::Instant;

use planner::plan::topology::{Link, Topology};
use planner::plan::{plan_with, PlanOptions, SearchKind};

const DEFAULT_CASES: &str = "256,256:32x8,1024:128x8,4096:512x8";
/// Set in a child: the one case it plans.
const CHILD: &str = "TOFU_BENCH_DECODER_CASE";

fn main() {
    if let Ok(case) = std::env::var(CHILD) {
        return child(&case);
    }
    let cases = std::env::var("TOFU_BENCH_CASES").unwrap_or_else(|_| DEFAULT_CASES.into());
    println!("| workers | topology | batch | plan s | wall s | CPU s | peak RSS MiB | kept | inter-node s | intra-node s |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let exe = std::env::current_exe().expect("the bench's own path");
    for case in cases.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        let out = Command::new(&exe)
            .env(CHILD, case)
            .output()
            .expect("the bench runs itself");
        if !out.status.success() {
            eprintln!("{case}: {}", String::from_utf8_lossy(&out.stderr));
            continue;
        }
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
}

/// The batch of a case with `workers` workers (see the module doc).
fn batch(workers: usize) -> usize {
    if workers < 1024 {
        workers / 4
    } else {
        workers / 8
    }
}

/// Plan one case `WORKERS[:NODESxGPUS]` and print its row.
fn child(case: &str) {
    let start = Instant::now();
    let (k, topo) = match case.split_once(':') {
        Some((k, t)) => (k, Some(Topology::parse(t).expect("NODESxGPUS"))),
        None => (case, None),
    };
    let workers: usize = k.parse().expect("WORKERS");
    let b = batch(workers).max(1);
    let dir = std::env::temp_dir().join(format!("tofu-bench-decoder-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("llama7b.onnx");
    let cfg = onnx::synth::DecoderConfig::llama_7b();
    std::fs::write(&path, onnx::synth::to_bytes(&onnx::synth::decoder(&cfg))).expect("written");
    // What `tofu plan FILE.onnx --input-shape input_ids=B,2048` imports.
    let opts = onnx::ImportOptions {
        batch: None,
        dims: vec![],
        input_shapes: vec![format!("input_ids={b},2048")],
        input_values: vec![],
        training: true,
        loss: None,
        class_ids: true,
        optimizer: "momentum".into(),
        weight_decay: 0.0,
        opaque_unsupported: false,
        op_map: vec![],
    };
    let lib = tdl::Library::shipped().expect("shipped specs");
    let imported = onnx::load_graph_with(&path, &lib, &opts.options().expect("options"))
        .expect("the decoder imports");
    let _ = std::fs::remove_dir_all(&dir);
    let plan_opts = PlanOptions {
        topology: topo,
        ..PlanOptions::default()
    };
    let cache = interval::cache::StrategyCache::new();
    let p = plan_with(
        &imported.graph,
        &imported.library,
        &cache,
        workers,
        SearchKind::CriticalDp,
        plan_opts,
    )
    .expect("planned");
    let wall = start.elapsed().as_secs_f64();
    let secs = |l: Link| {
        p.links.map_or("—".into(), |r| {
            format!("{:.4}", r.load.seconds[l as usize])
        })
    };
    println!(
        "| {workers} | {} | {b} | {:.1} | {wall:.1} | {:.1} | {} | {} | {} | {} |",
        topo.map_or("—".into(), |t| format!(
            "`{}x{}`",
            t.nodes, t.gpus_per_node
        )),
        p.plan_seconds,
        cpu_seconds(),
        peak_rss_mib().map_or("?".into(), |m| m.to_string()),
        p.choice,
        secs(Link::InterNode),
        secs(Link::IntraNode),
    );
}

/// This process's CPU time so far, user and system, all threads (seconds).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes only the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return f64::NAN;
    }
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// This process's peak resident memory (`VmHWM`, Linux), MiB.
fn peak_rss_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}
