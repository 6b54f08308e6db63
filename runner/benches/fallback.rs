//! The operators of the benchmark models that run without a library kernel
//! (through the evaluator compiled from their TDL spec), at the shapes those
//! models give them, against their memory-traffic time measured in the same
//! run: each line prints the op's time, the time a copy moving the same
//! bytes takes (bytes read + written at the bandwidth of a `copy_from_slice`
//! of 64 MiB, measured first) and the ratio (issue 24: a fallback op should
//! stay within ~10× of its traffic time). Library kernels in the list are
//! marked so.
//!
//! Run: `cargo bench -p runner --bench fallback` (env `TOFU_BENCH_OPS`: a
//! comma-separated subset of op names).

mod common;

use common::inputs;
use std::time::Instant;

use runner::{OpKernel, Registry};
use tdl::{AttrValue, Attrs, Library};

/// Median seconds of `f` over a few runs after a warm-up.
fn median(mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..5)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[2]
}

fn run(k: &OpKernel, ins: &[Vec<f32>], outs: &mut [Vec<f32>]) {
    let ins: Vec<&[f32]> = ins.iter().map(|v| &v[..]).collect();
    let mut outs: Vec<&mut [f32]> = outs.iter_mut().map(|v| &mut v[..]).collect();
    k.run(&ins, &mut outs).expect("kernel runs");
}

fn main() {
    let lib = Library::shipped().expect("shipped specs");
    let reg = Registry::default();
    let only: Option<Vec<String>> = std::env::var("TOFU_BENCH_OPS")
        .ok()
        .map(|s| s.split(',').map(str::to_string).collect());
    // Bandwidth of a plain copy (bytes read + written per second).
    let n = 16 << 20;
    let (src, mut dst) = (vec![1.0f32; n], vec![0.0f32; n]);
    let t = median(|| dst.copy_from_slice(&src));
    let bandwidth = (8 * n) as f64 / t;
    println!(
        "copy of 64 MiB: {:.2} GB/s (bytes read + written)",
        bandwidth / 1e9
    );
    let int = |k: &str, v: i64| (k.to_string(), AttrValue::Int(v));
    let float = |k: &str, v: f64| (k.to_string(), AttrValue::Float(v));
    // (op, input shapes, attributes): ResNet-50 b8, gpt-2-256 b2, mlp-4-4096 b256.
    let act = vec![8, 256, 56, 56];
    let hid = vec![2, 1024, 1024];
    let cases: Vec<(&str, Vec<Vec<usize>>, Attrs)> = vec![
        ("relu", vec![act.clone()], Attrs::new()),
        ("relu_grad", vec![act.clone(), act.clone()], Attrs::new()),
        ("add", vec![act.clone(), act.clone()], Attrs::new()),
        ("identity", vec![act.clone()], Attrs::new()),
        ("gelu", vec![hid.clone()], Attrs::new()),
        ("gelu_grad", vec![hid.clone(), hid.clone()], Attrs::new()),
        ("bias_add", vec![hid.clone(), vec![1024]], Attrs::new()),
        ("sum_leading", vec![hid.clone()], Attrs::new()),
        ("causal_mask", vec![vec![2, 4, 1024, 1024]], Attrs::new()),
        (
            "causal_mask_grad",
            vec![vec![2, 4, 1024, 1024]],
            Attrs::new(),
        ),
        (
            "scale",
            vec![vec![2, 4, 1024, 1024]],
            [float("alpha", 0.125)].into_iter().collect(),
        ),
        (
            "split_heads",
            vec![vec![2, 1024, 256]],
            [int("heads", 4)].into_iter().collect(),
        ),
        ("merge_heads", vec![vec![2, 4, 1024, 64]], Attrs::new()),
        ("relu", vec![vec![256, 4096]], Attrs::new()),
        (
            "relu_grad",
            vec![vec![256, 4096], vec![256, 4096]],
            Attrs::new(),
        ),
    ];
    println!(
        "{:<18} {:<28} {:>10} {:>10} {:>8}  provider",
        "op", "input shapes", "op_ms", "traffic_ms", "ratio"
    );
    for (op, shapes, attrs) in cases {
        if only.as_ref().is_some_and(|o| !o.iter().any(|x| x == op)) {
            continue;
        }
        let Some(spec) = lib.get(op) else {
            println!("{op}: not in the shipped library");
            continue;
        };
        let k = match reg.prepare(spec, &shapes, &attrs) {
            Ok(k) => k,
            Err(e) => {
                println!("{op}: {e}");
                continue;
            }
        };
        let ins = inputs(&shapes);
        let mut outs: Vec<Vec<f32>> = k
            .output_shapes()
            .iter()
            .map(|s| vec![0.0; s.iter().product()])
            .collect();
        let s = median(|| run(&k, &ins, &mut outs));
        let bytes: usize = 4
            * (ins.iter().map(Vec::len).sum::<usize>() + outs.iter().map(Vec::len).sum::<usize>());
        let traffic = bytes as f64 / bandwidth;
        println!(
            "{:<18} {:<28} {:>10.2} {:>10.2} {:>7.1}x  {:?}",
            op,
            format!("{shapes:?}"),
            s * 1e3,
            traffic * 1e3,
            s / traffic,
            k.provider()
        );
    }
}
