//! The effective configuration as TOML (`check-config`) and key-by-key differences (SIGHUP).
//!
//! Both are built from one flat list of `(section, key, value)`, so the printed file, the reload
//! log and the parser cannot drift apart: a test reads the printed file back and compares.

use std::fmt::Write as _;

use log::LevelFilter;

use super::{ApiSource, Config, format_duration};
use crate::controller::condition_taints::ConditionTaint;
use crate::controller::pools::Pool;

/// One key whose value differs between two configurations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigChange {
    /// Dotted key, `api.qps`.
    pub(crate) key: String,
    /// TOML spelling of the old and new value; `None` when unset.
    pub(crate) old: Option<String>,
    pub(crate) new: Option<String>,
}

impl ConfigChange {
    /// Keys read once at start-up: connections and identities are built from them.
    pub(crate) fn needs_restart(&self) -> bool {
        self.key.starts_with("api.")
            || self.key.starts_with("leader_election.")
            || self.key == "metrics_address"
            || self.key == "log_format"
            || self.key == "control_socket"
    }
}

impl std::fmt::Display for ConfigChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(unset)".to_string());
        write!(f, "{} {} -> {}", self.key, show(&self.old), show(&self.new))
    }
}

struct Entry {
    section: Option<&'static str>,
    key: &'static str,
    value: Option<String>,
}

fn entries(c: &Config) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut put = |section, key, value: Option<String>| {
        out.push(Entry {
            section,
            key,
            value,
        })
    };
    for (key, value) in super::keys::top_level_entries(c) {
        put(None, key, value);
    }

    let api = Some("api");
    let a = &c.api;
    let path = |p: &std::path::Path| string(&p.to_string_lossy());
    let (kubeconfig, context, in_cluster) = match &a.source {
        ApiSource::Kubeconfig { path: p, context } => {
            (Some(path(p)), context.as_deref().map(string), false)
        }
        ApiSource::InCluster => (None, None, true),
        ApiSource::Explicit { .. } => (None, None, false),
    };
    put(api, "kubeconfig", kubeconfig);
    put(api, "context", context);
    put(api, "in_cluster", Some(in_cluster.to_string()));
    let (server, ca, cert, key, token) = match &a.source {
        ApiSource::Explicit {
            server,
            certificate_authority,
            client_certificate,
            client_key,
            token_file,
        } => (
            Some(string(server)),
            certificate_authority.as_deref().map(path),
            client_certificate.as_deref().map(path),
            client_key.as_deref().map(path),
            token_file.as_deref().map(path),
        ),
        _ => (None, None, None, None, None),
    };
    put(api, "server", server);
    put(api, "certificate_authority", ca);
    put(api, "client_certificate", cert);
    put(api, "client_key", key);
    put(api, "token_file", token);
    for (key, value) in super::keys::api_entries(a) {
        put(api, key, value);
    }

    for (key, value) in super::keys::leader_election_entries(&c.leader_election) {
        put(Some("leader_election"), key, value);
    }

    for (key, value) in super::keys::fencing_entries(&c.fencing) {
        put(Some("fencing"), key, value);
    }
    out
}

pub(super) fn to_toml(c: &Config) -> String {
    let mut out = String::new();
    let mut section = None;
    for e in entries(c) {
        if e.section != section {
            section = e.section;
            if let Some(s) = section {
                let _ = write!(out, "\n[{s}]\n");
            }
        }
        match e.value {
            Some(v) => {
                let _ = writeln!(out, "{} = {v}", e.key);
            }
            // Printed as a comment so the output stays a valid config that reads back the same.
            None => {
                let _ = writeln!(out, "# {} is not set{}", e.key, unset_meaning(e.key));
            }
        }
    }
    for pool in &c.controller.pools {
        let _ = write!(out, "\n[[pool]]\n{}", pool_body(pool));
    }
    for rule in &c.controller.condition_taints {
        let _ = write!(out, "\n[[condition_taint]]\n{}", condition_taint_body(rule));
    }
    out
}

/// A `[[pool]]` table's keys, one per line; unset overrides are left out (they inherit).
fn pool_body(p: &Pool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "name = {}", string(&p.name));
    if !p.match_labels.is_empty() {
        let pairs: Vec<String> = p
            .match_labels
            .iter()
            .map(|(k, v)| format!("{} = {}", string(k), string(v)))
            .collect();
        let _ = writeln!(out, "match_labels = {{ {} }}", pairs.join(", "));
    }
    if !p.match_expressions.is_empty() {
        let exprs: Vec<String> = p
            .match_expressions
            .iter()
            .map(|r| {
                let values = if r.values.is_empty() {
                    String::new()
                } else {
                    let v: Vec<String> = r.values.iter().map(|v| string(v)).collect();
                    format!(", values = [{}]", v.join(", "))
                };
                format!(
                    "{{ key = {}, operator = {}{values} }}",
                    string(&r.key),
                    string(r.operator.as_str())
                )
            })
            .collect();
        let _ = writeln!(out, "match_expressions = [{}]", exprs.join(", "));
    }
    for (key, value) in super::keys::pool_entries(p) {
        if let Some(v) = value {
            let _ = writeln!(out, "{key} = {v}");
        }
    }
    out
}

fn condition_taint_body(t: &ConditionTaint) -> String {
    format!(
        "condition = {}\nstatus = {}\nkey = {}\nvalue = {}\neffect = {}\n",
        string(&t.condition),
        string(t.status.as_str()),
        string(&t.key),
        string(&t.value),
        string(t.effect.as_str())
    )
}

/// A list of tables as one line, for the reload log.
fn one_line(bodies: Vec<String>) -> Option<String> {
    if bodies.is_empty() {
        return None;
    }
    let tables: Vec<String> = bodies
        .iter()
        .map(|b| format!("{{ {} }}", b.trim_end().replace('\n', ", ")))
        .collect();
    Some(format!("[{}]", tables.join(", ")))
}

/// What leaving an optional key out means, where that is not obvious.
fn unset_meaning(key: &str) -> &'static str {
    match key {
        "metrics_address" => ": no metrics endpoint",
        "context" => ": the kubeconfig's current-context",
        "identity" => ": hostname + \"_\" + a random suffix, chosen at start",
        "command" => ": no fence command (fencing needs one)",
        "max_unhealthy" => ": no brake on mass decisions (upstream)",
        "default_toleration_seconds" => {
            ": pods keep the tolerations admission gave them (upstream)"
        }
        "disruption_domain" => ": the zones (region + zone labels)",
        "hold_max" => ": a held domain waits until it recovers",
        "on_command" => ": no power-on command (power-cycle needs one)",
        "step" => ": one step, command with timeout",
        "status_command" => ": the fence agent's credentials are not checked",
        _ => "",
    }
}

pub(super) fn changes(old: &Config, new: &Config) -> Vec<ConfigChange> {
    let mut out: Vec<ConfigChange> = entries(old)
        .into_iter()
        .zip(entries(new))
        .filter(|(o, n)| o.value != n.value)
        .map(|(o, n)| ConfigChange {
            key: match o.section {
                Some(s) => format!("{s}.{}", o.key),
                None => o.key.to_string(),
            },
            old: o.value,
            new: n.value,
        })
        .collect();
    if old.controller.pools != new.controller.pools {
        out.push(ConfigChange {
            key: "pool".to_string(),
            old: one_line(old.controller.pools.iter().map(pool_body).collect()),
            new: one_line(new.controller.pools.iter().map(pool_body).collect()),
        });
    }
    if old.controller.condition_taints != new.controller.condition_taints {
        let bodies = |c: &Config| {
            c.controller
                .condition_taints
                .iter()
                .map(condition_taint_body)
                .collect()
        };
        out.push(ConfigChange {
            key: "condition_taint".to_string(),
            old: one_line(bodies(old)),
            new: one_line(bodies(new)),
        });
    }
    out
}

pub(crate) fn level_name(level: LevelFilter) -> &'static str {
    match level {
        LevelFilter::Off => "off",
        LevelFilter::Error => "error",
        LevelFilter::Warn => "warn",
        LevelFilter::Info => "info",
        LevelFilter::Debug => "debug",
        LevelFilter::Trace => "trace",
    }
}

pub(super) fn dur(d: std::time::Duration) -> String {
    string(&format_duration(d))
}

pub(super) fn string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

pub(super) fn float(x: f64) -> String {
    toml::Value::Float(x).to_string()
}
