//! Graph inputs that are functions of the batch's shape (issue 38, item 3):
//! GPT-2's torch export (`onnx/tests/fixtures/exports/gpt2.onnx`) computes
//! its position ids (`unsqueeze`, `arange(S)`) and its causal attention mask
//! (`bitwise_and_1`, `[B, 1, S, S]`, from an all-ones attention mask the
//! exporter baked in) from `input_ids`' shape. The importer folds them into
//! constants that carry their values, and the data path feeds only the
//! inputs the graph does not determine: a byte corpus (`ids`, `labels`, as
//! `--data kjv` gives) feeds `input_ids` and `loss.labels` with no mapping.
//!
//! Oracles: the folded values against `arange` and the causal mask written
//! here (`mask[b, 0, i, j] = j ≤ i`); before the change the data path
//! counted the folded constants as data inputs and `ids` matched none
//! (the error named `unsqueeze` and `bitwise_and_1`). An input the graph
//! does not determine (BERT's `attention_mask`) stays an error that lists
//! the graph's inputs and the data's tensors; windows of another length
//! than the graph's sequence are an error naming the input and the flags.

use std::collections::BTreeMap;
use std::path::PathBuf;

use train::text::TokenSet;

fn export(name: &str) -> PathBuf {
    tofu_tests::workspace_root().join(format!("onnx/tests/fixtures/exports/{name}.onnx"))
}

/// The training graph of export `name` at batch 2 and sequence `seq`.
fn import(name: &str, seq: usize) -> planner::graph::Graph {
    let lib = tdl::Library::shipped().expect("shipped specs load");
    let opts = onnx::Options {
        training: true,
        class_ids: true,
        dims: onnx::DimOptions {
            batch: Some(2),
            named: BTreeMap::from([("sequence".to_string(), seq)]),
        },
        ..Default::default()
    };
    onnx::load_graph_with(&export(name), &lib, &opts)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .graph
}

/// A byte corpus in windows of `seq`, as `--data kjv` gives.
fn bytes(seq: usize) -> TokenSet {
    TokenSet {
        tokens: (0..64 * seq).map(|i| (i * 7 % 251) as u8).collect(),
        seq,
    }
}

#[test]
fn gpt2_export_feeds_from_token_ids_alone() {
    let s = 16;
    let g = import("gpt2", s);
    let (tensors, _, batch) = train::prepare::task_tensors(&g, &bytes(s))
        .unwrap_or_else(|e| panic!("ids and labels feed the export: {e}"));
    assert_eq!(batch, 2);
    let fed: Vec<&str> = tensors
        .inputs
        .iter()
        .map(|(t, _)| g.tensor(*t).name.as_str())
        .collect();
    assert_eq!(fed, ["input_ids", "loss.labels"]);
    let named = |n: &str| g.tensors().iter().find(|t| t.name == n).unwrap();
    let positions: Vec<f64> = (0..s).map(|i| i as f64).collect();
    assert_eq!(named("unsqueeze").value.as_deref(), Some(&positions[..]));
    let mask = named("bitwise_and_1");
    assert_eq!(mask.shape, [2, 1, s, s]);
    let causal: Vec<f64> = (0..2 * s * s)
        .map(|e| f64::from(u8::from(e % s <= (e / s) % s)))
        .collect();
    assert_eq!(mask.value.as_deref(), Some(&causal[..]), "the causal mask");

    // Windows of another length name the graph input and both fixes.
    let err = match train::prepare::task_tensors(&g, &bytes(8)) {
        Ok(_) => panic!("windows of 8 for a sequence of 16"),
        Err(e) => e.to_string(),
    };
    for want in ["`input_ids`", "[2, 16]", "8 elements", "--dim", "--seq"] {
        assert!(err.contains(want), "{want}: {err}");
    }
}

#[test]
fn an_input_the_graph_does_not_determine_stays_an_error() {
    let g = import("bert-base", 16);
    let err = match train::prepare::task_tensors(&g, &bytes(16)) {
        Ok(_) => panic!("BERT's attention_mask has no data"),
        Err(e) => e.to_string(),
    };
    for want in [
        "`input_ids` [2, 16]",
        "`attention_mask` [2, 16]",
        "`ids` 16",
        "--input",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
}
