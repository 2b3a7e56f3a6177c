//! External programs some checks run (promtool, mandoc, man, lintian). `.ci/run` installs them,
//! so under CI (`CI=true`) a missing one fails the test; elsewhere the check says on stderr that
//! it did not run, and passes.

use std::path::PathBuf;
use std::process::{Command, Output};

pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// `program` as found on `PATH`.
pub fn find(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Whether `program` can run `check`: panics under CI when it is missing (`package` is the
/// Debian package .ci/run installs for it), prints that the check was skipped otherwise.
pub fn available(program: &str, package: &str, check: &str) -> bool {
    if find(program).is_some() {
        return true;
    }
    assert!(
        !ci(),
        "{program} not found: {check} needs it (apt-get install {package}; .ci/run does)"
    );
    eprintln!("NOT CHECKED: {check}: {program} not found (apt-get install {package})");
    false
}

/// Runs `program` with `args`, returning its output whatever the exit status.
pub fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"))
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
