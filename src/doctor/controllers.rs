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
    shadow: bool,
    report: &mut Report,
) {
    for f in found {
        report.push(match shadow {
            true => shadow_found(f, version).unwrap_or_else(|| check_found(f, version)),
            false => check_found(f, version),
        });
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

/// In shadow mode (`shadow = true`) the incumbent's controllers are to stay on: the daemon
/// writes nothing and compares with them. Off, nobody acts on a failed node.
pub(crate) fn shadow_found(found: &Found, version: Option<(u32, u32)>) -> Option<Check> {
    let setting = found.setting.as_ref().ok()?;
    let name = format!("{} {}", found.flavour.label(), found.path.display());
    let value = setting.value.as_deref();
    let on = replaced(version).iter().any(|c| enabled(value, c, version));
    let fix = advised_value(value, version);
    Some(if on {
        Check::ok(
            GROUP,
            name,
            format!(
                "{}: {} enabled, as shadow mode needs (shadow = true: the daemon writes nothing)",
                setting.shown,
                replaced(version).join(", ")
            ),
        )
        .action(format!(
            "to switch over, once `node-lifecycled shadow report` is clean: {}{}, then shadow = false and reload",
            found.flavour.fix(&found.path, &fix),
            version_note(version)
        ))
    } else {
        Check::fail(
            GROUP,
            name,
            format!(
                "{}: {} disabled while shadow = true: the daemon writes nothing, so nobody acts on a failed node",
                setting.shown,
                replaced(version).join(", ")
            ),
        )
        .action("set shadow = false in the configuration and reload (systemctl reload node-lifecycled)")
    })
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
#[path = "controllers_tests.rs"]
mod tests;
