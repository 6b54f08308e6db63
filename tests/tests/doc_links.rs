//! Every relative link of the repository's markdown resolves inside the
//! repository (issue 36, item 6): `[text](path)` and `[text](path#anchor)`
//! in README.md, ARCHITECTURE.md, `docs/` and every other `.md` file of the
//! checkout (outside `target/` and hidden directories), relative to the
//! file that holds it. Web links (`http:`, `https:`, `mailto:`) and
//! same-page anchors are not checked; fenced code is skipped.
//!
//! Oracle: the file system. The negative control shows a broken link and a
//! link out of the repository are reported.

use std::path::{Path, PathBuf};

use tofu_tests::workspace_root;

/// The targets of the inline links of markdown `text`, outside fenced code,
/// with their 1-based line numbers.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            // Any fence opens; only a bare one (backticks only) closes.
            if !fenced || trimmed.bytes().all(|b| b == b'`') {
                fenced = !fenced;
            }
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// The problems of the links of `file` (a path in `root`): one line each.
fn broken_links(root: &Path, file: &Path, text: &str) -> Vec<String> {
    let root = root.canonicalize().expect("the checkout");
    let dir = file.parent().expect("a file in a directory");
    let mut problems = Vec::new();
    for (line, target) in link_targets(text) {
        if target.is_empty()
            || target.starts_with('#')
            || ["http://", "https://", "mailto:"]
                .iter()
                .any(|p| target.starts_with(p))
        {
            continue;
        }
        let path = target.split('#').next().unwrap_or_default();
        let resolved = if let Some(from_root) = path.strip_prefix('/') {
            root.join(from_root)
        } else {
            dir.join(path)
        };
        let place = format!("{}:{line}: `{target}`", file.display());
        match resolved.canonicalize() {
            Err(_) => problems.push(format!("{place} does not exist")),
            Ok(p) if !p.starts_with(&root) => {
                problems.push(format!("{place} is outside the repository"))
            }
            Ok(_) => {}
        }
    }
    problems
}

/// The markdown files under `dir`, skipping `target/` and hidden entries.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if path.is_dir() {
            markdown_files(&path, out);
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

#[test]
fn every_relative_markdown_link_resolves_inside_the_repository() {
    let root = workspace_root().canonicalize().unwrap();
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    files.sort();
    assert!(files.iter().any(|f| f.ends_with("README.md")));
    let mut problems = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        problems.extend(broken_links(&root, f, &text));
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_missing_target_and_a_link_out_of_the_repository_are_reported() {
    let root = workspace_root().canonicalize().unwrap();
    let file = root.join("docs/example.md");
    let text = "[ok](tdl.md) [anchor](#x) [web](https://example.org)\n\
                [gone](no-such-page.md#part) [out](../..)\n\
                ```text\n[in code](nowhere.md)\n```sh\n[still code](nowhere.md)\n```\n\
                [root](/README.md)\n";
    let problems = broken_links(&root, &file, text);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems[0].contains(":2: `no-such-page.md#part` does not exist"));
    assert!(problems[1].contains(":2: `../..` is outside the repository"));
}
