//! `full_disruption = "hold"` and `hold_max` (`node_lifecycle/partitions.rs`), and the README
//! table's rows about holds; the fleet and helpers are `partitions.rs`'s.
//! The node lifecycle alone (`harness.rs` says why).

use std::time::Duration;

use super::harness::*;
use super::partitions::*;
use crate::decisions::HoldEnd;
use crate::model::TaintEffect::NoExecute;
use crate::model::{NodeConditionType, taint_keys};
use crate::partitions::FullDisruption;
use crate::time::{Rate, Time};
use crate::{Decision, Settings, ZoneState};

// ---- full_disruption = "hold" --------------------------------------------------------------

fn hold(max: Option<Duration>) -> Settings {
    Settings {
        full_disruption: FullDisruption::Hold,
        hold_max: max,
        node_eviction_rate: Rate::from_micro_per_second(100_000),
        ..by_site(test_settings())
    }
}

fn dark_site_1(h: &mut Harness, until: Time) {
    let cut = t0() + secs(25);
    let silent: Vec<(&str, Time)> = ["s1-1", "s1-2", "s1-3", "s1-4"]
        .iter()
        .map(|n| (*n, cut))
        .collect();
    heartbeat(h, until, |_| Duration::ZERO, &silent);
}

/// Site 1 goes dark (verdicts at 70 s) beside a healthy site 2. Held: nothing tainted
/// NoExecute until `hold_max` (120 s) has passed since it became fully disrupted, then one
/// node every 10 s (the normal rate, 0.1/s). One decision line entering, one leaving.
#[test]
fn a_held_domain_is_not_tainted_until_hold_max_then_at_the_normal_rate() {
    let mut h = fleet(hold(Some(secs(120))));
    dark_site_1(&mut h, t0() + secs(185));
    assert_eq!(no_execute_writes(&h), vec![]);
    let held = decisions(&mut h, "domain-hold");
    let full_at = match &held[..] {
        [
            Decision::DomainHold {
                until: Some(until),
                end: None,
                ..
            },
        ] => Time::from_unix_millis(until.as_unix_millis() - 120_000),
        other => panic!("{other:?}"),
    };
    assert!(full_at >= t0() + secs(70) && full_at < t0() + secs(71));
    dark_site_1(&mut h, t0() + secs(240));
    let writes = no_execute_writes(&h);
    let mut times: Vec<Time> = writes.iter().map(|(_, t)| *t).collect();
    times.sort();
    assert_eq!(times.len(), 4, "{writes:?}");
    assert_eq!(times[0], full_at + secs(120));
    for pair in times.windows(2) {
        assert_eq!(pair[1].since(pair[0]), secs(10), "{times:?}");
    }
    let left = decisions(&mut h, "domain-hold");
    assert!(
        matches!(
            &left[..],
            [Decision::DomainHold {
                end: Some(HoldEnd::HoldMax),
                ..
            }]
        ),
        "{left:?}"
    );
}

/// Without `hold_max` a held domain waits until it recovers; it leaves the hold with no taint.
#[test]
fn a_held_domain_without_hold_max_recovers_without_a_taint() {
    let mut h = fleet(hold(None));
    dark_site_1(&mut h, t0() + secs(600));
    assert_eq!(no_execute_writes(&h), vec![]);
    let now = h.now;
    for node in ["s1-1", "s1-2", "s1-3", "s1-4"] {
        come_back(&mut h, node);
    }
    heartbeat(&mut h, now + secs(30), |_| Duration::ZERO, &[]);
    assert_eq!(no_execute_writes(&h), vec![]);
    let lines = decisions(&mut h, "domain-hold");
    assert!(
        matches!(
            &lines[..],
            [
                Decision::DomainHold {
                    until: None,
                    end: None,
                    ..
                },
                Decision::DomainHold {
                    end: Some(HoldEnd::Recovered),
                    ..
                }
            ]
        ),
        "{lines:?}"
    );
}

/// Row "a domain of several pools": one pool holding is enough (the safer choice wins, as the
/// lowest rate does); a domain of evicting pools only is tainted as upstream.
#[test]
fn a_domain_holds_when_one_of_its_pools_holds() {
    // Site 1's nodes: s1-1 in a holding pool, the others in none (global: evict).
    let mut holding = pool("holding", "s1");
    holding
        .match_labels
        .push(("kubernetes.io/hostname".into(), "s1-1".into()));
    holding.full_disruption = Some(FullDisruption::Hold);
    let settings = Settings {
        pools: vec![holding],
        ..by_site(test_settings())
    };
    let mut h = fleet(settings);
    let mut s11 = h.nodes[&n("s1-1")].clone();
    s11.labels.push((n("kubernetes.io/hostname"), n("s1-1")));
    h.put_node(s11);
    dark_site_1(&mut h, t0() + secs(200));
    assert_eq!(no_execute_writes(&h), vec![]);
    assert_eq!(decisions(&mut h, "domain-hold").len(), 1);
}

/// Row "the correlated-failure rule and hold": a site going dark with spread heartbeats waits
/// for its suspects (no taint on the first verdict), then is held: nothing tainted at all.
#[test]
fn a_dark_site_with_spread_heartbeats_waits_for_its_suspects_then_is_held() {
    let mut h = fleet(hold(None));
    let cut = t0() + secs(19) + Duration::from_millis(50);
    let silent: Vec<(&str, Time)> = ["s1-1", "s1-2", "s1-3", "s1-4"]
        .iter()
        .map(|n| (*n, cut))
        .collect();
    heartbeat(&mut h, t0() + secs(200), spread, &silent);
    assert_eq!(no_execute_writes(&h), vec![]);
    assert_eq!(
        domain_state(&h, "example.com/site=s1"),
        Some(ZoneState::FullDisruption)
    );
    assert_eq!(decisions(&mut h, "domain-hold").len(), 1);
}

/// Row "the cooldown and hold": a held domain that recovers leaves the hold, and the
/// `disruption_cooldown` that follows any full disruption still applies: a node of it that
/// fails again within the cooldown is not tainted before the cooldown ends.
#[test]
fn the_cooldown_follows_the_end_of_a_hold() {
    let settings = Settings {
        disruption_cooldown: secs(60),
        ..hold(None)
    };
    let mut h = fleet(settings);
    dark_site_1(&mut h, t0() + secs(150));
    let back = h.now;
    for node in ["s1-1", "s1-2", "s1-3", "s1-4"] {
        come_back(&mut h, node);
    }
    heartbeat(&mut h, back + secs(5), |_| Duration::ZERO, &[]);
    // s1-2's kubelet reports NotReady 5 s later: within the 60 s cooldown.
    let now = h.now;
    h.set_conditions(
        "s1-2",
        vec![cond(
            NodeConditionType::Ready,
            crate::model::ConditionStatus::False,
            now,
            now,
        )],
    );
    heartbeat(&mut h, now + secs(80), |_| Duration::ZERO, &[]);
    let writes = h.taint_writes_with("s1-2", taint_keys::NOT_READY, NoExecute);
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert!(writes[0] >= back + secs(60), "{writes:?}");
}

/// Row "every domain down and hold": the all-domains-down stop wins (nothing tainted, the
/// hold is left with that reason); hold_max does not taint while every domain is down.
#[test]
fn every_domain_down_stops_tainting_whatever_the_hold() {
    let mut h = fleet(hold(Some(secs(10))));
    let cut = t0() + secs(25);
    let all: Vec<(String, Time)> = names().into_iter().map(|(n, _, _)| (n, cut)).collect();
    let silent: Vec<(&str, Time)> = all.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    heartbeat(&mut h, t0() + secs(200), |_| Duration::ZERO, &silent);
    assert!(h.ctl.lifecycle().all_zones_down());
    assert_eq!(no_execute_writes(&h), vec![]);
}
