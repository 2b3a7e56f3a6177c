//! `/metrics` in the Prometheus text format with upstream's metric names (docs/upstream.md,
//! "Metrics") plus ours, rendered from a snapshot of the real controllers.

use std::collections::{BTreeMap, BTreeSet};

use crate::observe_support::{cluster, snapshot};
use node_lifecycled::config::DumpFormat;
use node_lifecycled::controller::Decision;
use node_lifecycled::observe::metrics::render;

#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A strict reader of the text format (version 0.0.4): every sample belongs to a family
/// declared once with HELP and TYPE before its samples; label values use only the three escapes.
fn parse_exposition(text: &str) -> (BTreeMap<String, String>, Vec<Sample>) {
    let mut types = BTreeMap::new();
    let mut helped = BTreeSet::new();
    let mut samples = Vec::new();
    assert!(text.ends_with('\n'));
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, _) = rest.split_once(' ').unwrap();
            assert!(helped.insert(name.to_string()), "HELP twice for {name}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["gauge", "counter", "histogram"].contains(&kind), "{line}");
            assert!(
                types.insert(name.to_string(), kind.to_string()).is_none(),
                "TYPE twice: {name}"
            );
            continue;
        }
        assert!(!line.starts_with('#'), "{line}");
        let name_end = line.find(['{', ' ']).unwrap();
        let name = &line[..name_end];
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "metric name {name:?}"
        );
        let mut labels = BTreeMap::new();
        let mut rest = &line[name_end..];
        if let Some(body) = rest.strip_prefix('{') {
            let mut chars = body.char_indices().peekable();
            let end;
            loop {
                let (start, c) = chars.next().unwrap();
                if c == '}' {
                    end = start + 1;
                    break;
                }
                if c == ',' {
                    continue;
                }
                let eq = body[start..].find('=').unwrap() + start;
                let label = &body[start..eq];
                while chars.peek().unwrap().0 < eq + 1 {
                    chars.next();
                }
                assert_eq!(
                    chars.next().unwrap().1,
                    '"',
                    "label {label} value not quoted: {line}"
                );
                let mut value = String::new();
                loop {
                    let (_, c) = chars.next().unwrap();
                    match c {
                        '"' => break,
                        '\\' => match chars.next().unwrap().1 {
                            '\\' => value.push('\\'),
                            '"' => value.push('"'),
                            'n' => value.push('\n'),
                            other => panic!("escape \\{other} is not in the format: {line}"),
                        },
                        c => value.push(c),
                    }
                }
                labels.insert(label.to_string(), value);
            }
            rest = &body[end..];
        }
        let value = rest.strip_prefix(' ').unwrap();
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("value {v:?} in {line}")),
        };
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "sample before its TYPE: {line}");
        assert!(helped.contains(family), "sample without HELP: {line}");
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    (types, samples)
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels.len() == s.labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .unwrap_or_else(|| panic!("no {name} {labels:?}"))
        .value
}

fn buckets(samples: &[Sample], name: &str) -> Vec<(String, f64)> {
    samples
        .iter()
        .filter(|s| s.name == format!("{name}_bucket"))
        .map(|s| (s.labels["le"].clone(), s.value))
        .collect()
}

#[test]
fn upstream_metric_names_types_and_zone_labels_as_kube_controller_manager_exports_them() {
    let c = cluster(true, 4);
    let text = render(&snapshot(&c, DumpFormat::Text));
    let (types, samples) = parse_exposition(&text);
    for (name, kind) in [
        ("node_collector_zone_health", "gauge"),
        ("node_collector_zone_size", "gauge"),
        ("node_collector_unhealthy_nodes_in_zone", "gauge"),
        ("node_collector_evictions_total", "counter"),
        (
            "node_collector_update_node_health_duration_seconds",
            "histogram",
        ),
        (
            "node_collector_update_all_nodes_health_duration_seconds",
            "histogram",
        ),
        ("taint_eviction_controller_pod_deletions_total", "counter"),
        (
            "taint_eviction_controller_pod_deletion_duration_seconds",
            "histogram",
        ),
    ] {
        assert_eq!(types.get(name).map(String::as_str), Some(kind), "{name}");
    }
    // The zone label is the raw key, NUL included, as upstream emits it.
    assert!(
        text.contains("node_collector_zone_size{zone=\"r1:\u{0}:a\"} 4\n"),
        "{text}"
    );
    let a = [("zone", "r1:\u{0}:a")];
    let b = [("zone", "r1:\u{0}:b")];
    assert_eq!(value(&samples, "node_collector_zone_size", &a), 4.0);
    assert_eq!(
        value(&samples, "node_collector_unhealthy_nodes_in_zone", &a),
        1.0
    );
    assert_eq!(value(&samples, "node_collector_zone_health", &a), 75.0);
    assert_eq!(value(&samples, "node_collector_zone_health", &b), 0.0);
    assert_eq!(value(&samples, "node_collector_evictions_total", &a), 0.0);
    assert!(
        text.contains("# HELP node_collector_evictions_total [STABLE] Number of Node evictions")
    );

    let le: Vec<String> = buckets(
        &samples,
        "node_collector_update_node_health_duration_seconds",
    )
    .into_iter()
    .map(|(le, _)| le)
    .collect();
    assert_eq!(
        le,
        [
            "0.001", "0.004", "0.016", "0.064", "0.256", "1.024", "4.096", "16.384", "+Inf"
        ]
    );
    let all = buckets(
        &samples,
        "node_collector_update_all_nodes_health_duration_seconds",
    );
    assert_eq!(all[0], ("0.01".to_string(), 0.0));
    assert_eq!(all[1], ("0.04".to_string(), 1.0), "the 12 ms pass");
    assert_eq!(all[7].0, "163.84");
    assert_eq!(
        value(
            &samples,
            "node_collector_update_all_nodes_health_duration_seconds_count",
            &[]
        ),
        1.0
    );

    let deletion = buckets(
        &samples,
        "taint_eviction_controller_pod_deletion_duration_seconds",
    );
    let le: Vec<&str> = deletion.iter().map(|(le, _)| le.as_str()).collect();
    assert_eq!(
        le,
        [
            "0.005", "0.025", "0.1", "0.5", "1", "2.5", "10", "30", "60", "120", "180", "240",
            "+Inf"
        ]
    );
    assert_eq!(
        value(
            &samples,
            "taint_eviction_controller_pod_deletions_total",
            &[]
        ),
        0.0
    );
}

#[test]
fn our_metrics_watch_reconnects_relists_requests_leader_dry_run_and_build() {
    let c = cluster(true, 0);
    let text = render(&snapshot(&c, DumpFormat::Text));
    let (types, samples) = parse_exposition(&text);
    assert!(
        types
            .keys()
            .filter(|k| !k.starts_with("node_collector_")
                && !k.starts_with("taint_eviction_controller_"))
            .all(|k| k.starts_with("node_lifecycled_") || k == "process_resident_memory_bytes")
    );
    assert_eq!(
        value(
            &samples,
            "node_lifecycled_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
    assert_eq!(value(&samples, "node_lifecycled_leader", &[]), 1.0);
    assert_eq!(value(&samples, "node_lifecycled_synced", &[]), 1.0);
    assert_eq!(
        value(
            &samples,
            "node_lifecycled_watch_reconnects_total",
            &[("resource", "pods")]
        ),
        2.0
    );
    assert_eq!(
        value(
            &samples,
            "node_lifecycled_watch_relists_total",
            &[("resource", "nodes")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "node_lifecycled_watch_objects",
            &[("resource", "leases")]
        ),
        20.0
    );
    assert_eq!(
        value(
            &samples,
            "node_lifecycled_api_requests_total",
            &[("verb", "PATCH"), ("code", "409")]
        ),
        2.0
    );
    assert_eq!(
        value(
            &samples,
            "node_lifecycled_api_throttle_wait_seconds_total",
            &[]
        ),
        2.5
    );
    assert_eq!(
        value(
            &samples,
            "node_lifecycled_dry_run_actions_total",
            &[("kind", "PatchNodeTaints")]
        ),
        3.0
    );
    assert_eq!(
        value(&samples, "node_lifecycled_pending_pod_evictions", &[]),
        30.0
    );
    assert_eq!(
        value(&samples, "process_resident_memory_bytes", &[]),
        5.0 * 1048576.0
    );
}

#[test]
fn follower_reports_leader_zero_and_label_values_are_escaped() {
    let c = cluster(true, 0);
    let mut s = snapshot(&c, DumpFormat::Text);
    s.leadership.is_leader = false;
    s.reflectors[0].resource = "odd\"name\\with\nnewline".to_string();
    let text = render(&s);
    let (_, samples) = parse_exposition(&text);
    assert_eq!(value(&samples, "node_lifecycled_leader", &[]), 0.0);
    assert!(
        text.contains("resource=\"odd\\\"name\\\\with\\nnewline\""),
        "{text}"
    );
    assert_eq!(
        value(
            &samples,
            "node_lifecycled_watch_objects",
            &[("resource", "odd\"name\\with\nnewline")]
        ),
        10.0
    );
}

#[test]
fn legacy_mode_has_no_taint_eviction_metrics() {
    let c = cluster(false, 0);
    let text = render(&snapshot(&c, DumpFormat::Text));
    let (types, _) = parse_exposition(&text);
    assert!(!types.contains_key("taint_eviction_controller_pod_deletions_total"));
    assert!(!types.contains_key("taint_eviction_controller_pod_deletion_duration_seconds"));
    assert!(types.contains_key("node_collector_zone_health"));
}

/// A node's pool is named in `/metrics` and in the dump; a plain fleet shows neither.
#[test]
fn pools_are_counted_in_the_metrics_and_named_in_the_dump() {
    use node_lifecycled::controller::Settings;
    use node_lifecycled::controller::pools::{LabelRequirement, Pool, SelectorOperator};

    let plain = render(&snapshot(&cluster(true, 0), DumpFormat::Text));
    assert!(!plain.contains("node_lifecycled_pool_nodes"));
    let mut c = cluster(true, 2);
    let pool = Pool {
        name: "zone-b".into(),
        match_labels: vec![],
        match_expressions: vec![LabelRequirement {
            key: "topology.kubernetes.io/zone".into(),
            operator: SelectorOperator::In,
            values: vec!["b".into()],
        }],
        node_monitor_grace_period: None,
        node_startup_grace_period: None,
        mark_pods_not_ready: None,
        node_eviction_rate: None,
        secondary_node_eviction_rate: None,
        max_unhealthy: None,
        default_toleration_seconds: None,
        disruption_domain: None,
        full_disruption: None,
        hold_max: None,
    };
    let settings = Settings {
        pools: vec![pool],
        ..Settings::default()
    };
    c.controllers.apply_settings(settings, c.now);
    let snap = snapshot(&c, DumpFormat::Text);
    let (types, samples) = parse_exposition(&render(&snap));
    assert_eq!(types["node_lifecycled_pool_nodes"], "gauge");
    assert_eq!(
        value(
            &samples,
            "node_lifecycled_pool_nodes",
            &[("pool", "zone-b")]
        ),
        2.0
    );
    let dump = snap.to_text_lines().join("\n");
    assert!(dump.contains("pool=zone-b"), "{dump}");
}

/// What the alerts and the dashboard of `conf/monitoring/` read beyond upstream's gauges: zone
/// states, queues, nodes by Ready, whether each watch follows the server and for how long it has
/// not, the grace period, decisions by kind and API latency by verb.
#[test]
fn zone_states_nodes_by_ready_watch_currency_decisions_and_api_latency() {
    let c = cluster(true, 4);
    let mut snap = snapshot(&c, DumpFormat::Text);
    // A kind Decision::KINDS does not list yet still shows once counted.
    snap.decisions.insert("a-new-kind", 1);
    let text = render(&snap);
    let (types, samples) = parse_exposition(&text);
    let a = "r1:\u{0}:a";
    let b = "r1:\u{0}:b";
    for (zone, current) in [(a, "Normal"), (b, "FullDisruption")] {
        for state in ["Initial", "Normal", "PartialDisruption", "FullDisruption"] {
            assert_eq!(
                value(
                    &samples,
                    "node_lifecycled_zone_state",
                    &[("zone", zone), ("state", state)]
                ),
                if state == current { 1.0 } else { 0.0 },
                "{zone:?} {state}\n{text}"
            );
        }
        value(
            &samples,
            "node_lifecycled_zone_taint_queue",
            &[("zone", zone)],
        );
    }
    for (ready, n) in [
        ("True", 3.0),
        ("False", 1.0),
        ("Unknown", 4.0),
        ("none", 0.0),
    ] {
        assert_eq!(
            value(&samples, "node_lifecycled_nodes", &[("ready", ready)]),
            n,
            "{ready}"
        );
    }

    let up = |r: &str| value(&samples, "node_lifecycled_watch_up", &[("resource", r)]);
    let down = |r: &str| {
        value(
            &samples,
            "node_lifecycled_watch_down_seconds",
            &[("resource", r)],
        )
    };
    assert_eq!((up("nodes"), down("nodes")), (1.0, 0.0));
    assert_eq!((up("pods"), down("pods")), (0.0, 75.0));
    assert_eq!(
        value(
            &samples,
            "node_lifecycled_node_monitor_grace_period_seconds",
            &[]
        ),
        50.0
    );

    // Every kind is there, zero or not, and the one counted beyond them.
    let kinds: Vec<&str> = samples
        .iter()
        .filter(|s| s.name == "node_lifecycled_decisions_total")
        .map(|s| s.labels["decision"].as_str())
        .collect();
    assert_eq!(kinds.len(), Decision::KINDS.len() + 1, "{kinds:?}");
    let decided = |k: &str| {
        value(
            &samples,
            "node_lifecycled_decisions_total",
            &[("decision", k)],
        )
    };
    assert_eq!((decided("taints"), decided("pod-deletion")), (5.0, 0.0));
    assert_eq!(decided("a-new-kind"), 1.0);

    let name = "node_lifecycled_api_request_duration_seconds";
    assert_eq!(types[name], "histogram");
    assert_eq!(
        value(
            &samples,
            &format!("{name}_bucket"),
            &[("verb", "GET"), ("le", "0.025")]
        ),
        1.0
    );
    assert_eq!(
        value(&samples, &format!("{name}_count"), &[("verb", "GET")]),
        2.0
    );
}

/// The fleet pause is a gauge per held kind (0 without a pause, so alerts can watch it) and a line
/// of `status`.
#[test]
fn the_fleet_pause_is_a_gauge_per_kind_and_a_status_line() {
    use node_lifecycled::controller::fleet_pause::{FleetPause, PauseScope};
    use node_lifecycled::observe::explain::{LogFigures, status};
    let c = cluster(true, 0);
    let mut s = snapshot(&c, DumpFormat::Text);
    let (_, samples) = parse_exposition(&render(&s));
    assert_eq!(
        value(&samples, "node_lifecycled_paused", &[("what", "fencing")]),
        0.0
    );
    assert_eq!(
        value(&samples, "node_lifecycled_paused", &[("what", "tainting")]),
        0.0
    );
    assert!(!status(&s, LogFigures::default()).contains("pause:"));
    s.pause = Some(FleetPause {
        what: PauseScope::Fencing,
        until: s.now + std::time::Duration::from_secs(5400),
        reason: "switch upgrade".into(),
        by: "alice@cp-1".into(),
    });
    let (_, samples) = parse_exposition(&render(&s));
    assert_eq!(
        value(&samples, "node_lifecycled_paused", &[("what", "fencing")]),
        1.0
    );
    assert_eq!(
        value(&samples, "node_lifecycled_paused", &[("what", "tainting")]),
        0.0
    );
    let text = status(&s, LogFigures::default());
    assert!(
        text.contains("pause: fencing paused until ")
            && text.contains("(1h30m left) by alice@cp-1: switch upgrade"),
        "{text}"
    );
    // An unreadable annotation: everything, until its next valid write, and said so.
    s.pause = Some(FleetPause::unreadable("not the pause JSON"));
    let (_, samples) = parse_exposition(&render(&s));
    for what in ["fencing", "tainting"] {
        assert_eq!(
            value(&samples, "node_lifecycled_paused", &[("what", what)]),
            1.0
        );
    }
    let text = status(&s, LogFigures::default());
    assert!(
        text.contains(
            "pause: all paused until its next valid write (node-lifecycled pause or resume) by ?: \
             unreadable node-lifecycled.io/pause annotation (not the pause JSON)"
        ),
        "{text}"
    );
}
