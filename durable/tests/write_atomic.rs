//! The one atomic writer (`durable::write_atomic`): a file
//! is written whole or not at all. Negative controls: a write that fails
//! midway, and a commit that fails (the destination is a directory), leave
//! the old contents in place and no temporary file in the directory.

use std::path::{Path, PathBuf};

use durable::{write_atomic, write_atomic_with};

fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tofu-write-atomic-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn replaces_the_file_whole_and_leaves_no_temporary() {
    let dir = fresh_dir("replace");
    let p = dir.join("plan.json");
    write_atomic(&p, b"first").unwrap();
    write_atomic(&p, b"second, longer").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"second, longer");
    assert_eq!(names(&dir), ["plan.json"]);
    // The mode a plain create gives (not the temporary file's 0600).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let plain = dir.join("plain");
        std::fs::write(&plain, b"").unwrap();
        let mode = |q: &Path| std::fs::metadata(q).unwrap().permissions().mode();
        assert_eq!(mode(&p), mode(&plain));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_write_failing_midway_keeps_the_old_file_and_no_temporary() {
    let dir = fresh_dir("midway");
    let p = dir.join("ckpt.bin");
    write_atomic(&p, b"old contents").unwrap();
    let err = write_atomic_with(&p, |f| {
        f.write_all(b"half of the new")?;
        Err(std::io::Error::other("disk full (injected)"))
    })
    .unwrap_err();
    assert!(err.to_string().contains("injected"), "{err}");
    assert_eq!(std::fs::read(&p).unwrap(), b"old contents");
    assert_eq!(names(&dir), ["ckpt.bin"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failing_commit_keeps_what_was_there_and_no_temporary() {
    let dir = fresh_dir("commit");
    // A non-empty directory where the file should go: the rename fails
    // (whoever runs the test, root included).
    let p = dir.join("out");
    std::fs::create_dir(&p).unwrap();
    std::fs::write(p.join("kept"), b"x").unwrap();
    write_atomic(&p, b"new").unwrap_err();
    assert_eq!(std::fs::read(p.join("kept")).unwrap(), b"x");
    assert_eq!(names(&dir), ["out"]);
    // A missing directory: an error, nothing created.
    let missing = dir.join("no/such/dir/x");
    let err = write_atomic(&missing, b"x").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    assert_eq!(names(&dir), ["out"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
