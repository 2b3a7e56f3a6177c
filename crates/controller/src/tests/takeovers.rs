//! Never less safe across a takeover: a takeover sees the fleet before it acts, countdowns
//! never start before the pod's own could have (the sites cut off without a takeover are in
//! `disrupted_sites.rs`, which shares this file's clock and settings). One test per
//! story, named after it.
//! The node lifecycle alone where the NoExecute writes and pod marks are the subject
//! (`harness.rs` says why); the composed machine (`Cluster`) where pods are deleted.

use std::time::Duration;

use super::harness::*;
use super::lifecycle_with_eviction::{Cluster, tolerating_unreachable, with_tolerations};
use super::partitions::{SITE, by_site, fleet, heartbeat, no_execute_writes};
use crate::model::ConditionStatus::{False, True, Unknown};
use crate::model::TaintEffect::{NoExecute, NoSchedule};
use crate::model::{
    ConditionStatus, Lease, NodeConditionType, Taint, TaintEffect, Toleration, TolerationOperator,
    taint_keys,
};
use crate::partitions::{FullDisruption, PodsNotReady};
use crate::time::{Rate, Time};
use crate::{Action, Controllers, Input, Settings};

pub(super) fn t0() -> Time {
    date(2026, 12, 1, 9, 0, 0)
}

pub(super) fn hold(settings: Settings) -> Settings {
    Settings {
        full_disruption: FullDisruption::Hold,
        hold_max: None,
        node_eviction_rate: Rate::from_micro_per_second(100_000),
        ..by_site(settings)
    }
}

pub(super) fn lease40(name: &str, renew: Time) -> Lease {
    Lease {
        duration_seconds: Some(40),
        ..lease(name, renew)
    }
}

pub(super) fn t0_partitions() -> Time {
    super::partitions::t0()
}

// ---- a takeover does not queue the nodes already tainted again ---------------------------------

/// A new process finds n01..n03 Unknown and tainted by the previous leader in a zone of ten
/// (Normal). They are not queued again: no zone token spent on them, `evictions_total` not
/// inflated, and n04, reporting NotReady a second after the start, is tainted at once, not
/// 10 s per node found tainted later.
#[test]
fn a_takeover_does_not_queue_again_the_nodes_already_tainted() {
    let restart = t0() + secs(300);
    let added = t0() + secs(60);
    let names: Vec<String> = (1..=10).map(|i| format!("n{i:02}")).collect();
    let mut nodes = Vec::new();
    let mut leases = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if i < 3 {
            let mut dead = node(name)
                .ready(Unknown, t0(), added)
                .taint(taint_keys::UNREACHABLE, NoSchedule)
                .build();
            dead.taints.push(Taint {
                key: n(taint_keys::UNREACHABLE),
                value: n(""),
                effect: NoExecute,
                time_added: Some(added),
            });
            nodes.push(dead);
            leases.push(lease(name, t0()));
        } else {
            nodes.push(node(name).ready(True, restart, t0()).build());
            leases.push(lease(name, restart));
        }
    }
    let settings = Settings {
        node_eviction_rate: Rate::from_micro_per_second(100_000),
        ..test_settings()
    };
    let mut h = FakeApi::lifecycle_alone(settings, restart);
    h.start(nodes, vec![], leases);
    h.run_until(restart + secs(1));
    h.set_conditions(
        "n04",
        vec![cond(
            NodeConditionType::Ready,
            False,
            restart + secs(1),
            restart + secs(1),
        )],
    );
    h.run_until(restart + secs(40));
    let n04 = h.taint_writes_with("n04", taint_keys::NOT_READY, NoExecute);
    assert_eq!(n04.len(), 1, "{n04:?}");
    assert!(n04[0] <= restart + secs(2), "n04 tainted at {:?}", n04[0]);
    for name in &names[..3] {
        let writes: Vec<Time> = h
            .taint_writes()
            .iter()
            .filter(|(_, node, _)| **node == **name)
            .map(|(t, _, _)| *t)
            .collect();
        assert_eq!(writes, vec![], "{name}");
    }
    let total: u64 = h.dump().zones.iter().map(|z| z.evictions_total).sum();
    assert_eq!(total, 1);
}

// ---- unless-disrupted at a takeover ------------------------------------------------------------

/// Site 1's nodes went Unknown under the previous leader, which kept their pods Ready
/// (`unless-disrupted`); a new process finds them so. The site is fully disrupted before any
/// node is judged, so the pods stay Ready (judging each node before any zone had a state would
/// mark them all). The same with every site down.
#[test]
fn unless_disrupted_keeps_the_pods_of_a_dark_site_ready_at_a_takeover() {
    for every_site_down in [false, true] {
        let restart = t0() + secs(300);
        let mut nodes = Vec::new();
        let mut leases = Vec::new();
        let mut pods = Vec::new();
        for site in ["s1", "s2"] {
            for i in 1..=4 {
                let name = format!("{site}-{i}");
                let dark = site == "s1" || every_site_down;
                let b = node(&name).label(SITE, site);
                let (b, renewed) = if dark {
                    (b.ready(Unknown, t0(), t0() + secs(60)), t0())
                } else {
                    (b.ready(True, restart, t0()), restart)
                };
                nodes.push(b.build());
                leases.push(lease40(&name, renewed));
                pods.push(pod(&format!("p-{name}"), &name));
            }
        }
        let settings = Settings {
            mark_pods_not_ready: PodsNotReady::UnlessDisrupted,
            ..by_site(test_settings())
        };
        let mut h = FakeApi::lifecycle_alone(settings, restart);
        h.start(nodes, pods, leases);
        h.run_until(restart + secs(20));
        for i in 1..=4 {
            let p = format!("p-s1-{i}");
            assert_eq!(
                h.pod_marks(&p),
                vec![],
                "{p}, every site down: {every_site_down}"
            );
        }
    }
}

// ---- a takeover sees the fleet before it acts --------------------------------------------------

const THREE: [&str; 3] = ["n1", "n2", "n3"];

/// A leader and a standby fed every watch event, three nodes in one zone with 40 s Leases.
fn leader_and_standby(settings: Settings) -> Cluster {
    let mut c = Cluster::new(settings.clone(), t0());
    c.standby = Some(Controllers::new(settings, t0()));
    for name in THREE {
        c.put_lease(lease40(name, t0()));
    }
    for name in THREE {
        c.put_node(node(name).ready(True, t0(), t0()).build());
    }
    c
}

/// Runs to `until` in 1 s steps, the kubelets `live` says renewing every 10 s.
fn run(c: &mut Cluster, until: Time, live: impl Fn(&str, Time) -> bool) {
    while c.now < until {
        let next = (c.now + secs(1)).min(until);
        c.run_until(next);
        if next.since(t0()).as_millis() % 10_000 != 0 {
            continue;
        }
        for name in THREE {
            if live(name, next) {
                let renewed = Lease {
                    renew_time: Some(next),
                    ..c.leases[name].clone()
                };
                c.put_lease(renewed);
            }
        }
    }
}

/// The leader is gone; the standby, fed every watch event so far, takes over `after` later.
fn take_over(c: &mut Cluster, after: Duration, live: impl Fn(&str, Time) -> bool) {
    c.ctl = c.standby.take().expect("a standby");
    let at = c.now + after;
    run(c, at, live);
    c.feed(Input::InitialSyncDone);
}

fn status_writes(c: &Cluster, name: &str) -> Vec<Time> {
    c.log
        .iter()
        .filter_map(|(t, a)| match a {
            Action::UpdateNodeConditions { node, .. } if &**node == name => Some(*t),
            _ => None,
        })
        .collect()
}

/// n1's kubelet fell silent at 10 s; the leader dies at 40 s and the standby takes over at
/// 45 s. It judges n1 at the end of the grace counted from its last renewal (60 s), as the
/// leader would have, not a whole grace after the takeover (95 s).
#[test]
fn a_standby_judges_a_node_silent_before_the_takeover_from_its_last_renewal() {
    let mut c = leader_and_standby(test_settings());
    c.feed(Input::InitialSyncDone);
    let live = |n: &str, t: Time| n != "n1" || t <= t0() + secs(10);
    run(&mut c, t0() + secs(40), live);
    take_over(&mut c, secs(5), live);
    run(&mut c, t0() + secs(70), live);
    let verdicts = status_writes(&c, "n1");
    assert_eq!(verdicts.len(), 1, "{verdicts:?}");
    assert!(
        verdicts[0] > t0() + secs(60) && verdicts[0] <= t0() + secs(61),
        "judged at {:?}",
        verdicts[0]
    );
}

/// The same for a leader that lost its lease at 30 s (it keeps the lags it saw) and holds it
/// again at 35 s: n1 judged at 60 s, not 85 s.
#[test]
fn a_leader_reelected_judges_a_node_silent_before_from_its_last_renewal() {
    let mut c = leader_and_standby(test_settings());
    c.standby = None;
    c.feed(Input::InitialSyncDone);
    let live = |n: &str, t: Time| n != "n1" || t <= t0() + secs(10);
    run(&mut c, t0() + secs(30), live);
    let leader = std::mem::replace(&mut c.ctl, Controllers::new(test_settings(), t0()));
    c.ctl = leader.into_follower(c.now);
    run(&mut c, t0() + secs(35), live);
    c.feed(Input::InitialSyncDone);
    run(&mut c, t0() + secs(70), live);
    let verdicts = status_writes(&c, "n1");
    assert_eq!(verdicts.len(), 1, "{verdicts:?}");
    assert!(
        verdicts[0] > t0() + secs(60) && verdicts[0] <= t0() + secs(61),
        "judged at {:?}",
        verdicts[0]
    );
}

/// n1 is tainted at 50 s and its pod (60 s toleration) counts down. Later n2 and n3, the rest
/// of the cluster, go silent (last renewals at 70 s); the leader dies at 100 s, before they
/// are judged, and the standby takes over at 103 s. The pod comes due at 111 s while both are
/// suspects that would put every zone down: it waits; at 120 s they are judged, every zone is
/// down and n1's taint comes off, as a running upstream would do (and a restarted one at
/// registration), and does not delete the pod at 111 s.
#[test]
fn a_takeover_keeps_the_pod_a_running_upstream_keeps_when_the_rest_of_the_cluster_goes_silent() {
    let mut c = leader_and_standby(test_settings());
    c.put_pod(with_tolerations(
        pod("p", "n1"),
        vec![tolerating_unreachable(Some(60))],
    ));
    c.feed(Input::InitialSyncDone);
    let live = |n: &str, t: Time| n != "n1" && t <= t0() + secs(70);
    run(&mut c, t0() + secs(100), live);
    assert!(
        c.nodes["n1"]
            .taints
            .iter()
            .any(|t| &*t.key == taint_keys::UNREACHABLE && t.effect == NoExecute),
        "n1 tainted by the leader"
    );
    take_over(&mut c, secs(3), live);
    run(&mut c, t0() + secs(200), live);
    assert_eq!(c.evicted_names(), Vec::<String>::new());
    assert!(
        c.nodes["n1"].taints.iter().all(|t| t.effect != NoExecute),
        "{:?}",
        c.nodes["n1"].taints
    );
}

// ---- countdowns never start before the pod's own could have ------------------------------------

fn toleration(key: &str, seconds: Option<i64>) -> Toleration {
    Toleration {
        key: n(key),
        operator: TolerationOperator::Exists,
        value: n(""),
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: seconds,
    }
}

/// The previous leader wrote n1's taint at 50.8 s; the API keeps `timeAdded` 50 s. A new
/// process started at 58 s deletes the pod (20 s toleration) at 71 s: never before 20 s have
/// passed since the write (counting from `timeAdded` would delete it at 70 s, 19.2 s after).
#[test]
fn a_restart_never_deletes_a_pod_before_its_toleration_has_passed_since_the_taint_was_written() {
    let added = t0() + secs(50);
    let restart = added + secs(8);
    let mut c = Cluster::new(test_settings(), restart);
    c.put_lease(lease("n1", t0()));
    let mut n1 = node("n1")
        .ready(Unknown, t0(), added)
        .taint(taint_keys::UNREACHABLE, NoSchedule)
        .build();
    n1.taints.push(Taint {
        key: n(taint_keys::UNREACHABLE),
        value: n(""),
        effect: NoExecute,
        time_added: Some(added),
    });
    c.put_node(n1);
    for name in ["n2", "n3"] {
        c.put_lease(lease(name, restart));
        c.put_node(node(name).ready(True, restart, t0()).build());
    }
    c.put_pod(with_tolerations(
        pod("p", "n1"),
        vec![tolerating_unreachable(Some(20))],
    ));
    c.feed(Input::InitialSyncDone);
    c.run_until(restart + secs(30));
    let at: Vec<Time> = c.evicted.iter().map(|(t, _)| *t).collect();
    assert_eq!(at, vec![added + secs(21)]);
}

/// n1 is tainted at 50 s under a pod tolerating it forever; at 100 s the toleration is edited
/// to 60 s (the leader would delete the pod at 160 s). The leader dies at 120 s and the
/// standby, which saw the edit, takes over at 125 s: the pod goes at 160 s, not at once (as
/// counting from `timeAdded` would).
#[test]
fn a_toleration_edited_under_the_taint_counts_from_the_edit_at_a_takeover() {
    let mut c = leader_and_standby(test_settings());
    c.put_pod(with_tolerations(
        pod("p", "n1"),
        vec![tolerating_unreachable(None)],
    ));
    c.feed(Input::InitialSyncDone);
    let live = |n: &str, _: Time| n != "n1";
    let live_after = |n: &str, t: Time| n != "n1" || t <= t0();
    run(&mut c, t0() + secs(100), live_after);
    let mut edited = c.pods[&pod("p", "n1").key].clone();
    edited.tolerations = vec![tolerating_unreachable(Some(60))].into();
    c.put_pod(edited);
    run(&mut c, t0() + secs(120), live);
    take_over(&mut c, secs(5), live);
    run(&mut c, t0() + secs(200), live);
    let at: Vec<Time> = c.evicted.iter().map(|(t, _)| *t).collect();
    assert_eq!(at, vec![t0() + secs(160)]);
}

/// A pod tolerates not-ready for 300 s and unreachable for 30 s. n1 reports NotReady at 10 s
/// (tainted not-ready: the countdown ends near 311 s), then falls silent: at 70 s its taint is
/// swapped to unreachable, and the leader keeps the countdown that started first, as
/// upstream. The leader dies at 100 s; the standby takes over at 105 s and keeps it too
/// (counting from the swap, 30 s would have passed and the pod would go at once).
#[test]
fn a_taint_swapped_under_a_pod_keeps_the_first_taints_countdown_at_a_takeover() {
    let mut c = leader_and_standby(test_settings());
    c.put_pod(with_tolerations(
        pod("p", "n1"),
        vec![
            toleration(taint_keys::NOT_READY, Some(300)),
            toleration(taint_keys::UNREACHABLE, Some(30)),
        ],
    ));
    c.feed(Input::InitialSyncDone);
    let live = |n: &str, t: Time| n != "n1" || t <= t0() + secs(20);
    run(&mut c, t0() + secs(10), live);
    let now = c.now;
    c.set_conditions(
        "n1",
        vec![cond(
            NodeConditionType::Ready,
            ConditionStatus::False,
            now,
            now,
        )],
    );
    run(&mut c, t0() + secs(100), live);
    assert!(
        c.nodes["n1"]
            .taints
            .iter()
            .any(|t| &*t.key == taint_keys::UNREACHABLE && t.effect == NoExecute),
        "swapped: {:?}",
        c.nodes["n1"].taints
    );
    take_over(&mut c, secs(5), live);
    run(&mut c, t0() + secs(330), live);
    let at: Vec<Time> = c.evicted.iter().map(|(t, _)| *t).collect();
    assert_eq!(at.len(), 1, "{at:?}");
    assert!(
        at[0] >= t0() + secs(310) && at[0] <= t0() + secs(312),
        "deleted at {:?}",
        at[0]
    );
}

// ---- clocks that outlive a leader --------------------------------------------------------------

/// The leader hands its clocks to the next one (the shell writes them on the leader Lease,
/// `leader/clocks.rs`): a follower built from the leader at `now`, given `clocks`, synced.
fn hand_over(h: &mut Harness, settings: Settings, clocks: crate::clocks::Clocks) {
    let now = h.now;
    let leader = std::mem::replace(
        &mut h.ctl,
        Controllers::without_taint_eviction(settings, now),
    );
    h.ctl = leader.into_follower(now);
    h.ctl.inherit_clocks(clocks);
    h.feed(Input::InitialSyncDone);
}

/// Site 1 goes dark beside site 2 under `hold` with `hold_max` 120 s: fully disrupted at
/// ~70 s. A failover at 150 s does not start the hold over: the new leader reads when it
/// began from the clocks the old one left, and taints from ~190 s at the normal rate (without
/// them it held the site until 270 s: repeated failovers held it forever).
#[test]
fn hold_max_counts_from_the_first_leaders_full_disruption_across_a_takeover() {
    let settings = Settings {
        hold_max: Some(secs(120)),
        ..hold(test_settings())
    };
    let mut h = fleet(settings.clone());
    let cut = t0_partitions() + secs(25);
    let silent: Vec<(&str, Time)> = ["s1-1", "s1-2", "s1-3", "s1-4"]
        .iter()
        .map(|n| (*n, cut))
        .collect();
    heartbeat(
        &mut h,
        t0_partitions() + secs(150),
        |_| Duration::ZERO,
        &silent,
    );
    assert_eq!(no_execute_writes(&h), vec![]);
    let clocks = h.ctl.clocks(h.now);
    let full_at = clocks.full_since["example.com/site=s1"];
    hand_over(&mut h, settings, clocks);
    heartbeat(
        &mut h,
        t0_partitions() + secs(260),
        |_| Duration::ZERO,
        &silent,
    );
    let mut times: Vec<Time> = no_execute_writes(&h).iter().map(|(_, t)| *t).collect();
    times.sort();
    assert_eq!(times.len(), 4, "{times:?}");
    assert_eq!(times[0], full_at + secs(120));
}

/// A leader that lost its lease to an API server outage and acquires it again starts a
/// `disruption_cooldown` at the takeover (every kubelet may still be catching up): a node
/// reporting NotReady 10 s later is tainted only when the cooldown ends.
#[test]
fn a_leader_back_after_an_outage_that_cost_the_lease_starts_a_cooldown() {
    let settings = Settings {
        disruption_cooldown: secs(60),
        ..test_settings()
    };
    let nodes = ["n1", "n2", "n3"]
        .iter()
        .map(|n| node(n).ready(True, t0(), t0()).build())
        .collect();
    let leases = ["n1", "n2", "n3"].iter().map(|n| lease(n, t0())).collect();
    let mut h = Harness::lifecycle_alone_started(settings.clone(), t0(), nodes, vec![], leases);
    h.alive = ["n1", "n2", "n3"].iter().map(|s| n(s)).collect();
    h.run_until(t0() + secs(10));
    let clocks = crate::clocks::Clocks {
        after_outage: true,
        ..h.ctl.clocks(h.now)
    };
    hand_over(&mut h, settings, clocks);
    let back = h.now;
    h.run_until(back + secs(5));
    h.reporting_not_ready.insert(n("n1"));
    h.run_until(back + secs(70));
    let writes = h.taint_writes_with("n1", taint_keys::NOT_READY, NoExecute);
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert!(writes[0] >= back + secs(60), "tainted at {:?}", writes[0]);
}
