//! Where each distribution keeps kube-controller-manager's flags on a control-plane host, and
//! how `--controllers` is read out of each: kubeadm's static pod manifest, the k3s and rke2
//! `config.yaml`, k0s's `k0s.yaml` (a ClusterConfig) and MicroK8s' arguments file.
//!
//! A file that exists but is not the kind its option names (a manifest given as
//! `--microk8s-args`, a k0sctl.yaml as `--k0s-config`) is a mistake in the invocation, as a
//! broken config file is: [`read`] returns one line naming the file and what was expected, and
//! doctor exits 78 before it checks anything. A file that cannot be read (not root) is a
//! finding, reported with the other checks.

use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

use super::HostFiles;

pub(crate) const KUBEADM_MANIFEST: &str = "/etc/kubernetes/manifests/kube-controller-manager.yaml";
pub(crate) const K3S_CONFIG: &str = "/etc/rancher/k3s/config.yaml";
pub(crate) const RKE2_CONFIG: &str = "/etc/rancher/rke2/config.yaml";
pub(crate) const K0S_CONFIG: &str = "/etc/k0s/k0s.yaml";
pub(crate) const MICROK8S_ARGS: &str = "/var/snap/microk8s/current/args/kube-controller-manager";

/// What k0s passes as `--controllers` when `spec.controllerManager.extraArgs` has none (its
/// `cmDefaultArgs`): the token controllers its joins need stay on in any fix.
pub(crate) const K0S_DEFAULT_CONTROLLERS: &str = "*,bootstrapsigner,tokencleaner";

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Flavour {
    Kubeadm,
    K3s,
    Rke2,
    K0s,
    MicroK8s,
}

impl Flavour {
    pub(crate) const ALL: [Flavour; 5] = [
        Flavour::Kubeadm,
        Flavour::K3s,
        Flavour::Rke2,
        Flavour::K0s,
        Flavour::MicroK8s,
    ];

    /// How the file is named in a report line.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Flavour::Kubeadm => "kubeadm manifest",
            Flavour::K3s => "k3s config",
            Flavour::Rke2 => "rke2 config",
            Flavour::K0s => "k0s config",
            Flavour::MicroK8s => "MicroK8s arguments",
        }
    }

    /// The doctor option that names another file.
    pub(crate) fn option(self) -> &'static str {
        match self {
            Flavour::Kubeadm => "--kcm-manifest",
            Flavour::K3s => "--k3s-config",
            Flavour::Rke2 => "--rke2-config",
            Flavour::K0s => "--k0s-config",
            Flavour::MicroK8s => "--microk8s-args",
        }
    }

    fn expected(self) -> &'static str {
        match self {
            Flavour::Kubeadm => "a kubeadm static pod manifest of kube-controller-manager",
            Flavour::K3s => "a k3s config.yaml",
            Flavour::Rke2 => "an rke2 config.yaml",
            Flavour::K0s => "a k0s ClusterConfig (apiVersion k0s.k0sproject.io/v1beta1)",
            Flavour::MicroK8s => {
                "MicroK8s' kube-controller-manager arguments, one --flag=value per line"
            }
        }
    }

    pub(crate) fn path(self, host: &HostFiles) -> &Path {
        match self {
            Flavour::Kubeadm => &host.kubeadm_manifest,
            Flavour::K3s => &host.k3s_config,
            Flavour::Rke2 => &host.rke2_config,
            Flavour::K0s => &host.k0s_config,
            Flavour::MicroK8s => &host.microk8s_args,
        }
    }

    /// What the file says of `--controllers` and `--feature-gates`; `Err` when it is not this
    /// kind of file.
    pub(crate) fn parse(self, text: &str) -> Result<Setting, String> {
        let (mut setting, gates) = match self {
            Flavour::Kubeadm => {
                let args = kubeadm_args(text)?;
                (
                    Setting::flag(flag_value(&args, "controllers")?),
                    flag_value(&args, FEATURE_GATES)?,
                )
            }
            Flavour::K3s | Flavour::Rke2 => {
                let args = k3s_args(text)?;
                (
                    Setting::flag(k3s_flag(&args, "controllers")),
                    k3s_flag(&args, FEATURE_GATES),
                )
            }
            Flavour::K0s => (k0s_controllers(text)?, k0s_extra_arg(text, FEATURE_GATES)?),
            Flavour::MicroK8s => {
                let args = microk8s_args(text)?;
                (
                    Setting::flag(flag_value(&args, "controllers")?),
                    flag_value(&args, FEATURE_GATES)?,
                )
            }
        };
        setting.feature_gates = gates;
        Ok(setting)
    }

    /// How to set `--controllers={value}` in this distribution's file and apply it.
    pub(crate) fn fix(self, path: &Path, value: &str) -> String {
        let path = path.display();
        match self {
            Flavour::Kubeadm => format!(
                "set --controllers={value} in {path} (the kubelet restarts kube-controller-manager)"
            ),
            Flavour::K3s => format!(
                "set kube-controller-manager-arg: [\"controllers={value}\"] in {path} and restart k3s"
            ),
            Flavour::Rke2 => format!(
                "set kube-controller-manager-arg: [\"controllers={value}\"] in {path} and restart rke2-server"
            ),
            Flavour::K0s => format!(
                "set spec.controllerManager.extraArgs.controllers: \"{value}\" in {path} and restart k0s (k0s stop; k0s start)"
            ),
            Flavour::MicroK8s => format!(
                "put --controllers={value} on a line of its own in {path} (instead of any other --controllers line) and restart MicroK8s (snap restart microk8s)"
            ),
        }
    }
}

/// The flag kube-controller-manager reads its feature gates from (`Name=true,Other=false`).
const FEATURE_GATES: &str = "feature-gates";

/// What a host file sets `--controllers` (and `--feature-gates`) to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Setting {
    /// The value kube-controller-manager runs with; `None`: no flag, every default controller.
    pub(crate) value: Option<String>,
    /// How the report shows it.
    pub(crate) shown: String,
    /// `--feature-gates` as the file gives it; `None`: no flag.
    pub(crate) feature_gates: Option<String>,
}

impl Setting {
    fn flag(value: Option<String>) -> Setting {
        let shown = match &value {
            Some(v) => format!("--controllers={v}"),
            None => "no --controllers (every default controller runs)".to_string(),
        };
        Setting {
            value,
            shown,
            feature_gates: None,
        }
    }
}

/// A host file that exists: what it sets, or why it could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) flavour: Flavour,
    pub(crate) path: PathBuf,
    pub(crate) setting: Result<Setting, String>,
}

/// Every host file of `host` that exists. `Err`: one of them is not the kind its option names;
/// the message names the file and what was expected.
pub(crate) fn read(host: &HostFiles) -> Result<Vec<Found>, String> {
    let mut found = Vec::new();
    for flavour in Flavour::ALL {
        let path = flavour.path(host);
        if !path.exists() {
            continue;
        }
        let setting = match std::fs::read_to_string(path) {
            Err(e) => Err(format!("cannot read: {e}")),
            Ok(text) => Ok(flavour.parse(&text).map_err(|e| {
                format!(
                    "{}: expected {} ({}): {}",
                    path.display(),
                    flavour.expected(),
                    flavour.option(),
                    e.replace(['\n', '\r'], " ")
                )
            })?),
        };
        found.push(Found {
            flavour,
            path: path.to_path_buf(),
            setting,
        });
    }
    Ok(found)
}

/// The value of `--{name}` in an argument list, in either spelling; the last one wins, as with
/// any flag.
fn flag_value(args: &[String], name: &str) -> Result<Option<String>, String> {
    let mut found = None;
    let mut iter = args.iter();
    let (joined, alone) = (format!("--{name}="), format!("--{name}"));
    while let Some(arg) = iter.next() {
        if let Some(v) = arg.strip_prefix(&joined) {
            found = Some(v.to_string());
        } else if *arg == alone {
            found = Some(
                iter.next()
                    .cloned()
                    .ok_or_else(|| format!("{alone} without a value"))?,
            );
        }
    }
    Ok(found)
}

/// The `--controllers` value of a kubeadm static-pod manifest (`None`: the flag is absent).
#[cfg(test)]
pub(crate) fn kubeadm_controllers(yaml: &str) -> Result<Option<String>, String> {
    flag_value(&kubeadm_args(yaml)?, "controllers")
}

/// The command and arguments of a kubeadm static-pod manifest's kube-controller-manager.
fn kubeadm_args(yaml: &str) -> Result<Vec<String>, String> {
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
    Ok(args)
}

/// The `controllers=` entry of `kube-controller-manager-arg` in a k3s or rke2 config file.
#[cfg(test)]
pub(crate) fn k3s_controllers(yaml: &str) -> Result<Option<String>, String> {
    Ok(k3s_flag(&k3s_args(yaml)?, "controllers"))
}

/// The last `{name}=` entry of a k3s or rke2 `kube-controller-manager-arg` list.
fn k3s_flag(args: &[String], name: &str) -> Option<String> {
    let prefix = format!("{name}=");
    args.iter()
        .filter_map(|a| a.trim_start_matches('-').strip_prefix(&prefix))
        .map(str::to_string)
        .next_back()
}

/// `kube-controller-manager-arg` of a k3s or rke2 config file (empty when absent).
fn k3s_args(yaml: &str) -> Result<Vec<String>, String> {
    if yaml.trim().is_empty() {
        return Ok(Vec::new());
    }
    let doc: Value = serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())?;
    if !doc.is_mapping() {
        return Err("not a mapping of settings".into());
    }
    if let Some(kind) = doc.get("kind") {
        return Err(format!(
            "found a Kubernetes object (kind {}), not server settings",
            kind.as_str().unwrap_or("?")
        ));
    }
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
    Ok(args)
}

/// `spec.controllerManager.extraArgs.{name}` of a k0s ClusterConfig already read as one by
/// [`k0s_controllers`] (`None`: absent; a value that is not a string is refused).
fn k0s_extra_arg(yaml: &str, name: &str) -> Result<Option<String>, String> {
    let doc: Value = serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())?;
    match doc
        .get("spec")
        .and_then(|s| s.get("controllerManager"))
        .and_then(|c| c.get("extraArgs"))
        .and_then(|a| a.get(name))
    {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!(
            "spec.controllerManager.extraArgs.{name}: must be a string"
        )),
    }
}

/// `spec.controllerManager.extraArgs.controllers` of a k0s ClusterConfig (flag names without
/// dashes, as k0s writes them); without it, k0s's own default. (`rawArgs`, appended verbatim
/// by newer k0s, is not read.)
pub(crate) fn k0s_controllers(yaml: &str) -> Result<Setting, String> {
    let doc: Value = serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())?;
    let field = |key: &str| doc.get(key).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    // Early k0s releases called the kind Cluster.
    if !api_version.starts_with("k0s.k0sproject.io/")
        || !matches!(kind, "ClusterConfig" | "Cluster")
    {
        return Err(format!("found apiVersion {api_version:?}, kind {kind:?}"));
    }
    let extra_args = doc
        .get("spec")
        .and_then(|s| s.get("controllerManager"))
        .and_then(|c| c.get("extraArgs"));
    let value = match extra_args {
        None | Some(Value::Null) => None,
        Some(Value::Mapping(m)) => match m.get("controllers") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                return Err(
                    "spec.controllerManager.extraArgs.controllers: must be a string".into(),
                );
            }
        },
        Some(_) => return Err("spec.controllerManager.extraArgs: must be a map".into()),
    };
    Ok(match value {
        Some(v) => Setting {
            shown: format!("spec.controllerManager.extraArgs.controllers {v:?}"),
            value: Some(v),
            feature_gates: None,
        },
        None => Setting {
            shown: format!(
                "no controllers in spec.controllerManager.extraArgs: k0s passes --controllers={K0S_DEFAULT_CONTROLLERS}"
            ),
            value: Some(K0S_DEFAULT_CONTROLLERS.to_string()),
            feature_gates: None,
        },
    })
}

/// `--controllers` in MicroK8s' arguments file.
#[cfg(test)]
pub(crate) fn microk8s_controllers(text: &str) -> Result<Option<String>, String> {
    flag_value(&microk8s_args(text)?, "controllers")
}

/// MicroK8s' arguments file read as kubelite reads it: blank lines and `#` comments skipped,
/// quotes removed, each line split at spaces.
fn microk8s_args(text: &str) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.replace(['"', '\''], "");
        if !line.starts_with("--") {
            return Err(format!("line {} is {line:?}, not a --flag", i + 1));
        }
        args.extend(
            line.split(' ')
                .filter(|a| !a.is_empty())
                .map(str::to_string),
        );
    }
    Ok(args)
}

#[cfg(test)]
#[path = "host_files_tests.rs"]
mod tests;
