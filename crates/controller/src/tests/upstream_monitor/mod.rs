//! Ports of upstream `node_lifecycle_controller_test.go`: health monitoring, zone states,
//! status updates, leases and pods (`TestMonitorNodeHealth*`, `TestTryUpdateNodeHealth`,
//! `TestNodeEventGeneration`, `TestPodStatusChange`, `TestProcessPodMarkPodNotReady`). Here: zone
//! states; `node_status.rs`: status updates and Leases; `pods_and_events.rs`: pods and events.
//!
//! Upstream tests call `monitorNodeHealth` at two instants an hour apart; here the clock
//! jumps (`jump`) to the second instant, the new statuses are fed, and every due timer fires.
//! The node lifecycle alone, as upstream's tests run it (`harness.rs`).

use std::time::Duration;

use crate::ZoneState;
use crate::model::ConditionStatus::{True, Unknown};
use crate::model::{
    ConditionStatus, ConditionText, Node, NodeCondition, NodeConditionType, labels,
};
use crate::tests::harness::*;
use crate::time::Time;

fn fake_now() -> Time {
    date(2015, 1, 1, 12, 0, 0)
}

fn ready(status: ConditionStatus, hb: Time, tr: Time) -> Vec<NodeCondition> {
    vec![cond(NodeConditionType::Ready, status, hb, tr)]
}

type Zones = Vec<(&'static str, &'static str, ZoneState)>;

fn zone_states(h: &Harness) -> Vec<(String, ZoneState)> {
    h.dump()
        .zones
        .iter()
        .filter_map(|z| z.state.map(|s| (z.display.clone(), s)))
        .collect()
}

fn expect(z: &Zones) -> Vec<(String, ZoneState)> {
    let mut v: Vec<(String, ZoneState)> = z
        .iter()
        .map(|(r, zz, s)| {
            let d = if r.is_empty() {
                String::from("(none)")
            } else {
                format!("{r}/{zz}")
            };
            (d, *s)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// One case of `TestMonitorNodeHealth`: initial zone states, then statuses replaced an hour
/// later and the following zone states.
fn monitor_case(
    nodes: Vec<Node>,
    updated: Vec<Vec<NodeCondition>>,
    initial: Zones,
    following: Zones,
) {
    let mut h = Harness::lifecycle_alone_started(
        test_settings(),
        fake_now(),
        nodes.clone(),
        vec![],
        vec![],
    );
    assert_eq!(zone_states(&h), expect(&initial), "initial");
    h.jump(Duration::from_secs(3600));
    for (node, conditions) in nodes.iter().zip(updated) {
        h.set_conditions(&node.name, conditions);
    }
    h.tick();
    assert_eq!(zone_states(&h), expect(&following), "following");
}

fn z1(name: &str) -> NodeBuilder {
    node(name).created(fake_now()).zone("region1", "zone1")
}

fn healthy_new() -> Vec<NodeCondition> {
    ready(True, fake_now() + Duration::from_secs(3600), fake_now())
}

fn unhealthy_new() -> Vec<NodeCondition> {
    ready(Unknown, fake_now(), fake_now())
}

use ZoneState::{FullDisruption as Full, Normal, PartialDisruption as Partial};

#[test]
fn test_monitor_node_health_no_disruption_node_without_zone_labels() {
    monitor_case(
        vec![
            node("node0")
                .created(fake_now())
                .ready(True, fake_now(), fake_now())
                .build(),
        ],
        vec![healthy_new()],
        vec![("", "", Normal)],
        vec![("", "", Normal)],
    );
}

#[test]
fn test_monitor_node_health_no_disruption_both_zones_down_one_comes_back() {
    monitor_case(
        vec![
            z1("node0").ready(Unknown, fake_now(), fake_now()).build(),
            node("node1")
                .created(fake_now())
                .zone("region1", "zone2")
                .ready(Unknown, fake_now(), fake_now())
                .build(),
        ],
        vec![unhealthy_new(), healthy_new()],
        vec![("region1", "zone1", Full), ("region1", "zone2", Full)],
        vec![("region1", "zone1", Full), ("region1", "zone2", Normal)],
    );
}

#[test]
fn test_monitor_node_health_partial_disruption_nodes_without_status_conditions() {
    monitor_case(
        (0..4).map(|i| z1(&format!("node{i}")).build()).collect(),
        vec![
            unhealthy_new(),
            unhealthy_new(),
            unhealthy_new(),
            healthy_new(),
        ],
        vec![("region1", "zone1", Full)],
        vec![("region1", "zone1", Partial)],
    );
}

#[test]
fn test_monitor_node_health_partial_disruption_one_node_failed_exceeds_threshold() {
    let mut nodes: Vec<Node> = (0..2)
        .map(|i| {
            z1(&format!("node{i}"))
                .ready(Unknown, fake_now(), fake_now())
                .build()
        })
        .collect();
    nodes.extend((2..5).map(|i| {
        z1(&format!("node{i}"))
            .ready(True, fake_now(), fake_now())
            .build()
    }));
    monitor_case(
        nodes,
        vec![
            unhealthy_new(),
            unhealthy_new(),
            unhealthy_new(),
            healthy_new(),
            healthy_new(),
        ],
        vec![("region1", "zone1", Normal)],
        vec![("region1", "zone1", Partial)],
    );
}

#[test]
fn test_monitor_node_health_full_disruption_last_healthy_node_failed() {
    monitor_case(
        vec![
            z1("node0").ready(Unknown, fake_now(), fake_now()).build(),
            z1("node1").ready(Unknown, fake_now(), fake_now()).build(),
            z1("node2").ready(True, fake_now(), fake_now()).build(),
        ],
        vec![unhealthy_new(), unhealthy_new(), unhealthy_new()],
        vec![("region1", "zone1", Normal)],
        vec![("region1", "zone1", Full)],
    );
}

#[test]
fn test_monitor_node_health_full_disruption_all_nodes_in_one_zone_down() {
    monitor_case(
        vec![
            z1("node0").ready(Unknown, fake_now(), fake_now()).build(),
            node("node1")
                .created(fake_now())
                .zone("region1", "zone2")
                .ready(True, fake_now(), fake_now())
                .build(),
        ],
        vec![unhealthy_new(), healthy_new()],
        vec![("region1", "zone1", Full), ("region1", "zone2", Normal)],
        vec![("region1", "zone1", Full), ("region1", "zone2", Normal)],
    );
}

#[test]
fn test_monitor_node_health_full_disruption_all_nodes_in_both_zones_down() {
    monitor_case(
        vec![
            z1("node0").ready(Unknown, fake_now(), fake_now()).build(),
            node("node1")
                .created(fake_now())
                .zone("region2", "zone2")
                .ready(Unknown, fake_now(), fake_now())
                .build(),
        ],
        vec![unhealthy_new(), unhealthy_new()],
        vec![("region1", "zone1", Full), ("region2", "zone2", Full)],
        vec![("region1", "zone1", Full), ("region2", "zone2", Full)],
    );
}

#[test]
fn test_monitor_node_health_full_disruption_ready_condition_removed() {
    monitor_case(
        vec![z1("node0").ready(True, fake_now(), fake_now()).build()],
        vec![vec![]],
        vec![("region1", "zone1", Normal)],
        vec![("region1", "zone1", Full)],
    );
}

#[test]
fn test_monitor_node_health_full_disruption_only_available_node_excluded() {
    monitor_case(
        vec![
            z1("node0").ready(Unknown, fake_now(), fake_now()).build(),
            z1("node-master")
                .label(labels::EXCLUDE_DISRUPTION, "")
                .ready(True, fake_now(), fake_now())
                .build(),
        ],
        vec![unhealthy_new(), healthy_new()],
        vec![("region1", "zone1", Full)],
        vec![("region1", "zone1", Full)],
    );
}

fn old() -> Time {
    date(2012, 1, 1, 0, 0, 0)
}

/// A `TestMonitorNodeHealthUpdateStatus` / `...WithLease` case: pass at fakeNow, optionally a
/// second pass `later` with the new status and lease; returns the harness.
fn update_status_case(
    n0: Node,
    lease0: Option<Time>,
    later: Option<(Duration, Option<Vec<NodeCondition>>, Option<Time>)>,
) -> Harness {
    let leases = lease0.map(|t| vec![lease("node0", t)]).unwrap_or_default();
    let mut h = Harness::lifecycle_alone_started(
        test_settings(),
        fake_now(),
        vec![n0],
        vec![pod("pod0", "node0")],
        leases,
    );
    if let Some((d, status, renew)) = later {
        h.jump(d);
        if let Some(c) = status {
            h.set_conditions("node0", c);
        }
        if let Some(t) = renew {
            h.put_lease(lease("node0", t));
        }
        h.tick();
    }
    h
}

fn never_updated(kind: NodeConditionType, created: Time, now: Time) -> NodeCondition {
    NodeCondition {
        kind,
        status: Unknown,
        last_heartbeat_time: Some(created),
        last_transition_time: Some(now),
        text: ConditionText::new(
            Some(n("NodeStatusNeverUpdated")),
            Some(n("Kubelet never posted node status.")),
        ),
    }
}

fn four_never_updated(created: Time, now: Time) -> Vec<NodeCondition> {
    [
        NodeConditionType::Ready,
        NodeConditionType::MemoryPressure,
        NodeConditionType::DiskPressure,
        NodeConditionType::PIDPressure,
    ]
    .into_iter()
    .map(|k| never_updated(k, created, now))
    .collect()
}

mod node_status;
mod pods_and_events;
