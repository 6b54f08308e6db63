//! Kernel throughput of the CPU backend: GFLOP/s of a 1024³ f32 matmul (the
//! `gemm` crate) and elements/s of a softmax through the compiled evaluator,
//! with the reference interpreter as the baseline (ratio printed).
//!
//! `CARGO_TARGET_DIR=/work/targets/runner cargo bench -p runner --bench kernels`

mod common;

use common::inputs;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use runner::{OpKernel, Registry};
use tdl::{Attrs, Library, Tensor};

fn run(k: &OpKernel, ins: &[Vec<f32>], out: &mut [f32]) {
    let ins: Vec<&[f32]> = ins.iter().map(|v| &v[..]).collect();
    k.run(&ins, &mut [out]).expect("kernel runs");
}

/// Mean seconds per call of `f` over at least `min` of wall time.
fn time(min: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let (start, mut n) = (Instant::now(), 0u32);
    while start.elapsed() < min || n < 3 {
        f();
        n += 1;
    }
    start.elapsed().as_secs_f64() / n as f64
}

fn benches(c: &mut Criterion) {
    let lib = Library::shipped().expect("shipped specs");
    let reg = Registry::default();

    // Matmul 1024³.
    let n = 1024;
    let spec = lib.get("matmul").expect("matmul spec");
    let shapes = vec![vec![n, n], vec![n, n]];
    let k = reg
        .prepare(spec, &shapes, &Attrs::new())
        .expect("prepare matmul");
    let ins = inputs(&shapes);
    let mut out = vec![0.0f32; n * n];
    let flops = 2.0 * (n as f64).powi(3);
    let s = time(Duration::from_secs(2), || run(&k, &ins, &mut out));
    println!(
        "matmul {n}x{n}x{n} f32 ({:?}): {:.1} GFLOP/s ({:.2} ms)",
        k.provider(),
        flops / s / 1e9,
        s * 1e3
    );
    let mut g = c.benchmark_group("matmul_1024");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements(flops as u64));
    g.bench_function("gemm (thrpt = FLOP/s)", |b| {
        b.iter(|| run(&k, &ins, &mut out))
    });
    g.finish();

    // Softmax: compiled evaluator vs interpreter.
    let spec = lib.get("softmax").expect("softmax spec");
    let shapes = vec![vec![256, 1024]];
    let k = Registry::empty()
        .prepare(spec, &shapes, &Attrs::new())
        .expect("prepare softmax");
    let ins = inputs(&shapes);
    let mut out = vec![0.0f32; 256 * 1024];
    let s = time(Duration::from_secs(2), || run(&k, &ins, &mut out));
    let compiled = (256 * 1024) as f64 / s;
    let small = vec![8usize, 256];
    let t = Tensor::new(
        &small,
        inputs(std::slice::from_ref(&small))[0]
            .iter()
            .map(|&x| x as f64)
            .collect(),
    )
    .expect("tensor");
    let si = time(Duration::from_secs(2), || {
        tdl::evaluate(spec, std::slice::from_ref(&t), &Attrs::new()).expect("interpreter");
    });
    let interp = (8 * 256) as f64 / si;
    println!(
        "softmax [256, 1024] compiled: {:.1} M elements/s; interpreter ([8, 256]): {:.3} M elements/s; ratio {:.0}x",
        compiled / 1e6,
        interp / 1e6,
        compiled / interp
    );
    let mut g = c.benchmark_group("softmax_256x1024");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements(256 * 1024));
    g.bench_function("compiled evaluator", |b| b.iter(|| run(&k, &ins, &mut out)));
    g.finish();
}

criterion_group!(kernels, benches);
criterion_main!(kernels);
