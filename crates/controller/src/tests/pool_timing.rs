//! Eviction timing per pool (`controller/pool_timing.rs`): a pool's `default_toleration_seconds`
//! stands in for the admission default of the pods that kept it,
//! never for a pod's own choice, and counts from the taint's `timeAdded` across a restart.

use super::harness::{cond, date, n, node, pod, secs, test_settings};
use super::lifecycle_with_eviction::{Cluster, with_tolerations};
use crate::decisions::Decision;
use crate::inputs::Input;
use crate::model::{
    ConditionStatus, NodeConditionType, Pod, Taint, TaintEffect, Toleration, TolerationOperator,
    taint_keys,
};
use crate::pool_timing::TimingSource;
use crate::pools::Pool;
use crate::settings::Settings;
use crate::time::Time;

fn t0() -> Time {
    date(2026, 11, 26, 10, 0, 0)
}

fn toleration(key: &str, seconds: Option<i64>) -> Toleration {
    Toleration {
        key: n(key),
        operator: TolerationOperator::Exists,
        value: n(""),
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: seconds,
    }
}

/// What admission gives a pod that chose nothing (`seconds`: the cluster's default).
fn admitted(name: &str, node: &str, seconds: i64) -> Pod {
    with_tolerations(
        pod(name, node),
        vec![
            toleration(taint_keys::NOT_READY, Some(seconds)),
            toleration(taint_keys::UNREACHABLE, Some(seconds)),
        ],
    )
}

/// A pod that chose: `unreachable` seconds, and 600 s for not-ready.
fn chose(name: &str, node: &str, unreachable: i64) -> Pod {
    with_tolerations(
        pod(name, node),
        vec![
            toleration(taint_keys::NOT_READY, Some(600)),
            toleration(taint_keys::UNREACHABLE, Some(unreachable)),
        ],
    )
}

fn edge_pool(seconds: Option<u64>) -> Pool {
    Pool {
        name: n("edge"),
        match_labels: vec![("example.com/site".into(), "edge".into())],
        match_expressions: vec![],
        node_monitor_grace_period: None,
        node_startup_grace_period: None,
        mark_pods_not_ready: None,
        node_eviction_rate: None,
        secondary_node_eviction_rate: None,
        max_unhealthy: None,
        default_toleration_seconds: seconds,
        disruption_domain: None,
        full_disruption: None,
        hold_max: None,
    }
}

/// `e1` (edge pool) and `c1` (no pool) become unreachable at `tainted_at` (the taint found on
/// the node at the initial sync, with its `timeAdded`), each with `pods`.
fn tainted_fleet(settings: Settings, tainted_at: Time, start: Time, pods: Vec<Pod>) -> Cluster {
    let mut c = Cluster::new(settings, start);
    for (name, edge) in [("e1", true), ("c1", false), ("ok", false)] {
        let mut b = node(name);
        if edge {
            b = b.label("example.com/site", "edge");
        }
        let mut built = if name == "ok" {
            b.ready(ConditionStatus::True, start, start).build()
        } else {
            b.ready(ConditionStatus::Unknown, tainted_at, tainted_at)
                .build()
        };
        if name != "ok" {
            built.taints.push(Taint {
                key: n(taint_keys::UNREACHABLE),
                value: n(""),
                effect: TaintEffect::NoExecute,
                time_added: Some(tainted_at),
            });
        }
        c.put_node(built);
    }
    for p in pods {
        c.put_pod(p);
    }
    c.feed(Input::InitialSyncDone);
    c
}

fn deleted_at(c: &Cluster, name: &str) -> Option<Time> {
    c.evicted
        .iter()
        .find(|(_, p)| &*p.name == name)
        .map(|(t, _)| *t)
}

/// Keeps `ok` heartbeating so that not every zone is down.
fn run(c: &mut Cluster, until: Time) {
    let mut t = c.now;
    while t < until {
        t = (t + secs(10)).min(until);
        c.run_until(t);
        let mut ok = c.nodes[&n("ok")].clone();
        ok.conditions = vec![cond(
            NodeConditionType::Ready,
            ConditionStatus::True,
            t,
            t0(),
        )];
        c.put_node(ok);
    }
}

/// A pool with `default_toleration_seconds = 30`: its pods that kept the admission default go
/// 30 s after the taint; a pod of the same node that chose 300 s for itself stays until then;
/// nodes in no pool keep upstream's 300 s.
#[test]
fn a_pools_default_toleration_stands_in_for_the_admission_default_only() {
    let settings = Settings {
        pools: vec![edge_pool(Some(30))],
        ..test_settings()
    };
    let pods = vec![
        admitted("edge-default", "e1", 300),
        chose("edge-own-300", "e1", 300),
        admitted("core-default", "c1", 300),
    ];
    let mut c = tainted_fleet(settings, t0(), t0(), pods);
    run(&mut c, t0() + secs(400));
    assert_eq!(deleted_at(&c, "edge-default"), Some(t0() + secs(30)));
    assert_eq!(deleted_at(&c, "edge-own-300"), Some(t0() + secs(300)));
    assert_eq!(deleted_at(&c, "core-default"), Some(t0() + secs(300)));
    // The deletion's evidence names the seconds it was judged with.
    let seconds: Vec<(String, Option<u64>)> = c
        .ctl
        .take_decisions()
        .into_iter()
        .filter_map(|d| match d {
            Decision::PodDeletion {
                pod,
                toleration_seconds,
                ..
            } => Some((pod.name.to_string(), toleration_seconds)),
            _ => None,
        })
        .collect();
    assert!(
        seconds.contains(&("edge-default".into(), Some(30))),
        "{seconds:?}"
    );
}

/// Row "pool timing vs a pod's own tolerations": a pod that chose shorter, longer or forever
/// keeps its choice on a pool that sets an hour; only the admitted pod waits the hour.
#[test]
fn pool_timing_vs_a_pods_own_tolerations_the_pods_choice_wins() {
    let settings = Settings {
        pools: vec![edge_pool(Some(3600))],
        ..test_settings()
    };
    let forever = with_tolerations(
        pod("forever", "e1"),
        vec![
            toleration(taint_keys::NOT_READY, None),
            toleration(taint_keys::UNREACHABLE, None),
        ],
    );
    let pods = vec![
        admitted("admitted", "e1", 300),
        chose("own-60", "e1", 60),
        forever,
        pod("no-toleration", "e1"),
    ];
    let mut c = tainted_fleet(settings, t0(), t0(), pods);
    run(&mut c, t0() + secs(4000));
    assert_eq!(deleted_at(&c, "no-toleration"), Some(t0()));
    assert_eq!(deleted_at(&c, "own-60"), Some(t0() + secs(60)));
    assert_eq!(deleted_at(&c, "admitted"), Some(t0() + secs(3600)));
    assert_eq!(deleted_at(&c, "forever"), None);
    let lc = c.ctl.eviction().unwrap();
    let e1 = c.ctl.store().node("e1").unwrap();
    let own = chose("x", "e1", 60);
    assert_eq!(lc.timing_source(e1, &own.tolerations), TimingSource::Own);
}

/// Row "pool timing vs a restart (timeAdded)": a daemon starting 20 s after the taint was
/// added gives the pool's pods what is left of their 30 s, not 30 s more.
#[test]
fn pool_timing_vs_a_restart_counts_from_the_taints_time_added() {
    let settings = Settings {
        pools: vec![edge_pool(Some(30))],
        ..test_settings()
    };
    let start = t0() + secs(20);
    let mut c = tainted_fleet(settings, t0(), start, vec![admitted("web", "e1", 300)]);
    run(&mut c, start + secs(60));
    // From `timeAdded` rounded up to the next second (`tolerations::countdown_start`).
    assert_eq!(deleted_at(&c, "web"), Some(t0() + secs(31)));
}

/// The global key applies to nodes in no pool (a pool's own value wins on its nodes), and
/// `admission_default_toleration_seconds` says what "the admission default" is on a cluster
/// whose API server was started with another one.
#[test]
fn the_global_default_and_a_configured_admission_default() {
    let settings = Settings {
        pools: vec![edge_pool(Some(30))],
        default_toleration_seconds: Some(90),
        admission_default_toleration_seconds: 120,
        ..test_settings()
    };
    let pods = vec![
        admitted("edge-120", "e1", 120),
        admitted("core-120", "c1", 120),
        admitted("core-300", "c1", 300),
    ];
    let mut c = tainted_fleet(settings, t0(), t0(), pods);
    run(&mut c, t0() + secs(400));
    assert_eq!(deleted_at(&c, "edge-120"), Some(t0() + secs(30)));
    assert_eq!(deleted_at(&c, "core-120"), Some(t0() + secs(90)));
    assert_eq!(
        deleted_at(&c, "core-300"),
        Some(t0() + secs(300)),
        "300 s is not this cluster's default: the pod chose it"
    );
}

/// Without the key, the admitted pods of every pool keep their 300 s (upstream).
#[test]
fn without_default_toleration_seconds_pods_keep_their_own() {
    let settings = Settings {
        pools: vec![edge_pool(None)],
        ..test_settings()
    };
    let mut c = tainted_fleet(settings, t0(), t0(), vec![admitted("web", "e1", 300)]);
    run(&mut c, t0() + secs(400));
    assert_eq!(deleted_at(&c, "web"), Some(t0() + secs(300)));
}
