//! The Debian package as an operator gets it (`packaging/build-deb.sh`, run by `.ci/run` before
//! the tests): its files, the conffile, the unit and maintainer scripts that do not start it.
//!
//! The package is found at `$NODE_LIFECYCLED_DEB`, else as
//! `${CARGO_TARGET_DIR:-target}/debian/node-lifecycled_<version>_*.deb`. Without one the test
//! fails under CI (`CI=true`) and otherwise says on stderr that it checked nothing.

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

#[test]
fn the_package_installs_the_daemon_the_unit_and_the_conffile_and_starts_nothing() {
    let Some(deb) = find_deb() else {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !ci,
            "no node-lifecycled_{VERSION}_*.deb: .ci/run builds it with packaging/build-deb.sh"
        );
        eprintln!("debian_package: NOT CHECKED: no .deb built (run packaging/build-deb.sh first)");
        return;
    };
    let deb = deb.to_str().unwrap();

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
    let tmp = std::env::temp_dir().join(format!("nl-deb-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
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
    let _ = std::fs::remove_dir_all(&tmp);
}
