//! The mapping table and the spec library agree: every spec a row names
//! exists, every row's ONNX op is unique, ≥ 100 ai.onnx operators are
//! mapped, and the generated spec files (`specs/onnx_shape.tdl`,
//! `specs/onnx_grid_sample.tdl`) are what their generators write.

use std::collections::HashSet;
use std::path::Path;

#[test]
fn every_table_spec_exists() {
    let lib = tdl::Library::shipped().expect("shipped specs load");
    let mut seen = HashSet::new();
    for m in onnx::table::TABLE {
        assert!(seen.insert(m.op), "{} is listed twice", m.op);
        for s in m.specs {
            assert!(
                lib.get(s).is_some(),
                "{}: spec `{s}` is not in the library",
                m.op
            );
        }
    }
    for r in 0..=5 {
        for s in 0..=5 {
            if r + s > 0 {
                assert!(lib.get(&format!("reshape_{r}_{s}")).is_some());
            }
        }
    }
    assert!(onnx::table::covered_ops().count() >= 100);
}

#[test]
fn generated_specs_are_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (script, file) in [
        ("gen-onnx-shape-specs.py", "onnx_shape.tdl"),
        ("gen-onnx-grid-sample-specs.py", "onnx_grid_sample.tdl"),
    ] {
        let out = std::process::Command::new("python3")
            .arg(root.join("scripts").join(script))
            .output();
        let Ok(out) = out else {
            eprintln!("SKIPPED: python3 not available to regenerate specs/{file}");
            return;
        };
        let current = std::fs::read_to_string(root.join("specs").join(file)).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            current,
            "specs/{file} is stale: run python3 scripts/{script} > specs/{file}"
        );
    }
}
