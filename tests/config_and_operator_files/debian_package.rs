//! The Debian package as an operator gets it (`packaging/build-deb.sh`, run by `.ci/run` before
//! the tests): its files, the conffile, the unit and maintainer scripts that do not start it,
//! the man pages, completion and monitoring files, and lintian's verdict.
//!
//! The package is found at `$NODE_LIFECYCLED_DEB`, else as
//! `${CARGO_TARGET_DIR:-target}/debian/node-lifecycled_<version>_*.deb`. Without one the tests
//! fail under CI (`CI=true`) and otherwise say on stderr that they checked nothing; so does
//! the lintian test without lintian.

use std::path::{Path, PathBuf};
use std::process::Command;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn find_deb() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NODE_LIFECYCLED_DEB") {
        return Some(PathBuf::from(p));
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![manifest.join("target/debian")];
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        dirs.insert(0, manifest.join(t).join("debian"));
    }
    let prefix = format!("node-lifecycled_{VERSION}_");
    dirs.iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|entries| entries.filter_map(Result::ok))
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb"))
        })
}

fn dpkg_deb(args: &[&str]) -> String {
    let out = Command::new("dpkg-deb")
        .args(args)
        .output()
        .expect("dpkg-deb runs");
    assert!(
        out.status.success(),
        "dpkg-deb {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The package, or `None` (and a note on stderr) where none was built and CI is not running.
fn deb_or_skip() -> Option<String> {
    let Some(deb) = find_deb() else {
        assert!(
            !crate::tool_support::ci(),
            "no node-lifecycled_{VERSION}_*.deb: .ci/run builds it with packaging/build-deb.sh"
        );
        eprintln!("debian_package: NOT CHECKED: no .deb built (run packaging/build-deb.sh first)");
        return None;
    };
    Some(deb.to_str().unwrap().to_string())
}

/// A fresh directory for one test's extracted files, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("nl-deb-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_package_installs_the_daemon_the_unit_and_the_conffile_and_starts_nothing() {
    let Some(deb) = deb_or_skip() else {
        return;
    };
    let deb = deb.as_str();

    // Files, modes and owners.
    let listing = dpkg_deb(&["--contents", deb]);
    let entry = |path: &str| -> &str {
        listing
            .lines()
            .find(|l| l.ends_with(&format!(" .{path}")))
            .unwrap_or_else(|| panic!("{path} missing from the package:\n{listing}"))
    };
    assert!(entry("/usr/sbin/node-lifecycled").starts_with("-rwxr-xr-x root/root"));
    for file in [
        "/usr/lib/systemd/system/node-lifecycled.service",
        "/etc/node-lifecycled/config.toml",
        "/usr/share/doc/node-lifecycled/rbac.yaml",
        "/usr/share/doc/node-lifecycled/copyright",
        "/usr/share/doc/node-lifecycled/examples/scenarios/zone-outage.toml",
    ] {
        assert!(
            entry(file).starts_with("-rw-r--r-- root/root"),
            "{}",
            entry(file)
        );
    }
    let scenarios = std::fs::read_dir("conf/scenarios").unwrap().count();
    let shipped = listing
        .lines()
        .filter(|l| l.contains("/examples/scenarios/") && l.ends_with(".toml"))
        .count();
    assert_eq!(shipped, scenarios, "every scenario example is shipped");

    // Control data: the conffile, and maintainer scripts that reload systemd and do nothing else.
    let scratch = Scratch::new("control");
    let tmp = &scratch.0;
    let control = tmp.join("DEBIAN");
    dpkg_deb(&["--control", deb, control.to_str().unwrap()]);
    let read = |p: PathBuf| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
    assert_eq!(
        read(control.join("conffiles")).trim(),
        "/etc/node-lifecycled/config.toml"
    );
    let fields = read(control.join("control"));
    assert!(fields.contains("Package: node-lifecycled\n"), "{fields}");
    assert!(
        fields.contains(&format!("Version: {VERSION}\n")),
        "{fields}"
    );
    for script in ["postinst", "postrm"] {
        let text = read(control.join(script));
        assert!(
            text.contains("systemctl --system daemon-reload"),
            "{script}: {text}"
        );
        for forbidden in ["enable", "start", "deb-systemd-invoke"] {
            assert!(
                !text.contains(forbidden),
                "{script} must not {forbidden}: {text}"
            );
        }
    }
    for script in ["preinst", "prerm"] {
        assert!(!control.join(script).exists(), "unexpected {script}");
    }

    // The files themselves: the unit starts the binary where the package puts it, the
    // conffile is the documented default config, the binary runs.
    let root = tmp.join("root");
    dpkg_deb(&["--extract", deb, root.to_str().unwrap()]);
    let unit = read(root.join("usr/lib/systemd/system/node-lifecycled.service"));
    let exec = unit
        .lines()
        .find(|l| l.starts_with("ExecStart="))
        .expect("ExecStart= in the unit");
    assert_eq!(
        exec,
        "ExecStart=/usr/sbin/node-lifecycled --config /etc/node-lifecycled/config.toml"
    );
    assert!(unit.contains("WantedBy=multi-user.target"));
    assert_eq!(
        read(root.join("etc/node-lifecycled/config.toml")),
        read(PathBuf::from("conf/config.toml"))
    );
    let version = Command::new(root.join("usr/sbin/node-lifecycled"))
        .arg("--version")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&version.stdout);
    assert!(
        text.starts_with(&format!("node-lifecycled {VERSION} (commit ")),
        "{text}"
    );
}

/// `man node-lifecycled` works once installed, completion comes with the package, and so do the
/// alerts and the dashboard; the files Debian policy asks for are there.
#[test]
fn the_package_ships_man_pages_completion_monitoring_files_changelog_and_checksums() {
    let Some(deb) = deb_or_skip() else {
        return;
    };
    let scratch = Scratch::new("files");
    let root = scratch.0.join("root");
    dpkg_deb(&["--extract", &deb, root.to_str().unwrap()]);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let same = |shipped: &str, source: &str| {
        let a = std::fs::read(root.join(shipped)).unwrap_or_else(|e| panic!("{shipped}: {e}"));
        let b = std::fs::read(repo.join(source)).unwrap();
        assert!(a == b, "{shipped} is not {source}");
    };
    same(
        "usr/share/bash-completion/completions/node-lifecycled",
        "completions/node-lifecycled.bash",
    );
    for f in ["alerts.yaml", "alerts_test.yaml", "dashboard.json"] {
        same(
            &format!("usr/share/doc/node-lifecycled/monitoring/{f}"),
            &format!("conf/monitoring/{f}"),
        );
    }
    // gzip -9n: no file name, no time stamp (a rebuild gives the same bytes), and the page.
    for (section, page) in [
        ("8", "node-lifecycled.8"),
        ("5", "node-lifecycled.toml.5"),
        ("1", "node-lifecycled-sim.1"),
    ] {
        let gz = root.join(format!("usr/share/man/man{section}/{page}.gz"));
        let bytes = std::fs::read(&gz).unwrap_or_else(|e| panic!("{gz:?}: {e}"));
        assert_eq!(&bytes[..3], &[0x1f, 0x8b, 8], "{page}: gzip");
        assert_eq!(bytes[3] & 0x08, 0, "{page}: no file name in the header");
        assert_eq!(&bytes[4..8], &[0; 4], "{page}: no time stamp");
        let out = Command::new("gzip")
            .args(["-dc"])
            .arg(&gz)
            .output()
            .unwrap();
        assert_eq!(
            out.stdout,
            std::fs::read(repo.join("man").join(page)).unwrap(),
            "{page}"
        );
    }
    let changelog = Command::new("gzip")
        .args(["-dc"])
        .arg(root.join("usr/share/doc/node-lifecycled/changelog.gz"))
        .output()
        .unwrap();
    let changelog = String::from_utf8_lossy(&changelog.stdout);
    assert!(
        changelog.starts_with(&format!(
            "node-lifecycled ({VERSION}) unstable; urgency=medium"
        )),
        "{changelog}"
    );

    // md5sums lists every file but the conffile, with the right sums.
    let control = scratch.0.join("DEBIAN");
    dpkg_deb(&["--control", &deb, control.to_str().unwrap()]);
    let sums = std::fs::read_to_string(control.join("md5sums")).expect("DEBIAN/md5sums");
    let out = Command::new("md5sum")
        .args(["--check", "--strict", "--quiet"])
        .arg(control.join("md5sums"))
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::tool_support::text(&out));
    assert!(sums.contains("  usr/sbin/node-lifecycled\n"), "{sums}");
    assert!(
        !sums.contains("etc/node-lifecycled"),
        "the conffile is dpkg's: {sums}"
    );
    let files = listing_files(&deb);
    assert_eq!(
        sums.lines().count(),
        files - 1,
        "every file but the conffile:\n{sums}"
    );
}

fn listing_files(deb: &str) -> usize {
    dpkg_deb(&["--contents", deb])
        .lines()
        .filter(|l| l.starts_with('-'))
        .count()
}

/// lintian, as CI builds the package (from the debug binary): no error, no warning. The tags it
/// still reports at the info level, and the one override, are listed in the README.
#[test]
fn lintian_reports_no_error_or_warning() {
    let Some(deb) = deb_or_skip() else {
        return;
    };
    if !crate::tool_support::available("lintian", "lintian", "lintian on the package") {
        return;
    }
    let out = crate::tool_support::run("lintian", &["--no-tag-display-limit", &deb]);
    let text = crate::tool_support::text(&out);
    let findings: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("E:") || l.starts_with("W:"))
        .collect();
    assert!(findings.is_empty(), "lintian:\n{text}");
    assert!(out.status.success(), "lintian:\n{text}");
}
