//! The brake on mass decisions (`controller/brake.rs`), through both controllers: a mass failure
//! engages it before the first NoExecute taint, nothing is tainted or deleted on
//! the nodes it covers while engaged, countdowns act at the release, which waits
//! `disruption_cooldown`. Rows of the README's interactions table are tests named after them.

use std::time::Duration;

use super::harness::{cond, date, n, node, pod, secs, test_settings};
use super::lifecycle_with_eviction::{Cluster, tolerating_unreachable, with_tolerations};
use crate::brake::{BrakeScope, MaxUnhealthy};
use crate::controllers::Controllers;
use crate::decisions::Decision;
use crate::inputs::Input;
use crate::model::{Autonomy, ConditionStatus, Lease, NodeConditionType, TaintEffect, taint_keys};
use crate::pools::Pool;
use crate::settings::Settings;
use crate::time::Time;

fn t0() -> Time {
    date(2026, 11, 26, 9, 0, 0)
}

/// Four zones of three (`a1`..`d3`), Ready at t0, kubelets with 40 s Leases; `site=edge` on
/// the zone-d nodes. One dead node per zone never makes a zone partially disrupted: the zone
/// rules alone let each be tainted.
fn names() -> Vec<String> {
    ["a", "b", "c", "d"]
        .iter()
        .flat_map(|z| (1..=3).map(move |i| format!("{z}{i}")))
        .collect()
}

fn fleet(settings: Settings, autonomous: &[&str]) -> Cluster {
    let mut c = Cluster::new(settings, t0());
    for name in names() {
        let zone = &name[..1];
        let mut b = node(&name)
            .zone("r", zone)
            .ready(ConditionStatus::True, t0(), t0());
        if zone == "d" {
            b = b.label("example.com/site", "edge");
        }
        let mut built = b.build();
        if autonomous.contains(&name.as_str()) {
            built.autonomy = Autonomy::Forever;
        }
        c.put_lease(renewal(&name, t0()));
        c.put_node(built);
    }
    c.feed(Input::InitialSyncDone);
    c
}

/// `seconds` before t0.
fn before(seconds: u64) -> Time {
    Time::from_unix_millis(t0().as_unix_millis() - seconds * 1000)
}

fn renewal(name: &str, at: Time) -> Lease {
    Lease {
        name: name.into(),
        renew_time: Some(at),
        duration_seconds: Some(40),
        resource_version: format!("{}", at.as_unix_millis()).into(),
    }
}

/// Runs to `until`: every kubelet renews every 10 s except those silent at that instant.
fn run(c: &mut Cluster, until: Time, silent: impl Fn(&str, Time) -> bool) {
    let mut t = c.now;
    while t < until {
        t = (t + secs(10)).min(until);
        c.run_until(t);
        for name in names() {
            if !silent(&name, t) {
                c.put_lease(renewal(&name, t));
            }
        }
    }
}

/// A node's kubelet comes back: Ready again with a fresh heartbeat.
fn back(c: &mut Cluster, name: &str) {
    let mut node = c.nodes[&n(name)].clone();
    node.conditions = vec![cond(
        NodeConditionType::Ready,
        ConditionStatus::True,
        c.now,
        c.now,
    )];
    c.put_node(node);
    let t = c.now;
    c.put_lease(renewal(name, t));
}

fn no_execute_writes(c: &Cluster) -> Vec<(Time, String)> {
    c.taint_writes()
        .iter()
        .filter(|(_, _, taints)| {
            taints
                .iter()
                .any(|t| t.effect == TaintEffect::NoExecute && t.key.starts_with("node."))
        })
        .map(|(t, node, _)| (*t, node.to_string()))
        .collect()
}

fn brake_lines(c: &mut Cluster) -> Vec<(bool, BrakeScope, usize)> {
    c.ctl
        .take_decisions()
        .into_iter()
        .filter_map(|d| match d {
            Decision::Brake(b) => Some((b.engaged, b.scope, b.unhealthy)),
            _ => None,
        })
        .collect()
}

fn braked(limit: MaxUnhealthy) -> Settings {
    Settings {
        max_unhealthy: Some(limit),
        ..test_settings()
    }
}

/// Three nodes of three zones fall silent together. The zone rules taint them (each zone keeps
/// two of three Ready); with `max_unhealthy = 2` the brake, counting the other two as suspects
/// when the first is judged, engages before any NoExecute taint. Without it, the first is
/// tainted: the control that the test can fail.
#[test]
fn brake_vs_zone_waits_a_mass_failure_across_zones_engages_the_brake_before_the_first_taint() {
    let dead = |name: &str, t: Time| ["a1", "b1", "c1"].contains(&name) && t > t0();
    let mut control = fleet(test_settings(), &[]);
    run(&mut control, t0() + secs(120), dead);
    assert!(
        !no_execute_writes(&control).is_empty(),
        "without a brake the zone rules taint"
    );

    let mut c = fleet(braked(MaxUnhealthy::Count(2)), &[]);
    run(&mut c, t0() + secs(120), dead);
    assert_eq!(no_execute_writes(&c), vec![]);
    let lines = brake_lines(&mut c);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].0 && lines[0].1 == BrakeScope::Fleet && lines[0].2 == 3);
    for name in ["a1", "b1", "c1"] {
        assert_eq!(
            c.nodes[&n(name)].ready().map(|r| r.status),
            Some(ConditionStatus::Unknown),
            "{name} is still judged: the brake holds only NoExecute decisions"
        );
    }
}

/// A node tainted before the brake keeps its taint; its pod's 30 s countdown runs out while
/// the brake is engaged: the pod stays, and goes at the release, at once (its deadline is not
/// counted again). The release waits `disruption_cooldown` after the count is back within the
/// limit, and the nodes that came back were never tainted.
#[test]
fn brake_vs_cooldown_release_waits_the_cooldown_then_held_deletions_go_at_once() {
    let settings = Settings {
        disruption_cooldown: secs(40),
        ..braked(MaxUnhealthy::Count(1))
    };
    let mut c = fleet(settings, &[]);
    c.put_pod(with_tolerations(
        pod("web", "a1"),
        vec![tolerating_unreachable(Some(30))],
    ));
    c.put_pod(pod("db", "b2"));
    // a1 dies alone at t0: tainted at its deadline (~50 s).
    run(&mut c, t0() + secs(60), |name, t| name == "a1" && t > t0());
    let tainted = no_execute_writes(&c);
    assert_eq!(tainted.len(), 1, "{tainted:?}");
    assert_eq!(tainted[0].1, "a1");
    // b2 and c2 die at 60 s: three unhealthy, more than 1.
    let dead =
        |name: &str, t: Time| name == "a1" || (["b2", "c2"].contains(&name) && t > t0() + secs(60));
    run(&mut c, t0() + secs(200), dead);
    let lines = brake_lines(&mut c);
    assert!(
        matches!(&lines[..], [(true, BrakeScope::Fleet, 3)]),
        "{lines:?}"
    );
    assert_eq!(no_execute_writes(&c).len(), 1, "nothing new tainted");
    assert!(
        c.evicted.is_empty(),
        "web's deadline passed under the brake"
    );
    // b2 and c2 come back at 200 s: within the limit (a1 alone) from then on.
    back(&mut c, "b2");
    back(&mut c, "c2");
    let released_at = t0() + secs(240);
    let dead = |name: &str, _| name == "a1";
    run(&mut c, t0() + Duration::from_millis(239_999), dead);
    assert!(c.evicted.is_empty(), "released before the cooldown");
    run(&mut c, released_at + secs(1), dead);
    let lines = brake_lines(&mut c);
    assert!(
        matches!(&lines[..], [(false, BrakeScope::Fleet, 1)]),
        "{lines:?}"
    );
    assert_eq!(c.evicted_names(), vec!["web"]);
    assert_eq!(c.evicted[0].0, released_at, "deleted at the release itself");
    assert_eq!(no_execute_writes(&c).len(), 1, "b2 and c2 never tainted");
    assert!(c.pods.contains_key(&pod("db", "b2").key));
}

/// A pool's brake counts the pool's nodes only and covers only them: two of the three edge
/// nodes down (67 % > 40 %) stops the edge, while a core node dying alone is tainted and its
/// pods deleted.
#[test]
fn a_pool_brake_holds_its_own_nodes_and_no_others() {
    let settings = Settings {
        pools: vec![Pool {
            name: n("edge"),
            match_labels: vec![("example.com/site".into(), "edge".into())],
            match_expressions: vec![],
            node_monitor_grace_period: None,
            node_startup_grace_period: None,
            mark_pods_not_ready: None,
            node_eviction_rate: None,
            secondary_node_eviction_rate: None,
            max_unhealthy: Some(MaxUnhealthy::Percent(40.0)),
            default_toleration_seconds: None,
            disruption_domain: None,
            full_disruption: None,
            hold_max: None,
        }],
        ..test_settings()
    };
    let mut c = fleet(settings, &[]);
    c.put_pod(pod("edge-app", "d1"));
    c.put_pod(pod("core-app", "a3"));
    let dead = |name: &str, t: Time| ["d1", "d2", "a3"].contains(&name) && t > t0();
    run(&mut c, t0() + secs(120), dead);
    let tainted: Vec<String> = no_execute_writes(&c).into_iter().map(|w| w.1).collect();
    assert_eq!(tainted, vec!["a3"]);
    assert_eq!(c.evicted_names(), vec!["core-app"]);
    let lines = brake_lines(&mut c);
    assert!(
        matches!(&lines[..], [(true, BrakeScope::Pool(p), 2)] if &**p == "edge"),
        "{lines:?}"
    );
    let (lc, store) = (c.ctl.lifecycle(), c.ctl.store());
    assert!(lc.brake_covering(store, "d3").is_some());
    assert!(lc.brake_covering(store, "a1").is_none());
}

/// Autonomy does not take a node out of the count: an edge site whose autonomous nodes are cut
/// off engages the brake as any other, and the brake holds their taints (autonomy alone would
/// have let them be tainted and only stretched the deletions).
#[test]
fn brake_vs_autonomy_autonomous_nodes_count_and_are_held_too() {
    let dead = |name: &str, t: Time| ["a2", "b2", "c2"].contains(&name) && t > t0();
    let mut c = fleet(braked(MaxUnhealthy::Count(2)), &["a2", "b2", "c2"]);
    c.put_pod(pod("shop", "a2"));
    run(&mut c, t0() + secs(200), dead);
    assert_eq!(no_execute_writes(&c), vec![]);
    assert!(c.evicted.is_empty());
    assert!(matches!(&brake_lines(&mut c)[..], [(true, _, 3)]));
}

/// With no brake configured nothing of it shows: no decision line, no cover.
#[test]
fn without_max_unhealthy_nothing_is_braked() {
    let dead = |name: &str, t: Time| ["a1", "b1", "c1"].contains(&name) && t > t0();
    let mut c = fleet(test_settings(), &[]);
    run(&mut c, t0() + secs(120), dead);
    assert!(brake_lines(&mut c).is_empty());
    assert!(c.ctl.lifecycle().brakes().scopes.is_empty());
    assert_eq!(no_execute_writes(&c).len(), 3);
}

/// A percentage is of the scope's nodes: 3 of 12 down is within 30 % and over 20 %.
#[test]
fn a_percentage_brake_engages_over_its_share_of_the_fleet() {
    // 3 of 12 is 25 %: over 20 %, within 30 %.
    let dead = |name: &str, t: Time| ["a1", "b1", "c1"].contains(&name) && t > t0();
    let mut within = fleet(braked(MaxUnhealthy::Percent(30.0)), &[]);
    run(&mut within, t0() + secs(120), dead);
    assert!(brake_lines(&mut within).is_empty());
    assert_eq!(no_execute_writes(&within).len(), 3);
    let mut over = fleet(braked(MaxUnhealthy::Percent(20.0)), &[]);
    run(&mut over, t0() + secs(120), dead);
    assert!(!over.nodes[&n("a1")].has_taint(taint_keys::UNREACHABLE, &TaintEffect::NoExecute));
    assert_eq!(brake_lines(&mut over).len(), 1);
}

/// A reload that removes `max_unhealthy` releases an engaged brake (one line) and the held
/// deletions go at once; one that keeps it changes nothing.
#[test]
fn a_reload_removing_the_brake_releases_it_and_its_held_deletions() {
    let mut c = fleet(braked(MaxUnhealthy::Count(1)), &[]);
    c.put_pod(with_tolerations(
        pod("web", "a1"),
        vec![tolerating_unreachable(Some(30))],
    ));
    run(&mut c, t0() + secs(60), |name, t| name == "a1" && t > t0());
    let dead =
        |name: &str, t: Time| name == "a1" || (["b2", "c2"].contains(&name) && t > t0() + secs(60));
    run(&mut c, t0() + secs(200), dead);
    assert!(c.evicted.is_empty());
    assert!(matches!(
        &brake_lines(&mut c)[..],
        [(true, BrakeScope::Fleet, 3)]
    ));
    let now = c.now;
    let actions = c.ctl.apply_settings(braked(MaxUnhealthy::Count(1)), now);
    assert!(actions.is_empty(), "{actions:?}");
    let actions = c.ctl.apply_settings(test_settings(), now);
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, crate::Action::EvictPod { pod, .. } if &*pod.name == "web")),
        "{actions:?}"
    );
    assert!(matches!(
        &brake_lines(&mut c)[..],
        [(false, BrakeScope::Fleet, 3)]
    ));
}

/// The correlated-failure rule, for the brake: three nodes of three zones fall silent ten
/// seconds apart (a1 first), so a1's deadline comes while b1 and c1 are still short of theirs.
/// Counted as suspects (silent for more than two Lease renewals, as the zone gate counts them),
/// they engage the brake at a1's verdict and nothing is tainted. Counted by their verdicts only
/// (`early_suspects = false`), a1 is judged alone, one unhealthy node within the limit: tainted.
#[test]
fn the_brake_counts_suspects_so_the_first_node_of_a_spread_mass_failure_is_not_tainted() {
    let dead = |name: &str, t: Time| {
        (name == "a1" && t > t0()) || (["b1", "c1"].contains(&name) && t > t0() + secs(10))
    };
    let mut c = fleet(braked(MaxUnhealthy::Count(2)), &[]);
    run(&mut c, t0() + secs(120), dead);
    assert_eq!(no_execute_writes(&c), vec![]);
    assert!(matches!(
        &brake_lines(&mut c)[..],
        [(true, BrakeScope::Fleet, 3)]
    ));

    let by_verdicts = Settings {
        early_suspects: false,
        ..braked(MaxUnhealthy::Count(2))
    };
    let mut control = fleet(by_verdicts, &[]);
    run(&mut control, t0() + secs(120), dead);
    let tainted: Vec<String> = no_execute_writes(&control)
        .into_iter()
        .map(|w| w.1)
        .collect();
    assert_eq!(tainted, vec!["a1"], "the first node, judged alone");
}

/// A start (or a new leader) in the middle of a mass failure: three nodes already Unknown and
/// tainted for 100 s, their pods' 30 s long overdue. The brake, counted at the initial sync,
/// holds those deletions; without it they go at once (from the taints' `timeAdded`).
#[test]
fn a_start_in_a_mass_failure_holds_the_overdue_deletions_under_the_brake() {
    let start = |settings: Settings| {
        let mut c = Cluster::new(settings, t0());
        for name in names() {
            let zone = &name[..1];
            let dead = ["a1", "b1", "c1"].contains(&name.as_str());
            let since = before(150);
            let mut b = node(&name).zone("r", zone);
            b = if dead {
                b.ready(ConditionStatus::Unknown, since, since)
            } else {
                b.ready(ConditionStatus::True, t0(), t0())
            };
            let mut built = b.build();
            if dead {
                built.taints.push(crate::model::Taint {
                    key: n(taint_keys::UNREACHABLE),
                    value: n(""),
                    effect: TaintEffect::NoExecute,
                    time_added: Some(before(100)),
                });
                c.put_lease(renewal(&name, since));
            } else {
                c.put_lease(renewal(&name, t0()));
            }
            c.put_node(built);
            c.put_pod(with_tolerations(
                pod(&format!("web-{name}"), &name),
                vec![tolerating_unreachable(Some(30))],
            ));
        }
        c.feed(Input::InitialSyncDone);
        c
    };
    let control = start(test_settings());
    assert_eq!(control.evicted.len(), 3, "{:?}", control.evicted_names());
    let mut c = start(braked(MaxUnhealthy::Count(2)));
    assert!(c.evicted.is_empty(), "{:?}", c.evicted_names());
    assert!(matches!(
        &brake_lines(&mut c)[..],
        [(true, BrakeScope::Fleet, 3)]
    ));
}

/// Row "a takeover × hold, cooldown, brake release": the brake engaged in a mass failure, two
/// of the three dead nodes come back (the count within the limit: the release waits
/// `disruption_cooldown`, 60 s). A failover 10 s later keeps the brake engaged and its release
/// window from the clocks the old leader left: the third node's overdue deletion goes at the
/// release, not at the takeover (without the clocks the new leader found the count within the
/// limit and released at once).
#[test]
fn brake_vs_a_takeover_the_release_window_goes_on_from_the_old_leaders_clocks() {
    let settings = Settings {
        disruption_cooldown: secs(60),
        ..braked(MaxUnhealthy::Count(2))
    };
    let mut c = Cluster::new(settings.clone(), t0());
    for name in names() {
        let zone = &name[..1];
        let dead = ["a1", "b1", "c1"].contains(&name.as_str());
        let since = before(150);
        let mut b = node(&name).zone("r", zone);
        b = if dead {
            b.ready(ConditionStatus::Unknown, since, since)
        } else {
            b.ready(ConditionStatus::True, t0(), t0())
        };
        let mut built = b.build();
        if dead {
            built.taints.push(crate::model::Taint {
                key: n(taint_keys::UNREACHABLE),
                value: n(""),
                effect: TaintEffect::NoExecute,
                time_added: Some(before(100)),
            });
            c.put_lease(renewal(&name, since));
        } else {
            c.put_lease(renewal(&name, t0()));
        }
        c.put_node(built);
        c.put_pod(with_tolerations(
            pod(&format!("web-{name}"), &name),
            vec![tolerating_unreachable(Some(30))],
        ));
    }
    c.feed(Input::InitialSyncDone);
    assert!(c.evicted.is_empty(), "{:?}", c.evicted_names());
    let dead = |n: &str, _: Time| ["a1", "b1", "c1"].contains(&n);
    run(&mut c, t0() + secs(5), dead);
    back(&mut c, "a1");
    back(&mut c, "b1");
    let within = c.now;
    let still_dead = |n: &str, _: Time| n == "c1";
    run(&mut c, within + secs(10), still_dead);
    assert!(c.evicted.is_empty(), "{:?}", c.evicted_names());
    let clocks = c.ctl.clocks(c.now);
    let now = c.now;
    let leader = std::mem::replace(&mut c.ctl, Controllers::new(settings, now));
    c.ctl = leader.into_follower(now);
    c.ctl.inherit_clocks(clocks);
    c.feed(Input::InitialSyncDone);
    run(&mut c, within + secs(59), still_dead);
    assert!(c.evicted.is_empty(), "{:?}", c.evicted_names());
    run(&mut c, within + secs(70), still_dead);
    assert_eq!(c.evicted_names(), vec!["web-c1"]);
    assert!(
        c.evicted[0].0 >= within + secs(60) && c.evicted[0].0 <= within + secs(61),
        "{:?}",
        c.evicted
    );
}
