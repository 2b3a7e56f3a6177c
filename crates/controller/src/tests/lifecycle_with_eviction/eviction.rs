//! A node's failure through both controllers: tainted, its pods evicted by their tolerations,
//! told as decisions; a follower, stale watch events, taints removed and added again, legacy
//! mode.

use super::*;
use std::time::Duration;

use crate::controllers::Controllers;
use crate::inputs::Input;
use crate::model::{
    ConditionStatus, NodeConditionType, TaintEffect, Toleration, TolerationOperator, taint_keys,
};
use crate::testing::EchoOrder;
use crate::tests::harness::{date, lease, n, node, pod, secs, test_settings};
use crate::time::Time;

#[test]
fn nothing_is_evicted_before_the_initial_sync_then_untolerating_pods_go_at_once() {
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let mut c = Cluster::new(test_settings(), t0);
    let tainted = node("n1")
        .ready(ConditionStatus::True, t0, t0)
        .taint("CustomTaintByUser", TaintEffect::NoExecute)
        .build();
    c.put_node(tainted);
    c.put_pod(pod("victim", "n1"));
    c.put_pod(with_tolerations(
        pod("tolerant", "n1"),
        vec![Toleration {
            key: n("CustomTaintByUser"),
            operator: TolerationOperator::Exists,
            value: n(""),
            effect: None,
            toleration_seconds: None,
        }],
    ));
    assert!(c.evicted.is_empty(), "decided before the initial sync");
    c.feed(Input::InitialSyncDone);
    assert_eq!(c.evicted_names(), vec!["victim"]);
    assert_eq!(c.evicted[0].0, t0);
}

/// The whole story inside the core: a node stops heartbeating → Ready=Unknown at
/// probe + grace → the unreachable NoExecute taint (rate limited, first token at once) →
/// pods without a toleration evicted at once, pods with 300 s evicted 300 s later, pods
/// tolerating forever kept.
#[test]
fn node_failure_taints_then_evicts_by_toleration_seconds() {
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let mut c = Cluster::new(test_settings(), t0);
    c.put_lease(lease("n1", t0));
    c.put_node(node("n1").ready(ConditionStatus::True, t0, t0).build());
    c.put_node(node("n2").ready(ConditionStatus::True, t0, t0).build());
    c.put_pod(pod("plain", "n1"));
    c.put_pod(with_tolerations(
        pod("default-300s", "n1"),
        vec![tolerating_unreachable(Some(300))],
    ));
    c.put_pod(with_tolerations(
        pod("forever", "n1"),
        vec![tolerating_unreachable(None)],
    ));
    c.put_pod(pod("elsewhere", "n2"));
    c.feed(Input::InitialSyncDone);
    // n2 keeps heartbeating; n1 falls silent after t0.
    let grace = test_settings().node_monitor_grace_period;
    for s in (10..=400).step_by(10) {
        let t = t0 + secs(s);
        c.run_until(t);
        let mut n2 = c.nodes[&n("n2")].clone();
        n2.conditions = vec![crate::tests::harness::cond(
            NodeConditionType::Ready,
            ConditionStatus::True,
            t,
            t0,
        )];
        c.put_node(n2);
    }
    let unknown_at = t0 + grace + Duration::from_millis(1);
    let n1 = &c.nodes[&n("n1")];
    assert_eq!(n1.ready().map(|r| r.status), Some(ConditionStatus::Unknown));
    assert!(n1.has_taint(taint_keys::UNREACHABLE, &TaintEffect::NoExecute));
    assert_eq!(c.evicted_names(), vec!["plain", "default-300s"]);
    let plain_at = c.evicted[0].0;
    assert!(
        plain_at >= unknown_at && plain_at < unknown_at + secs(1),
        "{plain_at:?}"
    );
    assert_eq!(c.evicted[1].0, plain_at + secs(300));
    assert!(c.pods.contains_key(&pod("forever", "n1").key));
    assert!(c.pods.contains_key(&pod("elsewhere", "n2").key));
}

/// Every step of a node's death and recovery comes out as a decision with its evidence: Unknown
/// (last sign of life, grace, the live Lease read), the NoSchedule and
/// NoExecute taints and why, the pods marked NotReady, the deletions with the taint and the
/// toleration that ran out, and the node back to Ready with its taints off.
#[test]
fn a_node_failure_is_told_as_decisions_with_their_evidence() {
    use crate::decisions::{Decision, Heartbeat, LeaseEvidence};
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let mut c = Cluster::new(test_settings(), t0);
    c.put_lease(lease("n1", t0));
    c.put_node(node("n1").ready(ConditionStatus::True, t0, t0).build());
    c.put_pod(pod("plain", "n1"));
    c.put_pod(with_tolerations(
        pod("default-300s", "n1"),
        vec![tolerating_unreachable(Some(300))],
    ));
    c.put_node(node("n2").ready(ConditionStatus::True, t0, t0).build());
    c.feed(Input::InitialSyncDone);
    c.ctl.take_decisions();
    let grace = test_settings().node_monitor_grace_period;
    // n2 keeps heartbeating (so not every zone is down); n1 falls silent after t0.
    for s in (10..=400).step_by(10) {
        let t = t0 + secs(s);
        c.run_until(t);
        let mut n2 = c.nodes[&n("n2")].clone();
        n2.conditions = vec![crate::tests::harness::cond(
            NodeConditionType::Ready,
            ConditionStatus::True,
            t,
            t0,
        )];
        c.put_node(n2);
    }
    let decisions = c.ctl.take_decisions();
    let kinds: Vec<&str> = decisions.iter().map(Decision::kind).collect();
    let unknown = decisions
        .iter()
        .find(|d| d.kind() == "node-unknown")
        .unwrap_or_else(|| panic!("no Unknown verdict in {kinds:?}"));
    let Decision::NodeUnknown {
        node: n1,
        last_seen,
        heartbeat,
        grace: g,
        lease,
        ..
    } = unknown
    else {
        unreachable!()
    };
    assert_eq!(&**n1, "n1");
    assert_eq!(*last_seen, t0);
    assert_eq!(*g, grace);
    assert_eq!(
        heartbeat,
        &Heartbeat::Lease {
            renew_time: Some(t0)
        }
    );
    assert!(
        matches!(lease, LeaseEvidence::Stale { read_at, renew_time: Some(r) } if *read_at > t0 + grace && *r <= t0),
        "{lease:?}"
    );
    let taints: Vec<String> = decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Taints { added, why, .. } => Some(
                added
                    .iter()
                    .map(|t| format!("{}:{} queue={:?}", t.key, t.effect.as_str(), why.zone_queue))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            _ => None,
        })
        .collect();
    assert_eq!(
        taints,
        [
            "node.kubernetes.io/unreachable:NoSchedule queue=None",
            "node.kubernetes.io/unreachable:NoExecute queue=Some(\"\")",
        ],
        "{kinds:?}"
    );
    assert!(decisions.iter().any(|d| matches!(d,
        Decision::PodsNotReady { pods, .. } if pods.len() == 2)));
    let deletions: Vec<(String, Option<u64>)> = decisions
        .iter()
        .filter_map(|d| match d {
            Decision::PodDeletion {
                pod,
                taint: Some(t),
                toleration_seconds,
                ..
            } if &*t.key == taint_keys::UNREACHABLE => {
                Some((pod.name.to_string(), *toleration_seconds))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        deletions,
        [
            ("plain".to_string(), None),
            ("default-300s".to_string(), Some(300))
        ]
    );

    // The kubelet comes back: Ready again, both unreachable taints off.
    let now = c.now;
    let mut n1 = c.nodes[&n("n1")].clone();
    n1.conditions = vec![crate::tests::harness::cond(
        NodeConditionType::Ready,
        ConditionStatus::True,
        now,
        now,
    )];
    c.put_node(n1);
    let decisions = c.ctl.take_decisions();
    assert!(
        matches!(
            &decisions[0],
            Decision::NodeReady {
                was: Some(ConditionStatus::Unknown),
                ..
            }
        ),
        "{decisions:?}"
    );
    let removed: Vec<String> = decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Taints {
                added,
                removed,
                why,
                ..
            } if added.is_empty() => Some(
                removed
                    .iter()
                    .map(|t| format!("{} reachable={}", t.effect.as_str(), why.reachable))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            _ => None,
        })
        .collect();
    assert_eq!(
        removed,
        ["NoSchedule reachable=false", "NoExecute reachable=true"]
    );
}

/// A leader that lost its lease keeps what it knows (nodes, leases, pods) but decides
/// nothing and owns no countdown; told `InitialSyncDone` again (a new leadership), it acts.
#[test]
fn into_follower_keeps_the_caches_and_forgets_the_leaderships_work() {
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let mut c = Cluster::new(test_settings(), t0);
    c.put_lease(lease("n1", t0));
    c.put_node(
        node("n1")
            .ready(ConditionStatus::True, t0, t0)
            .taint("user", TaintEffect::NoExecute)
            .build(),
    );
    c.put_pod(with_tolerations(
        pod("waits", "n1"),
        vec![Toleration {
            key: n("user"),
            operator: TolerationOperator::Exists,
            value: n(""),
            effect: None,
            toleration_seconds: Some(60),
        }],
    ));
    c.feed(Input::InitialSyncDone);
    assert_eq!(c.ctl.eviction().unwrap().pending_len(), 1);

    let follower = std::mem::replace(&mut c.ctl, Controllers::new(test_settings(), t0))
        .into_follower(t0 + secs(1));
    assert!(!follower.is_synced());
    assert_eq!(follower.next_deadline(), None);
    assert_eq!(follower.store().node_count(), 1);
    assert_eq!(follower.store().lease_count(), 1);
    assert_eq!(follower.store().pod_count(), 1);
    assert_eq!(follower.eviction().unwrap().pending_len(), 0);

    c.ctl = follower;
    c.now = t0 + secs(2);
    c.feed(Input::InitialSyncDone);
    assert_eq!(c.ctl.eviction().unwrap().pending_len(), 1);
    c.run_until(t0 + secs(70));
    assert_eq!(c.evicted_names(), vec!["waits"]);
    // The taint has no timeAdded: the countdown restarted with the new leadership's first
    // sight of it (upstream: it lives in memory). With one, it would run from there.
    assert_eq!(c.evicted[0].0, t0 + secs(62));
}

/// Our taint write's answer (version 12) reaches the controllers first; the watch then
/// delivers version 11, from before the write. The store keeps 12: the late event changes
/// nothing, decides nothing, and the node's next write would carry version 12.
#[test]
fn a_watch_event_older_than_our_writes_answer_is_ignored() {
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let mut ctl = Controllers::new(test_settings(), t0);
    let mut v10 = node("n1").ready(ConditionStatus::True, t0, t0).build();
    v10.resource_version = n("10");
    ctl.handle(Input::LeaseUpsert(lease("n1", t0)), t0);
    ctl.handle(Input::NodeUpsert(v10.clone()), t0);
    ctl.handle(Input::InitialSyncDone, t0);
    let mut v12 = v10.clone();
    v12.resource_version = n("12");
    v12.unschedulable = true;
    ctl.handle(Input::NodeUpsert(v12), t0);
    let mut v11 = v10.clone();
    v11.resource_version = n("11");
    let actions = ctl.handle(Input::NodeUpsert(v11), t0);
    assert!(actions.is_empty(), "{actions:?}");
    let held = ctl.store().node("n1").expect("n1 held");
    assert_eq!(&*held.resource_version, "12");
    assert!(held.unschedulable, "the newer object is kept whole");
}

/// The lifecycle removes a NoExecute taint itself (the node is Ready again) and the write's
/// answer comes back before the watch echo, as over HTTP: taint eviction still sees the
/// taint go and cancels the countdown (rules out one explanation of SOAK.md finding 3).
#[test]
fn a_noexecute_taint_the_lifecycle_removes_itself_cancels_the_countdown() {
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let mut c = Cluster::new(test_settings(), t0);
    c.echo = EchoOrder::AnswerFirst;
    let tainted = node("n1")
        .ready(ConditionStatus::True, t0, t0)
        .taint(taint_keys::UNREACHABLE, TaintEffect::NoExecute)
        .build();
    c.put_node(tainted);
    c.put_pod(with_tolerations(
        pod("p", "n1"),
        vec![tolerating_unreachable(Some(10))],
    ));
    c.feed(Input::InitialSyncDone);
    c.run_until(t0 + secs(2));
    assert!(
        c.nodes[&n("n1")].taints.is_empty(),
        "the lifecycle untainted n1"
    );
    c.run_until(t0 + secs(60));
    assert_eq!(
        c.evicted_names(),
        Vec::<String>::new(),
        "evicted from an untainted node"
    );
}

/// Soak seed 11 (web-18): every zone down → master disruption mode removes the NoExecute
/// taints; a node back → the mode ends and the dead node is tainted again. The pod on it
/// tolerates 10 s: counted from the new taint, not from the first one (without faults this
/// holds; SOAK.md finding 3 is the same story with them).
#[test]
fn a_taint_removed_by_disruption_mode_and_added_again_restarts_the_countdown() {
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let mut c = Cluster::new(test_settings(), t0);
    c.echo = EchoOrder::AnswerFirst;
    c.put_node(node("n1").ready(ConditionStatus::True, t0, t0).build());
    c.put_node(node("n2").ready(ConditionStatus::True, t0, t0).build());
    c.put_pod(with_tolerations(
        pod("p", "n1"),
        vec![tolerating_unreachable(Some(10))],
    ));
    c.feed(Input::InitialSyncDone);
    let beat = |c: &mut Cluster, t: Time| {
        let mut n2 = c.nodes[&n("n2")].clone();
        n2.conditions = vec![crate::tests::harness::cond(
            NodeConditionType::Ready,
            ConditionStatus::True,
            t,
            t0,
        )];
        c.put_node(n2);
    };
    // n1 silent from t0 (Unknown and tainted at 50 s); n2 beats until 8 s (Unknown at 58 s:
    // every zone down, taints removed before p's 10 s run out); n2 back at 61 s (n1 tainted
    // again). n2's deadline lies beyond the pass after n1's verdict, so n1 is judged alone
    // (were it within, both would be seen down together and n1 never tainted: `suspects.rs`).
    c.run_until(t0 + secs(8));
    beat(&mut c, t0 + secs(8));
    c.run_until(t0 + secs(56));
    assert!(c.nodes[&n("n1")].has_taint(taint_keys::UNREACHABLE, &TaintEffect::NoExecute));
    c.run_until(t0 + secs(59));
    assert!(
        c.nodes[&n("n1")]
            .taints
            .iter()
            .all(|t| t.effect != TaintEffect::NoExecute)
    );
    c.run_until(t0 + secs(61));
    beat(&mut c, t0 + secs(61));
    let mut retainted = None;
    for s in 62..200 {
        c.run_until(t0 + secs(s));
        retainted = c.nodes[&n("n1")]
            .taints
            .iter()
            .find(|t| t.effect == TaintEffect::NoExecute)
            .and_then(|t| t.time_added);
        if retainted.is_some() || !c.evicted.is_empty() {
            break;
        }
    }
    let retainted = retainted.expect("n1 tainted again");
    c.run_until(retainted + secs(60));
    assert_eq!(c.evicted_names(), vec!["p"]);
    assert!(
        c.evicted[0].0 >= retainted + secs(10),
        "evicted at {:?}, the new taint at {:?}",
        c.evicted[0].0,
        retainted
    );
}

#[test]
fn legacy_mode_runs_no_taint_eviction() {
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let mut settings = test_settings();
    settings.taint_based_eviction = false;
    let mut c = Cluster::new(settings, t0);
    c.put_node(
        node("n1")
            .ready(ConditionStatus::True, t0, t0)
            .taint("user", TaintEffect::NoExecute)
            .build(),
    );
    c.put_pod(pod("p", "n1"));
    c.feed(Input::InitialSyncDone);
    c.run_until(t0 + secs(10));
    assert!(c.evicted.is_empty());
    assert!(c.ctl.eviction().is_none());
}
