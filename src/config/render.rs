//! The effective configuration as TOML (`check-config`) and key-by-key differences (SIGHUP).
//!
//! Both are built from one flat list of `(section, key, value)`, so the printed file, the reload
//! log and the parser cannot drift apart: a test reads the printed file back and compares.

use std::fmt::Write as _;

use log::LevelFilter;

use super::partitions::domain_text;
use super::{ApiSource, Config, DumpFormat, LogFormat, format_duration};
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
    let top = None;
    put(top, "node_monitor_period", Some(dur(c.node_monitor_period)));
    put(
        top,
        "node_monitor_grace_period",
        Some(dur(c.node_monitor_grace_period)),
    );
    put(
        top,
        "node_startup_grace_period",
        Some(dur(c.node_startup_grace_period)),
    );
    put(
        top,
        "node_eviction_rate",
        Some(float(c.node_eviction_rate.as_f64())),
    );
    put(
        top,
        "secondary_node_eviction_rate",
        Some(float(c.secondary_node_eviction_rate.as_f64())),
    );
    put(
        top,
        "large_cluster_size_threshold",
        Some(c.large_cluster_size_threshold.to_string()),
    );
    put(
        top,
        "unhealthy_zone_threshold",
        Some(float(c.unhealthy_zone_threshold)),
    );
    put(
        top,
        "taint_based_eviction",
        Some(c.taint_based_eviction.to_string()),
    );
    put(
        top,
        "pod_eviction_timeout",
        Some(dur(c.pod_eviction_timeout)),
    );
    put(top, "dry_run", Some(c.dry_run.to_string()));
    put(top, "log_level", Some(string(level_name(c.log_level))));
    put(
        top,
        "dump_format",
        Some(string(match c.dump_format {
            DumpFormat::Text => "text",
            DumpFormat::Json => "json",
        })),
    );
    put(
        top,
        "metrics_address",
        c.metrics_address.map(|a| string(&a.to_string())),
    );
    put(
        top,
        "log_format",
        Some(string(match c.log_format {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        })),
    );
    put(
        top,
        "control_socket",
        Some(string(
            &c.control_socket
                .as_deref()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
        )),
    );
    put(top, "autonomy", Some(c.autonomy.to_string()));
    put(top, "disruption_cooldown", Some(dur(c.disruption_cooldown)));
    put(top, "early_suspects", Some(c.early_suspects.to_string()));
    put(top, "max_unhealthy", c.max_unhealthy.map(|m| m.to_toml()));
    put(
        top,
        "admission_default_toleration_seconds",
        Some(c.admission_default_toleration_seconds.to_string()),
    );
    put(
        top,
        "default_toleration_seconds",
        c.default_toleration_seconds.map(|s| s.to_string()),
    );
    put(
        top,
        "mark_pods_not_ready",
        Some(string(c.mark_pods_not_ready.as_str())),
    );
    put(
        top,
        "disruption_domain",
        (!c.disruption_domain.is_empty()).then(|| domain_text(&c.disruption_domain)),
    );
    put(
        top,
        "full_disruption",
        Some(string(c.full_disruption.as_str())),
    );
    put(top, "hold_max", c.hold_max.map(dur));

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
    put(
        api,
        "allow_insecure_skip_tls_verify",
        Some(a.allow_insecure_skip_tls_verify.to_string()),
    );
    put(api, "qps", Some(float(a.qps.as_f64())));
    put(api, "burst", Some(a.burst.to_string()));
    put(api, "request_timeout", Some(dur(a.request_timeout)));
    put(api, "watch_idle_timeout", Some(dur(a.watch_idle_timeout)));
    put(api, "content_type", Some(string(a.content_type.as_str())));

    let le = Some("leader_election");
    let l = &c.leader_election;
    put(le, "enabled", Some(l.enabled.to_string()));
    put(le, "namespace", Some(string(&l.namespace)));
    put(le, "name", Some(string(&l.name)));
    put(le, "lease_duration", Some(dur(l.lease_duration)));
    put(le, "renew_deadline", Some(dur(l.renew_deadline)));
    put(le, "retry_period", Some(dur(l.retry_period)));
    put(le, "identity", l.identity.as_deref().map(string));

    let fe = Some("fencing");
    let f = &c.fencing;
    put(fe, "enabled", Some(f.enabled.to_string()));
    let argv: Vec<String> = f.command.iter().map(|a| string(a)).collect();
    put(
        fe,
        "command",
        (!argv.is_empty()).then(|| format!("[{}]", argv.join(", "))),
    );
    put(fe, "after", Some(dur(f.after)));
    put(fe, "timeout", Some(dur(f.timeout)));
    put(fe, "max_concurrent", Some(f.max_concurrent.to_string()));
    let labels: Vec<String> = f
        .match_labels
        .iter()
        .map(|(k, v)| format!("{} = {}", string(k), string(v)))
        .collect();
    put(
        fe,
        "match_labels",
        Some(format!("{{ {} }}", labels.join(", "))),
    );
    put(fe, "retry_backoff", Some(dur(f.retry_backoff)));
    put(fe, "retry_backoff_max", Some(dur(f.retry_backoff_max)));
    put(
        fe,
        "remove_out_of_service_on_recovery",
        Some(f.remove_out_of_service_on_recovery.to_string()),
    );
    put(fe, "skip_cordoned", Some(f.skip_cordoned.to_string()));
    put(fe, "max_pause", Some(dur(f.max_pause)));
    put(fe, "mode", Some(string(f.mode.as_str())));
    let on: Vec<String> = f.on_command.iter().map(|a| string(a)).collect();
    put(
        fe,
        "on_command",
        (!on.is_empty()).then(|| format!("[{}]", on.join(", "))),
    );
    put(fe, "recover_timeout", Some(dur(f.recover_timeout)));
    let steps: Vec<String> = f
        .steps
        .iter()
        .map(|s| {
            let argv: Vec<String> = s.command.iter().map(|a| string(a)).collect();
            format!(
                "{{ command = [{}], timeout = {} }}",
                argv.join(", "),
                dur(s.timeout)
            )
        })
        .collect();
    put(
        fe,
        "step",
        (!steps.is_empty()).then(|| format!("[{}]", steps.join(", "))),
    );
    let status: Vec<String> = f.status_command.iter().map(|a| string(a)).collect();
    put(
        fe,
        "status_command",
        (!status.is_empty()).then(|| format!("[{}]", status.join(", "))),
    );
    put(fe, "status_interval", Some(dur(f.status_interval)));
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
    for pool in &c.pools {
        let _ = write!(out, "\n[[pool]]\n{}", pool_body(pool));
    }
    for rule in &c.condition_taints {
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
    if let Some(d) = p.node_monitor_grace_period {
        let _ = writeln!(out, "node_monitor_grace_period = {}", dur(d));
    }
    if let Some(d) = p.node_startup_grace_period {
        let _ = writeln!(out, "node_startup_grace_period = {}", dur(d));
    }
    if let Some(m) = p.mark_pods_not_ready {
        let _ = writeln!(out, "mark_pods_not_ready = {}", string(m.as_str()));
    }
    if let Some(r) = p.node_eviction_rate {
        let _ = writeln!(out, "node_eviction_rate = {}", float(r.as_f64()));
    }
    if let Some(r) = p.secondary_node_eviction_rate {
        let _ = writeln!(out, "secondary_node_eviction_rate = {}", float(r.as_f64()));
    }
    if let Some(m) = p.max_unhealthy {
        let _ = writeln!(out, "max_unhealthy = {}", m.to_toml());
    }
    if let Some(t) = p.default_toleration_seconds {
        let _ = writeln!(out, "default_toleration_seconds = {t}");
    }
    if let Some(keys) = &p.disruption_domain {
        let _ = writeln!(out, "disruption_domain = {}", domain_text(keys));
    }
    if let Some(m) = p.full_disruption {
        let _ = writeln!(out, "full_disruption = {}", string(m.as_str()));
    }
    if let Some(d) = p.hold_max {
        let _ = writeln!(out, "hold_max = {}", dur(d));
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
    if old.pools != new.pools {
        out.push(ConfigChange {
            key: "pool".to_string(),
            old: one_line(old.pools.iter().map(pool_body).collect()),
            new: one_line(new.pools.iter().map(pool_body).collect()),
        });
    }
    if old.condition_taints != new.condition_taints {
        let bodies = |c: &Config| {
            c.condition_taints
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

fn dur(d: std::time::Duration) -> String {
    string(&format_duration(d))
}

fn string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn float(x: f64) -> String {
    toml::Value::Float(x).to_string()
}
