//! Taints that belong to others: the out-of-tree node-readiness-controller's
//! `readiness.k8s.io/*` taints on nodes still bootstrapping. (DRA device taints live on devices,
//! in ResourceSlices and DeviceTaintRules, never in a Node's `spec.taints`: nothing of ours reads
//! or writes them, and upstream's device-taint-eviction-controller does their evictions.)
//!
//! Every taint write carries the node's whole list, so each path that writes one is walked here
//! with readiness taints on the node: they come out of every write as they went in. They are no
//! node failure for the lifecycle's decisions (zone state, suspects, the brake, NoExecute
//! taints), while taint eviction treats a readiness `NoExecute` taint as upstream 1.37's taint
//! eviction controller treats any `NoExecute` taint: pods that do not tolerate it go.

use super::harness::{cond, date, n, node, pod, secs, test_settings};
use super::lifecycle_with_eviction::{Cluster, with_tolerations};
use crate::brake::MaxUnhealthy;
use crate::decisions::Decision;
use crate::inputs::Input;
use crate::model::{
    ConditionStatus, Lease, Node, NodeConditionType, Taint, TaintEffect, Toleration,
    TolerationOperator, taint_keys,
};
use crate::settings::Settings;
use crate::testing::HeldAnswer;
use crate::time::Time;
use crate::zones::ZoneState;

fn t0() -> Time {
    date(2026, 12, 1, 8, 0, 0)
}

const NETWORK: &str = "readiness.k8s.io/NetworkReady";
const GPU: &str = "readiness.k8s.io/acme.com/gpu-driver";

/// The node-readiness-controller's taints as it writes them: `pending`, one NoSchedule (the
/// usual bootstrap gate) and one NoExecute (a rule with `effect: NoExecute`).
fn readiness_taints(added: Time) -> Vec<Taint> {
    vec![
        Taint {
            key: n(NETWORK),
            value: n("pending"),
            effect: TaintEffect::NoSchedule,
            time_added: None,
        },
        Taint {
            key: n(GPU),
            value: n("pending"),
            effect: TaintEffect::NoExecute,
            time_added: Some(added),
        },
    ]
}

fn bootstrapping(name: &str, zone: &str, ready_since: Time) -> Node {
    let mut built = node(name)
        .zone("r", zone)
        .ready(ConditionStatus::True, ready_since, ready_since)
        .build();
    built.taints = readiness_taints(ready_since);
    built
}

fn renewal(name: &str, at: Time) -> Lease {
    Lease {
        name: name.into(),
        renew_time: Some(at),
        duration_seconds: Some(40),
        resource_version: format!("{}", at.as_unix_millis()).into(),
    }
}

/// Tolerates every readiness taint forever (what a CNI DaemonSet does).
fn tolerating_readiness(seconds: Option<i64>, key: &str) -> Toleration {
    Toleration {
        key: n(key),
        operator: TolerationOperator::Exists,
        value: n(""),
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: seconds,
    }
}

/// The readiness taints of a taint list, as written.
fn readiness_of(taints: &[Taint]) -> Vec<Taint> {
    taints
        .iter()
        .filter(|t| t.key.starts_with("readiness.k8s.io/"))
        .cloned()
        .collect()
}

fn set_ready(c: &mut Cluster, name: &str, status: ConditionStatus) {
    let t = c.now;
    c.set_conditions(name, vec![cond(NodeConditionType::Ready, status, t, t)]);
}

/// A node still bootstrapping (readiness taints on it) fails: its kubelet reports Ready=False
/// (not-ready NoSchedule and NoExecute added), then falls silent (swapped to unreachable), then
/// comes back (all of ours removed). Every one of those writes carries the readiness taints
/// with their values and `timeAdded` unchanged, and the node ends with exactly them.
#[test]
fn a_bootstrapping_node_keeps_its_readiness_taints_through_every_taint_write_we_make() {
    let mut c = Cluster::new(test_settings(), t0());
    for (name, zone) in [("boot", "a"), ("peer", "a"), ("other", "b")] {
        c.put_lease(renewal(name, t0()));
        let built = if name == "boot" {
            bootstrapping(name, zone, t0())
        } else {
            node(name)
                .zone("r", zone)
                .ready(ConditionStatus::True, t0(), t0())
                .build()
        };
        c.put_node(built);
    }
    c.alive.insert(n("peer"));
    c.alive.insert(n("other"));
    c.feed(Input::InitialSyncDone);
    c.run_for(secs(5));
    set_ready(&mut c, "boot", ConditionStatus::False);
    c.run_for(secs(1));
    assert!(c.has_taint("boot", taint_keys::NOT_READY, TaintEffect::NoExecute));
    assert!(c.has_taint("boot", taint_keys::NOT_READY, TaintEffect::NoSchedule));
    // Silent from here: Unknown at its deadline, swapped to unreachable.
    c.run_for(secs(70));
    assert_eq!(c.ready_of("boot"), Some(ConditionStatus::Unknown));
    assert!(c.has_taint("boot", taint_keys::UNREACHABLE, TaintEffect::NoExecute));
    assert!(!c.has_taint("boot", taint_keys::NOT_READY, TaintEffect::NoExecute));
    // Back.
    let t = c.now;
    c.put_lease(renewal("boot", t));
    set_ready(&mut c, "boot", ConditionStatus::True);
    c.run_for(secs(1));
    let writes: Vec<_> = c
        .taint_writes()
        .into_iter()
        .filter(|(_, node, _)| &**node == "boot")
        .collect();
    assert!(writes.len() >= 4, "{writes:#?}");
    for (at, _, taints) in &writes {
        assert_eq!(
            readiness_of(taints),
            readiness_taints(t0()),
            "the write at {at:?} lost or changed a readiness taint: {taints:#?}"
        );
    }
    assert_eq!(c.nodes[&n("boot")].taints, readiness_taints(t0()));
}

/// A restart finds a node Ready with a stale not-ready NoExecute taint of ours beside the
/// readiness taints: ours comes off at first sight (as upstream), theirs stay.
#[test]
fn a_restart_removes_our_stale_taint_from_a_ready_node_and_leaves_the_readiness_taints() {
    let mut c = Cluster::new(test_settings(), t0());
    let mut built = bootstrapping("boot", "a", t0());
    built.taints.push(Taint {
        key: n(taint_keys::NOT_READY),
        value: n(""),
        effect: TaintEffect::NoExecute,
        time_added: Some(t0()),
    });
    c.put_lease(renewal("boot", t0()));
    c.put_node(built);
    c.feed(Input::InitialSyncDone);
    c.run_for(secs(1));
    assert_eq!(c.taint_writes().len(), 1, "{:#?}", c.taint_writes());
    assert_eq!(c.nodes[&n("boot")].taints, readiness_taints(t0()));
}

/// The node-readiness-controller lifts its gate while our write is on its way, from a view
/// that still had it: the write answers 409, and the one made on the node read again does not
/// bring the gate back.
#[test]
fn a_readiness_gate_lifted_while_our_write_was_on_its_way_is_not_put_back() {
    let mut c = Cluster::new(test_settings(), t0());
    c.put_lease(renewal("boot", t0()));
    c.put_node(bootstrapping("boot", "a", t0()));
    c.put_lease(renewal("peer", t0()));
    c.put_node(
        node("peer")
            .zone("r", "a")
            .ready(ConditionStatus::True, t0(), t0())
            .build(),
    );
    c.feed(Input::InitialSyncDone);
    c.run_for(secs(1));
    c.hold_answers = true;
    set_ready(&mut c, "boot", ConditionStatus::False);
    let held = c
        .held
        .iter()
        .position(|a| matches!(a, crate::Action::PatchNodeTaints { .. }))
        .expect("a taint write");
    // The readiness controller removes both of its taints; our watch has not seen it yet.
    let mut lifted = c.nodes[&n("boot")].clone();
    lifted
        .taints
        .retain(|t| !t.key.starts_with("readiness.k8s.io/"));
    lifted.resource_version = n("9000");
    c.nodes.insert(n("boot"), lifted);
    c.answer_held(held, HeldAnswer::Execute);
    c.hold_answers = false;
    while !c.held.is_empty() {
        c.answer_held(0, HeldAnswer::Execute);
    }
    // The write is tried again (upstream's taint backoff: 100 ms steps) on the node read again.
    c.run_for(secs(1));
    assert!(c.conflicts >= 1);
    let taints = &c.nodes[&n("boot")].taints;
    assert!(readiness_of(taints).is_empty(), "{taints:#?}");
    assert!(c.has_taint("boot", taint_keys::NOT_READY, TaintEffect::NoSchedule));
}

/// New nodes come up in a small zone (large_cluster_size_threshold 20) carrying readiness
/// taints, NoExecute ones among them, with the brake at 2: three of four bootstrapping. Were
/// their taints a failure, the zone would be partially disrupted (rate 0) and the brake
/// engaged, and a real failure beside them would never be tainted. They are no failure: the
/// zone stays Normal, no brake engages, none of them gets a taint of ours, and the one node
/// that really dies is tainted unreachable at its deadline.
#[test]
fn nodes_still_bootstrapping_are_no_node_failure_for_the_zone_or_the_brake() {
    let settings = Settings {
        max_unhealthy: Some(MaxUnhealthy::Count(2)),
        ..test_settings()
    };
    let mut c = Cluster::new(settings, t0());
    let names = ["a1", "a2", "a3", "a4"];
    for name in names {
        c.put_lease(renewal(name, t0()));
        if name == "a4" {
            c.put_node(
                node(name)
                    .zone("r", "a")
                    .ready(ConditionStatus::True, t0(), t0())
                    .build(),
            );
        } else {
            c.put_node(bootstrapping(name, "a", t0()));
            c.alive.insert(n(name));
        }
    }
    c.feed(Input::InitialSyncDone);
    c.ctl.take_decisions();
    // a4 falls silent at t0; the others heartbeat.
    c.run_for(secs(90));
    assert_eq!(c.zone_state("r", "a"), Some(ZoneState::Normal));
    let decisions = c.ctl.take_decisions();
    assert!(
        !decisions.iter().any(|d| matches!(d, Decision::Brake(_))),
        "{decisions:#?}"
    );
    assert_eq!(c.ready_of("a4"), Some(ConditionStatus::Unknown));
    let tainted = c.taint_writes_with("a4", taint_keys::UNREACHABLE, TaintEffect::NoExecute);
    assert_eq!(tainted.len(), 1, "{:#?}", c.taint_writes());
    let deadline = t0() + test_settings().node_monitor_grace_period;
    assert!(
        tainted[0] >= deadline && tainted[0] < deadline + secs(1),
        "{tainted:?}"
    );
    for name in ["a1", "a2", "a3"] {
        assert_eq!(c.nodes[&n(name)].taints, readiness_taints(t0()), "{name}");
    }
}

/// Taint eviction treats a readiness `NoExecute` taint as upstream's taint eviction controller
/// treats any NoExecute taint: a pod not tolerating it goes at once, one tolerating it for 60 s
/// goes 60 s later, one tolerating it forever stays; when the readiness controller lifts the
/// taint, a pending deletion is cancelled. The node lifecycle sees no failure meanwhile: the
/// node stays Ready, nothing of ours is added, its pods are not marked NotReady.
#[test]
fn pods_not_tolerating_a_readiness_no_execute_taint_go_as_upstream_evicts_them() {
    let mut c = Cluster::new(test_settings(), t0());
    c.put_lease(renewal("boot", t0()));
    c.put_node(bootstrapping("boot", "a", t0()));
    c.put_pod(pod("plain", "boot"));
    c.put_pod(with_tolerations(
        pod("cni", "boot"),
        vec![tolerating_readiness(None, "")],
    ));
    c.put_pod(with_tolerations(
        pod("patient", "boot"),
        vec![tolerating_readiness(Some(60), GPU)],
    ));
    c.put_pod(with_tolerations(
        pod("more-patient", "boot"),
        vec![tolerating_readiness(Some(120), GPU)],
    ));
    c.alive.insert(n("boot"));
    c.feed(Input::InitialSyncDone);
    assert_eq!(c.evicted_names(), vec!["plain"]);
    assert_eq!(c.evicted[0].0, t0());
    c.run_for(secs(90));
    assert_eq!(c.evicted_names(), vec!["plain", "patient"]);
    assert_eq!(c.evicted[1].0, t0() + secs(60));
    // The GPU driver is ready: the readiness controller lifts its NoExecute taint.
    let mut lifted = c.nodes[&n("boot")].clone();
    lifted.taints.retain(|t| &*t.key != GPU);
    c.put_node(lifted);
    c.run_for(secs(60));
    assert_eq!(c.evicted_names(), vec!["plain", "patient"]);
    assert!(c.pods.contains_key(&pod("more-patient", "boot").key));
    assert!(c.pods.contains_key(&pod("cni", "boot").key));
    assert_eq!(c.ready_of("boot"), Some(ConditionStatus::True));
    assert!(c.taint_writes().is_empty(), "{:#?}", c.taint_writes());
    assert_eq!(c.pod_status_updates(), 0);
}

/// A gated node dies alone and is tainted; then every zone goes down and the NoExecute taints
/// of every node are lifted (upstream's all-zones-down stop): the write that lifts ours leaves
/// the readiness gates as they were.
#[test]
fn every_zone_down_lifts_our_taints_and_leaves_the_readiness_gates() {
    let mut c = Cluster::new(test_settings(), t0());
    c.put_lease(renewal("a1", t0()));
    c.put_node(bootstrapping("a1", "a", t0()));
    c.put_lease(renewal("b1", t0()));
    c.put_node(
        node("b1")
            .zone("r", "b")
            .ready(ConditionStatus::True, t0(), t0())
            .build(),
    );
    c.alive.insert(n("b1"));
    c.feed(Input::InitialSyncDone);
    c.run_for(secs(60));
    assert!(c.has_taint("a1", taint_keys::UNREACHABLE, TaintEffect::NoExecute));
    // b1 dies too: every zone is fully disrupted.
    c.alive.remove(&n("b1"));
    c.run_for(secs(120));
    assert_eq!(c.ready_of("b1"), Some(ConditionStatus::Unknown));
    assert!(!c.has_taint("a1", taint_keys::UNREACHABLE, TaintEffect::NoExecute));
    let writes: Vec<_> = c
        .taint_writes()
        .into_iter()
        .filter(|(_, node, _)| &**node == "a1")
        .collect();
    assert!(writes.len() >= 2, "{writes:#?}");
    for (at, _, taints) in &writes {
        assert_eq!(readiness_of(taints), readiness_taints(t0()), "{at:?}");
    }
    assert_eq!(
        readiness_of(&c.nodes[&n("a1")].taints),
        readiness_taints(t0())
    );
}
