//! What an operator sees and changes while the core runs: the state dump, a config reload,
//! and a fleet of 5,000 nodes and 150,000 pods.
//! The node lifecycle alone (`harness.rs` says why).

use std::time::Duration;

use super::harness::*;
use crate::model::ConditionStatus::{False, True, Unknown};
use crate::model::TaintEffect::NoExecute;
use crate::model::taint_keys;
use crate::time::Rate;
use crate::time::Time;
use crate::{Settings, ZoneState};

fn t0() -> Time {
    date(2024, 5, 1, 8, 0, 0)
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn defaults() -> Settings {
    Settings::default()
}

#[test]
fn state_dump_shows_zones_queues_and_nodes() {
    let nodes = vec![
        node("node0")
            .zone("r", "a")
            .ready(Unknown, t0(), t0())
            .build(),
        node("node1")
            .zone("r", "a")
            .ready(False, t0(), t0())
            .build(),
        node("node2").zone("r", "a").ready(True, t0(), t0()).build(),
        node("node3").zone("r", "a").ready(True, t0(), t0()).build(),
    ];
    let mut h = Harness::lifecycle_alone_started(defaults(), t0(), nodes, vec![], vec![]);
    h.run_for(ms(150));
    let d = h.dump();
    assert!(d.synced && d.taint_based_eviction && !d.all_zones_fully_disrupted);
    assert_eq!(d.zones.len(), 1);
    let z = &d.zones[0];
    assert_eq!(z.display, "r/a");
    assert_eq!(
        (z.state, z.size, z.unhealthy),
        (Some(ZoneState::Normal), 4, 2)
    );
    assert_eq!(z.rate, Rate::from_f64(0.1).unwrap());
    // One node tainted at once (the bucket starts full), the other waits for a token.
    assert_eq!((z.tokens, z.queue_len, z.evictions_total), (0, 1, 1));
    assert_eq!(
        z.queue_head.as_ref().map(|(n, _)| n.to_string()),
        Some(String::from("node1"))
    );
    let n0 = &d.nodes[0];
    assert_eq!(n0.ready, Some(Unknown));
    assert_eq!(n0.grace, secs(50));
    assert_eq!(n0.probe_age, ms(150));
    assert_eq!(n0.pending_deadline, Some(t0() + secs(50) + ms(1)));
    assert!(
        n0.taints
            .contains(&format!("{}:NoExecute", taint_keys::UNREACHABLE))
    );
    assert!(
        n0.taints
            .contains(&format!("{}:NoSchedule", taint_keys::UNREACHABLE))
    );
    assert_eq!(n0.verdict, "idle");
    // Ten seconds later the second node gets its token.
    h.run_for(secs(10));
    assert!(h.has_taint("node1", taint_keys::NOT_READY, NoExecute));
    assert_eq!(h.dump().zones[0].evictions_total, 2);
}

#[test]
fn config_reload_changes_rates_and_graces_live() {
    let nodes = vec![
        node("node0").zone("r", "a").ready(True, t0(), t0()).build(),
        node("node1").zone("r", "a").ready(True, t0(), t0()).build(),
    ];
    let mut h = Harness::lifecycle_alone_started(defaults(), t0(), nodes, vec![], vec![]);
    let faster = Settings {
        node_monitor_grace_period: secs(20),
        node_eviction_rate: Rate::from_f64(1.0).unwrap(),
        ..defaults()
    };
    let actions = h.ctl.apply_settings(faster, h.now);
    assert!(actions.is_empty());
    let d = h.dump();
    assert_eq!(d.zones[0].rate, Rate::per_second(1));
    assert_eq!(d.nodes[0].pending_deadline, Some(t0() + secs(20) + ms(1)));
}

/// Scale: 5,000 nodes and 150,000 pods through sync and a full pass, then every node going
/// silent at once (one verdict each, all pods marked, master disruption mode).
#[test]
fn five_thousand_nodes_and_150k_pods() {
    const NODES: usize = 5_000;
    const PODS: usize = 30;
    let nodes = (0..NODES)
        .map(|i| {
            node(&format!("node{i}"))
                .zone("r", &format!("z{}", i % 3))
                .ready(True, t0(), t0())
                .build()
        })
        .collect();
    let pods = (0..NODES * PODS)
        .map(|i| pod(&format!("pod{i}"), &format!("node{}", i % NODES)))
        .collect();
    let mut h = Harness::lifecycle_alone_started(defaults(), t0(), nodes, pods, vec![]);
    h.run_until(t0() + secs(49));
    assert!(h.status_writes().is_empty());
    h.run_until(t0() + secs(60));
    assert_eq!(h.status_writes().len(), NODES);
    assert_eq!(h.pod_status_updates(), NODES * PODS);
    assert!(h.dump().all_zones_fully_disrupted);
}
