//! Table 1 of the Tofu paper (shared/seeds/001 §6.1), "Total size for weight
//! tensors in GB", reproduced from the zoo's training graphs.
//!
//! **What the table counts.** Not the weights alone: each cell is the bytes
//! of the weights **plus their gradients plus one optimizer-state tensor per
//! weight** (momentum SGD, MXNet's default), i.e. 3 × 4 bytes per f32
//! parameter, in GiB (2^30 bytes). The paper's own text fixes the factor:
//! "WResNet-152-10 requires 22GB for just its weight tensors" and
//! "RNN-10-8K requires 19GB to store just its weight tensors", while the
//! table lists 65.1 and 57.0 — three times as much. The numbers also fix the
//! rest:
//!
//! * WResNet: every tensor of the network — all convolutions (stem and
//!   shortcut projections included) with *both* channel sides widened by W,
//!   batch-norm scale and shift, and the final 1000-way classifier. The
//!   stem is widened too (64W channels); only the 3 image channels and the
//!   1000 classes are not.
//! * RNN: only the LSTM layers, 4H·(K + H) + 4H parameters per layer with
//!   K = 512 (the embedding size) for the first layer and K = H above. The
//!   embedding table and the softmax projection are not counted: the model of
//!   [32] has an 800K-word vocabulary, whose 512-wide embedding alone would
//!   add ~4.6 GiB to every cell, and even a 10K vocabulary (embedding plus
//!   softmax, 46M parameters, 0.5 GiB) would put
//!   RNN-6-4K 5.5% above the table, while the LSTM layers alone match every
//!   cell within 1%.
//!
//! **The cell not fitted: RNN-8 at H = 6K (28.5 GB).** The table is linear
//! in the number of layers for every hidden size (each extra layer adds
//! 12 · 8H² bytes: 1.5 GiB at 4K, 3.375 GiB at 6K, 6 GiB at 8K), and its own
//! 6K row gives 18.6 (6 layers) and 32.1 (10 layers), whose midpoint is 25.35
//! — our count is 25.45. 28.5 is 12% above that and breaks the row's
//! linearity (it would need 4.95 GiB per layer from 6 to 8 layers and 1.8
//! from 8 to 10) and the column's H² scaling; it looks like a typo (25.x → 28.5).
//! The test asserts that our value for this cell is the interpolation, not 28.5.

use planner::graph::memory::weight_state_bytes;
use planner::graph::{MemoryReport, Optimizer, TensorRole};
use planner::zoo::Model;

const GIB: f64 = (1u64 << 30) as f64;

fn library() -> tdl::Library {
    tdl::Library::shipped().expect("the shipped specs load")
}

/// Bytes of weights + gradients + momentum of a whole zoo model, in GiB.
fn model_state_gib(lib: &tdl::Library, name: &str) -> f64 {
    let g = Model::parse(name)
        .unwrap()
        .with_batch(1)
        .training(lib, &Optimizer::default())
        .unwrap();
    MemoryReport::of(&g).training_state_bytes() as f64 / GIB
}

/// The same, counting only the LSTM layers' weights (`lstm.*`).
fn lstm_state_gib(lib: &tdl::Library, name: &str) -> f64 {
    let g = Model::parse(name)
        .unwrap()
        .with_batch(1)
        .training(lib, &Optimizer::default())
        .unwrap();
    let bytes: u64 = g
        .tensor_ids()
        .filter(|&t| {
            g.tensor(t).role == TensorRole::Weight && g.tensor(t).name.starts_with("lstm.")
        })
        .map(|t| weight_state_bytes(&g, t))
        .sum();
    bytes as f64 / GIB
}

fn check(cells: &[(&str, f64)], measure: impl Fn(&str) -> f64) {
    let mut failures = Vec::new();
    for &(name, paper) in cells {
        let ours = measure(name);
        let err = (ours / paper - 1.0) * 100.0;
        println!("{name:>16}: paper {paper:5.1} GB, ours {ours:6.2} GiB ({err:+.1}%)");
        if err.abs() > 3.0 {
            failures.push(format!(
                "{name}: paper {paper}, ours {ours:.2} ({err:+.1}%)"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "cells off by more than 3%: {failures:#?}"
    );
}

#[test]
fn table1_wresnet_within_3_percent() {
    let lib = library();
    let cells = [
        ("wresnet-50-4", 4.2),
        ("wresnet-101-4", 7.8),
        ("wresnet-152-4", 10.5),
        ("wresnet-50-6", 9.6),
        ("wresnet-101-6", 17.1),
        ("wresnet-152-6", 23.4),
        ("wresnet-50-8", 17.1),
        ("wresnet-101-8", 30.6),
        ("wresnet-152-8", 41.7),
        ("wresnet-50-10", 26.7),
        ("wresnet-101-10", 47.7),
        ("wresnet-152-10", 65.1),
    ];
    check(&cells, |n| model_state_gib(&lib, n));
}

#[test]
fn table1_rnn_within_3_percent() {
    let lib = library();
    let cells = [
        ("rnn-6-4k", 8.4),
        ("rnn-8-4k", 11.4),
        ("rnn-10-4k", 14.4),
        ("rnn-6-6k", 18.6),
        // rnn-8-6k: 28.5 in the paper, not fitted (see the module doc).
        ("rnn-10-6k", 32.1),
        ("rnn-6-8k", 33.0),
        ("rnn-8-8k", 45.3),
        ("rnn-10-8k", 57.0),
    ];
    check(&cells, |n| lstm_state_gib(&lib, n));
}

#[test]
fn table1_rnn_8_6k_is_the_interpolation_of_its_row() {
    let lib = library();
    let ours = lstm_state_gib(&lib, "rnn-8-6k");
    let midpoint = (18.6 + 32.1) / 2.0;
    assert!(
        (ours / midpoint - 1.0).abs() < 0.01,
        "rnn-8-6k: {ours:.2} GiB, row midpoint {midpoint}"
    );
    assert!(
        ours < 28.5 * 0.9,
        "rnn-8-6k should not match the paper's 28.5"
    );
}

#[test]
fn paper_text_weight_sizes() {
    // §6.1 text: WResNet-152-10 "requires 22GB for just its weight tensors",
    // RNN-10-8K "requires 19GB".
    let lib = library();
    let w = model_state_gib(&lib, "wresnet-152-10") / 3.0;
    let r = lstm_state_gib(&lib, "rnn-10-8k") / 3.0;
    assert!((w - 22.0).abs() < 0.5, "wresnet-152-10 weights {w:.2} GiB");
    assert!((r - 19.0).abs() < 0.5, "rnn-10-8k weights {r:.2} GiB");
}
