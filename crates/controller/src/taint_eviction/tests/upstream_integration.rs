//! Upstream's integration cases (`test/integration/node/lifecycle_test.go`), at the level of
//! this machine: the node lifecycle core's taints arrive as node updates.

use super::harness::*;
use crate::Action;
use crate::model::{Taint, labels, taint_keys};

fn with_exclusion(mut node: crate::model::Node) -> crate::model::Node {
    node.labels.push((n(labels::EXCLUDE_DISRUPTION), n("")));
    node
}

/// TestEvictionForNoExecuteTaintAddedByUser: any NoExecute taint evicts, not only ours; the
/// apiserver's default not-ready/unreachable tolerations do not cover it.
#[test]
fn eviction_for_no_execute_taint_added_by_user() {
    let mut h = Harness::new();
    for i in 0..3 {
        h.node(&with_exclusion(node(&format!("node-{i}"), vec![])));
    }
    let defaults = default_tolerations(Some(300));
    h.pod(&tolerating(pod("testpod", "node-0"), defaults.clone()));
    h.pod(&tolerating(pod("bystander", "node-1"), defaults));
    h.advance(10 * SEC);
    let user_taint = Taint {
        time_added: Some(h.now),
        ..no_execute("CustomTaintByUser")
    };
    h.node(&with_exclusion(node("node-0", vec![user_taint])));
    assert_eq!(h.evicted(), vec![(h.now, "testpod".to_string())]);
    h.advance(3600 * SEC);
    assert_eq!(h.evicted(), vec![]);
}

/// TestTaintBasedEvictions: for both of the core's taints, a pod with the default 300 s
/// tolerations goes 300 s after the taint is seen, 200 s after with 200 s, at once with 0 s,
/// and at once with no toleration at all.
#[test]
fn taint_based_evictions() {
    let cases = [
        ("default 300 s tolerations", Some(Some(300)), Some(300)),
        ("200 s tolerations", Some(Some(200)), Some(200)),
        ("0 s tolerations", Some(Some(0)), Some(0)),
        ("no tolerations", None, Some(0)),
        ("tolerated forever", Some(None), None),
    ];
    for taint_key in [taint_keys::NOT_READY, taint_keys::UNREACHABLE] {
        for (description, tolerations, evicted_after) in cases {
            let mut h = Harness::new();
            let tolerations = tolerations.map(default_tolerations).unwrap_or_default();
            h.node(&node("node-0", vec![]));
            h.pod(&tolerating(pod("testpod", "node-0"), tolerations));
            h.advance(7 * SEC);
            let seen = h.now;
            let t = Taint {
                time_added: Some(seen),
                ..no_execute(taint_key)
            };
            h.node(&node("node-0", vec![t]));
            if let Some(secs) = evicted_after.filter(|s| *s > 0) {
                h.advance(secs * SEC - MS);
                assert_eq!(h.evicted(), vec![], "{taint_key} {description}: 1 ms early");
            }
            h.advance(3600 * SEC);
            let expected: Vec<_> = evicted_after
                .map(|secs| (seen + secs * SEC, "testpod".to_string()))
                .into_iter()
                .collect();
            assert_eq!(h.evicted(), expected, "{taint_key} {description}");
        }
    }
}

/// The swap the core does when a node goes from Unknown to False (unreachable -> not-ready,
/// two taint writes, possibly two node updates) does not restart the countdown.
#[test]
fn swapping_unreachable_for_not_ready_keeps_the_countdown() {
    let mut h = Harness::new();
    h.pod(&tolerating(
        pod("testpod", "node-0"),
        default_tolerations(Some(300)),
    ));
    let seen = h.now;
    let unreachable = Taint {
        time_added: Some(seen),
        ..no_execute(taint_keys::UNREACHABLE)
    };
    h.node(&node("node-0", vec![unreachable.clone()]));
    h.advance(100 * SEC);
    let not_ready = Taint {
        time_added: Some(h.now),
        ..no_execute(taint_keys::NOT_READY)
    };
    h.node(&node("node-0", vec![unreachable, not_ready.clone()]));
    h.node(&node("node-0", vec![not_ready]));
    h.advance(3600 * SEC);
    assert_eq!(h.evicted(), vec![(seen + 300 * SEC, "testpod".to_string())]);
}

/// "All zones fully disrupted": the core removes its not-ready/unreachable NoExecute taints
/// from every node, which this machine sees as node updates: pending evictions are cancelled.
/// A user's NoExecute taint still evicts, as upstream.
#[test]
fn full_disruption_cancels_pending_evictions_but_user_taints_still_evict() {
    let mut h = Harness::new();
    let defaults = default_tolerations(Some(300));
    for i in 0..3 {
        h.pod(&tolerating(
            pod(&format!("pod-{i}"), &format!("node-{i}")),
            defaults.clone(),
        ));
    }
    let unreachable = Taint {
        time_added: Some(h.now),
        ..no_execute(taint_keys::UNREACHABLE)
    };
    let user = no_execute("CustomTaintByUser");
    for i in 0..3 {
        h.node(&node(&format!("node-{i}"), vec![unreachable.clone()]));
    }
    h.advance(120 * SEC);
    assert_eq!(h.te().pending_len(), 3);
    // Entering disruption mode: our taints go; node-2 also gets a user's taint.
    h.node(&node("node-0", vec![]));
    h.node(&node("node-1", vec![]));
    h.node(&node("node-2", vec![user]));
    let t = h.now;
    let log = h.take();
    let cancelled = log
        .iter()
        .filter(|l| {
            matches!(&l.action, Action::RecordEvent(e)
                if e.message.starts_with("Cancelling"))
        })
        .count();
    assert_eq!(
        cancelled, 3,
        "node-2's countdown is cancelled before it is evicted at once"
    );
    let evicted: Vec<_> = log
        .iter()
        .filter_map(|l| match &l.action {
            Action::EvictPod { pod, .. } => Some((l.at, pod.name.to_string())),
            _ => None,
        })
        .collect();
    assert_eq!(evicted, vec![(t, "pod-2".to_string())]);
    h.advance(3600 * SEC);
    assert!(h.take().is_empty());
}
