//! No Rust file of `src/` or `crates/` is over [`MAX_LINES`] lines: a longer one holds more than
//! one concept and is split along its boundary (a file per concept, or its tests beside it).
//!
//! Walks both trees (build output in `target/` left out) and names every file over the limit.

use std::path::Path;

use super::tree::rust_files;

/// The most lines a source file may have.
const MAX_LINES: usize = 600;

/// The complaint about one file, if it is over the limit.
fn too_long(file: &str, text: &str) -> Option<String> {
    let lines = text.lines().count();
    (lines > MAX_LINES).then(|| {
        format!("{file}: {lines} lines (at most {MAX_LINES}): split it along a concept boundary")
    })
}

#[test]
fn no_source_file_is_over_600_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for tree in ["src", "crates"] {
        rust_files(&root.join(tree), &mut files);
    }
    assert!(
        files.len() > 100,
        "found only {} source files under src/ and crates/",
        files.len()
    );
    let problems: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(path).expect("source file");
            let rel = path.strip_prefix(root).unwrap_or(path);
            too_long(&rel.display().to_string(), &text)
        })
        .collect();
    assert!(
        problems.is_empty(),
        "{} file(s) over {MAX_LINES} lines:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The check can fail: 601 lines are named with their count, 600 pass.
#[test]
fn a_file_over_the_limit_is_named_with_its_line_count() {
    let at_limit = "x\n".repeat(MAX_LINES);
    assert_eq!(too_long("src/a.rs", &at_limit), None);
    let over = format!("{at_limit}y\n");
    let complaint = too_long("src/b.rs", &over).expect("a complaint");
    assert!(complaint.starts_with("src/b.rs: 601 lines"), "{complaint}");
}
