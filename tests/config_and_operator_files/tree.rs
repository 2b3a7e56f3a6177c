//! Walking the repository's trees: the files the text checks read (`layering.rs`,
//! `file_sizes.rs`, `outside_references.rs`).

use std::path::{Path, PathBuf};

/// Every file under `dir` that `keep` takes, sorted; `target` directories (build output) are
/// left out.
pub fn files_under(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                files_under(&path, keep, out);
            }
        } else if path.is_file() && keep(&path) {
            out.push(path);
        }
    }
}

/// Every `.rs` file under `dir` (see [`files_under`]).
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    files_under(dir, &|p| p.extension().is_some_and(|e| e == "rs"), out);
}
