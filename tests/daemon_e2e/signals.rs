//! The operator's signals on a daemon that is doing something. SIGUSR1 logs every section of the
//! state (text lines parsed as logfmt here; then one JSON line); SIGHUP with a
//! new eviction rate applies it to the zones at once; SIGHUP with a broken file keeps the old
//! configuration running.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::e2e_support::{
    Daemon, Kubelets, Sim, Timing, config_text, tolerating_unreachable, wait_until,
};
use serde_json::Value;

const TOKEN: &str = "daemon-a";

/// `state dump <section>: k=v k="v w"` → (section, fields).
fn parse_dump_line(line: &str) -> Option<(String, BTreeMap<String, String>)> {
    let rest = &line[line.find("state dump ")? + "state dump ".len()..];
    let (section, mut rest) = rest.split_once(':')?;
    let mut fields = BTreeMap::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let (key, after) = rest.split_once('=')?;
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, e)) = chars.next() {
                            value.push(e);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => value.push(c),
                }
            }
            (value, &quoted[end..])
        } else {
            let end = after.find(' ').unwrap_or(after.len());
            (after[..end].to_string(), &after[end..])
        };
        fields.insert(key.to_string(), value);
        rest = next;
    }
    Some((section.to_string(), fields))
}

/// Sends SIGUSR1 and collects the text dump up to its last section.
fn text_dump(d: &mut Daemon) -> Vec<(String, BTreeMap<String, String>)> {
    d.signal("USR1");
    d.wait_log("state dump version:", Duration::from_secs(5));
    d.wait_log("state dump loop:", Duration::from_secs(5));
    let lines = d.lines();
    let start = lines
        .iter()
        .rposition(|l| l.contains("state dump version:"))
        .unwrap();
    let end = lines
        .iter()
        .rposition(|l| l.contains("state dump loop:"))
        .unwrap();
    lines[start..=end]
        .iter()
        .map(|l| parse_dump_line(l).unwrap_or_else(|| panic!("not a dump line: {l}")))
        .collect()
}

fn json_dump(d: &mut Daemon) -> Value {
    d.signal("USR1");
    let line = d.wait_log("\"dump\":\"node-lifecycled\"", Duration::from_secs(5));
    serde_json::from_str(&line[line.find('{').unwrap()..]).unwrap()
}

fn section<'a>(
    dump: &'a [(String, BTreeMap<String, String>)],
    name: &str,
) -> Vec<&'a BTreeMap<String, String>> {
    dump.iter()
        .filter(|(s, _)| s == name)
        .map(|(_, f)| f)
        .collect()
}

#[test]
fn sigusr1_dumps_every_section_and_sighup_applies_a_new_rate_or_keeps_the_old_config() {
    let sim = Sim::start("signals", &[TOKEN]);
    let nodes: Vec<String> = ["n1", "n2", "n3"].iter().map(|s| s.to_string()).collect();
    for n in &nodes {
        sim.add_node(n, Some("z1"));
    }
    sim.add_pod("waits", "n3", tolerating_unreachable(Some(600)));
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    let timing = Timing::default();
    let kubeconfig = sim.kubeconfig(TOKEN);
    let mut d = Daemon::start("signals", &sim.dir, &config_text(&kubeconfig, &timing), &[]);
    d.wait_log("acting (leader election disabled)", Duration::from_secs(15));
    kubelets.set_alive("n3", false);
    wait_until(
        "n3 tainted",
        Duration::from_secs(15),
        || sim.has_taint("n3", "node.kubernetes.io/unreachable:NoExecute"),
        || d.log(),
    );
    // The taint reaches taint eviction through the node watch; give it that moment.
    wait_until(
        "one pending eviction in the dump",
        Duration::from_secs(5),
        || {
            let dump = text_dump(&mut d);
            section(&dump, "evictions")
                .first()
                .is_some_and(|e| e.get("pending").map(String::as_str) == Some("1"))
        },
        String::new,
    );

    let dump = text_dump(&mut d);
    let one = |name: &str| -> &BTreeMap<String, String> {
        let s = section(&dump, name);
        assert_eq!(s.len(), 1, "section {name}: {dump:?}");
        s[0]
    };
    assert_eq!(one("version")["pid"], d.child.id().to_string());
    assert_eq!(
        one("version")["status"],
        "leader, 3 nodes, 1 not Ready, 1 pending evictions"
    );
    assert_eq!(one("config")["node_eviction_rate"], "100");
    assert_eq!(one("leadership")["enabled"], "false");
    assert_eq!(one("leadership")["is_leader"], "true");
    assert_eq!(one("reflectors")["count"], "3");
    let reflectors = section(&dump, "reflector");
    assert_eq!(reflectors.len(), 3);
    for r in &reflectors {
        assert_eq!(r["synced"], "true", "{r:?}");
    }
    let node_objects: Vec<&str> = reflectors
        .iter()
        .filter(|r| r["resource"] == "nodes")
        .map(|r| r["objects"].as_str())
        .collect();
    assert_eq!(node_objects, ["3"]);
    assert_eq!(one("controller")["synced"], "true");
    assert_eq!(one("controller")["nodes"], "3");
    assert_eq!(one("zones")["count"], "1");
    assert_eq!(section(&dump, "zone")[0]["rate"], "100");
    assert_eq!(one("not_ready")["count"], "1");
    assert_eq!(section(&dump, "node")[0]["name"], "n3");
    assert_eq!(one("evictions")["pending"], "1");
    assert!(one("client")["requests"].parse::<u64>().unwrap() > 0);
    assert!(one("memory")["rss_bytes"].parse::<u64>().unwrap() > 0);
    assert!(one("loop")["sources"].parse::<u64>().unwrap() >= 4 + 3);

    // SIGHUP: a new rate (and the JSON dump) apply at once.
    let reloaded = Timing {
        eviction_rate: 0.5,
        dump_format: "json",
        ..timing.clone()
    };
    d.rewrite_config(&config_text(&kubeconfig, &reloaded));
    d.signal("HUP");
    let line = d.wait_log("config reloaded from", Duration::from_secs(5));
    assert!(line.contains("node_eviction_rate 100.0 -> 0.5"), "{line}");
    assert!(!line.contains("restart"), "{line}");
    let v = json_dump(&mut d);
    assert_eq!(v["zones"]["items"][0]["rate"], 0.5, "{v}");
    assert_eq!(v["config"]["node_eviction_rate"], 0.5, "{v}");
    assert_eq!(v["not_ready"]["count"], 1);
    assert_eq!(v["leadership"]["is_leader"], true);
    assert_eq!(v["reflectors"].as_array().unwrap().len(), 3);
    assert!(v["evictions"].is_object() && v["client"].is_object() && v["loop"].is_object());

    // SIGHUP with a broken file: one clear line, the running configuration stays.
    d.rewrite_config(&format!(
        "unhealthy_zone_threshold = 1.5\n{}",
        config_text(&kubeconfig, &timing)
    ));
    d.signal("HUP");
    let failed = d.wait_log("reload failed", Duration::from_secs(5));
    assert!(
        failed.contains("keeping the running configuration"),
        "{failed}"
    );
    assert!(
        failed.contains(":1: unhealthy_zone_threshold: must be in (0, 1], got 1.5"),
        "{failed}"
    );
    let v = json_dump(&mut d);
    assert_eq!(v["zones"]["items"][0]["rate"], 0.5, "{v}");
    assert!(d.child.try_wait().unwrap().is_none());
    d.signal("TERM");
    assert_eq!(d.wait_exit(Duration::from_secs(5)).0.code(), Some(0));
}
