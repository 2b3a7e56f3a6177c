//! Node Lifecycle Conditions (KEP-5683, alpha in 1.37): a node whose `MaintenanceInProgress`
//! condition is True is in planned maintenance, and with `lifecycle_conditions` (on by
//! default) planned maintenance is no failure. It leaves its zone's counts, is never a suspect
//! and is not counted by the brake; its own verdict and taints stay upstream's. Each story is
//! also run with the key off, where upstream's counting comes back. Fencing's side is in
//! `fencing/tests.rs`.

use super::harness::{date, n, node, secs, test_settings};
use super::lifecycle_with_eviction::Cluster;
use crate::brake::MaxUnhealthy;
use crate::decisions::Decision;
use crate::inputs::Input;
use crate::model::{ConditionStatus, Lease, Node, TaintEffect, taint_keys};
use crate::settings::Settings;
use crate::time::Time;
use crate::zones::ZoneState;

fn t0() -> Time {
    date(2026, 12, 1, 22, 0, 0)
}

fn renewal(name: &str, at: Time) -> Lease {
    Lease {
        name: name.into(),
        renew_time: Some(at),
        duration_seconds: Some(40),
        resource_version: format!("{}", at.as_unix_millis()).into(),
    }
}

/// The condition as an admin (or a maintenance controller) writes it.
fn in_maintenance(mut built: Node) -> Node {
    built
        .other_conditions
        .push((n("MaintenanceInProgress"), ConditionStatus::True));
    built
}

/// `names` Ready at t0 in zone `r/<zone>`, with 40 s Leases; those in `maintenance` carry
/// `MaintenanceInProgress=True`; those in `alive` keep heartbeating.
fn cluster(
    settings: Settings,
    nodes: &[(&str, &str)],
    maintenance: &[&str],
    alive: &[&str],
) -> Cluster {
    let mut c = Cluster::new(settings, t0());
    for (name, zone) in nodes {
        c.put_lease(renewal(name, t0()));
        let built = node(name)
            .zone("r", zone)
            .ready(ConditionStatus::True, t0(), t0())
            .build();
        c.put_node(if maintenance.contains(name) {
            in_maintenance(built)
        } else {
            built
        });
    }
    for name in alive {
        c.alive.insert(n(name));
    }
    c.feed(Input::InitialSyncDone);
    c
}

fn off(settings: Settings) -> Settings {
    Settings {
        lifecycle_conditions: false,
        ..settings
    }
}

/// A rack of a small zone (five nodes, large_cluster_size_threshold 20) goes down for planned
/// work: three nodes carry `MaintenanceInProgress=True` and fall silent. Then a fourth node
/// dies for real. The three are judged Unknown and tainted as upstream does, but are no
/// failure of the zone: it stays Normal, and the real failure is tainted at its deadline.
/// With `lifecycle_conditions = false` (upstream's counting) four of five down make the zone
/// partially disrupted, a small zone's rate is 0, and the real failure is never tainted.
#[test]
fn a_rack_in_planned_maintenance_does_not_stop_the_failover_of_a_real_failure_beside_it() {
    let nodes = [
        ("m1", "a"),
        ("m2", "a"),
        ("m3", "a"),
        ("w4", "a"),
        ("w5", "a"),
    ];
    let maintenance = ["m1", "m2", "m3"];
    let deadline = t0() + test_settings().node_monitor_grace_period;

    let mut c = cluster(test_settings(), &nodes, &maintenance, &["w5"]);
    c.run_for(secs(90));
    assert_eq!(c.zone_state("r", "a"), Some(ZoneState::Normal));
    for name in ["m1", "m2", "m3", "w4"] {
        assert_eq!(c.ready_of(name), Some(ConditionStatus::Unknown), "{name}");
        assert!(
            c.has_taint(name, taint_keys::UNREACHABLE, TaintEffect::NoExecute),
            "{name}: its own taint stays upstream's"
        );
    }
    let tainted = c.taint_writes_with("w4", taint_keys::UNREACHABLE, TaintEffect::NoExecute);
    assert_eq!(tainted.len(), 1, "{:#?}", c.taint_writes());
    assert!(
        tainted[0] >= deadline && tainted[0] < deadline + secs(1),
        "{tainted:?}"
    );

    let mut upstream = cluster(off(test_settings()), &nodes, &maintenance, &["w5"]);
    upstream.run_for(secs(90));
    assert_eq!(
        upstream.zone_state("r", "a"),
        Some(ZoneState::PartialDisruption)
    );
    assert!(
        upstream
            .taint_writes_with("w4", taint_keys::UNREACHABLE, TaintEffect::NoExecute)
            .is_empty()
    );
}

/// Four nodes across zones go down for planned work with the brake at 2: not counted, the
/// brake stays released and a real failure beside them is tainted. With the key off the four
/// count, the brake engages, and nothing is tainted.
#[test]
fn nodes_in_planned_maintenance_do_not_engage_the_brake() {
    let nodes = [
        ("a1", "a"),
        ("a2", "a"),
        ("a3", "a"),
        ("b1", "b"),
        ("b2", "b"),
        ("b3", "b"),
        ("c1", "c"),
        ("c2", "c"),
        ("c3", "c"),
    ];
    let maintenance = ["a1", "b1", "c1", "c2"];
    let alive = ["a2", "b2", "b3", "c3"];
    let settings = Settings {
        max_unhealthy: Some(MaxUnhealthy::Count(2)),
        ..test_settings()
    };
    let mut c = cluster(settings.clone(), &nodes, &maintenance, &alive);
    c.ctl.take_decisions();
    c.run_for(secs(90));
    let decisions = c.ctl.take_decisions();
    assert!(
        !decisions.iter().any(|d| matches!(d, Decision::Brake(_))),
        "{decisions:#?}"
    );
    assert_eq!(
        c.taint_writes_with("a3", taint_keys::UNREACHABLE, TaintEffect::NoExecute)
            .len(),
        1,
        "{:#?}",
        c.taint_writes()
    );

    let mut upstream = cluster(off(settings), &nodes, &maintenance, &alive);
    upstream.ctl.take_decisions();
    upstream.run_for(secs(90));
    let decisions = upstream.ctl.take_decisions();
    assert!(
        decisions.iter().any(|d| matches!(d, Decision::Brake(_))),
        "{decisions:#?}"
    );
    assert!(
        upstream
            .taint_writes_with("a3", taint_keys::UNREACHABLE, TaintEffect::NoExecute)
            .is_empty()
    );
}

/// The maintenance ends while the node is still down (the admin clears the condition, or sets
/// it False): from then it is a failure like any other, counted in its zone at once.
#[test]
fn a_node_whose_maintenance_ends_while_it_is_still_down_counts_again() {
    let nodes = [
        ("m1", "a"),
        ("m2", "a"),
        ("m3", "a"),
        ("w4", "a"),
        ("w5", "a"),
    ];
    let maintenance = ["m1", "m2", "m3"];
    let mut c = cluster(test_settings(), &nodes, &maintenance, &["w4", "w5"]);
    c.run_for(secs(90));
    assert_eq!(c.zone_state("r", "a"), Some(ZoneState::Normal));
    for name in maintenance {
        let mut ended = c.nodes[&n(name)].clone();
        ended.other_conditions = vec![(n("MaintenanceInProgress"), ConditionStatus::False)];
        c.put_node(ended);
    }
    c.run_for(secs(10));
    // Three of five down: partially disrupted.
    assert_eq!(c.zone_state("r", "a"), Some(ZoneState::PartialDisruption));
}

/// A percentage brake is taken of the nodes serving, not of those in planned maintenance: with
/// half of ten nodes down for planned work, three real failures are 60 % of the five left and
/// engage a 40 % brake (counted against all ten, 30 %, they would not). With the key off the
/// eight silent nodes count against ten and engage it too.
#[test]
fn a_percentage_brake_is_taken_of_the_nodes_not_in_planned_maintenance() {
    let nodes = [
        ("a1", "a"),
        ("a2", "a"),
        ("a3", "a"),
        ("a4", "a"),
        ("b1", "b"),
        ("b2", "b"),
        ("b3", "b"),
        ("c1", "c"),
        ("c2", "c"),
        ("c3", "c"),
    ];
    let maintenance = ["a1", "a2", "b1", "c1", "c2"];
    // Real failures: a3, b2, c3.
    let alive = ["a4", "b3"];
    let settings = Settings {
        max_unhealthy: Some(MaxUnhealthy::Percent(40.0)),
        ..test_settings()
    };
    for key in [true, false] {
        let settings = Settings {
            lifecycle_conditions: key,
            ..settings.clone()
        };
        let mut c = cluster(settings, &nodes, &maintenance, &alive);
        c.ctl.take_decisions();
        c.run_for(secs(90));
        let decisions = c.ctl.take_decisions();
        assert!(
            decisions.iter().any(|d| matches!(d, Decision::Brake(_))),
            "lifecycle_conditions = {key}: {decisions:#?}"
        );
        for name in ["a3", "b2", "c3"] {
            assert!(
                c.taint_writes_with(name, taint_keys::UNREACHABLE, TaintEffect::NoExecute)
                    .is_empty(),
                "lifecycle_conditions = {key}: {name} tainted under the brake"
            );
        }
    }
}
