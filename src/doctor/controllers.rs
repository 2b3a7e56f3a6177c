//! Is kube-controller-manager's own node lifecycle / taint eviction controller still enabled on
//! this host? Read from the distribution's file (`host_files.rs`: kubeadm, k3s, rke2, k0s,
//! MicroK8s), and the exact `--controllers` value that turns them off for this server version.
//!
//! Names (upstream `cmd/kube-controller-manager/names`): before 1.29 one controller,
//! `nodelifecycle`, which also did taint eviction; from 1.29 `node-lifecycle-controller` (old
//! name kept as an alias) and a separate `taint-eviction-controller`. Enabling follows
//! upstream's `IsControllerEnabled`: the first item naming the controller (`name` or `-name`)
//! decides; otherwise `*` enables every default controller; no `--controllers` flag means `*`.
//!
//! Two neighbours are checked on the same file. Upstream's `device-taint-eviction-controller`
//! (DRA device taints: on by default from 1.36, GA in 1.37) deletes the pods using a tainted
//! device; it is not ours and must stay enabled, so a `--controllers` value that turns it off is
//! warned about. And a leftover `--feature-gates=SeparateTaintEvictionController=…`: the gate
//! is beta from 1.29, GA and locked to true from 1.34 (setting it false makes
//! kube-controller-manager refuse to start, true only logs "Setting GA feature gate"), and gone
//! from 1.38 (any value: "unrecognized feature gate", it refuses to start).

use super::host_files::{Flavour, Found, Setting};
use super::{Check, HostFiles, Level, Report};

const GROUP: &str = "controllers";

/// Upstream's controller for DRA device taints (`cmd/kube-controller-manager/names`).
pub(crate) const DEVICE_TAINT_EVICTION: &str = "device-taint-eviction-controller";

/// The first version whose kube-controller-manager runs [`DEVICE_TAINT_EVICTION`] by default
/// (its gates DynamicResourceAllocation and DRADeviceTaints both on: DRADeviceTaints beta).
const DEVICE_TAINT_EVICTION_DEFAULT: (u32, u32) = (1, 36);

/// The taint eviction split's feature gate (KEP-3902).
pub(crate) const SEPARATE_GATE: &str = "SeparateTaintEvictionController";

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

/// The `--controllers` value doctor advises for this version: ours off, everything else as it
/// was, and from 1.36 [`DEVICE_TAINT_EVICTION`] on (it must keep running beside us).
pub(crate) fn advised_value(value: Option<&str>, version: Option<(u32, u32)>) -> String {
    let off = disabling_value(value, version);
    if version.is_some_and(|v| v >= DEVICE_TAINT_EVICTION_DEFAULT) {
        keeping_device_taint_eviction(&off)
    } else {
        off
    }
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
        if let Ok(setting) = &f.setting {
            report
                .checks
                .extend(device_taint_eviction(f, setting, version));
            report.checks.extend(separate_gate(f, setting, version));
        }
    }
    if found.is_empty() {
        let value = advised_value(None, version);
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
    let fix = advised_value(value, version);
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

/// A warning when the file's `--controllers` turns upstream's device taint eviction controller
/// off on a server that runs it by default; the value to use instead keeps it on and ours off.
fn device_taint_eviction(
    found: &Found,
    setting: &Setting,
    version: Option<(u32, u32)>,
) -> Option<Check> {
    if version.is_none_or(|v| v < DEVICE_TAINT_EVICTION_DEFAULT) {
        return None;
    }
    let value = setting.value.as_deref();
    if enabled(value, DEVICE_TAINT_EVICTION, version) {
        return None;
    }
    let fixed = advised_value(value, version);
    Some(
        Check::warn(
            GROUP,
            format!("{} {}", found.flavour.label(), found.path.display()),
            format!(
                "{}: {DEVICE_TAINT_EVICTION} disabled; it evicts the pods of DRA devices tainted \
                 NoExecute (not node-lifecycled's work: nobody does it now)",
                setting.shown
            ),
        )
        .action(found.flavour.fix(&found.path, &fixed)),
    )
}

/// `value` with [`DEVICE_TAINT_EVICTION`] enabled: its `-` item dropped, and named when no `*`
/// enables it.
fn keeping_device_taint_eviction(value: &str) -> String {
    let mut out: Vec<&str> = items(Some(value))
        .into_iter()
        .filter(|item| item.strip_prefix('-') != Some(DEVICE_TAINT_EVICTION))
        .collect();
    if !enabled(Some(&out.join(",")), DEVICE_TAINT_EVICTION, None) {
        out.push(DEVICE_TAINT_EVICTION);
    }
    out.join(",")
}

/// Go's `strconv.ParseBool`, which the flag is read with.
fn go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A line when the file still sets [`SEPARATE_GATE`]: what kube-controller-manager of this
/// version does with it, and the `--feature-gates` value without it.
fn separate_gate(found: &Found, setting: &Setting, version: Option<(u32, u32)>) -> Option<Check> {
    let gates = setting.feature_gates.as_deref()?;
    let pairs: Vec<(&str, &str)> = gates
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (p, ""),
        })
        .collect();
    let (_, raw) = pairs.iter().rev().find(|(k, _)| *k == SEPARATE_GATE)?;
    let set = go_bool(raw);
    let shown = format!("--feature-gates sets {SEPARATE_GATE}={raw}");
    let (level, what) = match version {
        None => (
            Level::Warn,
            "server version unknown; from 1.34 it is locked to true, from 1.38 it is gone and \
             kube-controller-manager refuses to start with it"
                .to_string(),
        ),
        Some(v) if v < (1, 29) => (
            Level::Fail,
            "the gate exists only from 1.29: kube-controller-manager refuses to start \
             (unrecognized feature gate)"
                .to_string(),
        ),
        Some(v) if v < (1, 34) => (
            Level::Warn,
            "beta on this version and harmless while node-lifecycle-controller is off; \
             locked to true from 1.34, gone from 1.38 (kube-controller-manager then refuses to \
             start with it)"
                .to_string(),
        ),
        Some(v) if v < (1, 38) => match set {
            Some(true) => (
                Level::Warn,
                "GA and locked to true since 1.34 (kube-controller-manager logs \"Setting GA \
                 feature gate\"); gone from 1.38, where it refuses to start with it"
                    .to_string(),
            ),
            _ => (
                Level::Fail,
                "locked to true since 1.34: kube-controller-manager refuses to start (cannot \
                 set feature gate, feature is locked to true)"
                    .to_string(),
            ),
        },
        Some((major, minor)) => (
            Level::Fail,
            format!(
                "the gate is removed in 1.38: kube-controller-manager {major}.{minor} refuses to \
                 start (unrecognized feature gate: {SEPARATE_GATE})"
            ),
        ),
    };
    let rest: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| *k != SEPARATE_GATE)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let leaving = if rest.is_empty() {
        "and the flag with it, nothing else is set".to_string()
    } else {
        format!("leaving --feature-gates={}", rest.join(","))
    };
    Some(
        Check::new(
            GROUP,
            format!(
                "{} {} feature gates",
                found.flavour.label(),
                found.path.display()
            ),
            level,
            format!("{shown}: {what}"),
        )
        .action(format!(
            "remove {SEPARATE_GATE} from --feature-gates in {}, {leaving}",
            found.path.display()
        )),
    )
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

    const V137: Option<(u32, u32)> = Some((1, 37));

    /// Every line `check` gives for one host file.
    fn lines(f: Found, version: Option<(u32, u32)>) -> Vec<Check> {
        let mut report = Report::default();
        check(&[f], &HostFiles::default(), version, &mut report);
        report.checks
    }

    /// A kubeadm cluster upgraded to 1.37 with ours off, device-taint-eviction-controller off
    /// beside them and the split's gate still set: ours is ok; the device controller is warned
    /// about with the exact value that turns it back on and keeps ours off; the gate is a
    /// warning (GA, locked to true: only logged) that becomes a failure on 1.38.
    #[test]
    fn doctor_on_1_37_warns_of_device_taint_eviction_turned_off_and_of_the_leftover_gate() {
        let f = found(
            Flavour::Kubeadm,
            include_str!("fixtures/kubeadm-1.37-leftovers.yaml"),
        );
        let checks = lines(f.clone(), V137);
        assert_eq!(checks.len(), 3, "{checks:#?}");
        assert_eq!(checks[0].level, Level::Ok, "{}", checks[0].message);
        let device = &checks[1];
        assert_eq!(device.level, Level::Warn);
        assert!(
            device
                .message
                .contains("device-taint-eviction-controller disabled"),
            "{}",
            device.message
        );
        assert_eq!(
            device.action,
            "set --controllers=*,bootstrapsigner,tokencleaner,-node-lifecycle-controller,\
             -taint-eviction-controller in /etc/kubernetes/manifests/kube-controller-manager.yaml \
             (the kubelet restarts kube-controller-manager)"
        );
        let gate = &checks[2];
        assert_eq!(gate.level, Level::Warn);
        assert!(
            gate.message
                .starts_with("--feature-gates sets SeparateTaintEvictionController=true: GA"),
            "{}",
            gate.message
        );
        assert!(
            gate.action
                .ends_with("leaving --feature-gates=NodeLifecycleConditions=true"),
            "{}",
            gate.action
        );
        // 1.38: the gate is gone, kube-controller-manager would not start.
        let on_138 = lines(f.clone(), Some((1, 38)));
        let gate = on_138.last().unwrap();
        assert_eq!(gate.level, Level::Fail);
        assert!(
            gate.message
                .contains("unrecognized feature gate: SeparateTaintEvictionController"),
            "{}",
            gate.message
        );
        // 1.35: the device controller is not on by default yet; the gate is still only a
        // warning.
        let on_135 = lines(f, Some((1, 35)));
        assert_eq!(on_135.len(), 2, "{on_135:#?}");
        assert!(on_135.iter().all(|c| {
            !c.message
                .contains("device-taint-eviction-controller disabled")
        }));
        assert_eq!(on_135[1].level, Level::Warn);
    }

    /// Ours still on and the device controller off on 1.37: the one value advised turns ours
    /// off and the device controller back on; before 1.36 the device item is left as it is.
    #[test]
    fn the_value_advised_for_1_37_turns_ours_off_and_device_taint_eviction_back_on() {
        let f = kubeadm("*,-device-taint-eviction-controller");
        let checks = lines(f.clone(), V137);
        assert_eq!(checks[0].level, Level::Fail);
        let fixed = "--controllers=*,-node-lifecycle-controller,-taint-eviction-controller ";
        assert!(checks[0].action.contains(fixed), "{}", checks[0].action);
        assert!(checks[1].action.contains(fixed), "{}", checks[1].action);
        let old = check_found(&f, Some((1, 35)));
        assert!(
            old.action.contains(
                "--controllers=*,-device-taint-eviction-controller,-node-lifecycle-controller,\
                 -taint-eviction-controller "
            ),
            "{}",
            old.action
        );
    }

    /// A value without `*` turns every controller it does not name off, the device one with
    /// them: the fix names it.
    #[test]
    fn a_controllers_list_without_star_is_told_to_name_device_taint_eviction() {
        let checks = lines(
            kubeadm(
                "garbage-collector-controller,-node-lifecycle-controller,-taint-eviction-controller",
            ),
            V137,
        );
        let device = checks
            .iter()
            .find(|c| c.message.contains(DEVICE_TAINT_EVICTION))
            .expect("a device taint eviction line");
        assert_eq!(device.level, Level::Warn);
        assert!(
            device.action.contains(
                "--controllers=garbage-collector-controller,-node-lifecycle-controller,\
                 -taint-eviction-controller,device-taint-eviction-controller "
            ),
            "{}",
            device.action
        );
        // Enabled by `*` (the usual fix): no line.
        let fine = lines(
            kubeadm("*,-node-lifecycle-controller,-taint-eviction-controller"),
            V137,
        );
        assert_eq!(fine.len(), 1, "{fine:#?}");
    }

    /// The gate set false, as a k3s server switched over in 1.30 left it: harmless then, fatal
    /// for kube-controller-manager from 1.34 (locked to true) and, set either way, from 1.38;
    /// before 1.29 it did not exist. k0s' extraArgs are read the same way.
    #[test]
    fn the_leftover_separate_taint_eviction_gate_is_judged_per_version() {
        let k3s = found(Flavour::K3s, include_str!("fixtures/k3s-feature-gate.yaml"));
        let gate = |version| lines(k3s.clone(), version).pop().unwrap();
        assert_eq!(gate(Some((1, 30))).level, Level::Warn);
        let locked = gate(Some((1, 34)));
        assert_eq!(locked.level, Level::Fail);
        assert!(
            locked.message.contains("locked to true"),
            "{}",
            locked.message
        );
        assert!(
            locked
                .action
                .ends_with("and the flag with it, nothing else is set"),
            "{}",
            locked.action
        );
        assert_eq!(gate(Some((1, 38))).level, Level::Fail);
        assert_eq!(gate(Some((1, 28))).level, Level::Fail);
        assert_eq!(gate(None).level, Level::Warn);
        let k0s = found(Flavour::K0s, include_str!("fixtures/k0s-feature-gate.yaml"));
        let checks = lines(k0s, V137);
        assert_eq!(checks.len(), 2, "{checks:#?}");
        assert_eq!(checks[0].level, Level::Ok);
        assert_eq!(checks[1].level, Level::Warn);
        assert!(checks[1].name.ends_with("feature gates"));
        // No gate, no line.
        assert_eq!(
            lines(
                kubeadm("*,-node-lifecycle-controller,-taint-eviction-controller"),
                Some((1, 38))
            )
            .len(),
            1
        );
    }
}
