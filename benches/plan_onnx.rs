//! The planner benchmark of issue 6 on real ONNX models: every search on the
//! `light_*` models of the `onnx==1.22.0` wheel (fetched by
//! `scripts/fetch-onnx-data.sh` into `$TOFU_ONNX_CACHE`, default
//! `~/.cache/tofu/onnx-1.22.0`), trained with softmax cross-entropy on their
//! output, at the worker counts of `TOFU_BENCH_K` (default 2, 4, 6, 8, 16, 64)
//! and batch `TOFU_BENCH_BATCH` (default 32). Prints Markdown: every row,
//! then the summary (one line per model and k); ratios to the ILP are
//! measured in the same run.
//!
//! `cargo bench -p tofu --bench plan_onnx`

use std::path::PathBuf;

use planner::plan::compare::{
    compare, ks_from_env, markdown_row, summary_markdown, MARKDOWN_HEADER,
};

fn main() {
    let cache = std::env::var_os("TOFU_ONNX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/tofu/onnx-1.22.0")
        });
    let dir = cache.join("light");
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(d) => d
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
            .collect(),
        Err(e) => {
            eprintln!(
                "no ONNX models in {} ({e}); run scripts/fetch-onnx-data.sh first",
                dir.display()
            );
            return;
        }
    };
    files.sort();
    let batch: usize = std::env::var("TOFU_BENCH_BATCH")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32);
    let lib = tdl::Library::shipped().expect("shipped specs");
    let ks = ks_from_env();
    println!("{MARKDOWN_HEADER}");
    let mut all = Vec::new();
    for f in files {
        let opts = onnx::Options {
            training: true,
            dims: onnx::DimOptions {
                batch: Some(batch),
                ..Default::default()
            },
            ..Default::default()
        };
        let imported = match onnx::load_graph_with(&f, &lib, &opts) {
            Ok(i) => i,
            Err(e) => {
                eprintln!("{}: {e}", f.display());
                continue;
            }
        };
        let name = format!(
            "{} (b={batch})",
            f.file_stem().unwrap_or_default().to_string_lossy()
        );
        eprintln!("{name}: {} ops", imported.graph.ops().len());
        for r in compare(&name, &imported.graph, &imported.library, &ks, 5000) {
            println!("{}", markdown_row(&r));
            all.push(r);
        }
    }
    println!("\n{}", summary_markdown(&all));
}
