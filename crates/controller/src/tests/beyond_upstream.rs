//! Where we deliberately do better than upstream (docs/upstream.md, "Where we do better than
//! upstream") and node deletion. Legacy mode: `legacy_mode.rs`; the dump, reloads and scale:
//! `operation.rs`.
//! The node lifecycle alone (`harness.rs` says why).

use std::time::Duration;

use super::harness::*;
use crate::events::EventObject;
use crate::model::ConditionStatus::{False, True, Unknown};
use crate::model::TaintEffect::{NoExecute, NoSchedule};
use crate::model::{NodeConditionType, taint_keys};
use crate::time::Rate;
use crate::time::Time;
use crate::{Action, Settings, ZoneState};

fn t0() -> Time {
    date(2024, 5, 1, 8, 0, 0)
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn defaults() -> Settings {
    Settings::default()
}

#[test]
fn unknown_verdict_at_probe_time_plus_grace_to_the_millisecond() {
    let n0 = node("node0").zone("r", "a").ready(True, t0(), t0()).build();
    let n1 = node("node1").zone("r", "a").ready(True, t0(), t0()).build();
    let mut h = Harness::lifecycle_alone_started(defaults(), t0(), vec![n0, n1], vec![], vec![]);
    // node1 keeps posting status; node0 falls silent. Its probe time is t0 (first sight).
    let mut t = t0();
    while t < t0() + secs(120) {
        t += secs(10);
        h.run_until(t);
        h.set_conditions("node1", vec![cond(NodeConditionType::Ready, True, t, t0())]);
    }
    let writes = h.status_writes();
    assert_eq!(writes.len(), 1);
    // Upstream: `now > probe + grace`, checked every 5 s. Here: the first millisecond after.
    assert_eq!(writes[0].0, t0() + secs(50) + ms(1));
    assert_eq!(&*writes[0].1, "node0");
    let ready = writes[0]
        .2
        .iter()
        .find(|c| c.kind == NodeConditionType::Ready)
        .unwrap();
    assert_eq!(ready.last_transition_time, Some(t0() + secs(50) + ms(1)));
}

/// node1 in these tests has no Lease (an old-style kubelet) and posts nothing: it is declared
/// Unknown as upstream would; only node0's verdicts matter here.
fn node0_writes(h: &Harness) -> Vec<Time> {
    h.status_writes()
        .into_iter()
        .filter(|(_, n, _)| &**n == "node0")
        .map(|(t, _, _)| t)
        .collect()
}

#[test]
fn a_live_lease_read_showing_a_fresh_renewal_prevents_the_verdict() {
    let n0 = node("node0").zone("r", "a").ready(True, t0(), t0()).build();
    let n1 = node("node1").zone("r", "a").ready(True, t0(), t0()).build();
    let mut h = Harness::lifecycle_alone_started(
        defaults(),
        t0(),
        vec![n0, n1],
        vec![],
        vec![lease("node0", t0())],
    );
    // The Lease watch stalls: the API has renewals our cache never saw.
    h.faults.lease_read_override = Some(lease("node0", t0() + secs(45)));
    h.run_until(t0() + secs(50) + ms(1));
    assert_eq!(h.lease_reads(), 1);
    assert!(
        node0_writes(&h).is_empty(),
        "fresh evidence cancels the verdict"
    );
    assert_eq!(h.ready_of("node0"), Some(True));
    // The live renewal restarted the grace period from the read.
    let d = h.dump();
    let n0 = d.nodes.iter().find(|n| &*n.name == "node0").unwrap();
    assert_eq!(n0.pending_deadline, Some(t0() + secs(100) + ms(2)));
    // Exactly one live read until then (upstream TestLeaseCircuitBreaker).
    h.run_until(t0() + secs(100));
    assert_eq!(h.lease_reads(), 1);
}

#[test]
fn no_verdict_while_the_lease_cannot_be_read_then_verdict_once_confirmed_stale() {
    let n0 = node("node0").zone("r", "a").ready(True, t0(), t0()).build();
    let n1 = node("node1").zone("r", "a").ready(True, t0(), t0()).build();
    let mut h = Harness::lifecycle_alone_started(
        defaults(),
        t0(),
        vec![n0, n1],
        vec![pod("p", "node0")],
        vec![lease("node0", t0())],
    );
    h.faults.lease_reads_fail = true;
    h.run_until(t0() + secs(80));
    assert!(h.lease_reads() >= 2, "retried while failing");
    assert!(node0_writes(&h).is_empty(), "no verdict without evidence");
    assert_eq!(h.pod_status_updates(), 0);
    // The API answers again: the Lease is really stale.
    h.faults.lease_reads_fail = false;
    h.run_until(t0() + secs(90));
    assert_eq!(node0_writes(&h).len(), 1);
    assert_eq!(h.ready_of("node0"), Some(Unknown));
    assert_eq!(h.pod_status_updates(), 1);
}

#[test]
fn restart_with_a_dead_node_marks_its_still_ready_pods() {
    let dead_since = date(2024, 5, 1, 7, 0, 0);
    let n0 = node("node0").ready(Unknown, dead_since, dead_since).build();
    let mut already = pod("already-not-ready", "node0");
    already.ready = Some(False);
    let pods = vec![
        pod("a", "node0"),
        pod("b", "node0"),
        already,
        pod("c", "node1"),
    ];
    let n1 = node("node1").ready(True, t0(), t0()).build();
    let h = Harness::lifecycle_alone_started(defaults(), t0(), vec![n0, n1], pods, vec![]);
    let marked: Vec<String> = h
        .log
        .iter()
        .filter_map(|(_, a)| match a {
            Action::MarkPodNotReady { pod, .. } => Some(pod.name.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(marked, ["a", "b"]);
    assert!(h.status_writes().is_empty(), "the node was already Unknown");
}

#[test]
fn entering_and_leaving_full_disruption() {
    let nodes = vec![
        node("a1").zone("r", "a").ready(True, t0(), t0()).build(),
        node("a2").zone("r", "a").ready(True, t0(), t0()).build(),
        node("b1").zone("r", "b").ready(True, t0(), t0()).build(),
    ];
    let mut h = Harness::lifecycle_alone_started(defaults(), t0(), nodes, vec![], vec![]);
    // a1 dies first and is tainted; the others keep heartbeating.
    let mut t = t0();
    while t < t0() + secs(60) {
        t += secs(10);
        h.run_until(t);
        for n in ["a2", "b1"] {
            h.set_conditions(n, vec![cond(NodeConditionType::Ready, True, t, t0())]);
        }
    }
    assert!(h.has_taint("a1", taint_keys::UNREACHABLE, NoExecute));
    assert_eq!(h.zone_state("r", "a"), Some(ZoneState::Normal));
    // Then everything goes silent: every zone is fully disrupted.
    h.run_until(t + secs(60));
    assert_eq!(h.zone_state("r", "a"), Some(ZoneState::FullDisruption));
    assert_eq!(h.zone_state("r", "b"), Some(ZoneState::FullDisruption));
    let d = h.dump();
    assert!(d.all_zones_fully_disrupted);
    // Nodes still get queued by later passes (as upstream), but a rate of zero taints nobody.
    assert!(
        d.zones
            .iter()
            .all(|z| z.rate == Rate::NEVER && z.tokens == 0)
    );
    for n in ["a1", "a2", "b1"] {
        assert!(
            h.taints(n).iter().all(|(_, e)| *e != NoExecute),
            "{n}: {:?}",
            h.taints(n)
        );
    }
    // b1 comes back: zone b Normal, zone a stays Full but is tainted at the normal rate again,
    // and every node got a fresh grace period from the exit.
    let back = h.now;
    h.set_conditions("b1", vec![cond(NodeConditionType::Ready, True, back, back)]);
    assert_eq!(h.zone_state("r", "b"), Some(ZoneState::Normal));
    assert_eq!(h.zone_state("r", "a"), Some(ZoneState::FullDisruption));
    let d = h.dump();
    assert!(!d.all_zones_fully_disrupted);
    let za = d.zones.iter().find(|z| z.display == "r/a").unwrap();
    assert_eq!(za.rate, defaults().node_eviction_rate);
    let a2 = d.nodes.iter().find(|n| &*n.name == "a2").unwrap();
    assert_eq!(a2.probe_age, Duration::ZERO);
    // The dead zone's nodes are tainted again (first token after 1/rate: the bucket swapped
    // from "never" starts drained).
    h.run_until(back + secs(25));
    assert!(
        h.has_taint("a1", taint_keys::UNREACHABLE, NoExecute)
            || h.has_taint("a2", taint_keys::UNREACHABLE, NoExecute)
    );
}

#[test]
fn heartbeats_pausing_40s_with_grace_50s_never_mark_unknown_nor_taint() {
    let nodes = vec![
        node("node0").zone("r", "a").ready(True, t0(), t0()).build(),
        node("node1").zone("r", "a").ready(True, t0(), t0()).build(),
    ];
    let leases = vec![lease("node0", t0()), lease("node1", t0())];
    let mut h =
        Harness::lifecycle_alone_started(defaults(), t0(), nodes, vec![pod("p", "node0")], leases);
    let mut t = t0();
    for _ in 0..30 {
        t += secs(40);
        h.run_until(t);
        h.put_lease(lease("node0", t));
        h.put_lease(lease("node1", t));
    }
    assert!(h.status_writes().is_empty());
    assert_eq!(h.lease_reads(), 0);
    assert!(h.taints("node0").is_empty() && h.taints("node1").is_empty());
    assert_eq!(h.pod_status_updates(), 0);
}

#[test]
fn node_deletion_forgets_and_recreation_with_new_uid_starts_fresh() {
    let n0 = node("node0")
        .zone("r", "a")
        .ready(Unknown, t0(), t0())
        .build();
    let n1 = node("node1").zone("r", "a").ready(True, t0(), t0()).build();
    let mut h =
        Harness::lifecycle_alone_started(defaults(), t0(), vec![n0, n1.clone()], vec![], vec![]);
    h.run_for(secs(1));
    assert!(h.has_taint("node0", taint_keys::UNREACHABLE, NoExecute));
    h.run_until(t0() + secs(30));
    h.delete_node("node0");
    assert!(h.dump().nodes.iter().all(|n| &*n.name != "node0"));
    assert!(
        h.dump()
            .zones
            .iter()
            .all(|z| z.queue_head.as_ref().is_none_or(|(n, _)| &**n != "node0"))
    );
    // Same name, new UID, healthy: registered again with a fresh health record.
    h.put_node(
        node("node0")
            .uid("uid-2")
            .zone("r", "a")
            .ready(True, h.now, h.now)
            .build(),
    );
    let events: Vec<_> = h
        .node_events()
        .into_iter()
        .filter(|(n, _, _)| n == "node0")
        .map(|(_, r, _)| r)
        .collect();
    assert_eq!(events, ["RegisteredNode", "RemovingNode", "RegisteredNode"]);
    let d = h.dump();
    let n0 = d.nodes.iter().find(|n| &*n.name == "node0").unwrap();
    assert_eq!(n0.probe_age, Duration::ZERO);
    assert_eq!(n0.pending_deadline, Some(h.now + secs(50) + ms(1)));
    let removing = h
        .events()
        .into_iter()
        .find(|e| e.reason == "RemovingNode")
        .unwrap();
    assert!(matches!(removing.object, EventObject::Node { uid, .. } if &*uid == "uid-node0"));
}

#[test]
fn conflicting_taint_write_is_rebuilt_on_the_re_read_node() {
    let n0 = node("node0")
        .zone("r", "a")
        .ready(False, t0(), t0())
        .build();
    let n1 = node("node1").zone("r", "a").ready(True, t0(), t0()).build();
    let mut h = Harness::lifecycle_alone(defaults(), t0());
    h.put_node(n0);
    h.put_node(n1);
    // Another writer adds its own taint behind our back (our cache does not see it yet).
    let mut theirs = h.nodes["node0"].clone();
    theirs.taints.push(crate::model::Taint {
        key: n("example.com/theirs"),
        value: n(""),
        effect: NoExecute,
        time_added: None,
    });
    theirs.resource_version = n("999");
    h.nodes.insert(n("node0"), theirs);
    h.feed(crate::Input::InitialSyncDone);
    h.run_for(secs(1));
    let keys: Vec<String> = h.taints("node0").into_iter().map(|(k, _)| k).collect();
    assert!(
        keys.contains(&String::from("example.com/theirs")),
        "{keys:?}"
    );
    assert!(
        keys.contains(&String::from(taint_keys::NOT_READY)),
        "{keys:?}"
    );
}

/// Upstream quirk no longer kept: upstream's `markNodeAsReachable` on first sight removes the
/// NoExecute taint of a still-unhealthy node after a restart, then queues
/// and taints it again with a new `timeAdded` (cancelling its pods' deletions and restarting
/// their countdowns). Here the taint stays as it was, and the node counts as processed by its
/// zone queue (as in the leader that tainted it): nothing is written, no token is spent and
/// `evictions_total` does not count it again.
#[test]
fn restart_keeps_existing_no_execute_taints_of_a_node_not_ready() {
    let mut tainted = node("node0")
        .zone("r", "a")
        .ready(Unknown, t0(), t0())
        .taint(taint_keys::UNREACHABLE, NoSchedule)
        .taint(taint_keys::UNREACHABLE, NoExecute)
        .build();
    tainted.taints[1].time_added = Some(t0());
    let n1 = node("node1").zone("r", "a").ready(True, t0(), t0()).build();
    let start = t0() + secs(30);
    let mut h = Harness::lifecycle_alone_started(
        defaults(),
        start,
        vec![tainted.clone(), n1],
        vec![],
        vec![],
    );
    h.run_for(ms(500));
    let patches: Vec<_> = h
        .log
        .iter()
        .filter(|(_, a)| matches!(a, Action::PatchNodeTaints { node, .. } if &**node == "node0"))
        .collect();
    assert!(patches.is_empty(), "{patches:?}");
    assert_eq!(h.nodes["node0"].taints, tainted.taints);
    assert_eq!(
        h.dump().zones[0].evictions_total,
        0,
        "not through its zone queue again"
    );
}

/// Nodes falling silent together get their verdicts one API round-trip after another (a live
/// Lease read, then a status write each). A zone of 10 losing 6 must be counted as partially
/// disrupted (rate 0 at this size) before the tainting pass looks at any of them, as upstream,
/// which judges every node in one pass before setting the zone's rate.
#[test]
fn verdicts_in_flight_hold_the_tainting_pass_until_the_zone_is_counted() {
    use crate::model::Node;
    use crate::{Controllers, Input, LeaseReadOutcome, Outcome};
    use std::collections::{BTreeMap, VecDeque};

    let names: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
    let mut c = Controllers::new(test_settings(), t0());
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    for name in &names {
        c.handle(Input::LeaseUpsert(lease(name, t0())), t0());
        let n = node(name).zone("r", "a").ready(True, t0(), t0()).build();
        nodes.insert(name.clone(), n.clone());
        c.handle(Input::NodeUpsert(n), t0());
    }
    let mut now = t0();
    let mut pending: VecDeque<Action> = c.handle(Input::InitialSyncDone, now).into();
    let mut no_execute = Vec::new();
    let mut status_writes = 0;
    // n0..n5 fall silent at t0; n6..n9 renew every second. Each step is 50 ms: the controller
    // ticks, then the "API server" answers the oldest read or write (and its watch shows the
    // written node at once).
    while now < t0() + secs(60) {
        now += ms(50);
        if (now - t0()).as_millis() % 1000 == 0 {
            for name in &names[6..] {
                pending.extend(c.handle(Input::LeaseUpsert(lease(name, now)), now));
            }
        }
        while c.next_deadline().is_some_and(|d| d <= now) {
            pending.extend(c.handle(Input::Tick, now));
        }
        let Some(position) = pending.iter().position(|a| {
            matches!(
                a,
                Action::ReadLease { .. }
                    | Action::UpdateNodeConditions { .. }
                    | Action::PatchNodeTaints { .. }
            )
        }) else {
            continue;
        };
        let action = pending.remove(position).unwrap();
        let mut write = |name: &str, id, change: &dyn Fn(&mut Node), c: &mut Controllers| {
            let n = nodes.get_mut(name).unwrap();
            change(n);
            let mut out = c.handle(Input::NodeUpsert(n.clone()), now);
            out.extend(c.handle(
                Input::Result {
                    id,
                    outcome: Outcome::Ok,
                },
                now,
            ));
            out
        };
        let out = match action {
            Action::ReadLease { id, node } => {
                let outcome = LeaseReadOutcome::Found(lease(&node, t0()));
                c.handle(Input::LeaseRead { id, outcome }, now)
            }
            Action::UpdateNodeConditions {
                id,
                node,
                conditions,
                ..
            } => {
                status_writes += 1;
                write(&node, id, &|n| n.conditions = conditions.clone(), &mut c)
            }
            Action::PatchNodeTaints {
                id, node, taints, ..
            } => {
                if taints.iter().any(|t| t.effect == NoExecute) {
                    no_execute.push((now - t0(), node.clone()));
                }
                write(&node, id, &|n| n.taints = taints.clone(), &mut c)
            }
            _ => unreachable!(),
        };
        pending.extend(out);
    }
    assert_eq!(status_writes, 6, "six verdicts, one after another");
    assert!(
        no_execute.is_empty(),
        "tainted before the zone was counted: {no_execute:?}"
    );
    let (dump, _) = c.dump(now);
    assert_eq!(dump.zones[0].state, Some(ZoneState::PartialDisruption));
}

/// Found by the soak (seed 11): a node's kubelet came back, the taint PATCH in flight got a
/// 500, and the untaint queued behind it was never sent: the node kept `unreachable:NoExecute`
/// while Ready=True (55 s until the soak ended; its pods with short tolerations are evicted
/// from a healthy node). Upstream retries on its next pass; so do we now.
#[test]
fn a_failed_untaint_of_a_recovered_node_is_retried_on_the_next_pass() {
    let t1 = t0();
    let nodes = vec![
        node("node0").zone("r", "z").ready(True, t1, t1).build(),
        node("node1").zone("r", "z").ready(True, t1, t1).build(),
    ];
    let mut h = Harness::lifecycle_alone_started(test_settings(), t1, nodes, vec![], vec![]);
    let t2 = t1 + secs(51);
    h.jump(t2 - h.now);
    h.set_conditions("node1", vec![cond(NodeConditionType::Ready, True, t2, t1)]);
    h.tick();
    h.tainting_pass();
    assert!(h.has_taint("node0", taint_keys::UNREACHABLE, NoExecute));

    h.faults.fail_taint_writes = 1;
    h.set_conditions("node0", vec![cond(NodeConditionType::Ready, True, t2, t2)]);
    h.tick();
    assert!(
        h.has_taint("node0", taint_keys::UNREACHABLE, NoExecute),
        "the write failed"
    );
    h.run_for(secs(12));
    assert!(
        !h.has_taint("node0", taint_keys::UNREACHABLE, NoExecute),
        "still {:?} two monitor passes after the failure",
        h.taints("node0")
    );
}

/// Soak seed 31 (SOAK.md finding 5): the zone queue gives out n1's NoExecute taint while the
/// zone is Normal, but the taint waits behind another write of n1 still in flight; meanwhile
/// two more nodes report NotReady and the small zone is partially disrupted (rate 0). When
/// the write in flight comes back, the waiting taint goes back to the queue instead of out;
/// once the zone is Normal again it is written (nothing lost).
#[test]
fn a_queued_taint_waiting_behind_a_write_is_not_sent_after_its_zone_stops_tainting() {
    use crate::model::Node;
    use crate::{Controllers, Input, Outcome};
    let t0 = date(2026, 1, 1, 12, 0, 0);
    // The node lifecycle alone (`harness.rs` says why); answers held by hand, not `FakeApi`.
    let mut ctl = Controllers::without_taint_eviction(test_settings(), t0);
    let mut rv = 1u64;
    let mut put = |ctl: &mut Controllers, mut node: Node, now: Time| {
        rv += 1;
        node.resource_version = n(&rv.to_string());
        let mut actions = ctl.handle(Input::NodeUpsert(node.clone()), now);
        actions.extend(ctl.handle(Input::Tick, now));
        (node, actions)
    };
    let healthy = |name: &str| node(name).ready(True, t0, t0).build();
    for name in ["n1", "n2", "n3", "n4"] {
        put(&mut ctl, healthy(name), t0);
    }
    ctl.handle(Input::InitialSyncDone, t0);
    let n1_taints = |actions: &[Action]| {
        actions.iter().find_map(|a| match a {
            Action::PatchNodeTaints {
                id, node, taints, ..
            } if &**node == "n1" => Some((*id, taints.clone())),
            _ => None,
        })
    };
    let no_execute = |taints: &[crate::model::Taint]| taints.iter().any(|t| t.effect == NoExecute);

    // A taint write of n1 in flight (cordoned: unschedulable NoSchedule), left unanswered.
    let t1 = t0 + secs(1);
    let mut n1 = healthy("n1");
    n1.unschedulable = true;
    let (_, actions) = put(&mut ctl, n1.clone(), t1);
    let (held_id, held_taints) = n1_taints(&actions).expect("n1's cordon taint written");
    // n1 reports NotReady: the zone (1 of 4) is Normal and gives out n1's NoExecute taint,
    // which waits behind the write in flight.
    let t2 = t0 + secs(2);
    n1.conditions = node("n1").ready(False, t2, t2).build().conditions;
    let (n1, actions) = put(&mut ctl, n1, t2);
    assert_eq!(
        n1_taints(&actions),
        None,
        "one taint write per node in flight"
    );
    // n2 and n3 report NotReady too: 3 of 4, the small zone is partially disrupted.
    for name in ["n2", "n3"] {
        put(&mut ctl, node(name).ready(False, t2, t2).build(), t2);
    }
    assert_eq!(
        ctl.lifecycle().zone_state_of("n1"),
        Some(ZoneState::PartialDisruption)
    );
    // The write in flight comes back: its answer, then its result.
    let mut written = n1.clone();
    written.taints = held_taints;
    let (_, mut actions) = put(&mut ctl, written.clone(), t2 + secs(1));
    actions.extend(ctl.handle(
        Input::Result {
            id: held_id,
            outcome: Outcome::Ok,
        },
        t2 + secs(1),
    ));
    for s in 2..20 {
        actions.extend(ctl.handle(Input::Tick, t2 + secs(s)));
    }
    // The not-ready NoSchedule taint that waited too is written: answer it.
    let (id, taints) = n1_taints(&actions).expect("n1's not-ready NoSchedule taint written");
    assert!(
        !no_execute(&taints),
        "n1 NoExecute-tainted in a partially disrupted zone: {actions:?}"
    );
    written.taints = taints;
    let (_, more) = put(&mut ctl, written, t2 + secs(20));
    actions.extend(more);
    actions.extend(ctl.handle(
        Input::Result {
            id,
            outcome: Outcome::Ok,
        },
        t2 + secs(20),
    ));
    assert!(
        !n1_taints(&actions).is_some_and(|(_, t)| no_execute(&t)),
        "n1 NoExecute-tainted in a partially disrupted zone: {actions:?}"
    );
    // n2 and n3 recover: the zone is Normal again and n1's taint goes out from the queue.
    let t3 = t2 + secs(20);
    for name in ["n2", "n3"] {
        put(&mut ctl, node(name).ready(True, t3, t3).build(), t3);
    }
    let mut actions = Vec::new();
    for ms in (0..3000).step_by(100) {
        actions.extend(ctl.handle(Input::Tick, t3 + Duration::from_millis(ms)));
    }
    assert!(
        n1_taints(&actions).is_some_and(|(_, t)| no_execute(&t)),
        "n1's taint was lost: {actions:?}"
    );
}
