//! The dump: "SIGUSR1 output contains each section (text and JSON forms parsed in the test)". The
//! snapshot comes from the real controllers fed a small cluster.

use std::collections::BTreeMap;

use crate::observe_support::{cluster, snapshot};
use node_lifecycled::config::DumpFormat;
use node_lifecycled::observe::dump::{JSON_LINE_MAX, TEXT_LINE_MAX, TEXT_NODES_SHOWN, TEXT_PREFIX};
use serde_json::Value;

/// One parsed text line: its section and its key=value pairs, in order.
#[derive(Debug)]
struct Line {
    section: String,
    pairs: Vec<(String, String)>,
}

impl Line {
    fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// `state dump <section>: k=v k="quoted \"v\""`, as a log pipeline would split it.
fn parse(line: &str) -> Line {
    let rest = line
        .strip_prefix(TEXT_PREFIX)
        .unwrap_or_else(|| panic!("no prefix: {line}"));
    let (section, mut rest) = rest
        .split_once(':')
        .unwrap_or_else(|| panic!("no section: {line}"));
    let mut pairs = Vec::new();
    loop {
        rest = rest.trim_start_matches(' ');
        if rest.is_empty() {
            break;
        }
        let (key, after) = rest
            .split_once('=')
            .unwrap_or_else(|| panic!("not key=value at {rest:?} in {line}"));
        assert!(!key.contains(' '), "key with a space in {line}");
        let (value, after) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let end = loop {
                let (i, c) = chars
                    .next()
                    .unwrap_or_else(|| panic!("unterminated quote: {line}"));
                match c {
                    '"' => break i + 1,
                    '\\' => match chars.next().map(|(_, c)| c) {
                        Some('n') => value.push('\n'),
                        Some('t') => value.push('\t'),
                        Some(c) => value.push(c),
                        None => panic!("dangling escape: {line}"),
                    },
                    c => value.push(c),
                }
            };
            (value, &quoted[end..])
        } else {
            let end = after.find(' ').unwrap_or(after.len());
            (after[..end].to_string(), &after[end..])
        };
        pairs.push((key.to_string(), value));
        rest = after;
    }
    Line {
        section: section.to_string(),
        pairs,
    }
}

fn by_section(lines: &[Line]) -> BTreeMap<&str, Vec<&Line>> {
    let mut map: BTreeMap<&str, Vec<&Line>> = BTreeMap::new();
    for l in lines {
        map.entry(l.section.as_str()).or_default().push(l);
    }
    map
}

#[test]
fn sigusr1_text_dump_has_every_section_as_key_value_lines() {
    let c = cluster(true, 80);
    let s = snapshot(&c, DumpFormat::Text);
    let text = s.dump_lines();
    for l in &text {
        assert!(
            l.len() < 2048 && l.len() <= TEXT_LINE_MAX,
            "{} bytes: {l}",
            l.len()
        );
        assert!(!l.contains('\n'));
    }
    let lines: Vec<Line> = text.iter().map(|l| parse(l)).collect();
    let sections = by_section(&lines);
    for wanted in [
        "version",
        "config",
        "leadership",
        "reflectors",
        "reflector",
        "controller",
        "zones",
        "zone",
        "not_ready",
        "node",
        "evictions",
        "eviction",
        "client",
        "client_requests",
        "dry_run",
        "memory",
        "loop",
    ] {
        assert!(
            sections.contains_key(wanted),
            "no {wanted} section in {text:#?}"
        );
    }
    let one = |s: &str| sections[s][0];

    let version = one("version");
    assert_eq!(version.get("version"), Some(env!("CARGO_PKG_VERSION")));
    assert_eq!(version.get("uptime"), Some("1m31s"));
    assert_eq!(version.get("status"), Some("running: leader"));

    let config = one("config");
    assert_eq!(
        config.get("api"),
        Some("kubeconfig /etc/kubernetes/node-lifecycled.conf")
    );
    assert_eq!(
        config.get("leader_election"),
        Some("kube-system/node-lifecycled")
    );
    assert_eq!(config.get("node_monitor_grace_period"), Some("50s"));
    assert_eq!(config.get("metrics_address"), Some("127.0.0.1:10259"));
    assert_eq!(config.get("qps"), Some("20"));

    let leader = one("leadership");
    assert_eq!(leader.get("holder"), Some("host-1_abc123"));
    assert_eq!(leader.get("is_leader"), Some("true"));
    assert_eq!(leader.get("renew_age"), Some("1s500ms"));

    assert_eq!(one("reflectors").get("count"), Some("3"));
    let pods = sections["reflector"]
        .iter()
        .find(|l| l.get("resource") == Some("pods"))
        .unwrap();
    assert_eq!(pods.get("synced"), Some("true"));
    assert_eq!(pods.get("resource_version"), Some("1002"));
    assert_eq!(pods.get("last_event_age"), Some("250ms"));
    assert_eq!(pods.get("reconnects"), Some("2"));
    assert_eq!(pods.get("relists"), Some("1"));
    assert_eq!(pods.get("objects"), Some("30"));

    assert_eq!(one("controller").get("synced"), Some("true"));
    assert_eq!(one("controller").get("nodes"), Some("84"));

    assert_eq!(one("zones").get("count"), Some("2"));
    let zone_a = sections["zone"]
        .iter()
        .find(|l| l.get("name") == Some("r1/a"))
        .unwrap();
    assert_eq!(zone_a.get("size"), Some("4"));
    assert_eq!(zone_a.get("unhealthy"), Some("1"));
    assert_eq!(zone_a.get("rate"), Some("0.1"));
    for key in [
        "state",
        "tokens",
        "queue",
        "next",
        "next_due_in",
        "evictions_total",
    ] {
        assert!(zone_a.get(key).is_some(), "zone has no {key}: {zone_a:?}");
    }
    let zone_b = sections["zone"]
        .iter()
        .find(|l| l.get("name") == Some("r1/b"))
        .unwrap();
    assert_eq!(zone_b.get("state"), Some("FullDisruption"));
    assert_eq!(zone_b.get("unhealthy"), Some("80"));

    // 81 not-Ready nodes: the first 50 by name, then how many were left out.
    let not_ready = &sections["not_ready"];
    assert_eq!(not_ready[0].get("count"), Some("81"));
    assert_eq!(not_ready[0].get("shown"), Some("50"));
    assert_eq!(not_ready.last().unwrap().get("more"), Some("… and 31 more"));
    let nodes = &sections["node"];
    assert_eq!(nodes.len(), TEXT_NODES_SHOWN);
    let sick = nodes
        .iter()
        .find(|l| l.get("name") == Some("a-sick"))
        .unwrap();
    assert_eq!(sick.get("ready"), Some("False"));
    assert_eq!(sick.get("zone"), Some("r1/a"));
    assert_eq!(
        sick.get("taints"),
        Some("node.kubernetes.io/not-ready:NoExecute")
    );
    for key in ["probe_age", "grace", "verdict", "deadline_in"] {
        assert!(sick.get(key).is_some(), "node has no {key}: {sick:?}");
    }

    // 30 pods wait for eviction: the count and the next 20, soonest first.
    let evictions = one("evictions");
    assert_eq!(evictions.get("pending"), Some("30"));
    assert_eq!(evictions.get("shown"), Some("20"));
    let next = &sections["eviction"];
    assert_eq!(next.len(), 20);
    assert_eq!(next[0].get("pod"), Some("default/web-00"));
    assert_eq!(
        next[0].get("in"),
        Some("1m39s"),
        "tolerates 100 s, seen 1 s ago"
    );
    assert_eq!(next[19].get("pod"), Some("default/web-19"));

    let client = one("client");
    assert_eq!(client.get("requests"), Some("45"));
    assert_eq!(client.get("throttle_wait"), Some("2s500ms"));
    let requests = one("client_requests");
    assert_eq!(requests.get("GET/200"), Some("42"));
    assert_eq!(requests.get("PATCH/409"), Some("2"));
    assert_eq!(requests.get("PUT/timeout"), Some("1"));
    assert_eq!(one("dry_run").get("PatchNodeTaints"), Some("3"));

    assert_eq!(one("memory").get("rss_bytes"), Some("5242880"));
    assert_eq!(one("memory").get("rss"), Some("5.0 MiB"));

    let lp = one("loop");
    assert_eq!(lp.get("wakeups"), Some("100"));
    assert_eq!(lp.get("timers_pending"), Some("3"));
    assert_eq!(lp.get("next_timer_in"), Some("100ms"));
}

#[test]
fn sigusr1_json_dump_is_one_line_with_every_section() {
    let c = cluster(true, 80);
    let s = snapshot(&c, DumpFormat::Json);
    let lines = s.dump_lines();
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    assert!(!line.contains('\n'));
    assert!(line.len() <= JSON_LINE_MAX);
    let v: Value = serde_json::from_str(line).unwrap();
    for key in [
        "version",
        "config",
        "leadership",
        "reflectors",
        "controller",
        "zones",
        "not_ready",
        "evictions",
        "client",
        "memory",
        "loop",
    ] {
        assert!(v.get(key).is_some(), "no {key} in {v}");
    }
    assert_eq!(v["version"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["version"]["uptime_ms"], 91_000);
    assert_eq!(v["config"]["node_monitor_grace_period_ms"], 50_000);
    assert_eq!(v["config"]["dump_format"], "json");
    assert_eq!(v["leadership"]["holder"], "host-1_abc123");
    assert_eq!(v["leadership"]["renew_age_ms"], 1500);
    assert_eq!(v["reflectors"].as_array().unwrap().len(), 3);
    assert_eq!(v["reflectors"][0]["resource"], "nodes");
    assert_eq!(v["reflectors"][0]["last_event_age_ms"], 250);

    assert_eq!(v["zones"]["count"], 2);
    let zones = v["zones"]["items"].as_array().unwrap();
    let a = zones.iter().find(|z| z["name"] == "r1/a").unwrap();
    assert_eq!(a["key"], "r1:\u{0}:a", "the raw zone key survives JSON");
    assert_eq!(a["size"], 4);
    assert_eq!(a["unhealthy"], 1);
    for key in ["state", "rate", "tokens", "queue", "next_due_in_ms"] {
        assert!(a.get(key).is_some(), "zone has no {key}");
    }

    assert_eq!(v["not_ready"]["count"], 81);
    assert_eq!(v["not_ready"]["omitted"], 0, "81 nodes fit in the line");
    let nodes = v["not_ready"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 81);
    let sick = nodes.iter().find(|n| n["name"] == "a-sick").unwrap();
    assert_eq!(sick["ready"], "False");
    assert_eq!(sick["taints"][0], "node.kubernetes.io/not-ready:NoExecute");

    assert_eq!(v["evictions"]["pending"], 30);
    let next = v["evictions"]["next"].as_array().unwrap();
    assert_eq!(next.len(), 20);
    assert_eq!(next[0]["pod"], "default/web-00");
    assert_eq!(next[0]["in_ms"], 99_000);

    assert_eq!(v["client"]["requests"][1]["verb"], "PATCH");
    assert_eq!(v["client"]["requests"][1]["code"], "409");
    assert_eq!(v["client"]["throttle_wait_ms"], 2500);
    assert_eq!(v["client"]["dry_run_actions"][0]["kind"], "PatchNodeTaints");
    assert_eq!(v["memory"]["rss_bytes"], 5 * 1048576);
    assert_eq!(v["loop"]["wakeups"], 100);
}

#[test]
fn a_5000_node_outage_keeps_every_line_under_the_journal_limit() {
    let c = cluster(true, 5000);
    let text = snapshot(&c, DumpFormat::Text).to_text_lines();
    assert!(text.len() < 150, "{} lines", text.len());
    assert!(text.iter().all(|l| l.len() < 2048));
    let more = text
        .iter()
        .map(|l| parse(l))
        .find(|l| l.section == "not_ready" && l.get("more").is_some());
    assert_eq!(more.unwrap().get("more"), Some("… and 4951 more"));

    let json = snapshot(&c, DumpFormat::Json).to_json_line();
    assert!(json.len() <= JSON_LINE_MAX, "{} bytes", json.len());
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["not_ready"]["count"], 5001);
    let shown = v["not_ready"]["nodes"].as_array().unwrap().len();
    assert!(shown > 0);
    assert_eq!(v["not_ready"]["omitted"], 5001 - shown);
}

#[test]
fn legacy_mode_says_so_in_the_evictions_section() {
    let c = cluster(false, 3);
    let s = snapshot(&c, DumpFormat::Text);
    let lines: Vec<Line> = s.to_text_lines().iter().map(|l| parse(l)).collect();
    let evictions = lines.iter().find(|l| l.section == "evictions").unwrap();
    assert_eq!(evictions.get("mode"), Some("legacy"));
    let node = lines
        .iter()
        .find(|l| l.section == "node" && l.get("name") == Some("a-sick"))
        .unwrap();
    assert_eq!(node.get("legacy"), Some("unmarked"));
    let v: Value = serde_json::from_str(&s.to_json_line()).unwrap();
    assert_eq!(v["evictions"]["mode"], "legacy");
}
