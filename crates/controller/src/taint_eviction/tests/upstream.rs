//! Upstream's `taint_eviction_test.go`, case by case, on the virtual clock. Upstream waits up to
//! 5 s of wall time for a PATCH+DELETE; here "evicted" means the `EvictPod` action (which the
//! shell executes as that PATCH+DELETE) came out, at an exact virtual time.

use std::time::Duration;

use super::harness::*;
use crate::Action;
use crate::events::{EventObject, EventType, TAINT_EVICTION_CONTROLLER};
use crate::model::TaintEffect;
use crate::taint_eviction::EVICTION_EVENT_REASON;

#[test]
fn test_filter_no_execute_taints() {
    let mut h = Harness::new();
    let mut two = taint(2, h.now);
    two.effect = TaintEffect::NoSchedule;
    h.node(&node("node1", vec![taint(1, h.now), two]));
    let known = h.node_taints("node1").expect("node known");
    assert_eq!(known.len(), 1);
    assert_eq!(&*known[0].key, "testTaint1");
}

/// TestCreatePod: `(description, pod, node1 tainted?, evicted at once?)`.
#[test]
fn test_create_pod() {
    let cases = [
        ("not scheduled - ignore", pod("pod1", ""), true, false),
        (
            "scheduled on untainted Node",
            pod("pod1", "node1"),
            false,
            false,
        ),
        ("schedule on tainted Node", pod("pod1", "node1"), true, true),
        (
            "schedule on tainted Node with finite toleration",
            tolerating(pod("pod1", "node1"), vec![toleration(1, 100)]),
            true,
            false,
        ),
        (
            "schedule on tainted Node with infinite toleration",
            tolerating(pod("pod1", "node1"), vec![toleration(1, -1)]),
            true,
            false,
        ),
        (
            "schedule on tainted Node with infinite invalid toleration",
            tolerating(pod("pod1", "node1"), vec![toleration(2, -1)]),
            true,
            true,
        ),
    ];
    for (description, p, tainted, expect_evicted) in cases {
        let mut h = Harness::new();
        if tainted {
            h.node(&node("node1", vec![taint(1, h.now)]));
        }
        h.pod(&p);
        let expected = if expect_evicted {
            vec![(h.now, "pod1".to_string())]
        } else {
            vec![]
        };
        assert_eq!(h.evicted(), expected, "{description}");
    }
}

/// The finite-toleration case of TestCreatePod, followed to its end.
#[test]
fn test_create_pod_finite_toleration_fires_after_100s() {
    let mut h = Harness::new();
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 100)]));
    let t0 = h.now;
    assert_eq!(h.te().deadline_of(&key("pod1")), Some(t0 + 100 * SEC));
    h.advance(100 * SEC - MS);
    assert_eq!(h.evicted(), vec![]);
    h.advance(MS);
    assert_eq!(h.evicted(), vec![(t0 + 100 * SEC, "pod1".to_string())]);
}

/// TestDeletePod: a delete for a pod never seen is harmless; one with a pending eviction
/// cancels it with the event.
#[test]
fn test_delete_pod() {
    let mut h = Harness::new();
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.delete_pod("pod1");
    assert!(h.take().is_empty());

    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 100)]));
    h.delete_pod("pod1");
    assert_eq!(h.events(), vec!["Cancelling deletion of Pod default/pod1"]);
    h.advance(3600 * SEC);
    assert!(h.take().is_empty());
    assert_eq!(h.te().pending_len(), 0);
    assert_eq!(h.store().pod_count(), 0);
}

/// TestUpdatePod, cases 1, 2: `prev` seen, then `new` on tainted node1.
#[test]
fn test_update_pod_scheduling_onto_tainted_node() {
    let cases = [
        ("scheduling onto tainted Node", vec![], true),
        (
            "scheduling onto tainted Node with toleration",
            vec![toleration(1, -1)],
            false,
        ),
    ];
    for (description, tolerations, expect_evicted) in cases {
        let mut h = Harness::new();
        h.node(&node("node1", vec![taint(1, h.now)]));
        h.pod(&tolerating(pod("pod1", ""), tolerations.clone()));
        assert_eq!(h.evicted(), vec![], "{description}: unscheduled");
        h.advance(10 * MS);
        h.pod(&tolerating(pod("pod1", "node1"), tolerations));
        let evicted = h.evicted();
        assert_eq!(evicted.len(), usize::from(expect_evicted), "{description}");
        h.advance(3600 * SEC);
        assert_eq!(h.evicted(), vec![], "{description}: nothing later");
    }
}

/// TestUpdatePod "removing toleration": the 100 s countdown gives way to an eviction at once.
#[test]
fn test_update_pod_removing_toleration() {
    let mut h = Harness::new();
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 100)]));
    assert!(h.te().deadline_of(&key("pod1")).is_some());
    h.advance(10 * MS);
    h.pod(&pod("pod1", "node1"));
    let log = h.take();
    let messages: Vec<_> = log
        .iter()
        .map(|l| match &l.action {
            Action::RecordEvent(e) => e.message.clone(),
            Action::EvictPod { pod, .. } => format!("evict {pod}"),
            other => format!("{other:?}"),
        })
        .collect();
    // Upstream cancels the countdown (with its event) and evicts at once.
    assert_eq!(
        messages,
        vec![
            "Cancelling deletion of Pod default/pod1",
            "Marking for deletion Pod default/pod1",
            "evict default/pod1",
        ]
    );
    assert!(log.iter().all(|l| l.at == h.now));
}

/// TestUpdatePod "lengthening toleration shouldn't work": 1 s then 100 s still fires at 1 s.
#[test]
fn test_update_pod_lengthening_toleration_shouldnt_work() {
    let mut h = Harness::new();
    h.node(&node("node1", vec![taint(1, h.now)]));
    let t0 = h.now;
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 1)]));
    h.advance(10 * MS);
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 100)]));
    assert_eq!(h.te().deadline_of(&key("pod1")), Some(t0 + SEC));
    h.advance(SEC);
    assert_eq!(h.evicted(), vec![(t0 + SEC, "pod1".to_string())]);
}

/// TestCreateNode: `(description, pod tolerations, node tainted?, evicted?)`.
#[test]
fn test_create_node() {
    let cases = [
        (
            "Creating Node matching already assigned Pod",
            vec![],
            false,
            false,
        ),
        (
            "Creating tainted Node matching already assigned Pod",
            vec![],
            true,
            true,
        ),
        (
            "Creating tainted Node matching already assigned tolerating Pod",
            vec![toleration(1, -1)],
            true,
            false,
        ),
    ];
    for (description, tolerations, tainted, expect_evicted) in cases {
        let mut h = Harness::new();
        h.pod(&tolerating(pod("pod1", "node1"), tolerations));
        let taints = if tainted {
            vec![taint(1, h.now)]
        } else {
            vec![]
        };
        h.node(&node("node1", taints));
        let expected = if expect_evicted {
            vec![(h.now, "pod1".to_string())]
        } else {
            vec![]
        };
        assert_eq!(h.evicted(), expected, "{description}");
    }
}

/// TestDeleteNode: the node's taints are forgotten, so a pod arriving later is not evicted.
#[test]
fn test_delete_node() {
    let mut h = Harness::new();
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.delete_node("node1");
    assert_eq!(h.node_taints("node1"), None);
    h.pod(&pod("pod1", "node1"));
    assert_eq!(h.evicted(), vec![]);
}

/// TestUpdateNode cases 1-3 and 5: `(description, tolerations, new taints, evicted after)`.
#[test]
fn test_update_node() {
    let multiple = vec![toleration(1, 1), toleration(2, 100)];
    let cases: [(&str, Vec<_>, Vec<u32>, Option<Duration>); 4] = [
        (
            "Added taint, expect node patched and deleted",
            vec![],
            vec![1],
            Some(Duration::ZERO),
        ),
        (
            "Added tolerated taint",
            vec![toleration(1, 100)],
            vec![1],
            Some(100 * SEC),
        ),
        (
            "Only one added taint tolerated",
            vec![toleration(1, 100)],
            vec![1, 2],
            Some(Duration::ZERO),
        ),
        (
            "Pod with multiple tolerations are evicted when first one runs out",
            multiple,
            vec![1, 2],
            Some(SEC),
        ),
    ];
    for (description, tolerations, taints, evicted_after) in cases {
        let mut h = Harness::new();
        h.node(&node("node1", vec![]));
        h.pod(&tolerating(pod("pod1", "node1"), tolerations));
        let t0 = h.now;
        let taints = taints.into_iter().map(|i| taint(i, t0)).collect();
        h.node(&node("node1", taints));
        h.advance(3600 * SEC);
        let expected: Vec<_> = evicted_after
            .map(|d| (t0 + d, "pod1".to_string()))
            .into_iter()
            .collect();
        assert_eq!(h.evicted(), expected, "{description}");
    }
}

/// TestUpdateNode "Taint removed": the 1 s countdown is cancelled before it fires.
#[test]
fn test_update_node_taint_removed() {
    let mut h = Harness::new();
    h.pod(&tolerating(pod("pod1", "node1"), vec![toleration(1, 1)]));
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.advance(500 * MS);
    h.node(&node("node1", vec![]));
    assert_eq!(h.events(), vec!["Cancelling deletion of Pod default/pod1"]);
    h.advance(1500 * MS);
    assert!(h.take().is_empty());
}

/// TestUpdateNodeWithMultipleTaints: forever + 60 s tolerations through four node states;
/// never deleted.
#[test]
fn test_update_node_with_multiple_taints() {
    let mut h = Harness::new();
    let t1 = taint(1, h.now);
    let t2 = taint(2, h.now);
    let exists = |t: &crate::model::Taint, secs: Option<i64>| crate::model::Toleration {
        key: t.key.clone(),
        operator: crate::model::TolerationOperator::Exists,
        value: n(""),
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: secs,
    };
    h.pod(&tolerating(
        pod("pod1", "node1"),
        vec![exists(&t1, None), exists(&t2, Some(60))],
    ));
    let pending = |h: &Harness| h.te().deadline_of(&key("pod1"));

    h.node(&node("node1", vec![]));
    assert_eq!(pending(&h), None, "no taint");
    h.node(&node("node1", vec![t1.clone()]));
    assert_eq!(pending(&h), None, "permanently tolerated taint");
    h.advance(SEC);
    h.node(&node("node1", vec![t1.clone(), t2]));
    assert_eq!(
        pending(&h),
        Some(h.now + 60 * SEC),
        "temporarily tolerated taint"
    );
    h.advance(SEC);
    h.node(&node("node1", vec![t1]));
    assert_eq!(pending(&h), None, "temporarily tolerated taint removed");
    h.advance(3600 * SEC);
    assert_eq!(h.evicted(), vec![]);
}

/// TestUpdateNodeWithMultiplePods: each pod at its own time (upstream allows 500 ms of slack;
/// we expect the exact millisecond).
#[test]
fn test_update_node_with_multiple_pods() {
    type Case = (&'static str, Vec<u32>, Vec<(u64, &'static str)>);
    let cases: [Case; 2] = [
        (
            "Pods with different toleration times are evicted appropriately",
            vec![1],
            vec![(0, "pod1"), (1000, "pod2")],
        ),
        (
            "Evict all pods not matching all taints instantly",
            vec![1, 2],
            vec![(0, "pod1"), (0, "pod2"), (0, "pod3")],
        ),
    ];
    for (description, taints, expected) in cases {
        let mut h = Harness::new();
        h.node(&node("node1", vec![]));
        h.pod(&pod("pod1", "node1"));
        h.pod(&tolerating(pod("pod2", "node1"), vec![toleration(1, 1)]));
        h.pod(&tolerating(pod("pod3", "node1"), vec![toleration(1, -1)]));
        let t0 = h.now;
        h.node(&node(
            "node1",
            taints.into_iter().map(|i| taint(i, t0)).collect(),
        ));
        h.advance(3600 * SEC);
        let mut got = h.evicted();
        got.sort();
        let expected: Vec<_> = expected
            .into_iter()
            .map(|(ms, p)| (t0 + Duration::from_millis(ms), p.to_string()))
            .collect();
        assert_eq!(got, expected, "{description}");
    }
}

/// TestEventualConsistency: the node update evicts pod1; pod2's late update still gets judged
/// against the taint (at once, or 100 s later with its toleration).
#[test]
fn test_eventual_consistency() {
    let cases = [
        ("existing pod2 scheduled onto tainted Node", true, vec![], 0),
        (
            "existing pod2 with taint toleration scheduled onto tainted Node",
            true,
            vec![toleration(1, 100)],
            100,
        ),
        ("new pod2 created on tainted Node", false, vec![], 0),
        (
            "new pod2 with tait toleration created on tainted Node",
            false,
            vec![toleration(1, 100)],
            100,
        ),
    ];
    for (description, prev_exists, tolerations, pod2_after_secs) in cases {
        let mut h = Harness::new();
        h.node(&node("node1", vec![]));
        h.pod(&pod("pod1", "node1"));
        if prev_exists {
            h.pod(&tolerating(pod("pod2", ""), tolerations.clone()));
        }
        let t0 = h.now;
        h.node(&node("node1", vec![taint(1, t0)]));
        assert_eq!(h.evicted(), vec![(t0, "pod1".to_string())], "{description}");
        h.advance(20 * MS);
        let t1 = h.now;
        h.pod(&tolerating(pod("pod2", "node1"), tolerations));
        h.advance(3600 * SEC);
        assert_eq!(
            h.evicted(),
            vec![(t1 + pod2_after_secs * SEC, "pod2".to_string())],
            "{description}"
        );
    }
}

/// TestPodDeletionEvent: exact reason, type, message, object and source of both events.
#[test]
fn test_pod_deletion_event() {
    let mut h = Harness::new();
    h.answer = Box::new(|_, _| None);
    let test_pod = |tolerations| {
        let mut p = tolerating(pod("test", "node1"), tolerations);
        p.key.namespace = n("test");
        p
    };
    h.node(&node("node1", vec![taint(1, h.now)]));
    h.pod(&test_pod(vec![toleration(1, 100)]));
    h.pod(&test_pod(vec![]));
    let events: Vec<_> = h
        .take()
        .into_iter()
        .filter_map(|l| match l.action {
            Action::RecordEvent(e) => Some(e),
            _ => None,
        })
        .collect();
    let messages = [
        "Cancelling deletion of Pod test/test",
        "Marking for deletion Pod test/test",
    ];
    assert_eq!(events.len(), 2);
    for (event, message) in events.iter().zip(messages) {
        assert_eq!(event.message, message);
        assert_eq!(event.reason, EVICTION_EVENT_REASON);
        assert_eq!(event.event_type, EventType::Normal);
        assert_eq!(event.component, TAINT_EVICTION_CONTROLLER);
        assert_eq!(
            event.object,
            EventObject::Pod {
                namespace: n("test"),
                name: n("test"),
                uid: n(""),
            }
        );
    }
}
