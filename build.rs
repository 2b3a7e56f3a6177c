//! Records the git commit the binary is built from, for `node-lifecycled --version`
//! (`NODE_LIFECYCLED_GIT_COMMIT`); "unknown" outside a git checkout or without git.

use std::path::PathBuf;
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

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=NODE_LIFECYCLED_GIT_COMMIT={commit}");
    // Rebuild when the checked-out commit moves: HEAD (per worktree) and the branch refs.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!(
            "cargo:rerun-if-changed={}",
            PathBuf::from(dir).join("HEAD").display()
        );
    }
    if let Some(dir) = git(&["rev-parse", "--git-common-dir"]) {
        let dir = PathBuf::from(dir);
        println!(
            "cargo:rerun-if-changed={}",
            dir.join("refs/heads").display()
        );
        println!(
            "cargo:rerun-if-changed={}",
            dir.join("packed-refs").display()
        );
    }
    println!("cargo:rerun-if-changed=build.rs");
}
