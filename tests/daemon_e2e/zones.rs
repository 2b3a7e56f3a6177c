//! Zones and disruption, end to end (docs/upstream.md, "Zones"). A 3-node zone losing 2 nodes stays
//! Normal and is tainted at the normal rate; a 60-node zone losing 40 is partially disrupted and,
//! at or under `large_cluster_size_threshold`, gets rate 0: no NoExecute taint; every node of
//! every zone silent at once (the API server cut off from the nodes) taints and deletes nothing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::e2e_support::{Daemon, Kubelets, Sim, Timing, config_text, holds_for, wait_until};
use serde_json::{Value, json};

const TOKEN: &str = "daemon-a";
const NO_EXECUTE: [&str; 2] = [
    "node.kubernetes.io/unreachable:NoExecute",
    "node.kubernetes.io/not-ready:NoExecute",
];

fn names(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}{i:02}")).collect()
}

fn json_dump(d: &mut Daemon) -> Value {
    d.signal("USR1");
    let line = d.wait_log("\"dump\":\"node-lifecycled\"", Duration::from_secs(5));
    serde_json::from_str(&line[line.find('{').unwrap()..]).unwrap()
}

fn start(sim: &Sim, name: &str, timing: Timing) -> Daemon {
    let timing = Timing {
        dump_format: "json",
        ..timing
    };
    let mut d = Daemon::start(
        name,
        &sim.dir,
        &config_text(&sim.kubeconfig(TOKEN), &timing),
        &[],
    );
    d.wait_log("acting (leader election disabled)", Duration::from_secs(20));
    d
}

fn no_execute_tainted(sim: &Sim, nodes: &[String]) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| NO_EXECUTE.iter().any(|t| sim.has_taint(n, t)))
        .cloned()
        .collect()
}

#[test]
fn a_three_node_zone_losing_two_stays_normal_and_is_tainted_at_the_normal_rate() {
    let sim = Sim::start("zone-normal", &[TOKEN]);
    let nodes = names("a", 3);
    for n in &nodes {
        sim.add_node(n, Some("z1"));
    }
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    // One node per second, so the spacing of the two taints shows the zone's rate.
    let mut d = start(
        &sim,
        "zone-normal",
        Timing {
            eviction_rate: 1.0,
            ..Timing::default()
        },
    );
    kubelets.set_alive("a00", false);
    kubelets.set_alive("a01", false);
    let mut tainted_at: BTreeMap<String, Instant> = BTreeMap::new();
    wait_until(
        "both silent nodes tainted NoExecute",
        Duration::from_secs(20),
        || {
            for n in no_execute_tainted(&sim, &nodes) {
                tainted_at.entry(n).or_insert_with(Instant::now);
            }
            tainted_at.len() == 2
        },
        || d.log(),
    );
    assert!(!tainted_at.contains_key("a02"));
    let times: Vec<Instant> = tainted_at.values().copied().collect();
    let gap = times[0].max(times[1]) - times[0].min(times[1]);
    assert!(
        gap >= Duration::from_millis(700),
        "two taints {gap:?} apart at 1 node/s"
    );
    let v = json_dump(&mut d);
    assert_eq!(v["zones"]["items"][0]["state"], "Normal", "{v}");
    assert_eq!(v["zones"]["items"][0]["rate"], 1.0, "{v}");
}

#[test]
fn a_sixty_node_zone_losing_forty_is_partially_disrupted_and_not_tainted() {
    let sim = Sim::start("zone-partial", &[TOKEN]);
    let nodes = names("p", 60);
    for n in &nodes {
        sim.add_node(n, Some("z1"));
    }
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    // A zone of 60 at a threshold of 60 counts as small: partial disruption means rate 0.
    let mut d = start(
        &sim,
        "zone-partial",
        Timing {
            large_cluster_size_threshold: 60,
            ..Timing::default()
        },
    );
    // Together: one at a time, the kubelet thread could renew the later ones a period (300 ms)
    // after the first stopped, and those first few would be judged, and tainted, alone.
    kubelets.silence(&nodes[..40]);
    wait_until(
        "40 nodes Unknown",
        Duration::from_secs(30),
        || nodes[..40].iter().all(|n| sim.ready(n) == "Unknown"),
        || d.log(),
    );
    holds_for(
        "no NoExecute taint in the partially disrupted zone",
        Duration::from_secs(3),
        || no_execute_tainted(&sim, &nodes).is_empty(),
        || d.log(),
    );
    assert!(nodes[40..].iter().all(|n| sim.ready(n) == "True"));
    let v = json_dump(&mut d);
    let zone = &v["zones"]["items"][0];
    assert_eq!(zone["state"], "PartialDisruption", "{v}");
    assert_eq!(zone["rate"], 0.0, "{v}");
    assert_eq!(zone["unhealthy"], 40, "{v}");
}

#[test]
fn every_node_silent_at_once_taints_and_deletes_nothing() {
    let sim = Sim::start("zone-all-silent", &[TOKEN]);
    let nodes: Vec<String> = names("x", 3).into_iter().chain(names("y", 3)).collect();
    for n in &nodes {
        let zone = if n.starts_with('x') { "zx" } else { "zy" };
        sim.add_node(n, Some(zone));
        sim.add_pod(&format!("pod-{n}"), n, json!([]));
    }
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    let mut d = start(&sim, "zone-all-silent", Timing::default());
    kubelets.silence_all();
    wait_until(
        "every node Unknown",
        Duration::from_secs(20),
        || nodes.iter().all(|n| sim.ready(n) == "Unknown"),
        || d.log(),
    );
    holds_for(
        "nothing tainted NoExecute, nothing deleted",
        Duration::from_secs(3),
        || no_execute_tainted(&sim, &nodes).is_empty() && sim.deleted_pods().is_empty(),
        || d.log(),
    );
    let v = json_dump(&mut d);
    assert_eq!(v["controller"]["all_zones_fully_disrupted"], true, "{v}");
}
