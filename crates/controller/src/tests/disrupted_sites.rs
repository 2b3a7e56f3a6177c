//! Sites cut off, no takeover in them: the hold covers sites of every
//! size (a three-node site, and a large one passing through PartialDisruption), a fully
//! disrupted zone is tainted in the order its nodes were judged, and a NoExecute taint queued
//! behind another write of its node waits for a pause of tainting.

use std::time::Duration;

use super::harness::*;
use super::partitions::{SITE, by_site, decisions, fleet, heartbeat, no_execute_writes, spread};
use super::takeovers::{hold, lease40, t0, t0_partitions};
use crate::fleet_pause::{FleetPause, PauseScope};
use crate::model::ConditionStatus::{False, True};
use crate::model::TaintEffect::{NoExecute, NoSchedule};
use crate::model::{Lease, NodeConditionType, taint_keys};
use crate::testing::HeldAnswer;
use crate::time::{Rate, Time};
use crate::{Action, Input, Settings, ZoneState};

// ---- the hold covers sites of every size -------------------------------------------------------

/// Three sites of three nodes, `a-1`..`c-3`, every node Ready at t0 with one pod.
const SMALL: [&str; 9] = [
    "a-1", "a-2", "a-3", "b-1", "b-2", "b-3", "c-1", "c-2", "c-3",
];

fn small_sites(settings: Settings) -> Harness {
    let nodes = SMALL
        .iter()
        .map(|name| {
            node(name)
                .label(SITE, &name[..1])
                .ready(True, t0(), t0())
                .build()
        })
        .collect();
    let pods = SMALL.iter().map(|n| pod(&format!("p-{n}"), n)).collect();
    let leases = SMALL.iter().map(|n| lease40(n, t0())).collect();
    Harness::lifecycle_alone_started(settings, t0(), nodes, pods, leases)
}

/// Site `a` cut off at `cut`, its kubelets renewing at 0, 4 and 8 s of each 10 s (spread).
fn run_small_sites(h: &mut Harness, until: Time, cut: Time) {
    let mut t = h.now;
    while t < until {
        t += Duration::from_millis(100);
        h.run_until(t);
        for name in SMALL {
            let phase = spread(name);
            if t < t0() + phase || t.since(t0() + phase).as_millis() % 10_000 != 0 {
                continue;
            }
            if name.starts_with('a') && t >= cut {
                continue;
            }
            let renewed = Lease {
                renew_time: Some(t),
                ..h.leases[name].clone()
            };
            h.put_lease(renewed);
        }
    }
}

/// A three-node site under `hold` beside two healthy ones is cut off with spread heartbeats.
/// Its first node is judged while the site reads 1 of 3 not ready (Normal): counting its two
/// suspects (about to be judged) it is fully disrupted and held, so nothing is tainted, then
/// or later (counting at most ready − 1 of them would read Normal and taint it).
#[test]
fn a_three_node_site_under_hold_cut_off_with_spread_heartbeats_taints_nothing() {
    let mut h = small_sites(hold(test_settings()));
    let cut = t0() + secs(19) + Duration::from_millis(50);
    run_small_sites(&mut h, t0() + secs(200), cut);
    let tainted: Vec<Time> = ["a-1", "a-2", "a-3"]
        .iter()
        .flat_map(|n| {
            let mut t = h.taint_writes_with(n, taint_keys::UNREACHABLE, NoExecute);
            t.extend(h.taint_writes_with(n, taint_keys::NOT_READY, NoExecute));
            t
        })
        .collect();
    assert_eq!(tainted, vec![], "the held site was tainted");
    let state = h
        .dump()
        .zones
        .iter()
        .find(|z| &*z.key == "example.com/site=a")
        .and_then(|z| z.state);
    assert_eq!(state, Some(ZoneState::FullDisruption));
    assert_eq!(decisions(&mut h, "domain-hold").len(), 1);
}

/// A site above `large_cluster_size_threshold` under `hold` passes through PartialDisruption
/// (the secondary rate) on its way to Full: its last node is still a suspect then, and with
/// it the site would be held, so its queue head is not tainted at the secondary rate.
#[test]
fn a_large_site_under_hold_taints_nothing_while_it_passes_through_partial_disruption() {
    let settings = Settings {
        large_cluster_size_threshold: 3,
        secondary_node_eviction_rate: Rate::per_second(1),
        ..hold(test_settings())
    };
    let mut h = fleet(settings);
    let cut = t0_partitions() + secs(19) + Duration::from_millis(50);
    let silent: Vec<(&str, Time)> = ["s1-1", "s1-2", "s1-3", "s1-4"]
        .iter()
        .map(|n| (*n, cut))
        .collect();
    heartbeat(&mut h, t0_partitions() + secs(200), spread, &silent);
    assert_eq!(no_execute_writes(&h), vec![]);
    assert_eq!(decisions(&mut h, "domain-hold").len(), 1);
}

// ---- a fully disrupted zone is tainted in the order its nodes were judged ----------------------

/// Site 1 goes dark beside a healthy site 2 (upstream's `evict`): judged s1-1, s1-4, s1-2,
/// s1-3 (their renewals spread), then tainted at the normal rate in that order, as upstream's
/// queue takes them; the periodic pass does not re-stamp them in name order.
#[test]
fn a_fully_disrupted_zone_is_tainted_in_the_order_its_nodes_were_judged() {
    let settings = Settings {
        node_eviction_rate: Rate::from_micro_per_second(100_000),
        ..by_site(test_settings())
    };
    let mut h = fleet(settings);
    let cut = t0_partitions() + secs(19) + Duration::from_millis(50);
    let silent: Vec<(&str, Time)> = ["s1-1", "s1-2", "s1-3", "s1-4"]
        .iter()
        .map(|n| (*n, cut))
        .collect();
    heartbeat(&mut h, t0_partitions() + secs(150), spread, &silent);
    let mut writes = no_execute_writes(&h);
    writes.sort_by_key(|(_, t)| *t);
    let order: Vec<&str> = writes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(order, ["s1-1", "s1-4", "s1-2", "s1-3"], "{writes:?}");
}

/// A NoExecute taint the zone queue gave out while another write of the same node was in
/// flight waits for it; a fleet pause of tainting that begins meanwhile holds it (it is not
/// written when the first write answers, pause or not).
#[test]
fn a_no_execute_taint_queued_behind_another_write_waits_for_a_pause_of_tainting() {
    let nodes = ["n1", "n2", "n3"]
        .iter()
        .map(|n| node(n).ready(True, t0(), t0()).build())
        .collect();
    let leases = ["n1", "n2", "n3"].iter().map(|n| lease(n, t0())).collect();
    let mut h = Harness::lifecycle_alone_started(test_settings(), t0(), nodes, vec![], leases);
    h.run_until(t0() + secs(5));
    h.hold_answers = true;
    let now = h.now;
    h.set_conditions("n1", vec![cond(NodeConditionType::Ready, False, now, now)]);
    let first = h
        .held
        .iter()
        .position(|a| matches!(a, Action::PatchNodeTaints { .. }))
        .expect("the NoSchedule taint write");
    h.feed(Input::FleetPause(Some(FleetPause {
        what: PauseScope::Tainting,
        until: now + secs(600),
        reason: "maintenance".into(),
        by: "ops".into(),
    })));
    h.answer_held(first, HeldAnswer::Execute);
    h.hold_answers = false;
    while !h.held.is_empty() {
        h.answer_held(0, HeldAnswer::Execute);
    }
    h.run_until(now + secs(60));
    assert_eq!(
        h.taint_writes_with("n1", taint_keys::NOT_READY, NoExecute),
        vec![],
        "tainted during the pause"
    );
    assert!(
        !h.taint_writes_with("n1", taint_keys::NOT_READY, NoSchedule)
            .is_empty()
    );
}
