//! No file of the repository refers to a file outside it: a clean clone is all that CI, the
//! tests, the scripts and the docs need (issue #47). The real-apiserver scripts once lived in a
//! `shared` folder beside the checkout; they are in `scripts/real-apiserver/` now.
//!
//! Reads the text files of the trees below and the files at the root (build output in
//! `target/` left out; a file that is not UTF-8 is no text) and names every line that points
//! at that folder, relatively or by the machine's absolute path.

use std::path::{Path, PathBuf};

use super::tree::files_under;

/// The trees scanned, besides the files at the root.
const TREES: &[&str] = &[
    "src",
    "crates",
    "tests",
    "scripts",
    ".ci",
    "conf",
    "packaging",
    "systemd",
    "docs",
    "examples",
    "man",
    "completions",
];

/// What a reference outside the repository looks like (split so this file holds neither).
const OUTSIDE: [&str; 2] = [concat!("..", "/shared"), concat!("/work", "/shared")];

/// `file:line: text` for each line of `text` that refers outside the repository.
fn outside_references(file: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| OUTSIDE.iter().any(|p| line.contains(p)))
        .map(|(i, line)| format!("{file}:{}: {}", i + 1, line.trim()))
        .collect()
}

#[test]
fn no_file_refers_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for tree in TREES {
        files_under(&root.join(tree), &|_| true, &mut files);
    }
    // The root's own files (README.md and the other documents, Cargo.toml, build.rs).
    let mut top: Vec<PathBuf> = std::fs::read_dir(root)
        .expect("the repository root")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| !n.to_string_lossy().starts_with('.'))
        })
        .collect();
    top.sort();
    files.extend(top);
    let mut scanned = 0;
    let mut problems = Vec::new();
    for path in &files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        scanned += 1;
        let rel = path.strip_prefix(root).unwrap_or(path);
        problems.extend(outside_references(&rel.display().to_string(), &text));
    }
    assert!(
        scanned > 300 && files.iter().any(|p| p.ends_with("README.md")),
        "scanned only {scanned} text files"
    );
    assert!(
        problems.is_empty(),
        "{} line(s) refer outside the repository (use the in-repo copy, e.g. scripts/real-apiserver/):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The check can fail: both forms are named with their file and line, other text passes.
#[test]
fn a_reference_outside_is_named_with_its_file_and_line() {
    let text = format!(
        "ok\nrun {}/real-apiserver/up.sh\nscripts/real-apiserver/up.sh\n{}/x/load.py\n",
        OUTSIDE[0], OUTSIDE[1]
    );
    let found = outside_references("a.sh", &text);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("a.sh:2: run "), "{found:?}");
    assert!(found[1].starts_with("a.sh:4: "), "{found:?}");
}
