//! Criterion benchmark (issue 3): time to analyse the whole shipped spec
//! library (target: well under 1 s) and to instantiate one op's strategies on
//! concrete shapes (target: under 10 µs). Both are also printed once with a
//! plain timer so the numbers show without criterion's report.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use interval::StrategyCache;
use tdl::{Attrs, Library};

/// Analyse every op (rank-polymorphic ones at ellipsis rank 2) with a fresh cache.
fn analyse_library(lib: &Library) -> usize {
    let cache = StrategyCache::new();
    cache
        .analyse_library(lib, 2)
        .iter()
        .filter(|(_, r)| r.is_ok())
        .count()
}

fn bench(c: &mut Criterion) {
    let lib = Library::shipped().expect("shipped library loads");
    let t = Instant::now();
    let n = analyse_library(&lib);
    println!(
        "analyse whole library: {n} ops in {:.1} ms (one cold run)",
        t.elapsed().as_secs_f64() * 1e3
    );
    c.bench_function("analyse_library", |b| {
        b.iter(|| black_box(analyse_library(&lib)))
    });

    let cache = StrategyCache::new();
    let conv = cache
        .get(lib.get("conv1d").expect("conv1d"), 0)
        .expect("analyses");
    let matmul = cache
        .get(lib.get("matmul").expect("matmul"), 0)
        .expect("analyses");
    let conv_shapes = vec![vec![32, 64, 128], vec![128, 64, 3]];
    let conv_attrs: Attrs = BTreeMap::from([("pad".to_string(), tdl::AttrValue::Int(1))]);
    let mm_shapes = vec![vec![1024, 512], vec![512, 256]];
    let none = Attrs::new();
    let iters = 100_000;
    let t = Instant::now();
    for _ in 0..iters {
        black_box(
            matmul
                .instantiate(black_box(&mm_shapes), &none, 4)
                .expect("fits"),
        );
    }
    println!(
        "instantiate matmul (4 parts): {:.2} µs",
        t.elapsed().as_secs_f64() * 1e6 / iters as f64
    );
    let t = Instant::now();
    for _ in 0..iters {
        black_box(
            conv.instantiate(black_box(&conv_shapes), &conv_attrs, 4)
                .expect("fits"),
        );
    }
    println!(
        "instantiate conv1d (4 parts): {:.2} µs",
        t.elapsed().as_secs_f64() * 1e6 / iters as f64
    );
    c.bench_function("instantiate_matmul_4", |b| {
        b.iter(|| black_box(matmul.instantiate(black_box(&mm_shapes), &none, 4)))
    });
    c.bench_function("instantiate_conv1d_4", |b| {
        b.iter(|| black_box(conv.instantiate(black_box(&conv_shapes), &conv_attrs, 4)))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
