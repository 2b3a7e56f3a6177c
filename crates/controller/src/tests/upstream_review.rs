//! The divergences a line-by-line review of upstream master found
//! (`node_lifecycle_controller.go`, `controller_utils.go`, `component-helpers/node/topology`):
//! each test is named after what it proves and fails on the behaviour before its fix.
//! The node lifecycle alone, as upstream's tests run it (`harness.rs`).

use super::harness::*;
use crate::ZoneState;
use crate::events::EventObject;
use crate::model::ConditionStatus::{False, Other, True, Unknown};
use crate::model::TaintEffect::{NoExecute, NoSchedule};
use crate::model::{NodeConditionType, PodKey, labels, taint_keys};
use crate::time::Time;

fn t0() -> Time {
    date(2025, 3, 1, 9, 0, 0)
}

/// Ten minutes before t0: a heartbeat that old is long past grace.
fn old() -> Time {
    date(2025, 3, 1, 8, 50, 0)
}

fn ms(v: u64) -> std::time::Duration {
    std::time::Duration::from_millis(v)
}

fn key(name: &str) -> PodKey {
    pod(name, "").key
}

/// node0 falls silent at t0; node1 keeps posting Ready until `until` (so the zone stays
/// healthy and node0 alone is judged Unknown at t0 + 50 s).
fn keep_node1_alive(h: &mut Harness, until: Time) {
    let mut t = h.now;
    while t < until {
        t = (t + secs(10)).min(until);
        h.run_until(t);
        h.set_conditions("node1", vec![cond(NodeConditionType::Ready, True, t, t0())]);
    }
}

fn two_nodes() -> Vec<crate::model::Node> {
    vec![
        node("node0").zone("r", "a").ready(True, t0(), t0()).build(),
        node("node1").zone("r", "a").ready(True, t0(), t0()).build(),
    ]
}

/// Upstream's per-pod path (`processPod`) never touches the node retry set: pods whose
/// NotReady write failed are retried at the next pass even if a new pod was bound meanwhile.
#[test]
fn a_pod_bound_to_a_dead_node_does_not_cancel_the_retry_of_its_failed_pods() {
    let pods = vec![pod("p1", "node0"), pod("p2", "node0")];
    let mut h = Harness::lifecycle_alone_started(test_settings(), t0(), two_nodes(), pods, vec![]);
    h.faults
        .fail_pod_status_of
        .extend(["p1", "p2"].map(String::from));
    keep_node1_alive(&mut h, t0() + secs(51));
    assert_eq!(h.ready_of("node0"), Some(Unknown));
    assert_eq!(h.pods[&key("p1")].ready, Some(True), "the writes failed");
    h.put_pod(pod("p3", "node0"));
    assert_eq!(h.pods[&key("p3")].ready, Some(False));
    // The API recovers; the next pass (every 5 s) retries the failed pods.
    h.faults.fail_pod_status_of.clear();
    keep_node1_alive(&mut h, t0() + secs(57));
    assert_eq!(
        h.pods[&key("p1")].ready,
        Some(False),
        "retried at the next pass"
    );
    assert_eq!(
        h.pods[&key("p2")].ready,
        Some(False),
        "retried at the next pass"
    );
}

/// `GetZoneKey` takes the beta failure-domain label whenever its key is present, even empty.
#[test]
fn an_empty_beta_zone_label_still_wins_over_the_ga_one() {
    let n0 = node("node0")
        .label(labels::REGION_BETA, "r")
        .label(labels::ZONE_BETA, "")
        .label(labels::REGION, "r")
        .label(labels::ZONE, "a")
        .ready(True, t0(), t0())
        .build();
    let h = Harness::lifecycle_alone_started(test_settings(), t0(), vec![n0], vec![], vec![]);
    assert!(h.zone_state("r", "").is_some(), "{:?}", h.dump().zones);
    assert_eq!(h.zone_state("r", "a"), None);
}

/// `MarkPodsNotReady` sets every pod's Ready condition to False, an Unknown one included.
#[test]
fn a_pod_whose_ready_is_unknown_is_marked_not_ready_too() {
    let mut p = pod("p1", "node0");
    p.ready = Some(Unknown);
    let mut h =
        Harness::lifecycle_alone_started(test_settings(), t0(), two_nodes(), vec![p], vec![]);
    keep_node1_alive(&mut h, t0() + secs(51));
    assert_eq!(h.pod_marks("p1").len(), 1);
    assert_eq!(h.pods[&key("p1")].ready, Some(False));
}

/// The restart rule of kubernetes#135205 is about nodes not heard from (Unknown): a node whose
/// kubelet reports Ready=False is alive, and upstream never marks its pods on a restart.
#[test]
fn a_restart_marks_pods_on_silent_nodes_only() {
    let nodes = vec![
        node("node0")
            .zone("r", "a")
            .ready(False, t0(), t0())
            .build(),
        node("node1")
            .zone("r", "a")
            .ready(Unknown, old(), old())
            .build(),
        node("node2").zone("r", "a").ready(True, t0(), t0()).build(),
    ];
    let pods = vec![pod("on-false", "node0"), pod("on-unknown", "node1")];
    let mut h = Harness::lifecycle_alone_started(test_settings(), t0(), nodes, pods, vec![]);
    h.run_for(secs(1));
    assert!(h.pod_marks("on-false").is_empty(), "{:?}", h.log);
    assert_eq!(h.pod_marks("on-unknown"), vec![t0()]);
}

/// Upstream records the pod's NodeNotReady event after its status update unless the pod was
/// not found: a failed update still gets the event.
#[test]
fn a_failed_pod_status_write_still_records_node_not_ready_on_the_pod() {
    let mut h = Harness::lifecycle_alone_started(
        test_settings(),
        t0(),
        two_nodes(),
        vec![pod("p1", "node0")],
        vec![],
    );
    h.faults.fail_pod_status_of.insert("p1".into());
    keep_node1_alive(&mut h, t0() + secs(51));
    assert!(!h.pod_marks("p1").is_empty());
    assert_eq!(h.pods[&key("p1")].ready, Some(True), "every write failed");
    let pod_events: Vec<_> = h
        .events()
        .into_iter()
        .filter(|e| matches!(&e.object, EventObject::Pod { name, .. } if &**name == "p1"))
        .map(|e| e.reason)
        .collect();
    assert!(!pod_events.is_empty(), "{:?}", h.log);
    assert!(pod_events.iter().all(|r| *r == "NodeNotReady"));
}

/// `node_collector_evictions_total{zone}` is a counter: a zone that loses its last node and
/// gets one back keeps its count.
#[test]
fn a_zones_eviction_count_survives_the_zone_emptying() {
    let nodes = vec![
        node("node0")
            .zone("r", "a")
            .ready(Unknown, old(), old())
            .build(),
        node("node1").zone("r", "a").ready(True, t0(), t0()).build(),
        node("node2").zone("r", "a").ready(True, t0(), t0()).build(),
    ];
    let mut h = Harness::lifecycle_alone_started(test_settings(), t0(), nodes, vec![], vec![]);
    h.tainting_pass();
    assert!(h.has_taint("node0", taint_keys::UNREACHABLE, NoExecute));
    let count = |h: &Harness| {
        h.dump()
            .zones
            .iter()
            .find(|z| &*z.key == "r:\x00:a")
            .map(|z| z.evictions_total)
    };
    assert_eq!(count(&h), Some(1));
    for n in ["node0", "node1", "node2"] {
        h.delete_node(n);
    }
    assert_eq!(count(&h), None, "the zone is gone with its nodes");
    h.put_node(
        node("node3")
            .zone("r", "a")
            .ready(True, h.now, h.now)
            .build(),
    );
    assert_eq!(count(&h), Some(1));
}

/// Upstream keeps the saved Ready condition as it was when the status write fails: a pod
/// bound meanwhile is judged against what the API says (Ready=True), not the failed write.
#[test]
fn a_failed_status_write_leaves_the_saved_ready_condition_alone() {
    let mut h =
        Harness::lifecycle_alone_started(test_settings(), t0(), two_nodes(), vec![], vec![]);
    h.faults.fail_node_status = 1;
    keep_node1_alive(&mut h, t0() + secs(50));
    h.run_until(t0() + secs(50) + std::time::Duration::from_millis(1));
    assert_eq!(h.status_writes().len(), 1);
    assert_eq!(h.ready_of("node0"), Some(True), "the write failed");
    h.put_pod(pod("fresh", "node0"));
    assert!(h.pod_marks("fresh").is_empty(), "{:?}", h.log);
}

/// A kubelet that reports Ready=False gets the not-ready NoExecute taint in the same instant as
/// the NoSchedule one when its zone has a token, as a node judged Unknown does.
#[test]
fn a_kubelet_reporting_not_ready_is_tainted_no_execute_in_the_same_instant() {
    let mut h =
        Harness::lifecycle_alone_started(test_settings(), t0(), two_nodes(), vec![], vec![]);
    keep_node1_alive(&mut h, t0() + secs(20));
    let at = t0() + secs(23);
    h.run_until(at);
    h.set_conditions("node0", vec![cond(NodeConditionType::Ready, False, at, at)]);
    assert_eq!(
        h.taint_writes_with("node0", taint_keys::NOT_READY, NoSchedule)
            .first(),
        Some(&at)
    );
    assert_eq!(
        h.taint_writes_with("node0", taint_keys::NOT_READY, NoExecute)
            .first(),
        Some(&at),
        "{:?}",
        h.log
    );
    let _ = ZoneState::Normal;
}

/// A Ready status that is neither True, False nor Unknown (`""`, `"true"`) matches none of
/// upstream's cases: a node that heartbeats with it is not tainted or queued; once it falls
/// silent, the grace period overwrites it with Unknown like any other status.
#[test]
fn an_unreadable_ready_status_taints_nothing_until_grace_overwrites_it() {
    let nodes = vec![
        node("node0")
            .zone("r", "a")
            .ready(Other, t0(), t0())
            .build(),
        node("node1").zone("r", "a").ready(True, t0(), t0()).build(),
        node("node2").zone("r", "a").ready(True, t0(), t0()).build(),
    ];
    let mut h = Harness::lifecycle_alone_started(test_settings(), t0(), nodes, vec![], vec![]);
    h.tainting_pass();
    assert!(h.taints("node0").is_empty(), "{:?}", h.taints("node0"));
    let mut t = t0();
    while t < t0() + secs(51) {
        t = (t + secs(10)).min(t0() + secs(51));
        h.run_until(t);
        for n in ["node1", "node2"] {
            h.set_conditions(n, vec![cond(NodeConditionType::Ready, True, t, t0())]);
        }
    }
    assert_eq!(
        h.ready_of("node0"),
        Some(Unknown),
        "overwritten after grace"
    );
    h.tainting_pass();
    assert!(h.has_taint("node0", taint_keys::UNREACHABLE, NoSchedule));
    assert!(h.has_taint("node0", taint_keys::UNREACHABLE, NoExecute));
}

/// Upstream tries a failed node health update again after 20 ms (`retrySleepTime`), five
/// tries in all, instead of waiting for the next pass.
#[test]
fn a_failed_status_write_is_tried_again_after_twenty_milliseconds() {
    let mut h =
        Harness::lifecycle_alone_started(test_settings(), t0(), two_nodes(), vec![], vec![]);
    h.faults.fail_node_status = 2;
    keep_node1_alive(&mut h, t0() + secs(50));
    h.run_until(t0() + secs(51));
    let verdict = t0() + secs(50) + ms(1);
    let writes: Vec<Time> = h
        .status_writes()
        .into_iter()
        .filter(|(_, n, _)| &**n == "node0")
        .map(|(t, _, _)| t)
        .collect();
    assert_eq!(writes, vec![verdict, verdict + ms(20), verdict + ms(40)]);
    assert_eq!(h.ready_of("node0"), Some(Unknown));
}

/// Upstream's taint updates back off 100–200 ms after a conflict (`UpdateTaintBackoff`) instead
/// of trying again at once.
#[test]
fn a_conflicting_taint_write_is_tried_again_after_upstreams_backoff() {
    let mut h =
        Harness::lifecycle_alone_started(test_settings(), t0(), two_nodes(), vec![], vec![]);
    keep_node1_alive(&mut h, t0() + secs(20));
    h.faults.conflict_taint_writes = 1;
    let at = t0() + secs(23);
    h.run_until(at);
    h.set_conditions("node0", vec![cond(NodeConditionType::Ready, False, at, at)]);
    h.run_until(at + secs(1));
    let writes = h.taint_writes_with("node0", taint_keys::NOT_READY, NoSchedule);
    assert_eq!(writes.first(), Some(&at));
    let retry = writes[1];
    assert!(
        retry >= at + ms(100) && retry <= at + ms(200),
        "retried at +{:?}",
        retry.since(at)
    );
    assert!(h.has_taint("node0", taint_keys::NOT_READY, NoSchedule));
    assert!(h.has_taint("node0", taint_keys::NOT_READY, NoExecute));
}
