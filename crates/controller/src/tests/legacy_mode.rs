//! Legacy direct eviction (`taint_based_eviction = false`; docs/upstream.md, "Legacy direct
//! eviction"): which pods go, when, and when it stops.
//! The node lifecycle alone (`harness.rs` says why; legacy mode runs no taint eviction anyway).

use super::harness::*;
use crate::model::ConditionStatus::{False, True, Unknown};
use crate::model::NodeConditionType;
use crate::model::TaintEffect::NoExecute;
use crate::time::Time;
use crate::{Action, LegacyEviction, Settings, ZoneState};

fn t0() -> Time {
    date(2024, 5, 1, 8, 0, 0)
}

fn defaults() -> Settings {
    Settings::default()
}

fn legacy() -> Settings {
    Settings {
        taint_based_eviction: false,
        ..defaults()
    }
}

#[test]
fn legacy_eviction_skips_daemonset_and_deleting_pods_and_waits_for_the_timeout() {
    let n0 = node("node0")
        .zone("r", "a")
        .ready(False, t0(), t0())
        .build();
    let n1 = node("node1").zone("r", "a").ready(True, t0(), t0()).build();
    let mut ds = pod("ds", "node0");
    ds.daemonset_owned = true;
    let mut going = pod("going", "node0");
    going.deleting = true;
    let pods = vec![pod("app", "node0"), ds, going];
    let mut h = Harness::lifecycle_alone_started(legacy(), t0(), vec![n0, n1], pods, vec![]);
    let mut t = t0();
    let beat = |h: &mut Harness, t: Time| {
        h.set_conditions(
            "node0",
            vec![cond(NodeConditionType::Ready, False, t, t0())],
        );
        h.set_conditions("node1", vec![cond(NodeConditionType::Ready, True, t, t0())]);
    };
    while t < t0() + secs(290) {
        t += secs(10);
        h.run_until(t);
        beat(&mut h, t);
    }
    assert!(h.pod_reasons.is_empty(), "not before pod_eviction_timeout");
    assert_eq!(h.dump().nodes[0].legacy, Some(LegacyEviction::Unmarked));
    while t < t0() + secs(320) {
        t += secs(10);
        h.run_until(t);
        beat(&mut h, t);
    }
    let deleted: Vec<String> = h
        .log
        .iter()
        .filter_map(|(_, a)| match a {
            Action::DeletePod { pod, .. } => Some(pod.name.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, ["app"]);
    assert_eq!(
        h.pod_reasons.len(),
        3,
        "NodeLost is written on every pod, as upstream"
    );
    assert_eq!(h.dump().nodes[0].legacy, Some(LegacyEviction::Evicted));
    assert!(h.taints("node0").iter().all(|(_, e)| *e != NoExecute));
    // Ready again: back to unmarked.
    h.set_conditions(
        "node0",
        vec![cond(NodeConditionType::Ready, True, h.now, h.now)],
    );
    assert_eq!(h.dump().nodes[0].legacy, Some(LegacyEviction::Unmarked));
}

/// Upstream `evictPods`: once a node is evicted, every pass deletes the pods newly bound to it
/// at once. A pass that finds nothing left to delete (only DaemonSet or terminating pods) must
/// not leave a job open that blocks the next one.
#[test]
fn legacy_evicted_node_deletes_pods_bound_later_even_after_an_empty_pass() {
    let n0 = node("node0")
        .zone("r", "a")
        .ready(False, t0(), t0())
        .build();
    let n1 = node("node1").zone("r", "a").ready(True, t0(), t0()).build();
    let mut ds = pod("ds", "node0");
    ds.daemonset_owned = true;
    let mut h = Harness::lifecycle_alone_started(
        legacy(),
        t0(),
        vec![n0, n1],
        vec![pod("app", "node0"), ds],
        vec![],
    );
    let mut t = t0();
    let beat = |h: &mut Harness, t: Time| {
        h.set_conditions(
            "node0",
            vec![cond(NodeConditionType::Ready, False, t, t0())],
        );
        h.set_conditions("node1", vec![cond(NodeConditionType::Ready, True, t, t0())]);
    };
    // Past pod_eviction_timeout, then several more passes over a node with nothing left to delete.
    while t < t0() + secs(400) {
        t += secs(10);
        h.run_until(t);
        beat(&mut h, t);
    }
    assert_eq!(h.dump().nodes[0].legacy, Some(LegacyEviction::Evicted));
    let deletes = |h: &Harness| -> Vec<String> {
        h.log
            .iter()
            .filter_map(|(_, a)| match a {
                Action::DeletePod { pod, .. } => Some(pod.name.to_string()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(deletes(&h), ["app"]);
    h.put_pod(pod("late", "node0"));
    for _ in 0..2 {
        t += secs(10);
        h.run_until(t);
        beat(&mut h, t);
    }
    assert_eq!(
        deletes(&h),
        ["app", "late"],
        "a pod bound to an evicted node goes at once"
    );
}

#[test]
fn legacy_eviction_stops_when_all_zones_are_fully_disrupted() {
    let n0 = node("node0")
        .zone("r", "a")
        .ready(Unknown, t0(), t0())
        .build();
    let mut h = Harness::lifecycle_alone_started(
        legacy(),
        t0(),
        vec![n0],
        vec![pod("app", "node0")],
        vec![],
    );
    h.run_until(t0() + secs(900));
    assert_eq!(h.zone_state("r", "a"), Some(ZoneState::FullDisruption));
    assert!(h.pod_reasons.is_empty());
    assert!(
        !h.log
            .iter()
            .any(|(_, a)| matches!(a, Action::DeletePod { .. }))
    );
}
