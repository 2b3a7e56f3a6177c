//! A zone seen whole (`node_lifecycle/suspects.rs`): the first verdict of a correlated failure
//! does not taint before the zone is judged with its nodes about to be judged, as upstream's
//! batched pass judges it; a single dead node is still tainted at its deadline.
//! The node lifecycle alone (`harness.rs` says why).

use std::time::Duration;

use super::harness::*;
use crate::model::ConditionStatus::True;
use crate::model::TaintEffect::{NoExecute, NoSchedule};
use crate::model::{Lease, Node, NodeConditionType, taint_keys};
use crate::time::Time;
use crate::{Decision, Input, Settings, ZoneState};

fn t0() -> Time {
    date(2026, 11, 26, 9, 0, 0)
}

/// Two zones of four, all Ready at t0, heartbeating through Leases; a small cluster (a
/// partially disrupted zone stops tainting). `lease_seconds`: `leaseDurationSeconds`, `None`
/// for Leases that do not say.
fn fleet(settings: Settings, lease_seconds: Option<u32>) -> Harness {
    let names = fleet_names();
    let nodes = names
        .iter()
        .map(|(name, zone)| node(name).zone("r", zone).ready(True, t0(), t0()).build())
        .collect();
    let leases = names
        .iter()
        .map(|(name, _)| Lease {
            duration_seconds: lease_seconds,
            ..lease(name, t0())
        })
        .collect();
    Harness::lifecycle_alone_started(settings, t0(), nodes, vec![], leases)
}

fn fleet_names() -> Vec<(String, &'static str)> {
    ["a", "b"]
        .iter()
        .flat_map(|z| (1..=4).map(move |i| (format!("{z}{i}"), *z)))
        .collect()
}

/// Runs to `until`, each kubelet renewing its Lease every `every` from its `phase`, the ones
/// in `silent_from` no longer after the instant given.
fn heartbeat(
    h: &mut Harness,
    until: Time,
    every: Duration,
    phase: impl Fn(&str) -> Duration,
    silent_from: &[(&str, Time)],
) {
    let names = fleet_names();
    let mut t = h.now;
    while t < until {
        t += Duration::from_millis(100);
        h.run_until(t);
        for (name, _) in &names {
            let offset = t.since(t0() + phase(name)).as_millis() % every.as_millis();
            if t < t0() + phase(name) || offset != 0 {
                continue;
            }
            if silent_from.iter().any(|(n, at)| n == name && t >= *at) {
                continue;
            }
            let renewed = Lease {
                renew_time: Some(t),
                ..h.leases[name.as_str()].clone()
            };
            h.put_lease(renewed);
        }
    }
}

fn no_execute_writes(h: &Harness) -> Vec<(String, Time)> {
    fleet_names()
        .iter()
        .flat_map(|(name, _)| {
            h.taint_writes_with(name, taint_keys::UNREACHABLE, NoExecute)
                .into_iter()
                .map(move |t| (name.clone(), t))
        })
        .collect()
}

fn waits(h: &mut Harness) -> Vec<Decision> {
    h.ctl
        .take_decisions()
        .into_iter()
        .filter(|d| matches!(d, Decision::ZoneWaits { .. }))
        .collect()
}

/// The issue's correlated failure: three of zone a's four nodes stop within the same second.
/// Upstream's pass sees the three Unknown together: partially disrupted, a small cluster,
/// nothing NoExecute-tainted. Before: the first verdict tainted its node at once.
#[test]
fn three_of_four_nodes_silent_within_a_pass_are_judged_together() {
    let mut h = fleet(test_settings(), None);
    // Last renewals at 20.0, 20.3 and 20.7 s: deadlines within one second, inside a pass.
    let phase = |name: &str| match name {
        "a2" => Duration::from_millis(300),
        "a3" => Duration::from_millis(700),
        _ => Duration::ZERO,
    };
    let cut = t0() + secs(25);
    let silent = [("a1", cut), ("a2", cut), ("a3", cut)];
    heartbeat(&mut h, t0() + secs(180), secs(10), phase, &silent);
    for name in ["a1", "a2", "a3"] {
        assert!(
            h.has_taint(name, taint_keys::UNREACHABLE, NoSchedule),
            "{name}"
        );
    }
    assert_eq!(no_execute_writes(&h), vec![]);
    assert_eq!(h.zone_state("r", "a"), Some(ZoneState::PartialDisruption));
    let w = waits(&mut h);
    assert!(
        matches!(
            &w[..],
            [Decision::ZoneWaits {
                suspects: 2,
                would_be: ZoneState::PartialDisruption,
                all_down: false,
                ..
            }]
        ),
        "{w:?}"
    );
}

/// Kubelets renewing at their own phases: a zone cut off at one instant has its deadlines
/// spread over the renew interval (10 s), wider than the pass (5 s). Upstream's pass judges
/// the first node alone and taints it. With `early_suspects` (the default) the nodes that
/// missed two renewals are suspects: nothing is tainted. Without it, upstream's outcome.
#[test]
fn a_zone_cut_off_with_spread_heartbeats_waits_for_nodes_that_missed_two_renewals() {
    let phase = |name: &str| match name {
        "a1" => Duration::ZERO,
        "a2" => secs(4),
        "a3" => secs(8),
        _ => secs(2),
    };
    let cut = t0() + secs(19) + Duration::from_millis(50);
    let silent = [("a1", cut), ("a2", cut), ("a3", cut)];
    // Last renewals: a1 at 10 s, a2 at 14 s, a3 at 18 s: deadlines 60, 64 and 68 s.
    let mut h = fleet(test_settings(), Some(40));
    heartbeat(&mut h, t0() + secs(180), secs(10), phase, &silent);
    assert_eq!(no_execute_writes(&h), vec![]);
    assert_eq!(h.zone_state("r", "a"), Some(ZoneState::PartialDisruption));
    let w = waits(&mut h);
    assert!(
        matches!(&w[..], [Decision::ZoneWaits { suspects: 2, .. }]),
        "{w:?}"
    );

    let upstream = Settings {
        early_suspects: false,
        ..test_settings()
    };
    let mut h = fleet(upstream, Some(40));
    heartbeat(&mut h, t0() + secs(180), secs(10), phase, &silent);
    let tainted: Vec<String> = no_execute_writes(&h).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        tainted,
        ["a1"],
        "upstream's pass taints the first node alone"
    );
}

/// While a zone waits for its suspects, its due queue head is looked at again at upstream's
/// pass period (100 ms), not every millisecond: a wait lasts until the suspects are judged,
/// seconds (here 8 s, the spread of three deadlines), and wake-ups are a product figure: a pass
/// re-armed 1 ms ahead for as long as the wait lasts would wake the daemon 1,000 times a
/// second.
#[test]
fn a_waiting_zone_looks_again_at_the_pass_period_not_every_millisecond() {
    let phase = |name: &str| match name {
        "a1" => Duration::ZERO,
        "a2" => secs(4),
        "a3" => secs(8),
        _ => secs(2),
    };
    let cut = t0() + secs(19) + Duration::from_millis(50);
    let silent = [("a1", cut), ("a2", cut), ("a3", cut)];
    let mut h = fleet(test_settings(), Some(40));
    // a1's verdict at 60 s queues it; a2 and a3 are judged at 64 and 68 s.
    heartbeat(&mut h, t0() + secs(60), secs(10), phase, &silent);
    let until = t0() + secs(68);
    let mut ticks = 0;
    while let Some(t) = h.ctl.next_deadline().filter(|t| *t <= until) {
        h.now = h.now.max(t);
        h.feed(Input::Tick);
        ticks += 1;
    }
    assert!(!waits(&mut h).is_empty(), "the zone waited");
    // 8 s at 10 passes a second, plus the verdicts, the monitor passes and the renewals' timers.
    assert!(ticks <= 100, "{ticks} timer wake-ups in 8 s of waiting");
    assert_eq!(no_execute_writes(&h), vec![]);
}

/// Every node silent together (the control plane cut off): every zone would be fully
/// disrupted with the suspects counted; nothing is tainted, and once all are judged the
/// all-zones-down stop holds.
#[test]
fn every_node_silent_together_taints_nothing() {
    let mut h = fleet(test_settings(), Some(40));
    let cut = t0() + secs(25);
    let names = fleet_names();
    let silent: Vec<(&str, Time)> = names.iter().map(|(n, _)| (n.as_str(), cut)).collect();
    // Phases 90 ms apart: the eight deadlines spread over 630 ms.
    let phase = |name: &str| {
        let i = names.iter().position(|(n, _)| n == name).unwrap_or(0) as u64;
        Duration::from_millis(90 * i)
    };
    heartbeat(&mut h, t0() + secs(150), secs(10), phase, &silent);
    assert_eq!(no_execute_writes(&h), vec![]);
    assert!(h.ctl.lifecycle().all_zones_down());
    let w = waits(&mut h);
    assert!(
        matches!(&w[..], [Decision::ZoneWaits { all_down: true, .. }, ..]),
        "{w:?}"
    );
}

/// A single node dies in a healthy zone: no suspect beside it, tainted NoExecute in the same
/// instant as its verdict, at its deadline to the millisecond.
#[test]
fn a_single_dead_node_is_tainted_at_its_deadline() {
    let mut h = fleet(test_settings(), Some(40));
    let cut = t0() + secs(25);
    heartbeat(
        &mut h,
        t0() + secs(120),
        secs(10),
        |_| Duration::ZERO,
        &[("a2", cut)],
    );
    // Last renewal at 20 s, grace 50 s: the verdict and the taint at 70 s + 1 ms.
    let deadline = t0() + secs(70) + Duration::from_millis(1);
    assert_eq!(no_execute_writes(&h), vec![("a2".to_string(), deadline)]);
    assert_eq!(waits(&mut h), vec![]);
}

/// Fencing is gated by the zone seen whole: while a suspect would make the zone partially
/// disrupted, the node's zone state for fencing is not Normal.
#[test]
fn the_zone_state_for_fencing_counts_the_suspects() {
    let mut h = fleet(test_settings(), None);
    // Last renewals at 20 s: deadlines at 70 s.
    let stop = t0() + secs(25);
    let silent = [("a1", stop), ("a2", stop), ("a3", stop)];
    // a1 is judged at 70 s + 1 ms, the others a few milliseconds later: look between.
    heartbeat(
        &mut h,
        t0() + secs(66),
        secs(10),
        |_| Duration::ZERO,
        &silent,
    );
    assert_eq!(
        h.ctl.lifecycle().zone_state_of("a1"),
        Some(ZoneState::Normal)
    );
    assert_eq!(
        h.ctl
            .lifecycle()
            .zone_state_with_suspects(h.ctl.store(), "a1", h.now),
        Some(ZoneState::PartialDisruption)
    );
    assert_eq!(
        h.ctl
            .lifecycle()
            .zone_state_with_suspects(h.ctl.store(), "b1", h.now),
        Some(ZoneState::Normal)
    );
}

/// A kubelet registers its node and posts its status milliseconds apart. Counted at once, the
/// new node without a Ready condition turned its new zone fully disrupted and back; upstream's
/// pass practically never sees that transient. Not counted until it is a pass old.
#[test]
fn a_node_without_ready_for_milliseconds_after_it_joined_does_not_flip_its_zone() {
    let mut h = fleet(test_settings(), Some(40));
    h.ctl.take_decisions();
    h.run_for(secs(3));
    h.put_node(node("c1").zone("r", "c").created(h.now).build());
    h.run_for(Duration::from_millis(5));
    let now = h.now;
    h.set_conditions("c1", vec![cond(NodeConditionType::Ready, True, now, now)]);
    h.run_for(secs(12));
    let states: Vec<(Option<ZoneState>, ZoneState)> = h
        .ctl
        .take_decisions()
        .into_iter()
        .filter_map(|d| match d {
            Decision::ZoneState { from, to, .. } => Some((from, to)),
            _ => None,
        })
        .collect();
    assert_eq!(states, vec![(Some(ZoneState::Initial), ZoneState::Normal)]);
}

/// A restart (or a new leader) in the middle of a zone's outage: a1 was judged Unknown by the
/// previous process, a2 and a3 have been silent for 30 s (their Leases say so) but a first
/// sight gives them a fresh grace. Their missed renewals are read from the Leases' renewTime,
/// so the zone is seen partially disrupted at once and a1 is not tainted.
#[test]
fn after_a_restart_missed_renewals_are_read_from_the_leases() {
    let (nodes, leases) = a1_dead_a2_a3_silent(secs(30), 40);
    let mut h = Harness::lifecycle_alone_started(test_settings(), t0(), nodes, vec![], leases);
    let silent = [("a1", t0()), ("a2", t0()), ("a3", t0())];
    heartbeat(
        &mut h,
        t0() + secs(120),
        secs(10),
        |_| Duration::ZERO,
        &silent,
    );
    assert_eq!(no_execute_writes(&h), vec![]);
    assert_eq!(h.zone_state("r", "a"), Some(ZoneState::PartialDisruption));
}

/// A stalled watch delivers a2's and a3's last renewals (renewTime 48 s) 4 s late, at 52 s,
/// and then they fall silent. At a1's verdict (70 s) their probe times say 18 s of silence,
/// their Leases 22 s: more than two renewals (20 s), so they are suspects and a1 waits.
#[test]
fn renewals_read_late_do_not_make_a_silent_kubelet_look_fresh() {
    let mut h = fleet(test_settings(), Some(40));
    let phase = |name: &str| match name {
        "a2" | "a3" => secs(8),
        _ => Duration::ZERO,
    };
    // a1's last renewal at 20 s; a2 and a3 renew at 8, 18, 28, 38 s.
    let stalled = [
        ("a1", t0() + secs(21)),
        ("a2", t0() + secs(47)),
        ("a3", t0() + secs(47)),
    ];
    heartbeat(&mut h, t0() + secs(52), secs(10), phase, &stalled);
    for name in ["a2", "a3"] {
        let late = Lease {
            renew_time: Some(t0() + secs(48)),
            ..h.leases[name].clone()
        };
        h.put_lease(late);
    }
    heartbeat(&mut h, t0() + secs(90), secs(10), phase, &stalled);
    assert!(h.has_taint("a1", taint_keys::UNREACHABLE, NoSchedule));
    assert_eq!(no_execute_writes(&h), vec![]);
}

/// Soak seed 63: a stalled watch makes every live kubelet of a zone look silent, so counting
/// every suspect the zone would be fully disrupted, which taints at the healthy rate, and a1's
/// verdict was tainted at once. With a2 and a3 really silent the zone is partially disrupted
/// whatever a4 turns out to be: it waits, and a1 is never tainted.
#[test]
fn a_stalled_watch_does_not_turn_a_partial_zone_into_a_dark_one() {
    let mut h = fleet(test_settings(), Some(40));
    // a1's last renewal at 20 s (verdict at 70 s); a2 and a3 silent after 40 s; a4 alive but
    // its renewals from 41 s on are held back until 75 s (renewals on a 1 s phase of its own).
    let phase = |name: &str| match name {
        "a4" => secs(1),
        _ => Duration::ZERO,
    };
    let silent = [
        ("a1", t0() + secs(21)),
        ("a2", t0() + secs(41)),
        ("a3", t0() + secs(41)),
        ("a4", t0() + secs(42)),
    ];
    heartbeat(&mut h, t0() + secs(75), secs(10), phase, &silent);
    let resumed = Lease {
        renew_time: Some(t0() + secs(71)),
        ..h.leases["a4"].clone()
    };
    h.put_lease(resumed);
    heartbeat(&mut h, t0() + secs(120), secs(10), phase, &silent[..3]);
    assert!(h.has_taint("a1", taint_keys::UNREACHABLE, NoSchedule));
    assert_eq!(no_execute_writes(&h), vec![]);
    assert_eq!(h.zone_state("r", "a"), Some(ZoneState::PartialDisruption));
}

/// The fleet at a start: a1 Unknown since `silent` ago, a2 and a3 Ready in the store, and the
/// Leases of all three last renewed `silent` ago (`lease_seconds` long); the others fresh.
fn a1_dead_a2_a3_silent(silent: Duration, lease_seconds: u32) -> (Vec<Node>, Vec<Lease>) {
    let ago = Time::from_unix_millis(t0().as_unix_millis() - silent.as_millis() as u64);
    let names = fleet_names();
    let nodes = names
        .iter()
        .map(|(name, zone)| {
            let status = if name == "a1" {
                crate::model::ConditionStatus::Unknown
            } else {
                True
            };
            node(name).zone("r", zone).ready(status, ago, ago).build()
        })
        .collect();
    let leases = names
        .iter()
        .map(|(name, _)| {
            let last = if ["a1", "a2", "a3"].contains(&name.as_str()) {
                ago
            } else {
                t0()
            };
            Lease {
                duration_seconds: Some(lease_seconds),
                ..lease(name, last)
            }
        })
        .collect();
    (nodes, leases)
}

/// A process just started (a leader killed and started again): its watches deliver the nodes,
/// then their Leases, then the initial sync is done, as the daemon's informers do.
fn started_nodes_first(settings: Settings, nodes: Vec<Node>, leases: Vec<Lease>) -> Harness {
    let mut h = Harness::lifecycle_alone(settings, t0());
    for node in nodes {
        h.put_node(node);
    }
    for lease in leases {
        h.put_lease(lease);
    }
    h.feed(Input::InitialSyncDone);
    h
}

/// The soak's finding (seed 41, `--partitions --fencing`): a leader killed and started again
/// finds a1 Unknown (queued for its NoExecute taint) and a2, a3 Ready in the store whose Leases
/// were last renewed 7 s ago (a 5 s grace, Leases of 4 s: two renewals missed). The first sight
/// of their Leases, in the initial list, is no renewal reaching the daemon: their silence is no
/// lag. Counted not ready they make the zone partially disrupted, and a1 waits, as a running
/// leader's a1 would. (The daemon took the 7 s for lag and tainted a1 50 ms after its start.)
#[test]
fn a_fresh_start_counts_the_kubelets_silent_by_their_leases_before_the_first_taint() {
    let settings = Settings {
        node_monitor_period: secs(1),
        node_monitor_grace_period: secs(5),
        node_startup_grace_period: secs(10),
        ..test_settings()
    };
    let (nodes, leases) = a1_dead_a2_a3_silent(secs(7), 4);
    let mut h = started_nodes_first(settings, nodes, leases);
    let silent = [("a1", t0()), ("a2", t0()), ("a3", t0())];
    heartbeat(&mut h, t0() + secs(2), secs(1), |_| Duration::ZERO, &silent);
    assert_eq!(no_execute_writes(&h), vec![]);
    assert_eq!(h.zone_state("r", "a"), Some(ZoneState::Normal));
}
