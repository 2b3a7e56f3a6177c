//! Is kube-controller-manager's own node lifecycle / taint eviction controller still enabled on
//! this host? Read from the kubeadm static-pod manifest, or the k3s / rke2 config, and the
//! exact `--controllers` value that turns them off for this server version.
//!
//! Names (upstream `cmd/kube-controller-manager/names`): before 1.29 one controller,
//! `nodelifecycle`, which also did taint eviction; from 1.29 `node-lifecycle-controller` (old
//! name kept as an alias) and a separate `taint-eviction-controller`. Enabling follows
//! upstream's `IsControllerEnabled`: the first item naming the controller (`name` or `-name`)
//! decides; otherwise `*` enables every default controller; no `--controllers` flag means `*`.

use std::path::Path;

use serde_yaml_ng::Value;

use super::{Check, HostFiles, Report};

const GROUP: &str = "controllers";

pub const KUBEADM_MANIFEST: &str = "/etc/kubernetes/manifests/kube-controller-manager.yaml";
pub const K3S_CONFIG: &str = "/etc/rancher/k3s/config.yaml";
pub const RKE2_CONFIG: &str = "/etc/rancher/rke2/config.yaml";

/// The controllers this daemon replaces, by the server's minor version (`None`: unknown,
/// assume current names).
pub fn replaced(version: Option<(u32, u32)>) -> &'static [&'static str] {
    match version {
        Some(v) if v < (1, 29) => &["nodelifecycle"],
        _ => &["node-lifecycle-controller", "taint-eviction-controller"],
    }
}

fn canonical(name: &str, version: Option<(u32, u32)>) -> &str {
    match (name, version) {
        ("nodelifecycle", Some(v)) if v < (1, 29) => name,
        ("nodelifecycle", _) => "node-lifecycle-controller",
        _ => name,
    }
}

/// `--controllers` as a list; the flag absent means `*`.
fn items(value: Option<&str>) -> Vec<&str> {
    match value {
        None => vec!["*"],
        Some(v) => v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect(),
    }
}

/// Upstream's `IsControllerEnabled` for a controller that is on by default.
pub fn enabled(value: Option<&str>, name: &str, version: Option<(u32, u32)>) -> bool {
    let mut star = false;
    for item in items(value) {
        if let Some(off) = item.strip_prefix('-') {
            if canonical(off, version) == name {
                return false;
            }
        } else if item == "*" {
            star = true;
        } else if canonical(item, version) == name {
            return true;
        }
    }
    star
}

/// The `--controllers` value that keeps everything else as it is and turns ours off.
pub fn disabling_value(value: Option<&str>, version: Option<(u32, u32)>) -> String {
    let targets = replaced(version);
    let mut out: Vec<String> = items(value)
        .into_iter()
        .filter(|item| {
            let name = canonical(item.trim_start_matches('-'), version);
            !targets.contains(&name)
        })
        .map(str::to_string)
        .collect();
    out.extend(targets.iter().map(|t| format!("-{t}")));
    out.join(",")
}

/// The `--controllers` value of a kubeadm static-pod manifest (`None`: the flag is absent).
pub fn kubeadm_controllers(yaml: &str) -> Result<Option<String>, String> {
    let doc: Value = serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())?;
    let containers = doc
        .get("spec")
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_sequence)
        .ok_or("no spec.containers: not a static pod manifest")?;
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_sequence)
            .map(|s| {
                s.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let container = containers
        .iter()
        .find(|c| {
            c.get("name").and_then(Value::as_str) == Some("kube-controller-manager")
                || strings(c.get("command"))
                    .first()
                    .is_some_and(|cmd| cmd.ends_with("kube-controller-manager"))
        })
        .ok_or("no kube-controller-manager container")?;
    let mut args = strings(container.get("command"));
    args.extend(strings(container.get("args")));
    let mut found = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if let Some(v) = arg.strip_prefix("--controllers=") {
            found = Some(v.to_string());
        } else if arg == "--controllers" {
            found = Some(
                iter.next()
                    .cloned()
                    .ok_or("--controllers without a value")?,
            );
        }
    }
    Ok(found)
}

/// The `controllers=` entry of `kube-controller-manager-arg` in a k3s or rke2 config file.
pub fn k3s_controllers(yaml: &str) -> Result<Option<String>, String> {
    if yaml.trim().is_empty() {
        return Ok(None);
    }
    let doc: Value = serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())?;
    let args: Vec<String> = match doc.get("kube-controller-manager-arg") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Sequence(seq)) => seq
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or("kube-controller-manager-arg: entries must be strings")
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("kube-controller-manager-arg: must be a string or a list".into()),
    };
    Ok(args
        .iter()
        .filter_map(|a| {
            a.trim_start_matches('-')
                .strip_prefix("controllers=")
                .map(str::to_string)
        })
        .next_back())
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Flavour {
    Kubeadm,
    K3s,
    Rke2,
}

pub fn check(host: &HostFiles, version: Option<(u32, u32)>, report: &mut Report) {
    let files = [
        (Flavour::Kubeadm, &host.kubeadm_manifest),
        (Flavour::K3s, &host.k3s_config),
        (Flavour::Rke2, &host.rke2_config),
    ];
    let mut seen = false;
    for (flavour, path) in files {
        if !path.exists() {
            continue;
        }
        seen = true;
        report.push(check_file(flavour, path, version));
    }
    if !seen {
        let value = disabling_value(None, version);
        report.push(
            Check::warn(
                GROUP,
                "kube-controller-manager",
                format!(
                    "no kubeadm manifest ({}), k3s ({}) or rke2 ({}) config on this host: not checked",
                    host.kubeadm_manifest.display(),
                    host.k3s_config.display(),
                    host.rke2_config.display()
                ),
            )
            .action(format!(
                "on the hosts that run kube-controller-manager, make sure --controllers={value}{}",
                version_note(version)
            )),
        );
    }
}

fn version_note(version: Option<(u32, u32)>) -> &'static str {
    if version.is_none() {
        " (server version unknown; before 1.29 the name is nodelifecycle)"
    } else {
        ""
    }
}

/// Reads the `--controllers` value out of one kind of file.
type Parser = fn(&str) -> Result<Option<String>, String>;

fn check_file(flavour: Flavour, path: &Path, version: Option<(u32, u32)>) -> Check {
    let (label, parse): (&str, Parser) = match flavour {
        Flavour::Kubeadm => ("kubeadm manifest", kubeadm_controllers),
        Flavour::K3s => ("k3s config", k3s_controllers),
        Flavour::Rke2 => ("rke2 config", k3s_controllers),
    };
    let name = format!("{label} {}", path.display());
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            return Check::fail(GROUP, name, format!("cannot read: {e}"))
                .action("run doctor as root on the control-plane host");
        }
    };
    let value = match parse(&text) {
        Ok(v) => v,
        Err(e) => return Check::fail(GROUP, name, format!("cannot parse: {e}")),
    };
    let shown = match &value {
        Some(v) => format!("--controllers={v}"),
        None => "no --controllers (every default controller runs)".to_string(),
    };
    let still: Vec<&str> = replaced(version)
        .iter()
        .copied()
        .filter(|c| enabled(value.as_deref(), c, version))
        .collect();
    if still.is_empty() {
        return Check::ok(
            GROUP,
            name,
            format!("{shown}: {} disabled", replaced(version).join(", ")),
        );
    }
    let fix = disabling_value(value.as_deref(), version);
    let action = match flavour {
        Flavour::Kubeadm => format!(
            "set --controllers={fix} in {} (the kubelet restarts kube-controller-manager){}",
            path.display(),
            version_note(version)
        ),
        Flavour::K3s | Flavour::Rke2 => format!(
            "set kube-controller-manager-arg: [\"controllers={fix}\"] in {} and restart {}{}",
            path.display(),
            if flavour == Flavour::K3s {
                "k3s"
            } else {
                "rke2-server"
            },
            version_note(version)
        ),
    };
    Check::fail(
        GROUP,
        name,
        format!(
            "{shown}: {} still enabled; both would act on the same nodes",
            still.join(", ")
        ),
    )
    .action(action)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Level;

    const V120: Option<(u32, u32)> = Some((1, 20));
    const V130: Option<(u32, u32)> = Some((1, 30));

    fn manifest(args: &[&str]) -> String {
        let mut text = String::from(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-controller-manager\n  namespace: kube-system\nspec:\n  containers:\n  - name: kube-controller-manager\n    image: registry.k8s.io/kube-controller-manager:v1.30.0\n    command:\n    - kube-controller-manager\n",
        );
        for a in args {
            text.push_str(&format!("    - \"{a}\"\n"));
        }
        text
    }

    #[test]
    fn the_kubeadm_manifest_flag_is_found_in_either_spelling_or_absent() {
        let m = manifest(&[
            "--bind-address=127.0.0.1",
            "--controllers=*,bootstrapsigner,tokencleaner",
        ]);
        assert_eq!(
            kubeadm_controllers(&m),
            Ok(Some("*,bootstrapsigner,tokencleaner".into()))
        );
        let split = manifest(&["--controllers", "*,-nodelifecycle"]);
        assert_eq!(
            kubeadm_controllers(&split),
            Ok(Some("*,-nodelifecycle".into()))
        );
        assert_eq!(kubeadm_controllers(&manifest(&["--v=2"])), Ok(None));
        assert!(kubeadm_controllers("kind: Pod\nspec: {}\n").is_err());
        assert!(
            kubeadm_controllers("spec:\n  containers:\n  - name: etcd\n")
                .unwrap_err()
                .contains("no kube-controller-manager")
        );
        assert!(kubeadm_controllers(": [").is_err());
    }

    #[test]
    fn k3s_and_rke2_configs_carry_it_in_kube_controller_manager_arg() {
        assert_eq!(
            k3s_controllers(
                "kube-controller-manager-arg:\n  - \"node-monitor-grace-period=20s\"\n  - \"controllers=*,-node-lifecycle-controller\"\n"
            ),
            Ok(Some("*,-node-lifecycle-controller".into()))
        );
        assert_eq!(
            k3s_controllers("kube-controller-manager-arg: \"--controllers=*\"\n"),
            Ok(Some("*".into()))
        );
        assert_eq!(
            k3s_controllers("write-kubeconfig-mode: \"0644\"\n"),
            Ok(None)
        );
        assert_eq!(k3s_controllers(""), Ok(None));
        assert!(k3s_controllers("kube-controller-manager-arg: {a: 1}\n").is_err());
    }

    #[test]
    fn enabling_follows_upstream_first_match_then_star_with_the_1_29_rename() {
        assert!(enabled(None, "nodelifecycle", V120));
        assert!(!enabled(Some("*,-nodelifecycle"), "nodelifecycle", V120));
        assert!(!enabled(Some("bootstrapsigner"), "nodelifecycle", V120));
        assert!(enabled(
            Some("nodelifecycle,-nodelifecycle"),
            "nodelifecycle",
            V120
        ));
        // 1.29+: the old name is an alias of node-lifecycle-controller only.
        assert!(!enabled(
            Some("*,-nodelifecycle"),
            "node-lifecycle-controller",
            V130
        ));
        assert!(enabled(
            Some("*,-nodelifecycle"),
            "taint-eviction-controller",
            V130
        ));
    }

    #[test]
    fn the_fix_keeps_other_controllers_and_names_ours_for_the_version() {
        assert_eq!(disabling_value(None, V120), "*,-nodelifecycle");
        assert_eq!(
            disabling_value(Some("*,bootstrapsigner,nodelifecycle"), V120),
            "*,bootstrapsigner,-nodelifecycle"
        );
        assert_eq!(
            disabling_value(None, V130),
            "*,-node-lifecycle-controller,-taint-eviction-controller"
        );
        assert_eq!(
            disabling_value(Some("*,-nodelifecycle"), V130),
            "*,-node-lifecycle-controller,-taint-eviction-controller"
        );
    }

    #[test]
    fn a_manifest_file_is_judged_and_the_exact_value_printed() {
        let dir = std::env::temp_dir().join(format!("nl-doctor-kcm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let on = dir.join("on.yaml");
        let off = dir.join("off.yaml");
        std::fs::write(&on, manifest(&["--controllers=*,bootstrapsigner"])).unwrap();
        std::fs::write(&off, manifest(&["--controllers=*,bootstrapsigner,-node-lifecycle-controller,-taint-eviction-controller"])).unwrap();
        let fail = check_file(Flavour::Kubeadm, &on, V130);
        assert_eq!(fail.level, Level::Fail);
        assert!(
            fail.message
                .contains("node-lifecycle-controller, taint-eviction-controller still enabled"),
            "{}",
            fail.message
        );
        assert!(fail.action.contains("--controllers=*,bootstrapsigner,-node-lifecycle-controller,-taint-eviction-controller"), "{}", fail.action);
        assert_eq!(check_file(Flavour::Kubeadm, &off, V130).level, Level::Ok);
        // The same file on a 1.28 server: those names mean nothing there, nodelifecycle runs.
        let old = check_file(Flavour::Kubeadm, &off, Some((1, 28)));
        assert_eq!(old.level, Level::Fail);
        assert!(old.action.contains("-nodelifecycle"), "{}", old.action);
        let missing = dir.join("absent.yaml");
        let mut report = Report::default();
        let host = HostFiles {
            kubeadm_manifest: missing.clone(),
            k3s_config: missing.clone(),
            rke2_config: missing,
        };
        check(&host, V130, &mut report);
        assert_eq!(report.checks.len(), 1);
        assert_eq!(report.checks[0].level, Level::Warn);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
