//! The file as written: every key optional, every value with its position.
//!
//! serde does the shape checks (unknown keys, wrong types) and `deny_unknown_fields` makes a typo
//! an error instead of a silently ignored setting; `Spanned` keeps each value's byte range so the
//! validation in `mod.rs` can name the line of a value that is well-typed but out of range.

use serde::Deserialize;
use toml::Spanned;

use super::partitions::{ModeOrBool, OneOrMany};

pub(super) type Field<T> = Option<Spanned<T>>;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(crate) node_monitor_period: Field<DurationText>,
    pub(crate) node_monitor_grace_period: Field<DurationText>,
    pub(crate) node_startup_grace_period: Field<DurationText>,
    pub(crate) node_eviction_rate: Field<f64>,
    pub(crate) secondary_node_eviction_rate: Field<f64>,
    pub(crate) large_cluster_size_threshold: Field<i64>,
    pub(crate) unhealthy_zone_threshold: Field<f64>,
    pub(crate) taint_based_eviction: Field<bool>,
    pub(crate) pod_eviction_timeout: Field<DurationText>,
    pub(crate) dry_run: Field<bool>,
    pub(crate) log_level: Field<String>,
    pub(crate) dump_format: Field<String>,
    pub(crate) metrics_address: Field<String>,
    pub(crate) log_format: Field<String>,
    pub(crate) control_socket: Field<String>,
    pub(crate) autonomy: Field<bool>,
    pub(crate) disruption_cooldown: Field<DurationText>,
    pub(crate) early_suspects: Field<bool>,
    pub(crate) max_unhealthy: Field<super::brake::RawMaxUnhealthy>,
    pub(crate) admission_default_toleration_seconds: Field<i64>,
    pub(crate) default_toleration_seconds: Field<i64>,
    pub(crate) mark_pods_not_ready: Field<ModeOrBool>,
    pub(crate) disruption_domain: Field<OneOrMany>,
    pub(crate) full_disruption: Field<String>,
    pub(crate) hold_max: Field<DurationText>,
    #[serde(default)]
    pub(crate) api: RawApi,
    #[serde(default)]
    pub(crate) leader_election: RawLeaderElection,
    #[serde(default)]
    pub(crate) pool: Vec<Spanned<RawPool>>,
    #[serde(default)]
    pub(crate) condition_taint: Vec<Spanned<RawConditionTaint>>,
    #[serde(default)]
    pub(crate) fencing: RawFencing,
}

/// One `[[pool]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPool {
    pub(crate) name: Field<String>,
    pub(crate) match_labels: Field<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    pub(crate) match_expressions: Vec<Spanned<RawRequirement>>,
    pub(crate) node_monitor_grace_period: Field<DurationText>,
    pub(crate) node_startup_grace_period: Field<DurationText>,
    pub(crate) mark_pods_not_ready: Field<ModeOrBool>,
    pub(crate) node_eviction_rate: Field<f64>,
    pub(crate) secondary_node_eviction_rate: Field<f64>,
    pub(crate) max_unhealthy: Field<super::brake::RawMaxUnhealthy>,
    pub(crate) default_toleration_seconds: Field<i64>,
    pub(crate) disruption_domain: Field<OneOrMany>,
    pub(crate) full_disruption: Field<String>,
    pub(crate) hold_max: Field<DurationText>,
}

/// One entry of a pool's `match_expressions`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRequirement {
    pub(crate) key: Field<String>,
    pub(crate) operator: Field<String>,
    pub(crate) values: Field<Vec<String>>,
}

/// One `[[condition_taint]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConditionTaint {
    pub(crate) condition: Field<String>,
    pub(crate) status: Field<String>,
    pub(crate) key: Field<String>,
    pub(crate) value: Field<String>,
    pub(crate) effect: Field<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFencing {
    pub(crate) enabled: Field<bool>,
    pub(crate) command: Field<Vec<String>>,
    pub(crate) after: Field<DurationText>,
    pub(crate) timeout: Field<DurationText>,
    pub(crate) max_concurrent: Field<i64>,
    pub(crate) match_labels: Field<std::collections::BTreeMap<String, String>>,
    pub(crate) retry_backoff: Field<DurationText>,
    pub(crate) retry_backoff_max: Field<DurationText>,
    pub(crate) remove_out_of_service_on_recovery: Field<bool>,
    pub(crate) skip_cordoned: Field<bool>,
    pub(crate) max_pause: Field<DurationText>,
    pub(crate) mode: Field<String>,
    pub(crate) on_command: Field<Vec<String>>,
    pub(crate) recover_timeout: Field<DurationText>,
    pub(crate) step: Field<Vec<Spanned<RawFenceStep>>>,
    pub(crate) status_command: Field<Vec<String>>,
    pub(crate) status_interval: Field<DurationText>,
}

/// One `[[fencing.step]]`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFenceStep {
    pub(crate) command: Field<Vec<String>>,
    pub(crate) timeout: Field<DurationText>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApi {
    pub(crate) kubeconfig: Field<String>,
    pub(crate) context: Field<String>,
    pub(crate) in_cluster: Field<bool>,
    pub(crate) server: Field<String>,
    pub(crate) certificate_authority: Field<String>,
    pub(crate) client_certificate: Field<String>,
    pub(crate) client_key: Field<String>,
    pub(crate) token_file: Field<String>,
    pub(crate) allow_insecure_skip_tls_verify: Field<bool>,
    pub(crate) qps: Field<f64>,
    pub(crate) burst: Field<i64>,
    pub(crate) request_timeout: Field<DurationText>,
    pub(crate) watch_idle_timeout: Field<DurationText>,
    pub(crate) content_type: Field<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLeaderElection {
    pub(crate) enabled: Field<bool>,
    pub(crate) namespace: Field<String>,
    pub(crate) name: Field<String>,
    pub(crate) lease_duration: Field<DurationText>,
    pub(crate) renew_deadline: Field<DurationText>,
    pub(crate) retry_period: Field<DurationText>,
    pub(crate) identity: Field<String>,
}

/// A duration as written ("1m30s"); parsed in validation so the error can say why. Its own
/// type only to make serde's type error say what is expected instead of "a string".
pub(super) struct DurationText(pub String);

impl<'de> Deserialize<'de> for DurationText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = DurationText;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a duration in quotes, like \"5s\" or \"1m30s\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DurationText, E> {
                Ok(DurationText(v.to_string()))
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// 1-based line of a byte offset.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The dotted key a TOML line defines, with its enclosing `[section]`; used to name the key of
/// an error serde reports only by position. `None` for blank lines, comments and oddities.
pub(super) fn key_at_line(text: &str, line: usize) -> Option<String> {
    let mut section: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if trimmed.starts_with('[') {
            let name = trimmed
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim();
            if i + 1 == line {
                return Some(name.to_string());
            }
            section = Some(name.to_string());
            continue;
        }
        if i + 1 == line {
            let (key, _) = trimmed.split_once('=')?;
            let key = key.trim().trim_matches('"').trim_matches('\'');
            if key.is_empty() || key.starts_with('#') {
                return None;
            }
            return Some(match section {
                Some(s) => format!("{s}.{key}"),
                None => key.to_string(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_at_line_names_the_section() {
        let text = "a = 1\n# c\n[api]\nqps = 2\n\"burst\" = 3\n[leader_election]\n";
        assert_eq!(key_at_line(text, 1).as_deref(), Some("a"));
        assert_eq!(key_at_line(text, 2), None);
        assert_eq!(key_at_line(text, 3).as_deref(), Some("api"));
        assert_eq!(key_at_line(text, 4).as_deref(), Some("api.qps"));
        assert_eq!(key_at_line(text, 5).as_deref(), Some("api.burst"));
        assert_eq!(key_at_line(text, 6).as_deref(), Some("leader_election"));
        assert_eq!(key_at_line(text, 99), None);
        assert_eq!(line_of(text, 0), 1);
        assert_eq!(line_of(text, 6), 2);
        assert_eq!(line_of(text, 10_000), 7);
    }
}
