//! No decision on a stale cache: while a watch is down, and for a new leader until its caches
//! are current, nothing is tainted NoExecute and no pod is deleted.

use super::*;
use std::time::Duration;

use crate::controllers::Controllers;
use crate::inputs::Input;
use crate::model::{ConditionStatus, NodeConditionType, TaintEffect, taint_keys};
use crate::tests::harness::{date, lease, n, node, pod, secs, test_settings};
use crate::time::Time;

/// SOAK.md finding 2, first shape: a zone was tainted at the full-disruption rate after one
/// of its nodes came back, unseen because the node watch was down. While an informer is
/// not watching, the Unknown verdict is still given (its live Lease read guards it) but no
/// new NoExecute taint is added; once every watch is back and has had its settle, the
/// queued node is tainted without having lost its place.
#[test]
fn a_zone_is_not_tainted_while_a_watch_is_down() {
    use crate::cache_currency::CACHE_SETTLE_MAX as CACHE_SETTLE;
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let mut c = Cluster::new(test_settings(), t0);
    c.put_lease(lease("n1", t0));
    c.put_node(node("n1").ready(ConditionStatus::True, t0, t0).build());
    c.put_node(node("n2").ready(ConditionStatus::True, t0, t0).build());
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
    let tainted =
        |c: &Cluster| c.nodes[&n("n1")].has_taint(taint_keys::UNREACHABLE, &TaintEffect::NoExecute);
    // n1 falls silent at t0; n2 keeps beating. The Lease watch fails at 30 s and stays
    // down (node events still arrive: any informer down holds the tainting).
    for s in (10..=90).step_by(10) {
        if s == 30 {
            c.feed(Input::InformersWatching(None));
        }
        c.run_until(t0 + secs(s));
        beat(&mut c, t0 + secs(s));
    }
    let n1 = &c.nodes[&n("n1")];
    assert_eq!(
        n1.ready().map(|r| r.status),
        Some(ConditionStatus::Unknown),
        "the verdict is not held"
    );
    assert!(!tainted(&c), "tainted while a watch was down");
    // Back at 90 s: not before the settle, then at once.
    c.feed(Input::InformersWatching(Some(CACHE_SETTLE)));
    c.run_until(t0 + secs(90) + (CACHE_SETTLE - Duration::from_millis(1)));
    assert!(!tainted(&c), "tainted before the watch caught up");
    c.run_until(t0 + secs(90) + CACHE_SETTLE + Duration::from_millis(200));
    assert!(tainted(&c), "the held taint was never added");
}

/// SOAK.md finding 2, second shape: a follower whose node watch is down holds a taint the
/// old leader removed long ago. Taking over, it deletes nothing until every watch is back
/// and caught up; the backlog then shows the taint gone (that pod stays), while a pod on a
/// node still tainted is deleted once the caches are current (nothing is lost).
#[test]
fn a_new_leader_deletes_no_pod_before_its_caches_are_current() {
    use crate::cache_currency::CACHE_SETTLE_MAX as CACHE_SETTLE;
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let mut c = Cluster::new(test_settings(), t0);
    for name in ["n1", "n2"] {
        c.put_lease(lease(name, t0));
        c.put_node(
            node(name)
                .ready(ConditionStatus::True, t0, t0)
                .taint("user", TaintEffect::NoExecute)
                .build(),
        );
    }
    c.put_pod(pod("stale", "n1"));
    c.put_pod(pod("due", "n2"));
    // A follower: the node watch went down at 1 s; the lease is ours at 25 s.
    c.now = t0 + secs(1);
    c.feed(Input::InformersWatching(None));
    c.now = t0 + secs(25);
    c.feed(Input::InitialSyncDone);
    c.run_until(t0 + secs(40));
    assert_eq!(
        c.evicted_names(),
        Vec::<String>::new(),
        "deleted on a stale cache"
    );
    // The watch is back at 40 s: its backlog has n1's taint removed 24 s before.
    c.feed(Input::InformersWatching(Some(CACHE_SETTLE)));
    let mut n1 = c.nodes[&n("n1")].clone();
    n1.taints.clear();
    n1.resource_version = n("99");
    c.put_node(n1);
    c.run_until(t0 + secs(40) + (CACHE_SETTLE - Duration::from_millis(1)));
    assert_eq!(
        c.evicted_names(),
        Vec::<String>::new(),
        "deleted before the settle"
    );
    c.run_until(t0 + secs(60));
    assert_eq!(c.evicted_names(), vec!["due"]);
    assert_eq!(c.evicted[0].0, t0 + secs(40) + CACHE_SETTLE);
}

/// A watch that fails again during the settle starts it over; a follower keeps the state
/// of its informers when it is demoted (they go on as they were).
#[test]
fn a_watch_failing_again_restarts_the_wait_and_a_demoted_leader_keeps_it() {
    use crate::cache_currency::CACHE_SETTLE_MAX as CACHE_SETTLE;
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let mut c = Cluster::new(test_settings(), t0);
    c.put_node(
        node("n1")
            .ready(ConditionStatus::True, t0, t0)
            .taint("user", TaintEffect::NoExecute)
            .build(),
    );
    c.feed(Input::InformersWatching(None));
    let follower =
        std::mem::replace(&mut c.ctl, Controllers::new(test_settings(), t0)).into_follower(t0);
    c.ctl = follower;
    c.put_pod(pod("p", "n1"));
    c.feed(Input::InitialSyncDone);
    c.run_until(t0 + secs(5));
    c.feed(Input::InformersWatching(Some(CACHE_SETTLE)));
    c.run_until(t0 + secs(5) + CACHE_SETTLE / 2);
    c.feed(Input::InformersWatching(None));
    c.feed(Input::InformersWatching(Some(CACHE_SETTLE)));
    c.run_until(t0 + secs(5) + CACHE_SETTLE + CACHE_SETTLE / 4);
    assert_eq!(c.evicted_names(), Vec::<String>::new());
    c.run_until(t0 + secs(10));
    assert_eq!(c.evicted_names(), vec!["p"]);
    assert_eq!(
        c.evicted[0].0,
        t0 + secs(5) + CACHE_SETTLE / 2 + CACHE_SETTLE
    );
}
