//! `node-lifecycled doctor`: one-shot checks for the switch-over from kube-controller-manager's
//! node lifecycle controllers to this daemon, run on a control-plane host before and after.
//!
//! Each check is one line: `ok` / `warn` / `fail`, what was found and, unless ok, what to do.
//! Groups, one file each: `cluster` (connection, TLS, identity, server version, clock skew),
//! `permissions` (every rule of conf/rbac.yaml asked with SelfSubjectAccessReview),
//! `controllers` (is kube-controller-manager's own node lifecycle / taint eviction controller
//! still enabled on this host, from the files `host_files` reads: kubeadm, k3s, rke2, k0s,
//! MicroK8s), `fleet` (zones, exclusions, planned maintenance and readiness gates, autonomy
//! annotations, nodes already Unknown or tainted, kubelet lease durations). A one-shot CLI:
//! blocking calls, no event loop.

pub(crate) mod cluster;
pub(crate) mod controllers;
pub(crate) mod fence_sample;
pub(crate) mod fleet;
pub(crate) mod host_files;
pub mod pause;
pub(crate) mod permissions;

use std::path::PathBuf;

use serde::Serialize;

use crate::config::Config;
use crate::kube::ApiClient;

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

impl Level {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warn => "warn",
            Level::Fail => "fail",
        }
    }
}

/// One line of the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Check {
    pub(crate) group: &'static str,
    /// What was checked, within the group ("server", "patch nodes", "zone eu-1a").
    pub(crate) name: String,
    pub(crate) level: Level,
    /// What was found.
    pub(crate) message: String,
    /// What to do about it; empty when nothing is to be done.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) action: String,
}

impl Check {
    pub(crate) fn new(
        group: &'static str,
        name: impl Into<String>,
        level: Level,
        message: impl Into<String>,
    ) -> Check {
        Check {
            group,
            name: name.into(),
            level,
            message: message.into(),
            action: String::new(),
        }
    }

    pub(crate) fn ok(
        group: &'static str,
        name: impl Into<String>,
        message: impl Into<String>,
    ) -> Check {
        Check::new(group, name, Level::Ok, message)
    }

    pub(crate) fn warn(
        group: &'static str,
        name: impl Into<String>,
        message: impl Into<String>,
    ) -> Check {
        Check::new(group, name, Level::Warn, message)
    }

    pub(crate) fn fail(
        group: &'static str,
        name: impl Into<String>,
        message: impl Into<String>,
    ) -> Check {
        Check::new(group, name, Level::Fail, message)
    }

    pub(crate) fn action(mut self, action: impl Into<String>) -> Check {
        self.action = action.into();
        self
    }

    /// `fail  permissions/patch nodes: not allowed -> kubectl apply -f ...`: one line whatever
    /// the message holds.
    pub(crate) fn line(&self) -> String {
        let mut line = format!(
            "{:<4}  {}/{}: {}",
            self.level.as_str(),
            self.group,
            self.name,
            self.message
        );
        if !self.action.is_empty() {
            line.push_str(" -> ");
            line.push_str(&self.action);
        }
        line.replace(['\n', '\r'], " ")
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
}

/// Where the host's kube-controller-manager configuration may be, one file per distribution
/// (`--kcm-manifest`, `--k3s-config`, … name others).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFiles {
    pub kubeadm_manifest: PathBuf,
    pub k3s_config: PathBuf,
    pub rke2_config: PathBuf,
    pub k0s_config: PathBuf,
    pub microk8s_args: PathBuf,
}

impl Default for HostFiles {
    fn default() -> Self {
        HostFiles {
            kubeadm_manifest: PathBuf::from(host_files::KUBEADM_MANIFEST),
            k3s_config: PathBuf::from(host_files::K3S_CONFIG),
            rke2_config: PathBuf::from(host_files::RKE2_CONFIG),
            k0s_config: PathBuf::from(host_files::K0S_CONFIG),
            microk8s_args: PathBuf::from(host_files::MICROK8S_ARGS),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub config: PathBuf,
    pub kubeconfig: Option<PathBuf>,
    pub output: Output,
    pub host: HostFiles,
}

/// Everything checked, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub(crate) checks: Vec<Check>,
}

impl Report {
    pub(crate) fn push(&mut self, check: Check) {
        self.checks.push(check);
    }

    pub fn worst(&self) -> Level {
        self.checks
            .iter()
            .map(|c| c.level)
            .max()
            .unwrap_or(Level::Ok)
    }

    pub(crate) fn count(&self, level: Level) -> usize {
        self.checks.iter().filter(|c| c.level == level).count()
    }

    pub fn to_text(&self) -> String {
        let mut text: String = self.checks.iter().map(|c| c.line() + "\n").collect();
        text.push_str(&format!(
            "{} ok, {} warn, {} fail\n",
            self.count(Level::Ok),
            self.count(Level::Warn),
            self.count(Level::Fail)
        ));
        text
    }

    pub fn to_json(&self) -> String {
        let summary = serde_json::json!({
            "ok": self.count(Level::Ok),
            "warn": self.count(Level::Warn),
            "fail": self.count(Level::Fail),
        });
        let body = serde_json::json!({
            "checks": serde_json::to_value(&self.checks).unwrap_or_default(),
            "summary": summary,
        });
        body.to_string()
    }
}

/// Runs every check, then with `fence_sample` the status command against that many nodes.
/// `Err` is a configuration error (the file, the kubeconfig it names, a host file that is not the
/// kind its option names): the caller exits 78 as the daemon would.
pub fn run_sampled(
    options: &Options,
    config: &Config,
    fence_sample: Option<usize>,
) -> Result<Report, String> {
    let mut report = Report::default();
    // Before the network: a wrong file given is said at once, alone.
    let host = host_files::read(&options.host)?;
    let (mut client, connection) = cluster::connect(options, config)?;
    let server = cluster::check_server(&mut client, &connection, config, &mut report);
    let version = server.as_ref().and_then(|s| s.version);
    if server.is_some() {
        cluster::check_identity(&mut client, version, &mut report);
        permissions::check(&mut client, config, &mut report);
    }
    controllers::check(&host, &options.host, version, config.shadow, &mut report);
    if server.is_some() {
        fleet::check(&mut client, config, &mut report);
        if let Some(n) = fence_sample {
            fence_sample::check(&mut client, config, n, &mut report);
        }
    }
    Ok(report)
}

/// A client for the one-shot checks: the daemon's connection settings, no throttle.
pub(crate) fn client_for(
    connection: &crate::kube::Connection,
    config: &Config,
) -> Result<ApiClient, String> {
    let settings = crate::kube::ClientSettings {
        qps: None,
        ..crate::runtime::settings::client_settings(&config.api)
    };
    let clock = crate::runtime::Clock::start();
    ApiClient::new(connection, &settings, Box::new(move || clock.now())).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_fails_when_any_check_fails_and_renders_one_line_per_check() {
        let mut report = Report::default();
        report.push(Check::ok("cluster", "server", "v1.20.2"));
        assert_eq!(report.worst(), Level::Ok);
        report.push(
            Check::warn("fleet", "zones", "one zone\nonly").action("label nodes with a zone"),
        );
        assert_eq!(report.worst(), Level::Warn);
        report.push(Check::fail("permissions", "patch nodes", "not allowed"));
        assert_eq!(report.worst(), Level::Fail);
        let text = report.to_text();
        assert_eq!(
            text,
            "ok    cluster/server: v1.20.2\n\
             warn  fleet/zones: one zone only -> label nodes with a zone\n\
             fail  permissions/patch nodes: not allowed\n\
             1 ok, 1 warn, 1 fail\n"
        );
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(json["summary"]["fail"], 1);
        assert_eq!(json["checks"][2]["level"], "fail");
        assert_eq!(json["checks"][1]["action"], "label nodes with a zone");
        assert!(json["checks"][0].get("action").is_none());
    }
}
