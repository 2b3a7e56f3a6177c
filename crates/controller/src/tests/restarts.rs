//! Restarts and leader changes mid-outage: a new process, or a new leader, changes nothing a
//! watcher of the cluster can see. A node that is not Ready keeps its
//! NoExecute taint and the taint's `timeAdded`; no pending deletion is cancelled; each pod goes
//! at `timeAdded + tolerationSeconds`, not a full `tolerationSeconds` after the new start.
//! What upstream does at first sight of a node that *is* Ready (its stale NoExecute taints come
//! off), and the all-zones-down rule, still apply: they are not restart effects.

use std::time::Duration;

use super::harness::{cond, date, lease, n, node, pod, secs, test_settings};
use super::lifecycle_with_eviction::{Cluster, tolerating_unreachable, with_tolerations};
use crate::Input;
use crate::controllers::Controllers;
use crate::model::{ConditionStatus, NodeConditionType, Taint, TaintEffect, taint_keys};
use crate::time::Time;

/// How long the dead node's pods tolerate the unreachable taint.
const TOLERATED: Duration = Duration::from_secs(20);

/// `timeAdded` has whole seconds: the taint was written within the second after it, and a
/// countdown found at a start counts from the next second (`tolerations::countdown_start`).
const ROUNDED_UP: Duration = Duration::from_secs(1);

fn t0() -> Time {
    date(2026, 1, 1, 12, 0, 0)
}

fn unreachable_no_execute(added: Time) -> Taint {
    Taint {
        key: n(taint_keys::UNREACHABLE),
        value: n(""),
        effect: TaintEffect::NoExecute,
        time_added: Some(added),
    }
}

/// The two pods of n1, tolerating the unreachable taint for [`TOLERATED`].
const PODS: [&str; 2] = ["a", "b"];

fn put_pods(c: &mut Cluster, ready: ConditionStatus) {
    let seconds = i64::try_from(TOLERATED.as_secs()).unwrap_or(i64::MAX);
    for name in PODS {
        let mut p = with_tolerations(pod(name, "n1"), vec![tolerating_unreachable(Some(seconds))]);
        p.ready = Some(ready);
        c.put_pod(p);
    }
}

/// A healthy kubelet posting Ready at `at`.
fn beat(c: &mut Cluster, name: &str, at: Time) {
    let mut node = c.nodes[&n(name)].clone();
    node.conditions = vec![cond(
        NodeConditionType::Ready,
        ConditionStatus::True,
        at,
        t0(),
    )];
    c.put_node(node);
}

/// Runs to `until` with n2 and n3 posting Ready every 10 s (n1 stays silent).
fn run_with_healthy_peers(c: &mut Cluster, until: Time) {
    while c.now < until {
        let next = (c.now + secs(10)).min(until);
        c.run_until(next);
        for name in ["n2", "n3"] {
            beat(c, name, next);
        }
    }
}

/// The cluster a daemon killed mid-outage leaves, as a new process lists it at `c.now`: n1
/// silent since t0, Ready=Unknown, tainted unreachable NoSchedule and NoExecute (the latter
/// with `timeAdded` = `added`), its pods marked NotReady; n2 and n3 healthy. One zone: 1 of
/// 3 not Ready is Normal.
fn listed_mid_outage(c: &mut Cluster, added: Time) {
    let now = c.now;
    c.put_lease(lease("n1", t0()));
    let mut n1 = node("n1")
        .ready(ConditionStatus::Unknown, t0(), added)
        .taint(taint_keys::UNREACHABLE, TaintEffect::NoSchedule)
        .build();
    n1.taints.push(unreachable_no_execute(added));
    c.put_node(n1);
    for name in ["n2", "n3"] {
        c.put_lease(lease(name, now));
        c.put_node(node(name).ready(ConditionStatus::True, now, t0()).build());
    }
    put_pods(c, ConditionStatus::False);
}

/// A leader running since t0 with n1, n2, n3 Ready and n1's two pods; n1 falls silent at t0
/// and is tainted at the end of its grace. Returns the taint's `timeAdded` and how many taint
/// writes were sent by then (the last added it).
fn leader_tainting_a_dead_node(c: &mut Cluster) -> (Time, usize) {
    c.put_lease(lease("n1", t0()));
    for name in ["n1", "n2", "n3"] {
        c.put_node(node(name).ready(ConditionStatus::True, t0(), t0()).build());
    }
    put_pods(c, ConditionStatus::True);
    c.feed(Input::InitialSyncDone);
    let until = t0() + test_settings().node_monitor_grace_period + secs(1);
    run_with_healthy_peers(c, until);
    let added = no_execute_added(c).expect("n1 tainted at the end of its grace");
    assert!(c.evicted.is_empty(), "{:?}", c.evicted);
    (added, c.taint_writes().len())
}

/// `timeAdded` of n1's unreachable:NoExecute taint, as the API holds it.
fn no_execute_added(c: &Cluster) -> Option<Time> {
    c.nodes[&n("n1")]
        .taints
        .iter()
        .find(|t| &*t.key == taint_keys::UNREACHABLE && t.effect == TaintEffect::NoExecute)
        .map(|t| t.time_added.unwrap_or(Time::ZERO))
}

/// After the first `before` taint writes: every taint write of n1 kept its
/// unreachable:NoExecute taint with `timeAdded` = `added`; the API still holds it so, and no
/// deletion was cancelled.
fn assert_taint_and_countdowns_untouched(c: &Cluster, before: usize, added: Time) {
    for (at, node, taints) in c.taint_writes().iter().skip(before) {
        if &**node != "n1" {
            continue;
        }
        let kept = taints.iter().any(|t| *t == unreachable_no_execute(added));
        assert!(
            kept,
            "a taint write of n1 at {at:?} dropped or re-stamped unreachable:NoExecute \
             (timeAdded {added:?}): {taints:?}"
        );
    }
    assert_eq!(no_execute_added(c), Some(added), "n1's NoExecute taint");
    let cancelled: Vec<String> = c
        .timed_events()
        .iter()
        .filter(|(_, e)| e.message.starts_with("Cancelling deletion"))
        .map(|(at, e)| format!("{at:?} {}", e.message))
        .collect();
    assert!(cancelled.is_empty(), "{cancelled:?}");
}

/// `(pod, when)` of every eviction.
fn evictions(c: &Cluster) -> Vec<(String, Time)> {
    c.evicted
        .iter()
        .map(|(at, p)| (p.name.to_string(), *at))
        .collect()
}

fn both_at(at: Time) -> Vec<(String, Time)> {
    PODS.iter().map(|p| (p.to_string(), at)).collect()
}

/// The daemon was killed 8 s after it tainted n1 and is started again: the new process
/// removes no taint, cancels nothing, and deletes the pods 20 s after `timeAdded`.
#[test]
fn a_restart_mid_outage_keeps_the_taint_and_deletes_at_time_added_plus_toleration() {
    let added = t0() + secs(50);
    let restart = added + secs(8);
    let mut c = Cluster::new(test_settings(), restart);
    listed_mid_outage(&mut c, added);
    c.feed(Input::InitialSyncDone);
    run_with_healthy_peers(&mut c, added + secs(40));
    assert_taint_and_countdowns_untouched(&c, 0, added);
    assert_eq!(evictions(&c), both_at(added + ROUNDED_UP + TOLERATED));
}

/// A leader that lost its lease 5 s after tainting n1 (`into_follower`) and holds it again
/// 3 s later keeps the taint and its `timeAdded`; the pods go 20 s after `timeAdded`.
#[test]
fn a_leader_demoted_and_reelected_mid_outage_keeps_the_taint_and_its_countdown() {
    let mut c = Cluster::new(test_settings(), t0());
    let (added, writes) = leader_tainting_a_dead_node(&mut c);
    let demoted = added + secs(5);
    run_with_healthy_peers(&mut c, demoted);
    let leader = std::mem::replace(&mut c.ctl, Controllers::new(test_settings(), t0()));
    c.ctl = leader.into_follower(demoted);
    run_with_healthy_peers(&mut c, demoted + secs(3));
    c.feed(Input::InitialSyncDone);
    run_with_healthy_peers(&mut c, added + secs(40));
    assert_taint_and_countdowns_untouched(&c, writes, added);
    assert_eq!(evictions(&c), both_at(added + ROUNDED_UP + TOLERATED));
}

/// A standby fed every watch event since t0 takes over 3 s after the leader died (5 s after
/// it tainted n1): the same.
#[test]
fn a_standby_taking_over_mid_outage_keeps_the_taint_and_its_countdown() {
    let mut c = Cluster::new(test_settings(), t0());
    c.standby = Some(Controllers::new(test_settings(), t0()));
    let (added, writes) = leader_tainting_a_dead_node(&mut c);
    let killed = added + secs(5);
    run_with_healthy_peers(&mut c, killed);
    // The leader is gone; the standby gets the watch events alone until its lease comes.
    c.ctl = c.standby.take().expect("a standby");
    run_with_healthy_peers(&mut c, killed + secs(3));
    c.feed(Input::InitialSyncDone);
    run_with_healthy_peers(&mut c, added + secs(40));
    assert_taint_and_countdowns_untouched(&c, writes, added);
    assert_eq!(evictions(&c), both_at(added + ROUNDED_UP + TOLERATED));
}

/// The old leader's host ran 30 s ahead: the taint's `timeAdded` is in the new leader's
/// future. The countdown never starts later than now: the pods go 20 s after the takeover.
#[test]
fn a_time_added_in_the_new_leaders_future_counts_from_the_takeover() {
    let restart = t0() + secs(60);
    let added = restart + secs(30);
    let mut c = Cluster::new(test_settings(), restart);
    listed_mid_outage(&mut c, added);
    c.feed(Input::InitialSyncDone);
    run_with_healthy_peers(&mut c, restart + secs(60));
    assert_taint_and_countdowns_untouched(&c, 0, added);
    assert_eq!(evictions(&c), both_at(restart + TOLERATED));
}

/// Upstream's first sight of a node that is Ready: its stale NoExecute taints come off (a
/// restart does not change that), and the countdown of its pods is cancelled with them.
#[test]
fn a_ready_node_with_a_stale_no_execute_taint_at_a_restart_is_untainted_as_upstream() {
    let added = t0() + secs(50);
    let restart = added + secs(8);
    let mut c = Cluster::new(test_settings(), restart);
    let mut n1 = node("n1")
        .ready(ConditionStatus::True, restart, t0())
        .build();
    n1.taints.push(unreachable_no_execute(added));
    for name in ["n1", "n2", "n3"] {
        c.put_lease(lease(name, restart));
    }
    c.put_node(n1);
    for name in ["n2", "n3"] {
        c.put_node(
            node(name)
                .ready(ConditionStatus::True, restart, t0())
                .build(),
        );
    }
    put_pods(&mut c, ConditionStatus::True);
    c.feed(Input::InitialSyncDone);
    run_with_healthy_peers(&mut c, restart + secs(1));
    assert_eq!(no_execute_added(&c), None, "the stale taint stayed");
    run_with_healthy_peers(&mut c, added + secs(40));
    assert!(c.evicted.is_empty(), "{:?}", c.evicted);
}

/// Every node Unknown and tainted when the new process starts: every zone is down, and the
/// all-zones-down rule lifts the NoExecute taints as it would for a running instance.
#[test]
fn every_zone_down_at_a_restart_still_lifts_the_no_execute_taints() {
    let added = t0() + secs(50);
    let restart = added + secs(8);
    let mut c = Cluster::new(test_settings(), restart);
    for name in ["n1", "n2", "n3"] {
        c.put_lease(lease(name, t0()));
        let mut dead = node(name)
            .ready(ConditionStatus::Unknown, t0(), added)
            .taint(taint_keys::UNREACHABLE, TaintEffect::NoSchedule)
            .build();
        dead.taints.push(unreachable_no_execute(added));
        c.put_node(dead);
    }
    put_pods(&mut c, ConditionStatus::False);
    c.feed(Input::InitialSyncDone);
    c.run_until(restart + secs(1));
    for name in ["n1", "n2", "n3"] {
        let node = &c.nodes[&n(name)];
        assert!(
            node.taints
                .iter()
                .all(|t| t.effect != TaintEffect::NoExecute),
            "{name}: {:?}",
            node.taints
        );
    }
    c.run_until(added + secs(40));
    assert!(c.evicted.is_empty(), "{:?}", c.evicted);
}

/// Pod "b" was re-created (a new uid) 5 s after n1 was tainted, while the old leader ran, and
/// the new leader starts 3 s later (soak seed 26: pods deleted 3.3 s after their creation with
/// a 6 s toleration). "b" cannot have been under the taint since `timeAdded`: it gets its whole
/// toleration from its creation, as upstream's fresh process would at least give it; "a",
/// there before the taint, still goes at `timeAdded + tolerationSeconds`.
#[test]
fn a_pod_created_after_the_taint_at_a_takeover_gets_its_full_toleration_from_its_creation() {
    let added = t0() + secs(50);
    let created = added + secs(5);
    let restart = added + secs(8);
    let mut c = Cluster::new(test_settings(), restart);
    listed_mid_outage(&mut c, added);
    let mut b = c.pods[&super::harness::pod("b", "n1").key].clone();
    b.uid = n("uid-b-recreated");
    b.creation_timestamp = Some(created);
    c.put_pod(b);
    c.feed(Input::InitialSyncDone);
    run_with_healthy_peers(&mut c, added + secs(40));
    assert_taint_and_countdowns_untouched(&c, 0, added);
    assert_eq!(
        evictions(&c),
        vec![
            ("a".to_string(), added + ROUNDED_UP + TOLERATED),
            ("b".to_string(), created + TOLERATED)
        ]
    );
}
