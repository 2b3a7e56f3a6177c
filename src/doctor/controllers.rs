//! Is kube-controller-manager's own node lifecycle / taint eviction controller still enabled on
//! this host? Read from the distribution's file (`host_files.rs`: kubeadm, k3s, rke2, k0s,
//! MicroK8s), and the exact `--controllers` value that turns them off for this server version.
//!
//! Names (upstream `cmd/kube-controller-manager/names`): before 1.29 one controller,
//! `nodelifecycle`, which also did taint eviction; from 1.29 `node-lifecycle-controller` (old
//! name kept as an alias) and a separate `taint-eviction-controller`. Enabling follows
//! upstream's `IsControllerEnabled`: the first item naming the controller (`name` or `-name`)
//! decides; otherwise `*` enables every default controller; no `--controllers` flag means `*`.

use super::host_files::{Flavour, Found};
use super::{Check, HostFiles, Report};

const GROUP: &str = "controllers";

/// The controllers this daemon replaces, by the server's minor version (`None`: unknown,
/// assume current names).
pub(crate) fn replaced(version: Option<(u32, u32)>) -> &'static [&'static str] {
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
pub(crate) fn enabled(value: Option<&str>, name: &str, version: Option<(u32, u32)>) -> bool {
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
pub(crate) fn disabling_value(value: Option<&str>, version: Option<(u32, u32)>) -> String {
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

/// One line per host file found (`host_files::read`), or one saying none was.
pub(crate) fn check(
    found: &[Found],
    host: &HostFiles,
    version: Option<(u32, u32)>,
    report: &mut Report,
) {
    for f in found {
        report.push(check_found(f, version));
    }
    if found.is_empty() {
        let value = disabling_value(None, version);
        let looked: Vec<String> = Flavour::ALL
            .iter()
            .map(|f| format!("{} ({})", f.label(), f.path(host).display()))
            .collect();
        report.push(
            Check::warn(
                GROUP,
                "kube-controller-manager",
                format!("none on this host: {}; not checked", looked.join(", ")),
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

fn check_found(found: &Found, version: Option<(u32, u32)>) -> Check {
    let name = format!("{} {}", found.flavour.label(), found.path.display());
    let setting = match &found.setting {
        Ok(s) => s,
        Err(e) => {
            return Check::fail(GROUP, name, e.clone())
                .action("run doctor as root on the control-plane host");
        }
    };
    let value = setting.value.as_deref();
    let still: Vec<&str> = replaced(version)
        .iter()
        .copied()
        .filter(|c| enabled(value, c, version))
        .collect();
    if still.is_empty() {
        return Check::ok(
            GROUP,
            name,
            format!(
                "{}: {} disabled",
                setting.shown,
                replaced(version).join(", ")
            ),
        );
    }
    let fix = disabling_value(value, version);
    Check::fail(
        GROUP,
        name,
        format!(
            "{}: {} still enabled; both would act on the same nodes",
            setting.shown,
            still.join(", ")
        ),
    )
    .action(format!(
        "{}{}",
        found.flavour.fix(&found.path, &fix),
        version_note(version)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Level;

    const V120: Option<(u32, u32)> = Some((1, 20));
    const V130: Option<(u32, u32)> = Some((1, 30));

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

    fn found(flavour: Flavour, text: &str) -> Found {
        Found {
            flavour,
            path: flavour.path(&HostFiles::default()).to_path_buf(),
            setting: Ok(flavour.parse(text).unwrap()),
        }
    }

    fn kubeadm(controllers: &str) -> Found {
        let manifest = format!(
            "kind: Pod\nspec:\n  containers:\n  - name: kube-controller-manager\n    command:\n    - kube-controller-manager\n    - --controllers={controllers}\n"
        );
        found(Flavour::Kubeadm, &manifest)
    }

    #[test]
    fn a_manifest_is_judged_and_the_exact_value_printed_for_the_version() {
        let fail = check_found(&kubeadm("*,bootstrapsigner"), V130);
        assert_eq!(fail.level, Level::Fail);
        assert!(
            fail.message
                .contains("node-lifecycle-controller, taint-eviction-controller still enabled"),
            "{}",
            fail.message
        );
        assert!(fail.action.contains("--controllers=*,bootstrapsigner,-node-lifecycle-controller,-taint-eviction-controller"), "{}", fail.action);
        let off =
            kubeadm("*,bootstrapsigner,-node-lifecycle-controller,-taint-eviction-controller");
        assert_eq!(check_found(&off, V130).level, Level::Ok);
        // The same file on a 1.28 server: those names mean nothing there, nodelifecycle runs.
        let old = check_found(&off, Some((1, 28)));
        assert_eq!(old.level, Level::Fail);
        assert!(old.action.contains("-nodelifecycle"), "{}", old.action);
        // No host file at all: a warning with the value to use elsewhere.
        let mut report = Report::default();
        check(&[], &HostFiles::default(), V130, &mut report);
        assert_eq!(report.checks.len(), 1);
        assert_eq!(report.checks[0].level, Level::Warn);
        assert!(
            report.checks[0]
                .message
                .contains("k0s config (/etc/k0s/k0s.yaml)")
                && report.checks[0].message.contains("MicroK8s arguments"),
            "{}",
            report.checks[0].message
        );
        let unreadable = Found {
            setting: Err("cannot read: Permission denied (os error 13)".into()),
            ..kubeadm("*")
        };
        let c = check_found(&unreadable, V130);
        assert_eq!(c.level, Level::Fail);
        assert!(c.action.contains("as root"));
    }

    /// k0s as installed: its default --controllers keeps the token controllers its joins need,
    /// and so must the fix. Once set, the same file passes; on 1.28 the old name is needed.
    #[test]
    fn a_k0s_config_is_told_enabled_or_disabled_and_the_fix_keeps_k0s_defaults() {
        let on = found(Flavour::K0s, include_str!("fixtures/k0s-enabled.yaml"));
        let fail = check_found(&on, V130);
        assert_eq!(fail.level, Level::Fail, "{}", fail.message);
        assert_eq!(
            fail.line(),
            "fail  controllers/k0s config /etc/k0s/k0s.yaml: no controllers in \
             spec.controllerManager.extraArgs: k0s passes \
             --controllers=*,bootstrapsigner,tokencleaner: node-lifecycle-controller, \
             taint-eviction-controller still enabled; both would act on the same nodes -> set \
             spec.controllerManager.extraArgs.controllers: \"*,bootstrapsigner,tokencleaner,\
             -node-lifecycle-controller,-taint-eviction-controller\" in /etc/k0s/k0s.yaml and \
             restart k0s (k0s stop; k0s start)"
        );
        let old = check_found(&on, Some((1, 28)));
        assert!(
            old.action
                .contains("controllers: \"*,bootstrapsigner,tokencleaner,-nodelifecycle\""),
            "{}",
            old.action
        );
        let off = found(Flavour::K0s, include_str!("fixtures/k0s-disabled.yaml"));
        let ok = check_found(&off, V130);
        assert_eq!(ok.level, Level::Ok, "{}", ok.message);
        assert!(
            ok.message
                .ends_with("node-lifecycle-controller, taint-eviction-controller disabled")
        );
        assert_eq!(check_found(&off, Some((1, 28))).level, Level::Fail);
    }

    #[test]
    fn a_microk8s_arguments_file_is_told_enabled_or_disabled_with_the_line_to_add() {
        let on = found(Flavour::MicroK8s, include_str!("fixtures/microk8s-enabled"));
        let fail = check_found(&on, V130);
        assert_eq!(fail.level, Level::Fail, "{}", fail.message);
        assert!(
            fail.message
                .starts_with("no --controllers (every default controller runs)"),
            "{}",
            fail.message
        );
        assert_eq!(
            fail.action,
            "put --controllers=*,-node-lifecycle-controller,-taint-eviction-controller on a line \
             of its own in /var/snap/microk8s/current/args/kube-controller-manager (instead of \
             any other --controllers line) and restart MicroK8s (snap restart microk8s)"
        );
        let old = check_found(&on, Some((1, 28)));
        assert!(
            old.action
                .starts_with("put --controllers=*,-nodelifecycle on a line"),
            "{}",
            old.action
        );
        let off = found(
            Flavour::MicroK8s,
            include_str!("fixtures/microk8s-disabled"),
        );
        assert_eq!(check_found(&off, V130).level, Level::Ok);
    }
}
