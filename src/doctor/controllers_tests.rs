//! Tests of the controllers check: enabling as upstream decides it, the disabling value per
//! version and distribution, device taint eviction and the leftover feature gate.

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
    assert!(
        fail.action.contains(
            "--controllers=*,bootstrapsigner,-node-lifecycle-controller,-taint-eviction-controller"
        ),
        "{}",
        fail.action
    );
    let off = kubeadm("*,bootstrapsigner,-node-lifecycle-controller,-taint-eviction-controller");
    assert_eq!(check_found(&off, V130).level, Level::Ok);
    // The same file on a 1.28 server: those names mean nothing there, nodelifecycle runs.
    let old = check_found(&off, Some((1, 28)));
    assert_eq!(old.level, Level::Fail);
    assert!(old.action.contains("-nodelifecycle"), "{}", old.action);
    // No host file at all: a warning with the value to use elsewhere.
    let mut report = Report::default();
    check(&[], &HostFiles::default(), V130, false, &mut report);
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
    check(&[f], &HostFiles::default(), version, false, &mut report);
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

/// In shadow mode the incumbent's controllers must stay on: off, nobody would act.
#[test]
fn in_shadow_mode_the_incumbents_controllers_are_to_stay_on() {
    let on = shadow_found(&kubeadm("*,bootstrapsigner"), V130).unwrap();
    assert_eq!(on.level, Level::Ok);
    assert!(
        on.message.contains("as shadow mode needs"),
        "{}",
        on.message
    );
    assert!(
        on.action
            .contains("-node-lifecycle-controller,-taint-eviction-controller")
            && on.action.contains("then shadow = false"),
        "{}",
        on.action
    );
    let off = kubeadm("*,bootstrapsigner,-node-lifecycle-controller,-taint-eviction-controller");
    let fail = shadow_found(&off, V130).unwrap();
    assert_eq!(fail.level, Level::Fail);
    assert!(fail.message.contains("nobody acts"), "{}", fail.message);
    assert!(
        fail.action.contains("set shadow = false"),
        "{}",
        fail.action
    );
}
