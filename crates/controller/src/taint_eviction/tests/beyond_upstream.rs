//! Our own promises beyond upstream's test file: ordering at one instant, the eviction action
//! and its results, retries, pods already being deleted, and the dump.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use super::harness::*;
use crate::model::TaintEffect;
use crate::taint_eviction::{EvictionResult, GAVE_UP_KEPT, MAX_ATTEMPTS};
use crate::{Action, ActionId};

fn evict_ids(log: &[Logged]) -> Vec<ActionId> {
    log.iter()
        .filter_map(|l| match &l.action {
            Action::EvictPod { id, .. } => Some(*id),
            _ => None,
        })
        .collect()
}

/// Upstream drains node updates before pod updates. Fed one input at a time, a pod update at
/// `t` must see the taints of every node update delivered at or before `t`, and the outcome
/// must not depend on which of the two came first within the instant.
#[test]
fn node_updates_are_seen_by_pod_updates_of_the_same_instant() {
    for node_first in [true, false] {
        let mut h = Harness::new();
        h.node(&node("node1", vec![]));
        h.advance(SEC);
        let t = h.now;
        let tainted = node("node1", vec![taint(1, t)]);
        let p = pod("pod1", "node1");
        if node_first {
            h.node(&tainted);
            h.pod(&p);
        } else {
            h.pod(&p);
            h.node(&tainted);
        }
        h.advance(3600 * SEC);
        assert_eq!(
            h.evicted(),
            vec![(t, "pod1".to_string())],
            "node first: {node_first}"
        );
    }
}

#[test]
fn eviction_is_an_event_then_one_evict_pod_carrying_the_uid() {
    let mut h = Harness::new();
    h.node(&node("node1", vec![no_execute("CustomTaint")]));
    h.pod(&pod("pod1", "node1"));
    let log = h.take();
    assert_eq!(log.len(), 2);
    match &log[0].action {
        Action::RecordEvent(e) => {
            assert_eq!(e.message, "Marking for deletion Pod default/pod1")
        }
        other => panic!("expected the event first, got {other:?}"),
    }
    match &log[1].action {
        Action::EvictPod {
            pod, uid, attempt, ..
        } => {
            assert_eq!(pod, &key("pod1"));
            assert_eq!(&**uid, "uid-pod1");
            assert_eq!(*attempt, 1);
        }
        other => panic!("expected EvictPod, got {other:?}"),
    }
    assert_eq!(h.te().metrics.pod_deletions_total, 1);
}

#[test]
fn not_found_and_conflict_are_successes_that_are_not_retried() {
    for (result, gone, replaced) in [
        (EvictionResult::NotFound, 1, 0),
        (EvictionResult::Conflict, 0, 1),
    ] {
        let mut h = Harness::new();
        let answer = result.clone();
        h.answer = Box::new(move |_, _| Some(answer.clone()));
        h.node(&node("node1", vec![taint(1, h.now)]));
        h.pod(&pod("pod1", "node1"));
        assert_eq!(h.evicted().len(), 1, "{result:?}");
        h.advance(3600 * SEC);
        assert_eq!(h.evicted(), vec![], "{result:?}: no retry");
        assert_eq!(h.te().metrics.pod_deletions_total, 0, "{result:?}");
        assert_eq!(h.te().metrics.already_gone_total, gone);
        assert_eq!(h.te().metrics.replaced_total, replaced);
        assert_eq!(h.te().metrics.retries_total, 0);
    }
}

/// Five attempts (upstream's `retries`), 100/200/400/800 ms apart, then given up and shown in
/// the dump; the "Marking" event is recorded once.
#[test]
fn errors_are_retried_with_backoff_then_given_up_after_five_attempts() {
    let mut h = Harness::new();
    h.answer = Box::new(|_, _| Some(EvictionResult::Error("503 Service Unavailable".into())));
    h.node(&node("node1", vec![taint(1, h.now)]));
    let t0 = h.now;
    h.pod(&pod("pod1", "node1"));
    h.advance(60 * SEC);
    let log = h.take();
    let attempts: Vec<_> = log
        .iter()
        .filter_map(|l| match &l.action {
            Action::EvictPod { attempt, .. } => Some((l.at - t0, *attempt)),
            _ => None,
        })
        .collect();
    assert_eq!(
        attempts,
        vec![
            (Duration::ZERO, 1),
            (100 * MS, 2),
            (300 * MS, 3),
            (700 * MS, 4),
            (1500 * MS, 5)
        ]
    );
    let events = log
        .iter()
        .filter(|l| matches!(l.action, Action::RecordEvent(_)))
        .count();
    assert_eq!(events, 1);
    let m = &h.te().metrics;
    assert_eq!(
        (m.retries_total, m.gave_up_total, m.pod_deletions_total),
        (u64::from(MAX_ATTEMPTS) - 1, 1, 0)
    );
    assert_eq!(m.recent_gave_up[0].pod, key("pod1"));
    assert_eq!(m.recent_gave_up[0].error, "503 Service Unavailable");
    let dump = h.te().dump(h.now);
    assert_eq!((dump.pending, dump.running, dump.gave_up_total), (0, 0, 1));
    assert!(dump.to_string().contains("gave up on default/pod1"));

    // Given up is not forgotten forever: the next change that re-judges the pod evicts again.
    h.answer = Box::new(|_, _| Some(EvictionResult::Deleted));
    h.node(&node("node1", vec![taint(1, t0), taint(2, h.now)]));
    assert_eq!(h.evicted(), vec![(h.now, "pod1".to_string())]);
}

#[test]
fn a_retry_that_succeeds_counts_one_deletion_and_its_latency_from_the_deadline() {
    let mut h = Harness::new();
    h.answer = Box::new(|_, attempt| {
        Some(if attempt < 3 {
            EvictionResult::Error("timeout".into())
        } else {
            EvictionResult::Deleted
        })
    });
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 10)]));
    h.advance(3600 * SEC);
    assert_eq!(h.evicted().len(), 3);
    let m = &h.te().metrics;
    assert_eq!(
        (m.pod_deletions_total, m.retries_total, m.gave_up_total),
        (1, 2, 0)
    );
    // Deadline at +10 s; attempts at +0, +100, +300 ms after it.
    assert_eq!(m.pod_deletion_duration.count, 1);
    assert_eq!(m.pod_deletion_duration.sum_ms, 300);
    assert_eq!(
        m.pod_deletion_duration.counts[2], 0,
        "le=0.1 s excludes 300 ms"
    );
    assert_eq!(m.pod_deletion_duration.counts[3], 1, "le=0.5 s");
}

#[test]
fn pod_deleted_during_backoff_stops_retries() {
    let mut h = Harness::new();
    h.answer = Box::new(|_, _| Some(EvictionResult::Error("boom".into())));
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.pod(&pod("pod1", "node1"));
    assert_eq!(h.evicted().len(), 1);
    h.advance(50 * MS);
    h.delete_pod("pod1");
    assert!(h.take().is_empty(), "no cancel event: nothing was pending");
    h.advance(60 * SEC);
    assert!(h.take().is_empty());
    assert_eq!(h.te().next_deadline(), None);
}

/// A failed DELETE waits in backoff; the node recovers meanwhile (its NoExecute taint is
/// removed). The pod must stay: no further attempt, no deadline left.
#[test]
fn taint_removed_during_backoff_stops_retries() {
    let mut h = Harness::new();
    h.answer = Box::new(|_, _| Some(EvictionResult::Error("500 Internal Server Error".into())));
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.pod(&pod("pod1", "node1"));
    assert_eq!(h.evicted().len(), 1);
    h.advance(50 * MS);
    h.node(&node("node1", vec![]));
    h.advance(60 * SEC);
    assert_eq!(h.evicted(), vec![], "no attempt after the taint went");
    assert_eq!(h.te().next_deadline(), None);
    assert_eq!(
        h.te().metrics.retries_total,
        1,
        "the one retry scheduled before the taint went"
    );
}

/// The same, when the pod's tolerations change to tolerate the taint forever: the retry is
/// dropped; a taint that is still not tolerated keeps the retries going.
#[test]
fn retries_go_on_only_while_the_taint_still_evicts_the_pod() {
    let mut h = Harness::new();
    h.answer = Box::new(|_, _| Some(EvictionResult::Error("500 Internal Server Error".into())));
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.pod(&pod("pod1", "node1"));
    h.pod(&pod("pod2", "node1"));
    assert_eq!(h.evicted().len(), 2);
    h.advance(50 * MS);
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, -1)]));
    h.advance(60 * SEC);
    let evicted = h.evicted();
    assert!(evicted.iter().all(|(_, p)| p == "pod2"), "{evicted:?}");
    assert_eq!(
        evicted.len(),
        MAX_ATTEMPTS as usize - 1,
        "pod2 retried to the end"
    );
}

#[test]
fn a_result_for_a_pod_deleted_meanwhile_counts_but_never_retries() {
    let mut h = Harness::new();
    h.answer = Box::new(|_, _| None);
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.pod(&pod("pod1", "node1"));
    let ids = evict_ids(&h.take());
    h.delete_pod("pod1");
    h.result(ids[0], EvictionResult::Deleted);
    assert_eq!(h.te().metrics.pod_deletions_total, 1);
    h.result(ActionId(999), EvictionResult::Error("unknown id".into()));
    h.advance(60 * SEC);
    assert!(h.take().is_empty());
}

/// Pods with a deletionTimestamp are never evicted again: a pending countdown is cancelled.
#[test]
fn pods_already_being_deleted_are_not_deleted_again() {
    let mut h = Harness::new();
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 100)]));
    let mut deleting = tolerating(pod("pod1", "node1"), vec![toleration(1, 100)]);
    deleting.deleting = true;
    h.pod(&deleting);
    assert_eq!(h.events(), vec!["Cancelling deletion of Pod default/pod1"]);

    let mut fresh = pod("pod2", "node1");
    fresh.deleting = true;
    h.pod(&fresh);
    // A later taint change does not pick them up either.
    h.node(&node("node1", vec![taint(1, h.now), taint(2, h.now)]));
    h.advance(3600 * SEC);
    assert!(h.take().is_empty());
}

#[test]
fn cancel_event_only_when_a_deadline_was_pending() {
    let mut h = Harness::new();
    h.answer = Box::new(|_, _| None);
    h.pod(&tolerating(
        pod("forever", "node1"),
        vec![toleration(1, -1)],
    ));
    h.pod(&pod("running", "node1"));
    h.node(&node("node1", vec![taint(1, h.now)]));
    assert_eq!(h.evicted(), vec![(h.now, "running".to_string())]);
    h.node(&node("node1", vec![]));
    assert!(h.take().is_empty(), "nothing pending: no event");
}

#[test]
fn pod_moved_off_the_tainted_node_cancels_its_countdown() {
    let mut h = Harness::new();
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.node(&node("node2", vec![]));
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 100)]));
    h.pod(&tolerating(pod("pod1", "node2"), vec![toleration(1, 100)]));
    assert_eq!(h.events(), vec!["Cancelling deletion of Pod default/pod1"]);
    // Its old node's later changes no longer concern it.
    h.node(&node("node1", vec![taint(1, h.now), taint(2, h.now)]));
    h.advance(3600 * SEC);
    assert!(h.take().is_empty());
}

#[test]
fn node_updates_with_the_same_no_execute_taints_are_ignored() {
    let mut h = Harness::new();
    let t0 = h.now;
    let mut n1 = node("node1", vec![taint(1, t0)]);
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 100)]));
    h.node(&n1);
    let examined = h.te().pods_examined();
    h.advance(50 * SEC);
    n1.taints.push(crate::model::Taint {
        effect: TaintEffect::NoSchedule,
        ..no_execute("node.kubernetes.io/unreachable")
    });
    n1.resource_version = n("2");
    h.node(&n1);
    assert_eq!(h.te().pods_examined(), examined, "no pod looked at");
    assert_eq!(h.te().deadline_of(&key("pod1")), Some(t0 + 100 * SEC));
    // A changed timeAdded is a change (semantic deep-equal), but the countdown is kept.
    h.node(&node("node1", vec![taint(1, h.now)]));
    assert_eq!(h.te().pods_examined(), examined + 1);
    assert_eq!(h.te().deadline_of(&key("pod1")), Some(t0 + 100 * SEC));
}

/// Upstream replaces a countdown that started this very instant (its start time is not before
/// now); we do the same, without emitting "Cancelling".
#[test]
fn countdown_started_this_instant_follows_the_latest_tolerations() {
    let mut h = Harness::new();
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 100)]));
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 5)]));
    assert!(h.take().is_empty());
    assert_eq!(h.te().deadline_of(&key("pod1")), Some(h.now + 5 * SEC));
}

#[test]
fn same_name_with_a_new_uid_is_a_new_pod() {
    let mut h = Harness::new();
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.pod(&tolerating(pod("web-0", "node1"), vec![toleration(1, 100)]));
    h.advance(60 * SEC);
    let mut replacement = tolerating(pod("web-0", "node1"), vec![toleration(1, 100)]);
    replacement.uid = n("uid-web-0-second");
    h.pod(&replacement);
    assert_eq!(h.events(), vec!["Cancelling deletion of Pod default/web-0"]);
    // A countdown of its own, from its arrival (the taint is older than the pod).
    assert_eq!(h.te().deadline_of(&key("web-0")), Some(h.now + 100 * SEC));
    h.advance(100 * SEC);
    let log = h.take();
    let uids: Vec<_> = log
        .iter()
        .filter_map(|l| match &l.action {
            Action::EvictPod { uid, .. } => Some(uid.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(uids, vec!["uid-web-0-second"]);
}

/// Upstream forgets a deleted node's taints but leaves its pods' countdowns running.
#[test]
fn node_deleted_keeps_pending_evictions_of_its_pods() {
    let mut h = Harness::new();
    let t0 = h.now;
    h.node(&node("node1", vec![taint(1, t0)]));
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 30)]));
    h.delete_node("node1");
    h.advance(30 * SEC);
    assert_eq!(h.evicted(), vec![(t0 + 30 * SEC, "pod1".to_string())]);
}

#[test]
fn dump_lists_the_twenty_soonest_pending_evictions() {
    let mut h = Harness::new();
    h.node(&node("node1", vec![taint(1, h.now)]));
    for i in (1..=30).rev() {
        h.pod(&tolerating(
            pod(&format!("pod{i:02}"), "node1"),
            vec![toleration(1, i)],
        ));
    }
    h.advance(500 * MS);
    let dump = h.te().dump(h.now);
    assert_eq!(dump.pending, 30);
    assert_eq!(dump.next.len(), 20);
    assert_eq!(dump.next[0].pod, key("pod01"));
    assert_eq!(dump.next[0].remaining, 500 * MS);
    assert_eq!(dump.next[19].pod, key("pod20"));
    assert!(dump.next.windows(2).all(|w| w[0].deadline <= w[1].deadline));
    assert!(dump.to_string().starts_with("taint eviction: 30 pending"));
}

#[test]
fn gave_up_list_keeps_only_the_most_recent() {
    let mut h = Harness::new();
    h.answer = Box::new(|_, _| Some(EvictionResult::Error("nope".into())));
    h.node(&node("node1", vec![taint(1, h.now)]));
    let total = GAVE_UP_KEPT + 5;
    for i in 0..total {
        h.pod(&pod(&format!("pod{i:02}"), "node1"));
    }
    h.advance(60 * SEC);
    let m = &h.te().metrics;
    assert_eq!(m.gave_up_total, total as u64);
    assert_eq!(m.recent_gave_up.len(), GAVE_UP_KEPT);
    assert_eq!(m.recent_gave_up[0].pod, key("pod05"));
}

/// The shell may answer later (it throttles); several evictions can be in flight at once and
/// their results can come back in any order.
#[test]
fn results_in_any_order_reach_their_own_pods() {
    let mut h = Harness::new();
    let seen = Rc::new(RefCell::new(Vec::new()));
    h.answer = Box::new(|_, _| None);
    h.node(&node("node1", vec![taint(1, h.now)]));
    for i in 0..3 {
        h.pod(&pod(&format!("pod{i}"), "node1"));
    }
    let ids = evict_ids(&h.take());
    assert_eq!(ids.len(), 3);
    h.result(ids[2], EvictionResult::Deleted);
    h.result(ids[0], EvictionResult::Error("later".into()));
    h.result(ids[1], EvictionResult::NotFound);
    let sink = seen.clone();
    h.answer = Box::new(move |p, attempt| {
        sink.borrow_mut().push((p.name.to_string(), attempt));
        Some(EvictionResult::Deleted)
    });
    h.advance(SEC);
    assert_eq!(*seen.borrow(), vec![("pod0".to_string(), 2)]);
    assert_eq!(h.te().metrics.pod_deletions_total, 2);
    assert_eq!(h.te().dump(h.now).running, 0);
}

/// A toleration of i64::MAX seconds is a deadline at the end of time, not an overflow.
#[test]
fn huge_toleration_seconds_saturate_instead_of_overflowing() {
    let mut h = Harness::new();
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.pod(&tolerating(
        pod("pod1", "node1"),
        vec![toleration(1, i64::MAX)],
    ));
    assert_eq!(h.te().next_deadline(), Some(crate::time::Time::MAX));
    h.advance(365 * 24 * 3600 * SEC);
    assert!(h.take().is_empty());
}

/// Same inputs, same actions in the same order: pods evicted at one instant go in pod order.
#[test]
fn same_inputs_give_the_same_actions_in_pod_order() {
    let run = || {
        let mut h = Harness::new();
        h.node(&node("node1", vec![]));
        for i in (0..50).rev() {
            h.pod(&pod(&format!("pod{i:02}"), "node1"));
        }
        h.node(&node("node1", vec![taint(1, h.now)]));
        h.take()
    };
    let first = run();
    assert_eq!(first, run());
    let order: Vec<_> = first
        .iter()
        .filter_map(|l| match &l.action {
            Action::EvictPod { pod, .. } => Some(pod.name.to_string()),
            _ => None,
        })
        .collect();
    let expected: Vec<_> = (0..50).map(|i| format!("pod{i:02}")).collect();
    assert_eq!(order, expected);
}

/// A pod that already carries the `DisruptionTarget` condition (an earlier attempt, another
/// leader) is evicted with the condition left as it is: the action says so.
#[test]
fn an_eviction_knows_the_pod_carries_its_condition_already() {
    let mut h = Harness::new();
    h.node(&node("node1", vec![taint(1, h.now)]));
    let mut marked = pod("marked", "node1");
    marked.disruption_target = true;
    h.pod(&marked);
    h.pod(&pod("plain", "node1"));
    let evictions: Vec<(String, bool)> = h
        .take()
        .into_iter()
        .filter_map(|l| match l.action {
            Action::EvictPod {
                pod,
                condition_present,
                ..
            } => Some((pod.name.to_string(), condition_present)),
            _ => None,
        })
        .collect();
    assert_eq!(
        evictions,
        vec![("marked".to_string(), true), ("plain".to_string(), false)]
    );
}
