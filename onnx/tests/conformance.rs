//! ONNX's operator test cases (onnx==1.22.0 `backend/test/data/node`) run
//! through the importer and the TDL interpreter; writes the checked-in
//! report `docs/onnx-conformance.md` and holds the targets: ≥ 95% of the
//! cases of mapped operators pass (skips count as not passed), ≥ 100 ai.onnx
//! operators are mapped.
//!
//! `TOFU_ONNX_CASES=substring` runs only matching cases (and does not write
//! the report).

mod common;

use std::path::Path;

#[test]
fn onnx_node_tests_pass_through_the_specs() {
    let Some(dir) = common::data_dir() else {
        return;
    };
    let lib = tdl::Library::shipped().expect("shipped specs load");
    let filter = std::env::var("TOFU_ONNX_CASES").ok();
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    let report = match &filter {
        Some(f) => onnx::conformance::Report {
            cases: onnx::conformance::case_dirs(&dir.join("node"))
                .expect("node dir readable")
                .iter()
                .filter(|d| d.to_string_lossy().contains(f.as_str()))
                .map(|d| onnx::conformance::run_case(d, &lib))
                .collect(),
        },
        None => {
            onnx::conformance::run_all(&dir.join("node"), &lib, threads).expect("node dir readable")
        }
    };
    let per_op = report.per_op();
    println!(
        "{:<28} {:>5} {:>6} {:>6} {:>7}",
        "operator", "cases", "passed", "failed", "skipped"
    );
    for (op, (c, p, f, s)) in &per_op {
        println!("{op:<28} {c:>5} {p:>6} {f:>6} {s:>7}");
    }
    for c in report.cases.iter().filter(|c| c.mapped) {
        match &c.outcome {
            onnx::conformance::Outcome::Fail(r) => println!("FAIL {} ({}): {r}", c.case, c.op),
            onnx::conformance::Outcome::Skip(r) => println!("SKIP {} ({}): {r}", c.case, c.op),
            onnx::conformance::Outcome::NotApplicable(r) => {
                println!("N/A  {} ({}): {r}", c.case, c.op)
            }
            onnx::conformance::Outcome::Pass => {}
        }
    }
    let (total, pass, fail, skip) = report.totals();
    let covered = onnx::table::covered_ops().count();
    println!(
        "cases of mapped ops {total}: passed {pass} ({:.1}%), failed {fail}, skipped {skip}; ai.onnx operators mapped: {covered}",
        100.0 * pass as f64 / total.max(1) as f64
    );
    if filter.is_some() {
        return;
    }
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/onnx-conformance.md");
    std::fs::write(&out, report.markdown()).expect("write docs/onnx-conformance.md");
    assert!(
        covered >= 100,
        "only {covered} ai.onnx operators are mapped"
    );
    // Judged cases (passed + failed) must pass at ≥ 95%; skips (variants the
    // mapping does not support) are listed with reasons in the report, and the
    // share of all cases of mapped operators that pass is printed above.
    assert!(
        pass as f64 >= 0.95 * (pass + fail) as f64,
        "only {pass} of {} judged cases of mapped operators pass",
        pass + fail
    );
    assert!(
        pass as f64 >= 0.95 * total as f64,
        "only {pass} of {total} cases of mapped operators pass"
    );
}
