//! The guide's worked examples still run (issue 36, item 6): every fenced
//! block of `docs/guide/*.md` whose info string is `sh test` is executed
//! by bash (`-euo pipefail`) in a fresh empty directory, with the built
//! `tofu` first on `PATH` and `TOFU_REPO` set to the checkout (the guide
//! tells readers to set both the same way). A block fails the test when
//! any of its commands exits non-zero.
//!
//! A block may name data it needs after the marker, `sh test
//! needs=digits` (scikit-learn's digits, `scripts/fetch-digits.sh`): it is
//! skipped with `SKIPPED` locally when the data is missing, and fails
//! under CI, as the other data tests do. Mark only commands that take
//! seconds in a debug build.
//!
//! Oracle: the exit status of the reader's own commands; the negative
//! controls below show that a failing block, or a failing command in the
//! middle of one, fails the runner.

use std::path::{Path, PathBuf};
use std::process::Command;

use tofu_tests::{have_digits, temp_dir, tofu_bin, workspace_root};

/// One marked block: where it is and what it runs.
#[derive(Debug)]
struct Block {
    /// `docs/guide/PAGE.md:LINE` of the opening fence.
    place: String,
    /// Data the block needs (`needs=NAME` after the marker).
    needs: Vec<String>,
    /// The shell text.
    script: String,
}

/// The marked blocks of one page's markdown text.
fn marked_blocks(page: &str, text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(Option<Block>, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            None if trimmed.starts_with("```") => {
                let info: Vec<&str> = trimmed.trim_start_matches('`').split_whitespace().collect();
                let block =
                    (info.len() >= 2 && info[0] == "sh" && info[1] == "test").then(|| Block {
                        place: format!("{page}:{}", i + 1),
                        needs: info[2..]
                            .iter()
                            .filter_map(|w| w.strip_prefix("needs=").map(String::from))
                            .collect(),
                        script: String::new(),
                    });
                open = Some((block, i));
            }
            None => {}
            // A closing fence has no info string.
            Some((block, _)) if is_bare_fence(trimmed) => {
                blocks.extend(block.take());
                open = None;
            }
            Some((Some(b), _)) => {
                b.script.push_str(line);
                b.script.push('\n');
            }
            Some((None, _)) => {}
        }
    }
    if let Some((_, start)) = open {
        panic!("{page}:{}: a fence that is never closed", start + 1);
    }
    blocks
}

/// Whether `line` (trimmed at the start) closes a fence: backticks only.
fn is_bare_fence(line: &str) -> bool {
    let line = line.trim_end();
    line.len() >= 3 && line.bytes().all(|b| b == b'`')
}

/// A directory holding only `tofu` (a link to the built binary), to put
/// first on `PATH`.
fn bin_dir(name: &str) -> PathBuf {
    let dir = temp_dir(&format!("guide-bin-{name}"));
    #[cfg(unix)]
    std::os::unix::fs::symlink(tofu_bin(), dir.join("tofu")).expect("link the tofu binary");
    dir
}

/// Run `block` in the fresh directory `dir`; `Err` with its output when a
/// command fails.
fn run_block(block: &Block, dir: &Path, bin: &Path) -> Result<(), String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin.to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &block.script])
        .current_dir(dir)
        .env("PATH", std::env::join_paths(paths).expect("a PATH"))
        .env(
            "TOFU_REPO",
            workspace_root().canonicalize().expect("the checkout"),
        )
        .env_remove("TOFU_SPECS")
        .output()
        .map_err(|e| format!("{}: cannot run bash: {e}", block.place))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{}: {}\n--- script\n{}--- stdout\n{}--- stderr\n{}",
        block.place,
        out.status,
        block.script,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Whether the data a block needs is there (else it prints SKIPPED, or
/// panics under CI).
fn have(needs: &[String]) -> bool {
    needs.iter().all(|n| match n.as_str() {
        "digits" => have_digits(),
        other => panic!("unknown `needs={other}` in a guide block"),
    })
}

/// The guide pages, in name order.
fn pages() -> Vec<PathBuf> {
    let dir = workspace_root().join("docs/guide");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    pages
}

#[test]
fn every_marked_guide_block_runs() {
    let bin = bin_dir("pages");
    let (mut ran, mut failures) = (0, Vec::new());
    for page in pages() {
        let name = format!("docs/guide/{}", page.file_name().unwrap().to_string_lossy());
        let text = std::fs::read_to_string(&page).unwrap();
        for (i, block) in marked_blocks(&name, &text).into_iter().enumerate() {
            if !have(&block.needs) {
                continue;
            }
            let stem = page.file_stem().unwrap().to_string_lossy().into_owned();
            let dir = temp_dir(&format!("guide-{stem}-{i}"));
            match run_block(&block, &dir, &bin) {
                Ok(()) => {
                    ran += 1;
                    let _ = std::fs::remove_dir_all(&dir);
                }
                Err(e) => failures.push(e),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 8, "only {ran} guide blocks ran");
}

#[test]
fn only_sh_test_blocks_are_marked_and_needs_are_read() {
    let page = "text\n```sh\ntofu plan --model gpt-96-12k -k 64\n```\n\
                ```sh test\ntofu check\n```\n\
                ```text\n```sh test\n```\n\
                ```sh test needs=digits\ntofu train --help\n```\n";
    let blocks = marked_blocks("page.md", page);
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert_eq!(blocks[0].script, "tofu check\n");
    assert_eq!(blocks[0].place, "page.md:5");
    assert!(blocks[0].needs.is_empty());
    assert_eq!(blocks[1].needs, ["digits"]);
}

/// Negative controls: a block whose command fails, or fails before a
/// command that succeeds, fails the runner and names its place.
#[test]
fn a_failing_marked_block_fails_the_runner() {
    let bin = bin_dir("negative");
    let page = "```sh test\ntofu plan --model no-such-model -k 2\n```\n\
                ```sh test\ntofu strategies no_such_op\ntofu check\n```\n\
                ```sh test\ntofu check | grep -q 'no such line'\n```\n\
                ```sh test\ntofu check\n```\n";
    let blocks = marked_blocks("bad.md", page);
    let results: Vec<Result<(), String>> = blocks
        .iter()
        .enumerate()
        .map(|(i, b)| run_block(b, &temp_dir(&format!("guide-negative-{i}")), &bin))
        .collect();
    for (i, r) in results[..3].iter().enumerate() {
        let e = r.as_ref().expect_err("a failing block fails");
        assert!(e.starts_with(&blocks[i].place), "{e}");
    }
    assert_eq!(results[3], Ok(()), "the control block passes");
}
