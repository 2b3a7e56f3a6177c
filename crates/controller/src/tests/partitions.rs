//! Partitions are not failures (`node_lifecycle/partitions.rs`): pods kept Ready while a disruption
//! domain is cut off, domains by label, and a fully dark domain held until `hold_max`. Each
//! interaction row of the README's table ("Edge and bare-metal operators") has its test here,
//! named after the row.
//! The node lifecycle alone (`harness.rs` says why): the pods kept Ready are asserted on.

use std::time::Duration;

use super::harness::*;
use crate::model::ConditionStatus::True;
use crate::model::TaintEffect::NoExecute;
use crate::model::{Lease, NodeConditionType, taint_keys};
use crate::partitions::PodsNotReady;
use crate::pools::Pool;
use crate::time::Time;
use crate::{Decision, Settings, ZoneState};

pub(super) const SITE: &str = "example.com/site";

pub(super) fn t0() -> Time {
    date(2026, 11, 26, 9, 0, 0)
}

/// Two sites of four nodes, `s1-1`..`s1-4` and `s2-1`..`s2-4`, spread over two cloud zones
/// (`s?-1`, `s?-2` in zone a, the others in b): the sites cut across the zones.
pub(super) fn names() -> Vec<(String, &'static str, &'static str)> {
    ["s1", "s2"]
        .iter()
        .flat_map(|s| {
            (1..=4).map(move |i| (format!("{s}-{i}"), *s, if i <= 2 { "a" } else { "b" }))
        })
        .collect()
}

pub(super) fn by_site(mut s: Settings) -> Settings {
    s.disruption_domain = vec![SITE.to_string()];
    s
}

/// Every node Ready at t0 with one pod, renewing a 40 s Lease.
pub(super) fn fleet(settings: Settings) -> Harness {
    let nodes = names()
        .iter()
        .map(|(name, site, zone)| {
            node(name)
                .zone("r", zone)
                .label(SITE, site)
                .ready(True, t0(), t0())
                .build()
        })
        .collect();
    let pods = names()
        .iter()
        .map(|(name, _, _)| pod(&format!("p-{name}"), name))
        .collect();
    let leases = names()
        .iter()
        .map(|(name, _, _)| Lease {
            duration_seconds: Some(40),
            ..lease(name, t0())
        })
        .collect();
    Harness::lifecycle_alone_started(settings, t0(), nodes, pods, leases)
}

/// Runs to `until`, each kubelet renewing every 10 s from its phase (`phase`), the ones in
/// `silent` no longer after the instant given.
pub(super) fn heartbeat(
    h: &mut Harness,
    until: Time,
    phase: impl Fn(&str) -> Duration,
    silent: &[(&str, Time)],
) {
    let every = secs(10);
    let mut t = h.now;
    while t < until {
        t += Duration::from_millis(100);
        h.run_until(t);
        for (name, _, _) in names() {
            let offset = t.since(t0() + phase(&name)).as_millis() % every.as_millis();
            if t < t0() + phase(&name) || offset != 0 {
                continue;
            }
            if silent.iter().any(|(n, at)| *n == name && t >= *at) {
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

/// Kubelets renewing at spread phases: 0, 4 and 8 s for the first three of a site.
pub(super) fn spread(name: &str) -> Duration {
    match name.chars().last() {
        Some('1') => Duration::ZERO,
        Some('2') => secs(4),
        Some('3') => secs(8),
        _ => secs(2),
    }
}

pub(super) fn no_execute_writes(h: &Harness) -> Vec<(String, Time)> {
    names()
        .iter()
        .flat_map(|(name, _, _)| {
            let mut times = h.taint_writes_with(name, taint_keys::UNREACHABLE, NoExecute);
            times.extend(h.taint_writes_with(name, taint_keys::NOT_READY, NoExecute));
            times.into_iter().map(move |t| (name.clone(), t))
        })
        .collect()
}

pub(super) fn renew(h: &mut Harness, node: &str) {
    let renewed = Lease {
        renew_time: Some(h.now),
        ..h.leases[node].clone()
    };
    h.put_lease(renewed);
}

/// The node's kubelet is back: it renews its Lease and posts Ready.
pub(super) fn come_back(h: &mut Harness, node: &str) {
    let now = h.now;
    renew(h, node);
    h.set_conditions(node, vec![cond(NodeConditionType::Ready, True, now, now)]);
}

pub(super) fn domain_state(h: &Harness, key: &str) -> Option<ZoneState> {
    h.dump()
        .zones
        .iter()
        .find(|z| &*z.key == key)
        .and_then(|z| z.state)
}

fn marked(h: &Harness, node: &str) -> Vec<Time> {
    h.pod_marks(&format!("p-{node}"))
}

pub(super) fn decisions(h: &mut Harness, kind: &str) -> Vec<Decision> {
    h.ctl
        .take_decisions()
        .into_iter()
        .filter(|d| d.kind() == kind)
        .collect()
}

pub(super) fn pool(name: &str, site: &str) -> Pool {
    Pool {
        name: n(name),
        match_labels: vec![(SITE.to_string(), site.to_string())],
        ..Default::default()
    }
}

// ---- mark_pods_not_ready ------------------------------------------------------------------

/// Three of site 1's four kubelets cut off at once, their Lease renewals spread over the
/// renew interval: the first verdict (s1-1, at 60 s) comes 4 s before the next. With
/// `unless-disrupted`, the first node's pods are not marked before the site is seen whole
/// (its suspects count), and none of the three are once it is partially disrupted. With
/// the default (`always`), upstream's outcome: every pod marked at its node's verdict.
#[test]
fn unless_disrupted_keeps_pods_ready_from_the_first_verdict_of_a_site_cut_off() {
    let cut = t0() + secs(19) + Duration::from_millis(50);
    let silent = [("s1-1", cut), ("s1-2", cut), ("s1-3", cut)];
    let settings = Settings {
        mark_pods_not_ready: PodsNotReady::UnlessDisrupted,
        ..by_site(test_settings())
    };
    let mut h = fleet(settings);
    heartbeat(&mut h, t0() + secs(120), spread, &silent);
    for node in ["s1-1", "s1-2", "s1-3"] {
        assert_eq!(
            h.ready_of(node),
            Some(crate::model::ConditionStatus::Unknown)
        );
        assert_eq!(marked(&h, node), vec![], "{node}");
    }
    assert_eq!(
        domain_state(&h, "example.com/site=s1"),
        Some(ZoneState::PartialDisruption)
    );
    let kept = decisions(&mut h, "pods-kept-ready");
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert!(
        matches!(&kept[0], Decision::PodsKeptReady { node, all_down: false, .. } if &**node == "s1-1"),
        "{kept:?}"
    );

    let mut h = fleet(by_site(test_settings()));
    heartbeat(&mut h, t0() + secs(120), spread, &silent);
    for node in ["s1-1", "s1-2", "s1-3"] {
        assert_eq!(marked(&h, node).len(), 1, "{node}");
    }
}

/// Row "a node failing alone": its domain stays Normal (no suspect beside it), so even under
/// `unless-disrupted` its pods are marked NotReady at its verdict, as upstream.
#[test]
fn unless_disrupted_marks_the_pods_of_a_node_failing_alone_at_its_verdict() {
    let settings = Settings {
        mark_pods_not_ready: PodsNotReady::UnlessDisrupted,
        ..by_site(test_settings())
    };
    let mut h = fleet(settings);
    let cut = t0() + secs(25);
    heartbeat(
        &mut h,
        t0() + secs(100),
        |_| Duration::ZERO,
        &[("s1-2", cut)],
    );
    // Last renewal at 20 s, grace 50 s: the verdict at 70 s + 1 ms.
    assert_eq!(
        marked(&h, "s1-2"),
        vec![t0() + secs(70) + Duration::from_millis(1)]
    );
    assert_eq!(decisions(&mut h, "pods-kept-ready"), vec![]);
}

/// Row "the domain returns to Normal while the node is still down": the rest of the site
/// comes back, the node is now failing alone, and its pods are marked then; the pods of the
/// nodes that came back were never marked.
#[test]
fn pods_kept_ready_are_marked_once_their_domain_is_normal_again_and_the_node_still_down() {
    let settings = Settings {
        mark_pods_not_ready: PodsNotReady::UnlessDisrupted,
        ..by_site(test_settings())
    };
    let mut h = fleet(settings);
    let cut = t0() + secs(19) + Duration::from_millis(50);
    let silent = [("s1-1", cut), ("s1-2", cut), ("s1-3", cut)];
    heartbeat(&mut h, t0() + secs(100), spread, &silent);
    assert_eq!(
        domain_state(&h, "example.com/site=s1"),
        Some(ZoneState::PartialDisruption)
    );
    // s1-2 and s1-3 come back (their kubelets renew, then post Ready, one after the other:
    // the site reads Normal after the first), s1-1 stays down.
    let back = h.now;
    for node in ["s1-2", "s1-3"] {
        renew(&mut h, node);
    }
    for node in ["s1-2", "s1-3"] {
        come_back(&mut h, node);
    }
    heartbeat(&mut h, back + secs(1), spread, &[("s1-1", cut)]);
    assert_eq!(
        domain_state(&h, "example.com/site=s1"),
        Some(ZoneState::Normal)
    );
    assert_eq!(marked(&h, "s1-1"), vec![back]);
    assert_eq!(marked(&h, "s1-2"), vec![]);
    assert_eq!(marked(&h, "s1-3"), vec![]);
    let marks = decisions(&mut h, "pods-not-ready");
    assert!(
        matches!(&marks[..], [Decision::PodsNotReady { node, .. }] if &**node == "s1-1"),
        "{marks:?}"
    );
}

/// Row "every domain down": the pods stay Ready under `unless-disrupted` (most likely our own
/// link), as the all-zones-down stop keeps the taints off.
#[test]
fn unless_disrupted_keeps_pods_ready_when_every_domain_is_down() {
    let settings = Settings {
        mark_pods_not_ready: PodsNotReady::UnlessDisrupted,
        ..by_site(test_settings())
    };
    let mut h = fleet(settings);
    let cut = t0() + secs(25);
    let all: Vec<(String, Time)> = names().into_iter().map(|(n, _, _)| (n, cut)).collect();
    let silent: Vec<(&str, Time)> = all.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    heartbeat(&mut h, t0() + secs(120), |_| Duration::ZERO, &silent);
    assert!(h.ctl.lifecycle().all_zones_down());
    for (node, _, _) in names() {
        assert_eq!(marked(&h, &node), vec![], "{node}");
    }
    assert_eq!(no_execute_writes(&h), vec![]);
}

/// Row "autonomy annotation and mark_pods_not_ready": an autonomous node's pods are never
/// marked, whatever the mode says (autonomy wins); `never` marks no pod either.
#[test]
fn autonomy_and_never_win_over_the_pods_not_ready_mode() {
    let settings = Settings {
        mark_pods_not_ready: PodsNotReady::Always,
        ..by_site(test_settings())
    };
    let mut h = fleet(settings);
    let mut autonomous = h.nodes[&n("s1-2")].clone();
    autonomous.autonomy = crate::model::Autonomy::Forever;
    h.put_node(autonomous);
    let cut = t0() + secs(25);
    heartbeat(
        &mut h,
        t0() + secs(100),
        |_| Duration::ZERO,
        &[("s1-2", cut)],
    );
    assert_eq!(marked(&h, "s1-2"), vec![]);

    let never = Settings {
        mark_pods_not_ready: PodsNotReady::Never,
        ..by_site(test_settings())
    };
    let mut h = fleet(never);
    heartbeat(
        &mut h,
        t0() + secs(100),
        |_| Duration::ZERO,
        &[("s1-2", cut)],
    );
    assert_eq!(marked(&h, "s1-2"), vec![]);
}

/// Row "a pool and the global mode": the node's pool decides, the global mode for the others.
#[test]
fn a_pools_mode_overrides_the_global_one_for_its_nodes() {
    let mut edge = pool("edge", "s1");
    edge.mark_pods_not_ready = Some(PodsNotReady::Never);
    let settings = Settings {
        pools: vec![edge],
        ..by_site(test_settings())
    };
    let mut h = fleet(settings);
    let cut = t0() + secs(25);
    heartbeat(
        &mut h,
        t0() + secs(100),
        |_| Duration::ZERO,
        &[("s1-2", cut), ("s2-2", cut)],
    );
    assert_eq!(marked(&h, "s1-2"), vec![]);
    assert_eq!(marked(&h, "s2-2").len(), 1);
}

// ---- disruption_domain --------------------------------------------------------------------

/// Row "domains and zones": a domain by label groups nodes across cloud zones. Site 1 (two
/// nodes in zone a, two in b) dark: the site is fully disrupted, the zones only half down.
#[test]
fn a_domain_by_label_groups_nodes_across_zones() {
    let mut h = fleet(by_site(test_settings()));
    let cut = t0() + secs(25);
    let silent: Vec<(&str, Time)> = ["s1-1", "s1-2", "s1-3", "s1-4"]
        .iter()
        .map(|n| (*n, cut))
        .collect();
    heartbeat(&mut h, t0() + secs(100), |_| Duration::ZERO, &silent);
    let dump = h.dump();
    let keys: Vec<&str> = dump.zones.iter().map(|z| &*z.key).collect();
    assert_eq!(keys, ["example.com/site=s1", "example.com/site=s2"]);
    assert_eq!(
        domain_state(&h, "example.com/site=s1"),
        Some(ZoneState::FullDisruption)
    );
    assert_eq!(
        domain_state(&h, "example.com/site=s2"),
        Some(ZoneState::Normal)
    );
    // Upstream (`evict`): a dark domain beside a healthy one is tainted at the normal rate.
    let tainted: Vec<String> = no_execute_writes(&h).into_iter().map(|(n, _)| n).collect();
    assert_eq!(tainted.len(), 4, "{tainted:?}");
    // By zone (the default), the same outage is two half-down zones.
    let mut h = fleet(test_settings());
    heartbeat(&mut h, t0() + secs(100), |_| Duration::ZERO, &silent);
    assert_eq!(h.zone_state("r", "a"), Some(ZoneState::Normal));
}

/// Nodes without the domain label fall back to their zone key; a pool may name its own label.
#[test]
fn nodes_without_the_domain_label_fall_back_to_their_zone_and_a_pool_names_its_own() {
    let mut racks = pool("racks", "s2");
    racks.disruption_domain = Some(vec!["example.com/rack".to_string()]);
    let settings = Settings {
        pools: vec![racks],
        ..by_site(test_settings())
    };
    let mut h = fleet(settings);
    h.put_node(node("plain").zone("r", "c").ready(True, t0(), t0()).build());
    let mut racked = h.nodes[&n("s2-1")].clone();
    racked.labels.push((n("example.com/rack"), n("r7")));
    h.put_node(racked);
    h.run_for(secs(6));
    let dump = h.dump();
    let mut keys: Vec<String> = dump.zones.iter().map(|z| z.key.to_string()).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            // s2-2..4: in the racks pool without a rack label: their zones.
            "example.com/rack=r7".to_string(),
            "example.com/site=s1".to_string(),
            "r:\x00:a".to_string(),
            "r:\x00:b".to_string(),
            "r:\x00:c".to_string(),
        ]
    );
}

/// A reload that sets `disruption_domain` moves every node into its domain at once.
#[test]
fn a_reload_moves_the_nodes_into_their_domains() {
    let mut h = fleet(test_settings());
    h.run_for(secs(1));
    h.apply_settings(by_site(test_settings()));
    let dump = h.dump();
    let keys: Vec<(&str, usize)> = dump.zones.iter().map(|z| (&*z.key, z.size)).collect();
    assert_eq!(
        keys,
        [("example.com/site=s1", 4), ("example.com/site=s2", 4)]
    );
}
