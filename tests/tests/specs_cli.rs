//! `--specs PATH` (issue 43, item 2): a user operator library loaded beside
//! the shipped one, recorded in the plan so the plan runs where the spec
//! files are not, and a spec edited after planning refused by name and
//! hash.
//!
//! The user op is `my_relu`, a copy of `relu` under a new name; the graph
//! is the zoo's `mlp-2-8` training graph (`tofu graph -o`) with its `relu`
//! operators switched to `my_relu`, so the plan runs `my_relu` from its
//! spec (no kernel knows the name) and `--verify` compares it with the
//! unpartitioned run.

use std::path::Path;
use std::process::Command;

use tofu_tests::{temp_dir, text, tofu, tofu_bin};

const MY_RELU: &str = "/// A user copy of relu: y = max(x, 0). Source: the --specs test.
op my_relu(x[...]) -> y[...] {
    y[...] = max(x[...], 0.0);
    grad x = relu_grad(x, grad(y));
}";

/// `tofu ARGS` in `dir` (no `TOFU_SPECS`): status, stdout, stderr.
fn tofu_in(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(tofu_bin())
        .args(args)
        .current_dir(dir)
        .env_remove("TOFU_SPECS")
        .output()
        .expect("cannot run tofu");
    let (out, err) = text(&o);
    (o.status.success(), out, err)
}

/// SHA-256 of `text` by the system's `sha256sum` (an oracle independent of
/// tofu's hashing).
fn sha256sum(dir: &Path, text: &str) -> String {
    let f = dir.join("hash-me");
    std::fs::write(&f, text).unwrap();
    let o = Command::new("sha256sum")
        .arg(&f)
        .output()
        .expect("sha256sum");
    String::from_utf8_lossy(&o.stdout)[..64].to_string()
}

/// The mlp-2-8 training graph with `relu` switched to `my_relu`, as `g.json` in `dir`.
fn graph_with_my_relu(dir: &Path) {
    let (ok, out, err) = tofu_in(
        dir,
        &[
            "graph", "--model", "mlp-2-8", "--batch", "8", "-o", "g.json",
        ],
    );
    assert!(ok, "{out}\n{err}");
    let mut g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("g.json")).unwrap()).unwrap();
    let mut switched = 0;
    for op in g["ops"].as_array_mut().unwrap() {
        if op["spec"] == "relu" {
            op["spec"] = "my_relu".into();
            switched += 1;
        }
    }
    assert_eq!(switched, 1, "mlp-2-8 has one relu operator");
    std::fs::write(dir.join("g.json"), g.to_string()).unwrap();
}

#[test]
fn a_plan_made_with_specs_runs_without_them_and_refuses_an_edited_spec() {
    let dir = temp_dir("specs-plan");
    std::fs::create_dir_all(dir.join("myops")).unwrap();
    std::fs::write(dir.join("myops/my_relu.tdl"), format!("{MY_RELU}\n")).unwrap();
    graph_with_my_relu(&dir);

    // Without --specs the op is unknown, and the message says how to load it.
    let (ok, _, err) = tofu_in(&dir, &["plan", "g.json", "-k", "2"]);
    assert!(
        !ok && err.contains("no spec named `my_relu`") && err.contains("--specs"),
        "{err}"
    );

    let (ok, out, err) = tofu_in(
        &dir,
        &[
            "strategies",
            "my_relu",
            "--specs",
            "myops",
            "--shape",
            "x=8x16",
        ],
    );
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("split"), "strategies of my_relu:\n{out}");

    let (ok, out, err) = tofu_in(
        &dir,
        &[
            "plan",
            "g.json",
            "-k",
            "2",
            "--specs",
            "myops",
            "-o",
            "plan.json",
        ],
    );
    assert!(ok, "{out}\n{err}");
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("plan.json")).unwrap()).unwrap();
    let specs = plan["specs"]
        .as_array()
        .expect("the plan records its specs");
    assert_eq!(specs.len(), 1);
    assert_eq!(specs[0]["file"], "myops/my_relu.tdl");
    assert_eq!(specs[0]["text"], format!("{MY_RELU}\n"));
    assert_eq!(specs[0]["sha256"], sha256sum(&dir, &format!("{MY_RELU}\n")));

    // Elsewhere, with no spec files: the recorded spec is used.
    let away = dir.join("away");
    std::fs::create_dir_all(&away).unwrap();
    std::fs::copy(dir.join("plan.json"), away.join("plan.json")).unwrap();
    let (ok, out, err) = tofu_in(&away, &["run", "plan.json", "--verify"]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("(ok)"), "{out}");

    // A recorded text edited in the plan file: refused as an edited plan.
    let mut tampered = plan.clone();
    tampered["specs"][0]["text"] = MY_RELU.replace("0.0", "0.5").into();
    std::fs::write(away.join("tampered.json"), tampered.to_string()).unwrap();
    let (ok, _, err) = tofu_in(&away, &["run", "tampered.json"]);
    assert!(!ok && err.contains("does not match its sha256"), "{err}");

    // The same spec given again: accepted.
    let (ok, out, err) = tofu_in(&dir, &["run", "plan.json", "--specs", "myops"]);
    assert!(ok, "{out}\n{err}");

    // Edited after planning: refused, naming the operator and both hashes.
    let edited = MY_RELU.replace("max(x[...], 0.0)", "max(x[...], 0.5)");
    std::fs::write(dir.join("myops/my_relu.tdl"), format!("{edited}\n")).unwrap();
    let (ok, out, err) = tofu_in(&dir, &["run", "plan.json", "--specs", "myops"]);
    assert!(!ok, "an edited spec must be refused:\n{out}");
    assert!(
        err.contains("operator `my_relu` changed since the plan was made"),
        "{err}"
    );
    let (before, after) = (sha256sum(&dir, MY_RELU), sha256sum(&dir, &edited));
    assert!(
        err.contains(&before) && err.contains(&after),
        "hashes {before} and {after} in:\n{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_plan_made_without_specs_has_no_specs_field() {
    let dir = temp_dir("specs-none");
    let (ok, out, err) = tofu_in(
        &dir,
        &["plan", "--model", "mlp-2-8", "-k", "2", "-o", "plan.json"],
    );
    assert!(ok, "{out}\n{err}");
    let text = std::fs::read_to_string(dir.join("plan.json")).unwrap();
    assert!(
        !text.contains("\"specs\""),
        "a plan without --specs must keep its bytes"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_with_specs_checks_a_user_file_beside_the_shipped_library() {
    let dir = temp_dir("specs-check");
    let f = dir.join("my_relu.tdl");
    std::fs::write(&f, MY_RELU).unwrap();
    // Alone, its gradient op `relu_grad` (shipped) is unknown; beside the
    // shipped library it checks clean, and only the user file is listed.
    let o = tofu(&[std::ffi::OsStr::new("check"), f.as_os_str()]);
    assert!(!o.status.success());
    let o = tofu(&[
        std::ffi::OsStr::new("check"),
        "--specs".as_ref(),
        f.as_os_str(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok  ")).count(),
        1,
        "{out}"
    );
    assert!(out.contains("my_relu.tdl: 1 operator(s)"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
