//! The SIGUSR1 state dump: a [`DaemonSnapshot`] as log lines for people, or as one JSON line for
//! log pipelines (`dump_format = "json"`).
//!
//! Text lines read `state dump <section>: key=value key=value ...`, values quoted logfmt-style
//! when they hold spaces, quotes or `=`, so a script can split them without guessing. Every line
//! stays under [`TEXT_LINE_MAX`] bytes: journald splits longer lines into several records, and a
//! record cut in half is unreadable to the script that greps it. Lists are capped (the
//! not-Ready nodes of a 5,000-node outage would bury the journal) and say how much was left out.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use super::snapshot::DaemonSnapshot;
use crate::config::{Config, DumpFormat, format_duration};
use crate::controller::{LegacyEviction, NodeDump, ZoneDump};
use crate::model::ConditionStatus;
use crate::time::Time;

/// Every text line starts with this, so `journalctl -u node-lifecycled | grep 'state dump'`
/// finds the whole dump.
pub const TEXT_PREFIX: &str = "state dump ";
/// Longest text line in bytes, leaving room for the logger's own prefix under 2 KiB.
pub const TEXT_LINE_MAX: usize = 1900;
/// A single value longer than this is cut (a taint list, an error message).
const VALUE_MAX: usize = 600;
/// Not-Ready nodes and zones listed in the text form.
pub const TEXT_NODES_SHOWN: usize = 50;
pub(crate) const TEXT_ZONES_SHOWN: usize = 100;
/// The JSON line stays under this (journald's LineMax is 48 KiB): lists shrink until it fits.
pub const JSON_LINE_MAX: usize = 40 * 1024;
/// Not-Ready nodes and zones the JSON form starts from before shrinking.
const JSON_NODES_SHOWN: usize = 100;
const JSON_ZONES_SHOWN: usize = 100;

mod json;

impl DaemonSnapshot {
    /// The dump in the configured format, one entry per log record.
    pub fn dump_lines(&self) -> Vec<String> {
        match self.config.dump_format {
            DumpFormat::Text => self.to_text_lines(),
            DumpFormat::Json => vec![self.to_json_line()],
        }
    }

    pub fn to_text_lines(&self) -> Vec<String> {
        let mut out = TextLines::default();
        self.text_version(&mut out);
        text_config(&mut out, self);
        self.text_leadership(&mut out);
        self.text_reflectors(&mut out);
        self.text_controller(&mut out);
        self.text_zones(&mut out);
        self.text_brakes(&mut out);
        self.text_not_ready(&mut out);
        self.text_evictions(&mut out);
        self.text_client(&mut out);
        self.text_memory(&mut out);
        self.text_loop(&mut out);
        out.lines
    }

    fn text_version(&self, out: &mut TextLines) {
        let b = &self.build;
        out.push(
            "version",
            vec![
                kv("version", b.version),
                kv("pid", b.pid),
                kv("started_at", b.started_at),
                kv("uptime", dur(b.uptime)),
                kv("now", self.now),
                kv("status", &self.status),
            ],
        );
    }

    fn text_leadership(&self, out: &mut TextLines) {
        let l = &self.leadership;
        out.push(
            "leadership",
            vec![
                kv("enabled", l.enabled),
                kv("identity", &l.identity),
                kv("holder", l.holder.as_deref().unwrap_or("none")),
                kv("is_leader", l.is_leader),
                kv("renew_age", opt_dur(l.renew_age)),
            ],
        );
    }

    fn text_reflectors(&self, out: &mut TextLines) {
        out.push("reflectors", vec![kv("count", self.reflectors.len())]);
        for r in &self.reflectors {
            out.push(
                "reflector",
                vec![
                    kv("resource", &r.resource),
                    kv("synced", r.synced),
                    kv(
                        "resource_version",
                        r.resource_version.as_deref().unwrap_or("none"),
                    ),
                    kv("last_event_age", opt_dur(r.last_event_age)),
                    kv("reconnects", r.reconnects),
                    kv("relists", r.relists),
                    kv("objects", r.objects),
                ],
            );
        }
    }

    fn text_controller(&self, out: &mut TextLines) {
        let c = &self.controller;
        out.push(
            "controller",
            vec![
                kv("synced", c.synced),
                kv("taint_based_eviction", c.taint_based_eviction),
                kv("all_zones_fully_disrupted", c.all_zones_fully_disrupted),
                kv("nodes", c.nodes.len()),
                kv("writes_in_flight", c.writes_in_flight),
                kv("next_deadline_in", opt_dur(self.until(c.next_deadline))),
            ],
        );
    }

    fn text_zones(&self, out: &mut TextLines) {
        let zones = &self.controller.zones;
        let shown = zones.len().min(TEXT_ZONES_SHOWN);
        out.push("zones", vec![kv("count", zones.len()), kv("shown", shown)]);
        for z in &zones[..shown] {
            let (head, head_due) = match &z.queue_head {
                Some((node, at)) => (node.to_string(), dur(*at - self.now)),
                None => ("none".to_string(), "none".to_string()),
            };
            out.push_keyed(
                "zone",
                kv("name", &z.display),
                vec![
                    kv("state", zone_state(z)),
                    kv("size", z.size),
                    kv("unhealthy", z.unhealthy),
                    kv("rate", z.rate.as_f64()),
                    kv("tokens", z.tokens),
                    kv("queue", z.queue_len),
                    kv("next", head),
                    kv("next_due_in", head_due),
                    kv("evictions_total", z.evictions_total),
                ]
                .into_iter()
                .chain(
                    z.cooldown_until
                        .map(|until| kv("cooldown_in", dur(until - self.now))),
                )
                .collect(),
            );
        }
        more(out, "zones", zones.len() - shown);
    }

    /// One line per brake configured (none without `max_unhealthy`).
    fn text_brakes(&self, out: &mut TextLines) {
        for (scope, b) in &self.controller.brakes {
            let mut fields = vec![
                kv("engaged", b.engaged()),
                kv("unhealthy", b.unhealthy),
                kv("total", b.total),
                kv("max_unhealthy", b.limit),
            ];
            if let Some(since) = b.engaged_since {
                fields.push(kv("engaged_for", dur(self.now.since(since))));
            }
            out.push_keyed("brake", kv("scope", scope), fields);
        }
    }

    fn text_not_ready(&self, out: &mut TextLines) {
        let nodes = self.not_ready_nodes();
        let shown = nodes.len().min(TEXT_NODES_SHOWN);
        out.push(
            "not_ready",
            vec![kv("count", nodes.len()), kv("shown", shown)],
        );
        for n in &nodes[..shown] {
            let mut fields = vec![
                kv("zone", &n.zone),
                kv("ready", ready(n.ready)),
                kv("probe_age", dur(n.probe_age)),
                kv("grace", dur(n.grace)),
                kv("verdict", n.verdict),
                kv("deadline_in", opt_dur(self.until(n.pending_deadline))),
                kv("excluded", n.excluded_from_disruption),
            ];
            // Edge and bare-metal policies: shown only where they apply, so a plain fleet's dump is
            // as before.
            if let Some(pool) = &n.pool {
                fields.push(kv("pool", pool));
            }
            if n.autonomous {
                fields.push(kv("autonomous", true));
            }
            if n.planned_maintenance {
                fields.push(kv("planned_maintenance", true));
            }
            if let Some(legacy) = n.legacy {
                fields.push(kv("legacy", legacy_state(legacy)));
            }
            fields.push(kv("taints", taints(&n.taints)));
            out.push_keyed("node", kv("name", &n.name), fields);
        }
        more(out, "not_ready", nodes.len() - shown);
    }

    fn text_evictions(&self, out: &mut TextLines) {
        let Some(e) = &self.evictions else {
            out.push("evictions", vec![kv("mode", "legacy"), kv("pending", 0)]);
            return;
        };
        out.push(
            "evictions",
            vec![
                kv("mode", "taint"),
                kv("pending", e.pending),
                kv("running", e.running),
                kv("deleted", e.pod_deletions_total),
                kv("gave_up", e.gave_up_total),
                kv("shown", e.next.len()),
            ],
        );
        for p in &e.next {
            out.push_keyed(
                "eviction",
                kv("pod", &p.pod),
                vec![kv("due", p.deadline), kv("in", dur(p.remaining))],
            );
        }
        for g in &e.recent_gave_up {
            out.push_keyed(
                "eviction_gave_up",
                kv("pod", &g.pod),
                vec![kv("at", g.at), kv("error", &g.error)],
            );
        }
    }

    fn text_client(&self, out: &mut TextLines) {
        let c = &self.client;
        let total: u64 = c.requests.iter().map(|r| r.count).sum();
        let dry_run: u64 = c.dry_run_actions.iter().map(|a| a.count).sum();
        out.push(
            "client",
            vec![
                kv("requests", total),
                kv("throttle_wait", dur(c.throttle_wait)),
                kv("dry_run_actions", dry_run),
            ],
        );
        if !c.requests.is_empty() {
            let fields = c
                .requests
                .iter()
                .map(|r| kv(&format!("{}/{}", r.verb, r.code), r.count))
                .collect();
            out.push("client_requests", fields);
        }
        if !c.dry_run_actions.is_empty() {
            let fields = c
                .dry_run_actions
                .iter()
                .map(|a| kv(&a.kind, a.count))
                .collect();
            out.push("dry_run", fields);
        }
    }

    fn text_memory(&self, out: &mut TextLines) {
        let mut fields = match self.rss_bytes {
            Some(b) => vec![
                kv("rss_bytes", b),
                kv("rss", format!("{:.1} MiB", b as f64 / 1048576.0)),
            ],
            None => vec![kv("rss_bytes", "unknown")],
        };
        let s = &self.store;
        fields.extend([
            kv("store_bytes", s.bytes.total()),
            kv("nodes", s.nodes),
            kv("bytes_per_node", s.bytes_per_node()),
            kv("pods", s.pods),
            kv("bytes_per_pod", s.bytes_per_pod()),
        ]);
        out.push("memory", fields);
    }

    fn text_loop(&self, out: &mut TextLines) {
        let l = &self.event_loop;
        out.push(
            "loop",
            vec![
                kv("wakeups", l.stats.wakeups),
                kv("io_events", l.stats.io_events),
                kv("stale_events", l.stats.stale_events),
                kv("timers_fired", l.stats.timers_fired),
                kv("sources", l.sources),
                kv("timers_pending", l.timers_pending),
                kv("next_timer_in", opt_dur(l.next_timer_in)),
            ],
        );
    }

    /// Registered nodes whose Ready is not True, by name.
    pub(crate) fn not_ready_nodes(&self) -> Vec<&NodeDump> {
        let mut nodes: Vec<&NodeDump> = self
            .controller
            .nodes
            .iter()
            .filter(|n| n.ready != Some(ConditionStatus::True))
            .collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        nodes
    }

    fn until(&self, at: Option<Time>) -> Option<Duration> {
        at.map(|at| at - self.now)
    }
}

fn text_config(out: &mut TextLines, s: &DaemonSnapshot) {
    let c = &s.config;
    out.push(
        "config",
        vec![
            kv("path", s.config_path.display()),
            kv("api", c.api.source.describe()),
            kv("qps", c.api.qps.as_f64()),
            kv("burst", c.api.burst),
            kv("leader_election", leader_election(c)),
            kv("taint_based_eviction", c.controller.taint_based_eviction),
            kv("dry_run", c.dry_run),
            kv("log_level", c.log_level.as_str().to_ascii_lowercase()),
            kv("dump_format", dump_format(c.dump_format)),
            kv("metrics_address", metrics_address(c)),
            kv("node_monitor_period", dur(c.controller.node_monitor_period)),
            kv(
                "node_monitor_grace_period",
                dur(c.controller.node_monitor_grace_period),
            ),
            kv(
                "node_startup_grace_period",
                dur(c.controller.node_startup_grace_period),
            ),
            kv(
                "node_eviction_rate",
                c.controller.node_eviction_rate.as_f64(),
            ),
            kv(
                "secondary_node_eviction_rate",
                c.controller.secondary_node_eviction_rate.as_f64(),
            ),
            kv(
                "large_cluster_size_threshold",
                c.controller.large_cluster_size_threshold,
            ),
            kv(
                "unhealthy_zone_threshold",
                c.controller.unhealthy_zone_threshold,
            ),
            kv(
                "pod_eviction_timeout",
                dur(c.controller.pod_eviction_timeout),
            ),
        ],
    );
}

fn leader_election(c: &Config) -> String {
    let le = &c.leader_election;
    if le.enabled {
        format!("{}/{}", le.namespace, le.name)
    } else {
        "off".to_string()
    }
}

fn dump_format(f: DumpFormat) -> &'static str {
    match f {
        DumpFormat::Text => "text",
        DumpFormat::Json => "json",
    }
}

fn metrics_address(c: &Config) -> String {
    c.metrics_address
        .map_or_else(|| "off".to_string(), |a| a.to_string())
}

fn zone_state(z: &ZoneDump) -> &'static str {
    z.state.map_or("uncounted", |s| s.as_str())
}

fn ready(status: Option<ConditionStatus>) -> &'static str {
    status.map_or("none", |s| s.as_str())
}

fn legacy_state(l: LegacyEviction) -> &'static str {
    match l {
        LegacyEviction::Unmarked => "unmarked",
        LegacyEviction::ToBeEvicted => "to-be-evicted",
        LegacyEviction::Evicted => "evicted",
    }
}

fn taints(taints: &[String]) -> String {
    if taints.is_empty() {
        "none".to_string()
    } else {
        taints.join(",")
    }
}

fn more(out: &mut TextLines, section: &str, omitted: usize) {
    if omitted > 0 {
        out.push(section, vec![kv("more", format!("… and {omitted} more"))]);
    }
}

/// Whole milliseconds, the unit of every duration in the JSON form.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn dur(d: Duration) -> String {
    format_duration(Duration::from_millis(millis(d)))
}

fn opt_dur(d: Option<Duration>) -> String {
    d.map_or_else(|| "none".to_string(), dur)
}

/// The text lines being built.
#[derive(Default)]
struct TextLines {
    lines: Vec<String>,
}

impl TextLines {
    fn push(&mut self, section: &str, fields: Vec<String>) {
        self.push_lines(section, None, fields);
    }

    /// A line about one item: if it must be split, every part repeats `key` so each line still
    /// says which item it is about.
    fn push_keyed(&mut self, section: &str, key: String, fields: Vec<String>) {
        self.push_lines(section, Some(key), fields);
    }

    fn push_lines(&mut self, section: &str, key: Option<String>, fields: Vec<String>) {
        let mut start = format!("{TEXT_PREFIX}{section}:");
        if let Some(key) = key {
            start.push(' ');
            start.push_str(&key);
        }
        let mut line = start.clone();
        let mut empty = true;
        for field in fields {
            if !empty && line.len() + 1 + field.len() > TEXT_LINE_MAX {
                self.lines.push(std::mem::replace(&mut line, start.clone()));
            }
            line.push(' ');
            line.push_str(&field);
            empty = false;
        }
        self.lines.push(line);
    }
}

/// `key=value`, the value quoted when a plain split on spaces and `=` would misread it, and cut
/// to [`VALUE_MAX`] bytes.
fn kv(key: &str, value: impl std::fmt::Display) -> String {
    let value = value.to_string();
    let value = truncate(&value, VALUE_MAX);
    let mut out = String::with_capacity(key.len() + value.len() + 3);
    for c in key.chars() {
        out.push(if c.is_whitespace() || c == '=' || c == '"' {
            '_'
        } else {
            c
        });
    }
    out.push('=');
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| !c.is_whitespace() && !c.is_control() && c != '"' && c != '=');
    if plain {
        out.push_str(&value);
        return out;
    }
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// At most `max` bytes, cut at a character boundary, with `…` when cut.
fn truncate(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return s.into();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end]).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_with_spaces_quotes_or_equals_are_quoted_and_escaped() {
        assert_eq!(kv("a", "plain"), "a=plain");
        assert_eq!(kv("a", ""), "a=\"\"");
        assert_eq!(kv("a", "two words"), "a=\"two words\"");
        assert_eq!(kv("a", "x=\"y\"\n"), "a=\"x=\\\"y\\\"\\n\"");
        assert_eq!(kv("a", "nul\0"), "a=\"nul\\u{0}\"");
        assert_eq!(kv("GET 200", 1), "GET_200=1");
    }

    #[test]
    fn long_values_are_cut_at_a_character_boundary() {
        let long = "é".repeat(1000);
        let cut = truncate(&long, VALUE_MAX);
        assert!(cut.len() <= VALUE_MAX);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn a_long_keyed_line_is_split_and_every_part_names_its_item() {
        let mut out = TextLines::default();
        let fields: Vec<String> = (0..200).map(|i| kv(&format!("field{i}"), i)).collect();
        out.push_keyed("node", kv("name", "n1"), fields);
        assert!(out.lines.len() > 1);
        for line in &out.lines {
            assert!(line.len() <= TEXT_LINE_MAX, "{}", line.len());
            assert!(line.starts_with("state dump node: name=n1 "), "{line}");
        }
        let joined = out.lines.join(" ");
        assert!(joined.contains("field0=0") && joined.contains("field199=199"));
    }
}
