//! `node-lifecycled doctor` against a real kube-apiserver of each tested release, connecting as
//! `DAEMON_KUBECONFIG` (user `node-lifecycled`, no groups): before conf/rbac.yaml is applied
//! every permission it grants is reported missing, after it all pass; the identity from
//! SelfSubjectReview where the server has it (1.28 and later); a fake kubeadm manifest with and
//! without kube-controller-manager's controllers disabled is told apart, with the exact
//! `--controllers` value for the release (`nodelifecycle` before 1.29,
//! `node-lifecycle-controller` and `taint-eviction-controller` from 1.29).
//!
//! Fails if the server cannot be started, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1 (then it
//! says why). The tests that need no server (a configuration that cannot be read, a host file
//! of another kind, an address nobody answers, k0s and MicroK8s hosts) run either way.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::real_apiserver_support::RealApiserver;
use crate::real_apiserver_support::versions::{Kube, versions};
use serde_json::Value;

struct Dir(PathBuf);

impl Dir {
    /// A fresh directory `name-PID-N` under the temp dir (the releases' tests run at once).
    fn new(name: &str) -> Dir {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("{name}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// kubeadm writes the flags unquoted, one per line.
fn kubeadm_manifest(controllers: &str, version: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  labels:
    component: kube-controller-manager
    tier: control-plane
  name: kube-controller-manager
  namespace: kube-system
spec:
  containers:
  - command:
    - kube-controller-manager
    - --authentication-kubeconfig=/etc/kubernetes/controller-manager.conf
    - --bind-address=127.0.0.1
    - --controllers={controllers}
    - --leader-elect=true
    image: registry.k8s.io/kube-controller-manager:{version}
    name: kube-controller-manager
  hostNetwork: true
"
    )
}

fn node_manifest(name: &str, zone: &str, excluded: bool) -> String {
    let exclude = if excluded {
        "\n    node.kubernetes.io/exclude-disruption: \"\""
    } else {
        ""
    };
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    topology.kubernetes.io/zone: {zone}{exclude}\n"
    )
}

fn lease_manifest(name: &str, seconds: u32) -> String {
    format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: {name}\n  namespace: kube-node-lease\nspec:\n  holderIdentity: {name}\n  leaseDurationSeconds: {seconds}\n"
    )
}

fn doctor(config: &Path, manifest: &Path, absent: &Path, output: &str) -> Output {
    doctor_on_host(config, &[("--kcm-manifest", manifest)], absent, output)
}

/// doctor with the host files of `files` (`(option, path)`), every other one `absent`, so the
/// machine's own files play no part.
fn doctor_on_host(config: &Path, files: &[(&str, &Path)], absent: &Path, output: &str) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_node-lifecycled"));
    cmd.arg("doctor")
        .arg("--config")
        .arg(config)
        .args(["--output", output]);
    for option in [
        "--kcm-manifest",
        "--k3s-config",
        "--rke2-config",
        "--k0s-config",
        "--microk8s-args",
    ] {
        let path = files
            .iter()
            .find(|(o, _)| *o == option)
            .map_or(absent, |(_, p)| *p);
        cmd.arg(option).arg(path);
    }
    cmd.output().expect("run node-lifecycled doctor")
}

fn checks(out: &Output) -> Vec<Value> {
    let text = String::from_utf8_lossy(&out.stdout);
    let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "doctor --output json: {e}\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    json["checks"].as_array().cloned().unwrap_or_default()
}

fn find<'a>(checks: &'a [Value], group: &str, name: &str) -> &'a Value {
    checks
        .iter()
        .find(|c| c["group"] == group && c["name"] == name)
        .unwrap_or_else(|| panic!("no {group}/{name} in {checks:#?}"))
}

fn doctor_reports_missing_permissions_then_passes_with_the_rbac_of_conf_and_reads_the_kubeadm_manifest(
    kube: Kube,
) {
    let Some(server) = RealApiserver::start(kube) else {
        return;
    };
    let dir = Dir::new("nl-doctor-e2e");
    let config = dir.0.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "node_monitor_grace_period = \"40s\"\nlarge_cluster_size_threshold = 1\n\
             [api]\nkubeconfig = \"{}\"\n[leader_election]\nenabled = true\n",
            server.var("DAEMON_KUBECONFIG")
        ),
    )
    .unwrap();
    let on = dir.0.join("kcm-on.yaml");
    let off = dir.0.join("kcm-off.yaml");
    // The controllers doctor must find disabled, by the release's names.
    let replaced = if kube.minor() >= 29 {
        "node-lifecycle-controller, taint-eviction-controller"
    } else {
        "nodelifecycle"
    };
    let disabling = replaced
        .split(", ")
        .map(|c| format!(",-{c}"))
        .collect::<String>();
    let version = kube.git_version();
    std::fs::write(
        &on,
        kubeadm_manifest("*,bootstrapsigner,tokencleaner", &version),
    )
    .unwrap();
    std::fs::write(
        &off,
        kubeadm_manifest(
            &format!("*,bootstrapsigner,tokencleaner{disabling}"),
            &version,
        ),
    )
    .unwrap();
    let absent = dir.0.join("absent.yaml");

    // A small fleet: two nodes in zone a (one excluded from disruption), one in zone b; one
    // kubelet Lease longer than the 40 s grace period.
    for (name, zone, excluded) in [("a1", "a", false), ("a2", "a", true), ("b1", "b", false)] {
        server.apply(&node_manifest(name, zone, excluded));
    }
    server.apply(&lease_manifest("a1", 40));
    server.apply(&lease_manifest("a2", 40));
    server.apply(&lease_manifest("b1", 60));

    // Without conf/rbac.yaml: every permission it grants is missing, and the fleet is unreadable.
    let before = doctor(&config, &off, &absent, "json");
    assert_eq!(before.status.code(), Some(1), "{before:?}");
    let list = checks(&before);
    let version = find(&list, "cluster", "server version");
    assert_eq!(version["level"], "ok");
    assert_eq!(version["message"], kube.git_version().as_str());
    let identity = find(&list, "cluster", "identity");
    let expected_identity = if kube.minor() >= 28 {
        "user \"node-lifecycled\", groups [system:authenticated]"
    } else {
        "unknown: this server has no SelfSubjectReview"
    };
    assert!(
        identity["message"]
            .as_str()
            .unwrap()
            .starts_with(expected_identity),
        "{identity}"
    );
    assert_eq!(find(&list, "cluster", "clock skew")["level"], "ok");
    let missing: Vec<&str> = list
        .iter()
        .filter(|c| c["group"] == "permissions" && c["level"] == "fail")
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    // 21, with `patch` on the leader Lease, for `node-lifecycled pause` / `resume`.
    assert_eq!(missing.len(), 21, "{missing:#?}");
    for expected in [
        "patch nodes",
        "update nodes/status",
        "delete pods",
        "patch pods/status",
        "create events",
        "watch leases.coordination.k8s.io in kube-node-lease",
        "update leases.coordination.k8s.io in kube-system named node-lifecycled",
    ] {
        assert!(missing.contains(&expected), "{expected}: {missing:#?}");
    }
    let patch_nodes = find(&list, "permissions", "patch nodes");
    assert!(
        patch_nodes["action"]
            .as_str()
            .unwrap()
            .contains("conf/rbac.yaml"),
        "{patch_nodes}"
    );
    assert_eq!(find(&list, "fleet", "nodes")["level"], "fail");

    // With it (RBAC takes a moment to reach the authorizer): nothing fails.
    server.kubectl(&["apply", "-f", "conf/rbac.yaml"], None);
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        let out = doctor(&config, &off, &absent, "json");
        if out.status.code() == Some(0) || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let list = checks(&after);
    assert_eq!(after.status.code(), Some(0), "{list:#?}");
    assert_eq!(
        find(&list, "permissions", "rbac.yaml")["message"],
        "all 21 permissions of conf/rbac.yaml granted"
    );
    let kcm = find(
        &list,
        "controllers",
        &format!("kubeadm manifest {}", off.display()),
    );
    assert_eq!(kcm["level"], "ok", "{kcm}");
    assert!(
        kcm["message"]
            .as_str()
            .unwrap()
            .ends_with(&format!("{replaced} disabled")),
        "{kcm}"
    );
    assert_eq!(
        find(&list, "fleet", "nodes")["message"],
        "3 nodes in 2 zones"
    );
    assert!(
        find(&list, "fleet", "zone a")["message"]
            .as_str()
            .unwrap()
            .starts_with("2 nodes, large"),
        "{list:#?}"
    );
    assert!(
        find(&list, "fleet", "zone b")["message"]
            .as_str()
            .unwrap()
            .starts_with("1 nodes, small")
    );
    assert!(
        find(&list, "fleet", "excluded from disruption")["message"]
            .as_str()
            .unwrap()
            .ends_with(": a2")
    );
    let leases = find(&list, "fleet", "kubelet leases");
    assert_eq!(leases["level"], "warn");
    assert!(
        leases["message"].as_str().unwrap().ends_with(": b1"),
        "{leases}"
    );

    // kube-controller-manager's own controller still on: a failure with the exact fix, as text.
    let enabled = doctor(&config, &on, &absent, "text");
    assert_eq!(enabled.status.code(), Some(1), "{enabled:?}");
    let text = String::from_utf8_lossy(&enabled.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("fail  controllers/kubeadm manifest"))
        .unwrap_or_else(|| panic!("no failing controllers line:\n{text}"));
    assert!(
        line.contains(&format!(
            "--controllers=*,bootstrapsigner,tokencleaner: {replaced} still enabled"
        )),
        "{line}"
    );
    assert!(
        line.contains(&format!(
            "-> set --controllers=*,bootstrapsigner,tokencleaner{disabling} in {}",
            on.display()
        )),
        "{line}"
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("fail")).count(),
        1,
        "only the controllers check fails:\n{text}"
    );
}

#[test]
fn doctor_with_a_broken_config_or_kubeconfig_exits_78_naming_the_file() {
    let dir = Dir::new("nl-doctor-cfg");
    let config = dir.0.join("config.toml");
    std::fs::write(&config, "large_cluster_size_threshold = \"many\"\n").unwrap();
    let absent = dir.0.join("absent.yaml");
    let out = doctor(&config, &absent, &absent, "text");
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("large_cluster_size_threshold"));
    std::fs::write(
        &config,
        format!("[api]\nkubeconfig = \"{}\"\n", absent.display()),
    )
    .unwrap();
    let out = doctor(&config, &absent, &absent, "text");
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&absent.display().to_string()),
        "{out:?}"
    );
}

#[test]
fn doctor_against_an_address_nobody_answers_fails_the_connection_and_still_reads_the_host() {
    let dir = Dir::new("nl-doctor-down");
    let (config, port) = unreachable_config(&dir.0);
    let on = dir.0.join("kcm.yaml");
    std::fs::write(&on, kubeadm_manifest("*", "v1.20.2")).unwrap();
    let out = doctor(&config, &on, &dir.0.join("absent.yaml"), "text");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!(
            "fail  cluster/connection: http://127.0.0.1:{port} via [api] settings of"
        )),
        "{text}"
    );
    assert!(first.contains("-> check the server address"), "{first}");
    assert!(
        !text.contains("ok    cluster/connection"),
        "no ok line before the server answered:\n{text}"
    );
    // Without a server version the controller names of 1.29+ are assumed, and said so.
    let kcm = text
        .lines()
        .find(|l| l.contains("controllers/kubeadm manifest"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(kcm.starts_with("fail"), "{kcm}");
    assert!(
        kcm.contains("-node-lifecycle-controller,-taint-eviction-controller")
            && kcm.contains("before 1.29 the name is nodelifecycle"),
        "{kcm}"
    );
}

/// A config whose server nobody answers at (a port free a moment ago): doctor reports the
/// connection failure and still reads the host.
fn unreachable_config(dir: &Path) -> (PathBuf, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!("[api]\nserver = \"http://127.0.0.1:{port}\"\nrequest_timeout = \"2s\"\n"),
    )
    .unwrap();
    (config, port)
}

/// k0s and MicroK8s hosts, as their files are found on them, before and after the switch-over
/// (server version unknown here: the 1.29+ names, and a note).
#[test]
fn doctor_reads_k0s_and_microk8s_files_enabled_and_disabled() {
    let dir = Dir::new("nl-doctor-k0s");
    let (config, _) = unreachable_config(&dir.0);
    let absent = dir.0.join("absent");
    let fixture = |name: &str| {
        let path = dir.0.join(name);
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("src/doctor/fixtures")
                .join(name),
        )
        .unwrap();
        std::fs::write(&path, text).unwrap();
        path
    };
    let k0s_on = fixture("k0s-enabled.yaml");
    let k0s_off = fixture("k0s-disabled.yaml");
    let mk8s_on = fixture("microk8s-enabled");
    let mk8s_off = fixture("microk8s-disabled");
    let line = |out: &Output, label: &str| -> String {
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find(|l| l.contains(&format!("controllers/{label} ")))
            .unwrap_or_else(|| panic!("no {label} line:\n{text}"))
            .to_string()
    };

    let out = doctor_on_host(
        &config,
        &[("--k0s-config", &k0s_on), ("--microk8s-args", &mk8s_on)],
        &absent,
        "text",
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let k0s = line(&out, "k0s config");
    assert!(k0s.starts_with("fail"), "{k0s}");
    assert!(
        k0s.contains(&format!(
            "-> set spec.controllerManager.extraArgs.controllers: \"*,bootstrapsigner,tokencleaner,-node-lifecycle-controller,-taint-eviction-controller\" in {}",
            k0s_on.display()
        )),
        "{k0s}"
    );
    let mk8s = line(&out, "MicroK8s arguments");
    assert!(mk8s.starts_with("fail"), "{mk8s}");
    assert!(
        mk8s.contains("-> put --controllers=*,-node-lifecycle-controller,-taint-eviction-controller on a line of its own"),
        "{mk8s}"
    );

    let out = doctor_on_host(
        &config,
        &[("--k0s-config", &k0s_off), ("--microk8s-args", &mk8s_off)],
        &absent,
        "text",
    );
    assert!(line(&out, "k0s config").starts_with("ok"), "{out:?}");
    assert!(
        line(&out, "MicroK8s arguments").starts_with("ok"),
        "{out:?}"
    );
}

/// A file that is not the kind its option names is a mistake in the invocation: exit 78 and
/// one line naming the file and what was expected, before anything is checked (as a broken
/// config file).
#[test]
fn doctor_given_a_file_of_another_kind_exits_78_naming_it_and_what_it_expected() {
    let dir = Dir::new("nl-doctor-kind");
    let (config, _) = unreachable_config(&dir.0);
    let absent = dir.0.join("absent");
    let manifest = dir.0.join("kube-controller-manager.yaml");
    std::fs::write(&manifest, kubeadm_manifest("*", "v1.20.2")).unwrap();
    let args = dir.0.join("kube-controller-manager");
    std::fs::write(&args, "--profiling=false\n--controllers=*\n").unwrap();
    for (option, path, expected) in [
        ("--k0s-config", &manifest, "a k0s ClusterConfig"),
        (
            "--microk8s-args",
            &manifest,
            "MicroK8s' kube-controller-manager arguments",
        ),
        ("--kcm-manifest", &args, "a kubeadm static pod manifest"),
    ] {
        let out = doctor_on_host(&config, &[(option, path)], &absent, "text");
        assert_eq!(out.status.code(), Some(78), "{option}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{option}: {stderr}");
        assert!(
            stderr.starts_with(&format!("{}: expected {expected}", path.display()))
                && stderr.contains(option),
            "{option}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "nothing checked: {out:?}");
    }
}

// The releases each scenario runs on: the whole tier on the newest; on 1.35 and the 1.20.2 floor
// the protocol and a representative few of each kind (README, Supported Kubernetes versions).
versions! {
    v1_37 => [
        doctor_reports_missing_permissions_then_passes_with_the_rbac_of_conf_and_reads_the_kubeadm_manifest,
    ],
    v1_35 => [
        doctor_reports_missing_permissions_then_passes_with_the_rbac_of_conf_and_reads_the_kubeadm_manifest,
    ],
    v1_20 => [
        doctor_reports_missing_permissions_then_passes_with_the_rbac_of_conf_and_reads_the_kubeadm_manifest,
    ],
}
