//! A `tofu` binary copied anywhere works: the shipped operator library is
//! built into it (issue 43, item 1).
//!
//! The test copies the binary into an empty temporary directory and, in the
//! copy, overwrites every occurrence of the source tree's path (e.g.
//! `/work/tofu`, inside `env!("CARGO_MANIFEST_DIR")` strings and debug
//! info) with a path of the same length that does not exist, so the copy
//! cannot reach the build tree's `specs/` by any compiled-in path. Run there
//! with no `TOFU_SPECS` and the temporary directory as its working
//! directory, it must plan a zoo model and run the plan with `--verify`.
//!
//! Negative control (checked by hand): with `tdl::shipped_sources` reading
//! `concat!(env!("CARGO_MANIFEST_DIR"), "/../specs")` instead of the
//! embedded files, the first command (`tofu check`) fails with `cannot read
//! '/####…/tdl/../specs'`.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use tofu_tests::{temp_dir, text, tofu_bin, workspace_root};

/// `bytes` with every occurrence of `needle` replaced by `#`s after a `/`
/// (same length); gives the count replaced.
fn void_path(bytes: &mut [u8], needle: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i + needle.len() <= bytes.len() {
        if &bytes[i..i + needle.len()] == needle {
            bytes[i + 1..i + needle.len()].fill(b'#');
            n += 1;
            i += needle.len();
        } else {
            i += 1;
        }
    }
    n
}

/// Run the copied binary in `dir` with no `TOFU_SPECS`.
fn run(bin: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .current_dir(dir)
        .env_remove("TOFU_SPECS")
        .env_remove("CARGO_MANIFEST_DIR")
        .output()
        .expect("cannot run the copied tofu")
}

#[test]
fn a_copied_binary_plans_and_runs_a_zoo_model_without_the_source_tree() {
    let dir = temp_dir("relocatable");
    let root = workspace_root().canonicalize().expect("the workspace root");
    let mut bytes = std::fs::read(tofu_bin()).expect("read the tofu binary");
    let voided = void_path(&mut bytes, root.as_os_str().as_bytes());
    let bin = dir.join("tofu");
    std::fs::write(&bin, &bytes).expect("write the copy");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    eprintln!("voided {voided} occurrence(s) of {}", root.display());

    let o = run(&bin, &dir, &["check"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "check: {out}\n{err}");
    assert!(out.contains("ok  specs/activation.tdl:"), "{out}");

    let o = run(
        &bin,
        &dir,
        &[
            "plan",
            "--model",
            "mlp-3-256",
            "--workers",
            "2",
            "-o",
            "plan.json",
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "plan: {out}\n{err}");
    let o = run(&bin, &dir, &["run", "plan.json", "--verify"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "run: {out}\n{err}");
    assert!(
        out.contains("verify: max relative error") && out.contains("(ok)"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn spec_errors_name_the_shipped_file_by_its_place_in_the_source_tree() {
    // A user op named like a shipped one: the duplicate error names
    // `specs/activation.tdl` with its line (not a path of the build tree).
    let dir = temp_dir("relocatable-dup");
    let user = dir.join("mine.tdl");
    std::fs::write(
        &user,
        "/// A second relu.\nop relu(x[N]) -> y[N] {\n    y[n] = x[n];\n}\n",
    )
    .unwrap();
    let o = tofu_tests::tofu(&[
        std::ffi::OsStr::new("check"),
        "--specs".as_ref(),
        user.as_os_str(),
    ]);
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}\n{err}");
    assert!(
        err.contains("operator `relu` is already defined at specs/activation.tdl:7:4"),
        "{err}"
    );
    assert!(err.contains("mine.tdl:2:4"), "{err}");
    assert!(err.contains("rename one of"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
