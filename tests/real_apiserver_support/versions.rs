//! The Kubernetes releases the real-API-server tier runs on, and where their binaries come from.
//!
//! - 1.20.2: Debian bookworm's source package, built by `scripts/real-apiserver/build.sh` (the
//!   floor: the oldest server the daemon supports, list+watch only);
//! - 1.35.x: the oldest release upstream still supports;
//! - 1.37.x: the newest release.
//!
//! The current releases are built from their Go modules by `scripts/build-kube.sh` (with
//! kube-controller-manager and a matching etcd), once per machine: cached under
//! `$HOME/.cache/node-lifecycled/`. A test asks for its release's binaries when it starts a
//! server; the first such test in the process builds them (minutes on a fresh machine) while
//! the others of that release wait for it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kube {
    V1_20,
    V1_35,
    V1_37,
}

impl Kube {
    /// The release built and run for this minor version.
    pub fn release(self) -> &'static str {
        match self {
            Kube::V1_20 => "1.20.2",
            Kube::V1_35 => "1.35.4",
            Kube::V1_37 => "1.37.2",
        }
    }

    /// `gitVersion` as `/version` and `--version` say it.
    pub fn git_version(self) -> String {
        format!("v{}", self.release())
    }

    pub fn minor(self) -> u32 {
        match self {
            Kube::V1_20 => 20,
            Kube::V1_35 => 35,
            Kube::V1_37 => 37,
        }
    }

    /// The server streams the initial list of a watch (`sendInitialEvents`, 1.32 and later).
    pub fn has_watch_list(self) -> bool {
        self.minor() >= 32
    }

    /// This release's binaries, built on first use (minutes on a fresh machine; the other tests
    /// of the release wait for the first).
    pub fn binaries(self) -> Result<Binaries, String> {
        static BUILT: [OnceLock<Result<Binaries, String>>; 3] =
            [OnceLock::new(), OnceLock::new(), OnceLock::new()];
        let slot = match self {
            Kube::V1_20 => &BUILT[0],
            Kube::V1_35 => &BUILT[1],
            Kube::V1_37 => &BUILT[2],
        };
        slot.get_or_init(|| match self {
            Kube::V1_20 => build_debian(),
            _ => build(self.release()),
        })
        .clone()
    }

    /// `kube-controller-manager` of this release (the current ones only: the differential tier).
    pub fn controller_manager(self) -> Result<PathBuf, String> {
        self.binaries()?
            .controller_manager
            .ok_or_else(|| format!("no kube-controller-manager is built for {}", self.release()))
    }
}

/// Where one release's programs are.
#[derive(Clone, Debug)]
pub struct Binaries {
    pub apiserver: PathBuf,
    /// A path, or a name looked up in PATH (Debian's etcd for 1.20.2).
    pub etcd: PathBuf,
    pub controller_manager: Option<PathBuf>,
}

/// 1.20.2: `scripts/real-apiserver/build.sh` (Debian's source package, cached; it installs
/// Debian's etcd too) prints the binary's path on its last line.
fn build_debian() -> Result<Binaries, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/real-apiserver/build.sh");
    let out = Command::new(&script)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let apiserver = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
    if !out.status.success() || !apiserver.is_file() {
        return Err(format!(
            "{} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(Binaries {
        apiserver,
        etcd: PathBuf::from("etcd"),
        controller_manager: None,
    })
}

/// Runs `scripts/build-kube.sh RELEASE` (cached: returns at once when built) and reads the bin
/// folder from its last line.
fn build(release: &str) -> Result<Binaries, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-kube.sh");
    let started = std::time::Instant::now();
    let out = Command::new("bash")
        .arg(&script)
        .arg(release)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {release} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let bin = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
    if !bin.join("kube-apiserver").is_file() {
        return Err(format!(
            "{} {release} printed no bin folder: {stdout}",
            script.display()
        ));
    }
    if started.elapsed().as_secs() > 5 {
        eprintln!(
            "built Kubernetes {release} in {} s: {}",
            started.elapsed().as_secs(),
            bin.display()
        );
    }
    Ok(Binaries {
        apiserver: bin.join("kube-apiserver"),
        etcd: bin.join("etcd"),
        controller_manager: Some(bin.join("kube-controller-manager")),
    })
}

/// One `#[test]` per (release, scenario): `versions! { v1_37 => [a, b], v1_20 => [a] }` makes
/// `v1_37::a`, `v1_37::b` and `v1_20::a`, each calling the scenario `fn a(kube: Kube)` of the
/// file with its release, so a failure names the release and `cargo test --test real_apiserver
/// v1_37` runs one release.
macro_rules! versions {
    ($($module:ident => [$($scenario:ident),* $(,)?]),* $(,)?) => {
        $(
            mod $module {
                $(
                    #[test]
                    fn $scenario() {
                        super::$scenario($crate::real_apiserver_support::versions::release_of(
                            stringify!($module),
                        ));
                    }
                )*
            }
        )*
    };
}
pub(crate) use versions;

/// The release a `versions!` module names (`v1_37` → 1.37.x).
pub fn release_of(module: &str) -> Kube {
    match module {
        "v1_20" => Kube::V1_20,
        "v1_35" => Kube::V1_35,
        "v1_37" => Kube::V1_37,
        other => panic!("versions!: no release is built for module {other}"),
    }
}
