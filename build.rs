//! Records the git commit the binary is built from, for `node-lifecycled --version`
//! (`NODE_LIFECYCLED_GIT_COMMIT`); "unknown" outside a git checkout or without git.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// Cargo treats a `rerun-if-changed` path that does not exist as changed on every build, so
/// only files that are there are watched (a checkout without `packed-refs` must not rerun
/// this script, and recompile everything that links the crate, on each `cargo build`).
fn watch_if_present(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=NODE_LIFECYCLED_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=build.rs");
    // Rebuild when the checked-out commit moves: HEAD (per worktree, moves on checkout), the
    // branch's own ref file (moves on commit) and packed-refs (where a packed branch lives).
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        watch_if_present(&PathBuf::from(dir).join("HEAD"));
    }
    if let Some(dir) = git(&["rev-parse", "--git-common-dir"]) {
        let dir = PathBuf::from(dir);
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch_if_present(&dir.join(branch));
        }
        watch_if_present(&dir.join("packed-refs"));
    }
}
