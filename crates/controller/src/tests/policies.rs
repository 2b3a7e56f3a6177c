//! Policies for bare-metal fleets: pools, custom condition taints and the disruption cooldown,
//! each against the virtual clock (edge autonomy: `edge_autonomy.rs`). The node lifecycle alone
//! (`harness.rs` says why).

use std::time::Duration;

use super::harness::*;
use crate::Settings;
use crate::condition_taints::ConditionTaint;
use crate::model::ConditionStatus::{False, True};
use crate::model::TaintEffect::{NoExecute, NoSchedule};
use crate::model::{NodeConditionType, TaintEffect, taint_keys};
use crate::partitions::PodsNotReady;
use crate::pools::{LabelRequirement, Pool, SelectorOperator};
use crate::time::Rate;
use crate::time::Time;

pub(super) fn t0() -> Time {
    date(2024, 5, 1, 8, 0, 0)
}

pub(super) fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// The kubelets of `names` post status every 10 s until `until`; everything else stays silent.
pub(super) fn keep_posting(h: &mut Harness, names: &[&str], until: Time) {
    while h.now + secs(10) <= until {
        let t = h.now + secs(10);
        h.run_until(t);
        for name in names {
            let tr = h.nodes[*name]
                .ready()
                .and_then(|c| c.last_transition_time)
                .unwrap_or(t);
            h.set_conditions(name, vec![cond(NodeConditionType::Ready, True, t, tr)]);
        }
    }
    h.run_until(until);
}

pub(super) fn verdict_times(h: &Harness, name: &str) -> Vec<Time> {
    h.status_writes()
        .into_iter()
        .filter(|(_, n, _)| &**n == name)
        .map(|(t, _, _)| t)
        .collect()
}

// ---- pools ---------------------------------------------------------------------------------

fn flaky_rack(grace: Duration) -> Pool {
    Pool {
        name: n("flaky-rack"),
        match_labels: vec![("example.com/rack".into(), "r7".into())],
        match_expressions: vec![LabelRequirement {
            key: "node-role.kubernetes.io/control-plane".into(),
            operator: SelectorOperator::DoesNotExist,
            values: vec![],
        }],
        node_monitor_grace_period: Some(grace),
        node_startup_grace_period: None,
        mark_pods_not_ready: Some(PodsNotReady::Never),
        node_eviction_rate: None,
        secondary_node_eviction_rate: None,
        max_unhealthy: None,
        default_toleration_seconds: None,
        disruption_domain: None,
        full_disruption: None,
        hold_max: None,
    }
}

#[test]
fn a_pools_grace_period_decides_its_nodes_unknown_time_to_the_millisecond() {
    let settings = Settings {
        pools: vec![flaky_rack(secs(20) + ms(250))],
        ..test_settings()
    };
    let rack = |name: &str| {
        node(name)
            .zone("r", "a")
            .label("example.com/rack", "r7")
            .ready(True, t0(), t0())
    };
    let nodes = vec![
        rack("in-pool").build(),
        // The selector's DoesNotExist keeps the control plane out of the pool.
        rack("control-plane")
            .label("node-role.kubernetes.io/control-plane", "")
            .build(),
        node("no-pool")
            .zone("r", "a")
            .ready(True, t0(), t0())
            .build(),
        node("joins-later")
            .zone("r", "a")
            .ready(True, t0(), t0())
            .build(),
        node("alive").zone("r", "a").ready(True, t0(), t0()).build(),
    ];
    let pods = vec![pod("p-in-pool", "in-pool"), pod("p-no-pool", "no-pool")];
    let mut h = Harness::lifecycle_alone_started(settings, t0(), nodes, pods, vec![]);
    // At t0 + 5 s "joins-later" is labelled into the pool: its verdict moves earlier.
    h.run_until(t0() + secs(5));
    let mut relabelled = h.nodes["joins-later"].clone();
    relabelled.labels.push((n("example.com/rack"), n("r7")));
    h.put_node(relabelled);
    keep_posting(&mut h, &["alive"], t0() + secs(60));

    let pool_verdict = t0() + secs(20) + ms(251);
    assert_eq!(verdict_times(&h, "in-pool"), vec![pool_verdict]);
    assert_eq!(verdict_times(&h, "joins-later"), vec![pool_verdict]);
    assert_eq!(
        verdict_times(&h, "control-plane"),
        vec![t0() + secs(50) + ms(1)]
    );
    assert_eq!(verdict_times(&h, "no-pool"), vec![t0() + secs(50) + ms(1)]);
    // The pool opts out of pod marking; the global default still marks.
    assert!(h.pod_marks("p-in-pool").is_empty());
    assert_eq!(h.pod_marks("p-no-pool"), vec![t0() + secs(50) + ms(1)]);
    let dump = h.dump();
    let pool_of = |name: &str| {
        dump.nodes
            .iter()
            .find(|d| &*d.name == name)
            .and_then(|d| d.pool.as_deref().map(String::from))
    };
    assert_eq!(pool_of("in-pool").as_deref(), Some("flaky-rack"));
    assert_eq!(pool_of("no-pool"), None);
}

#[test]
fn a_zone_with_nodes_of_several_pools_is_tainted_at_its_most_cautious_rate() {
    let mut slow = flaky_rack(secs(50));
    slow.node_eviction_rate = Some(Rate::from_f64(0.1).unwrap());
    let settings = Settings {
        pools: vec![slow],
        node_eviction_rate: Rate::per_second(100_000),
        ..test_settings()
    };
    let mut nodes: Vec<_> = (0..6)
        .map(|i| {
            node(&format!("n{i}"))
                .zone("r", "a")
                .ready(True, t0(), t0())
                .build()
        })
        .collect();
    nodes[5].labels.push((n("example.com/rack"), n("r7")));
    let mut h = Harness::lifecycle_alone_started(settings, t0(), nodes, vec![], vec![]);
    // n0 and n1 fall silent; the rest (n5 of the slow pool among them) keep posting.
    keep_posting(&mut h, &["n2", "n3", "n4", "n5"], t0() + secs(70));
    let mut tainted: Vec<Time> = ["n0", "n1"]
        .iter()
        .flat_map(|n| h.taint_writes_with(n, taint_keys::UNREACHABLE, NoExecute))
        .collect();
    tainted.sort();
    assert_eq!(tainted.len(), 2, "{tainted:?}");
    // One token every 10 s (the slow pool's rate), not 100 000 per second.
    assert!(tainted[1] >= tainted[0] + secs(10), "{tainted:?}");
}

// ---- custom condition taints ---------------------------------------------------------------

fn kernel_deadlock(effect: TaintEffect) -> ConditionTaint {
    ConditionTaint {
        condition: n("KernelDeadlock"),
        status: True,
        key: n("example.com/kernel-deadlock"),
        value: n("npd"),
        effect,
    }
}

fn set_other_condition(
    h: &mut Harness,
    name: &str,
    kind: &str,
    status: crate::model::ConditionStatus,
) {
    let mut node = h.nodes[name].clone();
    node.other_conditions.retain(|(k, _)| &**k != kind);
    node.other_conditions.push((n(kind), status));
    h.put_node(node);
}

#[test]
fn a_custom_no_schedule_taint_follows_its_condition_at_once() {
    let settings = Settings {
        condition_taints: vec![kernel_deadlock(NoSchedule)],
        ..test_settings()
    };
    let nodes = vec![node("n1").zone("r", "a").ready(True, t0(), t0()).build()];
    let mut h = Harness::lifecycle_alone_started(settings, t0(), nodes, vec![], vec![]);
    h.run_until(t0() + secs(1));
    set_other_condition(&mut h, "n1", "KernelDeadlock", True);
    assert!(h.has_taint("n1", "example.com/kernel-deadlock", NoSchedule));
    let taint = h.nodes["n1"]
        .taints
        .iter()
        .find(|t| &*t.key == "example.com/kernel-deadlock");
    assert_eq!(taint.map(|t| &*t.value), Some("npd"));
    h.run_until(t0() + secs(2));
    set_other_condition(&mut h, "n1", "KernelDeadlock", False);
    assert!(!h.has_taint("n1", "example.com/kernel-deadlock", NoSchedule));
}

/// Ready nodes `names` in one zone, with the KernelDeadlock rule as a NoExecute taint, at
/// `rate` per zone (`None`: the test settings' own).
fn kernel_deadlock_fleet(names: &[&str], rate: Option<f64>) -> Harness {
    let mut settings = Settings {
        condition_taints: vec![kernel_deadlock(NoExecute)],
        ..test_settings()
    };
    if let Some(rate) = rate {
        settings.node_eviction_rate = Rate::from_f64(rate).unwrap();
    }
    let nodes: Vec<_> = names
        .iter()
        .map(|name| node(name).zone("r", "a").ready(True, t0(), t0()).build())
        .collect();
    Harness::lifecycle_alone_started(settings, t0(), nodes, vec![], vec![])
}

#[test]
fn a_custom_no_execute_taint_waits_for_its_zones_token() {
    let mut h = kernel_deadlock_fleet(&["n1", "n2", "n3", "n4"], Some(0.1));
    h.run_until(t0() + secs(20));
    let at = h.now;
    set_other_condition(&mut h, "n1", "KernelDeadlock", True);
    set_other_condition(&mut h, "n2", "KernelDeadlock", True);
    keep_posting(&mut h, &["n1", "n2", "n3", "n4"], at + secs(30));
    let key = "example.com/kernel-deadlock";
    let n1 = h.taint_writes_with("n1", key, NoExecute);
    let n2 = h.taint_writes_with("n2", key, NoExecute);
    // The zone's bucket was full: n1 at once; n2 one token (10 s at 0.1/s) later.
    assert_eq!(n1.first(), Some(&at));
    assert_eq!(n2.first(), Some(&(at + secs(10))));
    assert!(h.has_taint("n2", key, NoExecute));
    assert_eq!(h.dump().zones[0].evictions_total, 2);
    // The condition clears: the taint goes at once, no token needed.
    let cleared = h.now;
    set_other_condition(&mut h, "n2", "KernelDeadlock", False);
    assert!(!h.has_taint("n2", key, NoExecute));
    assert_eq!(h.now, cleared);
}

/// As upstream's `markNodeForTainting` does for its own NoExecute taints: a condition taint
/// taken off by hand while its condition still holds goes through the zone's queue again.
#[test]
fn a_custom_no_execute_taint_removed_by_hand_while_its_condition_holds_is_put_back() {
    let mut h = kernel_deadlock_fleet(&["n1", "n2"], Some(0.1));
    h.run_until(t0() + secs(20));
    set_other_condition(&mut h, "n1", "KernelDeadlock", True);
    let key = "example.com/kernel-deadlock";
    assert!(h.has_taint("n1", key, NoExecute));
    let tainted = h.now;
    keep_posting(&mut h, &["n1", "n2"], tainted + secs(5));
    let mut by_hand = h.nodes["n1"].clone();
    by_hand.taints.retain(|t| &*t.key != key);
    h.put_node(by_hand);
    let removed = h.now;
    assert!(!h.has_taint("n1", key, NoExecute));
    keep_posting(&mut h, &["n1", "n2"], removed + secs(30));
    let writes = h.taint_writes_with("n1", key, NoExecute);
    assert!(
        writes.iter().any(|&at| at > removed) && h.has_taint("n1", key, NoExecute),
        "not put back: taint writes at {writes:?}, removed at {removed:?}"
    );
}

#[test]
fn a_custom_no_execute_taint_waits_while_the_whole_cluster_is_down() {
    let mut h = kernel_deadlock_fleet(&["n1", "n2"], None);
    // Everything goes silent: all zones fully disrupted, nothing is tainted.
    h.run_until(t0() + secs(55));
    assert_eq!(
        h.zone_state("r", "a"),
        Some(crate::ZoneState::FullDisruption)
    );
    let mut n1 = h.nodes["n1"].clone();
    n1.other_conditions.push((n("KernelDeadlock"), True));
    h.put_node(n1);
    h.run_until(t0() + secs(58));
    assert!(!h.has_taint("n1", "example.com/kernel-deadlock", NoExecute));
}

// ---- disruption cooldown -------------------------------------------------------------------

fn cooldown_settings(cooldown: Duration) -> Settings {
    Settings {
        disruption_cooldown: cooldown,
        ..test_settings()
    }
}

/// Every node of the only zone falls silent at t0 (the control plane lost them all), so the
/// cluster enters the all-zones-down stop at t0 + 50 s; at t0 + 100 s `back` reports in.
fn outage(cooldown: Duration) -> Harness {
    let nodes: Vec<_> = ["back", "late", "silent"]
        .iter()
        .map(|name| node(name).zone("r", "a").ready(True, t0(), t0()).build())
        .collect();
    let mut h =
        Harness::lifecycle_alone_started(cooldown_settings(cooldown), t0(), nodes, vec![], vec![]);
    h.run_until(t0() + secs(100));
    assert_eq!(
        h.zone_state("r", "a"),
        Some(crate::ZoneState::FullDisruption)
    );
    assert!(!h.has_taint("silent", taint_keys::UNREACHABLE, NoExecute));
    let t = h.now;
    h.set_conditions("back", vec![cond(NodeConditionType::Ready, True, t, t)]);
    h
}

#[test]
fn without_a_cooldown_the_silent_nodes_are_tainted_as_soon_as_the_stop_ends() {
    let mut h = outage(Duration::ZERO);
    keep_posting(&mut h, &["back"], t0() + secs(200));
    // Upstream (kubernetes#24200): the nodes still Unknown are queued on the first pass after
    // the stop and tainted at once, before their kubelets had a chance to catch up.
    let tainted = h.taint_writes_with("silent", taint_keys::UNREACHABLE, NoExecute);
    let first = *tainted.first().expect("tainted");
    assert!(
        first >= t0() + secs(100) && first < t0() + secs(100) + ms(100),
        "{first}"
    );
}

#[test]
fn no_taint_during_the_cooldown_and_nodes_that_report_in_are_never_tainted() {
    let mut h = outage(secs(120));
    // "late" reports in at t0 + 190 s, inside the cooldown (t0 + 100 s to t0 + 220 s).
    keep_posting(&mut h, &["back"], t0() + secs(190));
    let t = h.now;
    h.set_conditions("late", vec![cond(NodeConditionType::Ready, True, t, t)]);
    keep_posting(&mut h, &["back", "late"], t0() + secs(260));
    // Both stayed Unknown through the cooldown (declared at t0 + 50 s, before the stop)...
    assert_eq!(verdict_times(&h, "silent"), vec![t0() + secs(50) + ms(1)]);
    assert_eq!(verdict_times(&h, "late"), vec![t0() + secs(50) + ms(1)]);
    // ...but no NoExecute taint before the cooldown ends, exactly at t0 + 220 s, and "late",
    // back meanwhile, never.
    let silent = h.taint_writes_with("silent", taint_keys::UNREACHABLE, NoExecute);
    assert_eq!(silent.first(), Some(&(t0() + secs(220))));
    assert!(
        h.taint_writes_with("late", taint_keys::UNREACHABLE, NoExecute)
            .is_empty()
    );
}

#[test]
fn a_zone_leaving_full_disruption_cools_down_while_other_zones_taint() {
    let settings = Settings {
        disruption_cooldown: secs(120),
        ..test_settings()
    };
    let nodes = vec![
        node("a1").zone("r", "a").ready(True, t0(), t0()).build(),
        node("a2").zone("r", "a").ready(False, t0(), t0()).build(),
        node("a3").zone("r", "a").ready(True, t0(), t0()).build(),
        // Left out of the zone's counts, but tainted through its queue like any node.
        node("a4")
            .zone("r", "a")
            .label("node.kubernetes.io/exclude-disruption", "")
            .ready(True, t0(), t0())
            .build(),
        node("b1").zone("r", "b").ready(True, t0(), t0()).build(),
        node("b2").zone("r", "b").ready(True, t0(), t0()).build(),
    ];
    let mut h = Harness::lifecycle_alone_started(settings, t0(), nodes, vec![], vec![]);
    // a1 and b2 are silent from the start; a3 posts until t0 + 40 s: zone a (a2 reports
    // Ready=False) is fully down from t0 + 90 s.
    keep_posting(&mut h, &["a3", "a4", "b1"], t0() + secs(40));
    keep_posting(&mut h, &["a4", "b1"], t0() + secs(95));
    assert_eq!(
        h.zone_state("r", "a"),
        Some(crate::ZoneState::FullDisruption)
    );
    // a2 comes back at t0 + 95 s: zone a leaves full disruption and cools down until
    // t0 + 215 s. a4's last status was at t0 + 90 s: it goes Unknown at t0 + 140 s.
    let back = h.now;
    h.set_conditions("a2", vec![cond(NodeConditionType::Ready, True, back, back)]);
    keep_posting(&mut h, &["a2", "b1"], t0() + secs(300));
    assert_eq!(verdict_times(&h, "a4"), vec![t0() + secs(140) + ms(1)]);
    let a4 = h.taint_writes_with("a4", taint_keys::UNREACHABLE, NoExecute);
    assert_eq!(a4.first(), Some(&(back + secs(120))));
    // b2, in a zone that never went down, was tainted as soon as it went Unknown.
    let b2 = h.taint_writes_with("b2", taint_keys::UNREACHABLE, NoExecute);
    assert_eq!(b2.first(), Some(&(t0() + secs(50) + ms(1))));
}

// ---- reload ----------------------------------------------------------------------------------

#[test]
fn a_reload_applies_pools_and_removes_the_taints_of_dropped_condition_rules() {
    let settings = Settings {
        condition_taints: vec![kernel_deadlock(NoSchedule)],
        ..test_settings()
    };
    let nodes = vec![
        node("rack")
            .zone("r", "a")
            .label("example.com/rack", "r7")
            .ready(True, t0(), t0())
            .build(),
        node("alive").zone("r", "a").ready(True, t0(), t0()).build(),
    ];
    let mut h = Harness::lifecycle_alone_started(settings, t0(), nodes, vec![], vec![]);
    set_other_condition(&mut h, "rack", "KernelDeadlock", True);
    assert!(h.has_taint("rack", "example.com/kernel-deadlock", NoSchedule));
    h.run_until(t0() + secs(10));
    // SIGHUP: the rule is gone, a pool with a 35 s grace appears.
    let reloaded = Settings {
        pools: vec![flaky_rack(secs(35))],
        ..test_settings()
    };
    h.apply_settings(reloaded);
    assert!(!h.has_taint("rack", "example.com/kernel-deadlock", NoSchedule));
    keep_posting(&mut h, &["alive"], t0() + secs(60));
    assert_eq!(verdict_times(&h, "rack"), vec![t0() + secs(35) + ms(1)]);
}

// ---- autonomy through both machines ----------------------------------------------------------
