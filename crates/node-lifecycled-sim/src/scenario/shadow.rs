//! A scenario with `incumbent = true`: the incumbent started beside the daemon, the daemon in
//! shadow mode, its report asked over the control socket at the end and judged by the
//! scenario's `[[shadow_expect]]`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::{Outcome, ShadowExpect};

/// The classes and kinds of the daemon's shadow report, as it names them (its JSON and text).
pub const SHADOW_CLASSES: [&str; 5] = ["same", "earlier", "later", "only_ours", "only_theirs"];
pub const SHADOW_KINDS: [&str; 5] = [
    "node_unknown",
    "taint_added",
    "taint_removed",
    "pod_not_ready",
    "pod_deletion",
];
use crate::cluster::Cluster;
use crate::incumbent::{Incumbent, IncumbentConfig};
use node_lifecycled::config::Config;

/// The daemon's keys shadow mode needs: on, its file and control socket in the work dir.
pub(super) fn configure(config: &mut toml::Table, dir: &Path) {
    config.insert("shadow".into(), toml::Value::Boolean(true));
    for (key, file) in [
        ("shadow_file", "shadow.json"),
        ("control_socket", "control.sock"),
    ] {
        config
            .entry(key)
            .or_insert_with(|| toml::Value::String(dir.join(file).display().to_string()));
    }
}

/// The incumbent with the daemon's own timing (the keys are upstream's flags).
pub(super) fn start(cluster: &Cluster, config: &Config) -> Result<Incumbent, String> {
    let c = &config.controller;
    Incumbent::start(
        cluster,
        IncumbentConfig {
            period: c.node_monitor_period,
            grace: c.node_monitor_grace_period,
            eviction_rate: c.node_eviction_rate.as_f64(),
            large_cluster_size_threshold: c.large_cluster_size_threshold as usize,
            unhealthy_zone_threshold: c.unhealthy_zone_threshold,
        },
    )
    .map_err(|e| format!("cannot start the incumbent: {e}"))
}

/// The daemon's control socket, from its config.
pub(super) fn socket(config: &Config) -> Option<PathBuf> {
    config.control_socket.clone()
}

/// `shadow report` in `format`, or the error in words.
pub(super) fn report(socket: &Path, format: &str) -> String {
    node_lifecycled::runtime::control_socket::ask(
        socket,
        &format!("shadow report --format {format}"),
        Duration::from_secs(5),
    )
    .unwrap_or_else(|e| format!("error: {e}"))
}

/// Each `[[shadow_expect]]` against the report (JSON).
pub(super) fn judge(expects: &[ShadowExpect], report: &Value) -> Vec<Outcome> {
    expects.iter().map(|e| judge_one(e, report)).collect()
}

fn judge_one(e: &ShadowExpect, report: &Value) -> Outcome {
    let kind_ok = |k: &str| e.kind.as_deref().is_none_or(|want| want == k);
    let count: u64 = match &e.rule {
        None => report["counts"][e.class.as_str()]
            .as_object()
            .map_or(0, |kinds| {
                kinds
                    .iter()
                    .filter(|(k, _)| kind_ok(k))
                    .filter_map(|(_, n)| n.as_u64())
                    .sum()
            }),
        Some(rule) => report["divergences"].as_array().map_or(0, |ds| {
            ds.iter()
                .filter(|d| d["class"] == e.class.as_str())
                .filter(|d| kind_ok(d["kind"].as_str().unwrap_or("")))
                .filter(|d| match d["rule"].as_str() {
                    Some(r) => r == rule,
                    None => rule == "none",
                })
                .count() as u64
        }),
    };
    let held = count >= e.at_least as u64 && e.at_most.is_none_or(|m| count <= m as u64);
    let bounds = match e.at_most {
        Some(m) if m == e.at_least => format!("exactly {m}"),
        Some(m) => format!("{}..={m}", e.at_least),
        None => format!("at least {}", e.at_least),
    };
    Outcome {
        held,
        expected: format!(
            "shadow report: {bounds} {} {}{}",
            e.class,
            e.kind.as_deref().unwrap_or("pairs"),
            e.rule
                .as_ref()
                .map_or(String::new(), |r| format!(" with rule {r:?}"))
        ),
        seen: format!("{count}"),
        line: e.line,
    }
}
