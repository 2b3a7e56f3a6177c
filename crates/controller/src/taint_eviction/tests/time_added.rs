//! Beyond upstream: the pods under a taint found at a start or a takeover count from its
//! `timeAdded`, which is what `tolerationSeconds` documents and what a restart
//! or a new leader finds on the node (upstream starts it when its taint manager first looks, so
//! every restart gives the pod another full `tolerationSeconds`). Never from later than now: a
//! `timeAdded` in the future is another host's clock running ahead. A taint that appears while
//! this machine watches counts from then, as upstream's.

use super::harness::*;
use crate::Decision;
use crate::explain::PodEviction;

/// The taint was added 5 s before this machine started (a restart, a takeover): the pod
/// tolerating it 20 s goes 20 s after `timeAdded` rounded up to the next second, and the decision and `explain` say the
/// countdown ran from there.
#[test]
fn a_countdown_runs_from_the_taints_time_added() {
    let mut h = Harness::new();
    let added = h.now;
    // `timeAdded` has whole seconds: the taint was written within the second after it.
    let from = added + SEC;
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 20)]));
    h.advance(5 * SEC);
    h.found_at_start(&node("node1", vec![taint(1, added)]));
    assert_eq!(h.te().deadline_of(&key("pod1")), Some(from + 20 * SEC));
    assert_eq!(
        h.te().eviction_of(&key("pod1")),
        PodEviction::Scheduled {
            since: from,
            fire_at: from + 20 * SEC
        }
    );
    h.advance(16 * SEC - MS);
    assert_eq!(h.evicted(), vec![]);
    h.advance(MS);
    assert_eq!(h.evicted(), vec![(from + 20 * SEC, "pod1".to_string())]);
    let counted = h.take_decisions().into_iter().find_map(|d| match d {
        Decision::PodDeletion { countdown_from, .. } => Some(countdown_from),
        _ => None,
    });
    assert_eq!(counted, Some(from));
}

/// First seen when its toleration has already run out: the pod goes at once, and the deletion
/// latency is measured from that moment, not from the deadline that passed before this machine
/// could act (a restart's gap is not the API server's slowness).
#[test]
fn a_countdown_already_over_at_first_sight_evicts_at_once() {
    let mut h = Harness::new();
    let added = h.now;
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 20)]));
    h.advance(30 * SEC);
    h.found_at_start(&node("node1", vec![taint(1, added)]));
    assert_eq!(h.evicted(), vec![(added + 30 * SEC, "pod1".to_string())]);
    let latency = &h.te().metrics.pod_deletion_duration;
    assert_eq!((latency.count, latency.sum_ms), (1, 0));
}

/// `timeAdded` 30 s in the future (the writer's clock runs ahead): counted from now.
#[test]
fn a_time_added_in_the_future_counts_from_now() {
    let mut h = Harness::new();
    let seen = h.now;
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 20)]));
    h.found_at_start(&node("node1", vec![taint(1, seen + 30 * SEC)]));
    assert_eq!(h.te().deadline_of(&key("pod1")), Some(seen + 20 * SEC));
    h.advance(20 * SEC);
    assert_eq!(h.evicted(), vec![(seen + 20 * SEC, "pod1".to_string())]);
}

/// Two tolerated taints added at different times: the pod goes when the first of their
/// tolerations runs out, each counted from its own taint's `timeAdded` (upstream: the smallest
/// `tolerationSeconds`, from now).
#[test]
fn each_taint_counts_from_its_own_time_added() {
    let mut h = Harness::new();
    let t0 = h.now;
    h.pod(&tolerating(
        pod("pod1", "node1"),
        vec![toleration(1, 100), toleration(2, 60)],
    ));
    h.advance(50 * SEC);
    // taint1 since t0 (rounded up: 100 s from t0 + 1), taint2 since t0 + 50 (no later than
    // now: 60 s, t0 + 110).
    h.found_at_start(&node("node1", vec![taint(1, t0), taint(2, h.now)]));
    assert_eq!(h.te().deadline_of(&key("pod1")), Some(t0 + 101 * SEC));
    h.advance(51 * SEC);
    assert_eq!(h.evicted(), vec![(t0 + 101 * SEC, "pod1".to_string())]);
    // The evidence names the taint whose toleration ran out first, not the shortest one.
    let evidence = h.take_decisions().into_iter().find_map(|d| match d {
        Decision::PodDeletion {
            taint: Some(taint),
            toleration_seconds,
            countdown_from,
            ..
        } => Some((taint.key.to_string(), toleration_seconds, countdown_from)),
        _ => None,
    });
    assert_eq!(
        evidence,
        Some(("testTaint1".to_string(), Some(100), t0 + SEC))
    );
}

/// A taint that appears while this machine watches counts from then, even when its `timeAdded`
/// is older (a write decided earlier that landed after retries, or another writer's clock):
/// the pod is under it no sooner than it is seen, as upstream's taint manager counts.
#[test]
fn a_taint_that_appears_while_watching_counts_from_then() {
    let mut h = Harness::new();
    let added = h.now;
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 20)]));
    h.advance(5 * SEC);
    let seen = h.now;
    h.node(&node("node1", vec![taint(1, added)]));
    assert_eq!(h.te().deadline_of(&key("pod1")), Some(seen + 20 * SEC));
}

/// Found at a start on a node that is Ready again (its kubelet came back while nobody led, and
/// the lifecycle is about to take the stale taint off): the pods count from now, as upstream's,
/// instead of going at once on a `timeAdded` long past (soak seed 62: a new leader deleted two
/// pods of a recovered node in its first 50 ms).
#[test]
fn a_stale_taint_on_a_ready_node_found_at_a_start_counts_from_now() {
    use crate::model::{ConditionStatus, ConditionText, NodeCondition, NodeConditionType};
    let mut h = Harness::new();
    let added = h.now;
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 20)]));
    h.advance(30 * SEC);
    let mut ready = node("node1", vec![taint(1, added)]);
    ready.conditions = vec![NodeCondition {
        kind: NodeConditionType::Ready,
        status: ConditionStatus::True,
        last_heartbeat_time: Some(h.now),
        last_transition_time: Some(h.now),
        text: ConditionText::new(None, None),
    }];
    h.found_at_start(&ready);
    assert_eq!(h.evicted(), vec![]);
    assert_eq!(h.te().deadline_of(&key("pod1")), Some(h.now + 20 * SEC));
}

fn created_at(mut p: crate::model::Pod, at: crate::time::Time) -> crate::model::Pod {
    p.creation_timestamp = Some(at);
    p
}

/// A pod created after the taint was added (re-created or bound while the previous leader
/// ran) and found under it at a takeover cannot have been under it since `timeAdded`: its
/// whole toleration counts from its creation (soak seed 26: a new leader deleted pods 3.3 s
/// after their creation with a 6 s toleration).
#[test]
fn a_pod_created_after_the_taint_at_a_takeover_gets_its_full_toleration_from_its_creation() {
    let mut h = Harness::new();
    let added = h.now;
    h.advance(10 * SEC);
    let created = h.now;
    h.pod(&created_at(
        tolerating(pod("pod1", "node1"), vec![toleration(1, 6)]),
        created,
    ));
    h.advance(3 * SEC);
    h.found_at_start(&node("node1", vec![taint(1, added)]));
    assert_eq!(h.te().deadline_of(&key("pod1")), Some(created + 6 * SEC));
    assert_eq!(
        h.te().eviction_of(&key("pod1")),
        PodEviction::Scheduled {
            since: created,
            fire_at: created + 6 * SEC
        }
    );
    h.advance(3 * SEC - MS);
    assert_eq!(h.evicted(), vec![]);
    h.advance(MS);
    assert_eq!(h.evicted(), vec![(created + 6 * SEC, "pod1".to_string())]);
    let from = h.take_decisions().into_iter().find_map(|d| match d {
        Decision::PodDeletion { countdown_from, .. } => Some(countdown_from),
        _ => None,
    });
    assert_eq!(from, Some(created));
}

/// The later of `timeAdded` and the creation, and never later than now: a pod created before
/// the taint counts from `timeAdded` as before; a creation in this host's future (the API
/// server's clock ahead of ours) counts from now, upstream's first sight; and a taint seen
/// arriving still counts from then, whatever the pod's creation.
#[test]
fn a_found_taint_counts_from_the_later_of_time_added_and_creation_never_after_now() {
    let mut h = Harness::new();
    let t0 = h.now;
    h.pod(&created_at(
        tolerating(pod("older", "node1"), vec![toleration(1, 20)]),
        t0,
    ));
    h.advance(5 * SEC);
    let added = h.now;
    h.advance(5 * SEC);
    let seen = h.now;
    h.pod(&created_at(
        tolerating(pod("ahead", "node1"), vec![toleration(1, 20)]),
        seen + 30 * SEC,
    ));
    h.found_at_start(&node("node1", vec![taint(1, added)]));
    assert_eq!(h.te().deadline_of(&key("older")), Some(added + 21 * SEC));
    assert_eq!(h.te().deadline_of(&key("ahead")), Some(seen + 20 * SEC));

    let mut h = Harness::new();
    let created = h.now;
    h.pod(&created_at(
        tolerating(pod("pod1", "node2"), vec![toleration(1, 20)]),
        created,
    ));
    h.advance(5 * SEC);
    let seen = h.now;
    h.node(&node("node2", vec![taint(1, created)]));
    assert_eq!(h.te().deadline_of(&key("pod1")), Some(seen + 20 * SEC));
}
