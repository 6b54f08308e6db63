//! End-to-end tests of `tofu check`: the shipped specs pass, a broken spec
//! fails with `file:line:col`, a caret and a hint, a missing path fails with
//! a message naming it.
//!
//! The `tofu` binary belongs to another package, so `CARGO_BIN_EXE_tofu` is
//! not available here; the binary is built once per test run with the cargo
//! that runs the tests (`cargo build -p tofu --bin tofu --profile test`, into
//! the same target directory, so it shares the test build's artifacts and is
//! never stale). `TOFU_BIN` overrides the path.

use tofu_tests::{temp_dir, text, tofu, workspace_root};

#[test]
fn shipped_specs_check_clean() {
    let o = tofu(&["check"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    let total = out
        .lines()
        .find(|l| l.contains("operators in") && l.contains("no errors"))
        .unwrap_or_else(|| panic!("no total line in:\n{out}"));
    let n: usize = total.split_whitespace().next().unwrap().parse().unwrap();
    assert!(n > 0, "{total}");
    assert!(out.contains("ok  "), "no per-file line in:\n{out}");
}

#[test]
fn shipped_specs_by_explicit_path() {
    let specs = workspace_root().join("specs");
    let o = tofu(&[std::ffi::OsStr::new("check"), specs.as_os_str()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("no errors"), "{out}");
}

#[test]
fn bad_spec_reports_position_caret_and_hint() {
    let dir = temp_dir("bad");
    let bad = dir.join("bad.tdl");
    std::fs::write(
        &bad,
        "/// Downsample by two.\nop down(x[N]) -> y[N // 2] {\n    y[i] = x[i * 4 / 2];\n}\n",
    )
    .unwrap();
    let o = tofu(&[std::ffi::OsStr::new("check"), bad.as_os_str()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    let all = format!("{out}{err}");
    assert!(all.contains("index is not an integer"), "{all}");
    assert!(
        all.contains(&format!("{}:3:14", bad.display())),
        "no file:line:col in:\n{all}"
    );
    assert!(
        all.contains('^') || all.contains('─'),
        "no caret in:\n{all}"
    );
    assert!(
        all.contains("use `//` for integer division"),
        "no hint in:\n{all}"
    );
    assert!(all.contains("1 error(s)"), "{all}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_syntax_reports_every_file_and_hint() {
    let dir = temp_dir("syntax");
    std::fs::write(
        dir.join("a.tdl"),
        "/// Sum.\nop add(a[N], b[N]) -> c[N] {\n    // add them\n    c[i] = a[i] + b[i];\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.tdl"),
        "/// Copy.\nop copy(x[N]) -> y[N] {\n    y[i] = x[j];\n}\n",
    )
    .unwrap();
    let o = tofu(&[std::ffi::OsStr::new("check"), dir.as_os_str()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains(&format!("{}:3:5", dir.join("a.tdl").display())),
        "{err}"
    );
    assert!(err.contains("comments start with `#`"), "{err}");
    assert!(
        err.contains(&format!("{}:3:14", dir.join("b.tdl").display())),
        "{err}"
    );
    assert!(err.contains("unbound name `j`"), "{err}");
    assert!(err.contains("2 error(s)"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn op_without_doc_comment_is_rejected() {
    let dir = temp_dir("nodoc");
    let f = dir.join("nodoc.tdl");
    std::fs::write(&f, "op copy(x[N]) -> y[N] {\n    y[i] = x[i];\n}\n").unwrap();
    let o = tofu(&[std::ffi::OsStr::new("check"), f.as_os_str()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("`copy`") && err.contains("doc comment"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn missing_path_names_the_path() {
    let dir = temp_dir("missing");
    let missing = dir.join("no_such_spec.tdl");
    let o = tofu(&[std::ffi::OsStr::new("check"), missing.as_os_str()]);
    let (out, err) = text(&o);
    assert_ne!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(o.status.code().is_some(), "killed by a signal");
    assert!(
        err.contains(&missing.display().to_string()),
        "path not named in:\n{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
