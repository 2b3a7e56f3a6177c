use std::rc::Rc;

use super::*;
use crate::time::Rate;

fn at(s: &str) -> Time {
    Time::parse_rfc3339(s).unwrap()
}

fn now() -> Time {
    at("2026-11-22T12:00:00Z")
}

fn zone(state: ZoneState, rate: Rate) -> ZoneDump {
    ZoneDump {
        key: Rc::from("eu:\0:a"),
        display: "eu/a".into(),
        state: Some(state),
        size: 60,
        unhealthy: 40,
        rate,
        tokens: 0,
        queue_len: 3,
        queue_head: None,
        evictions_total: 2,
        cooldown_until: None,
    }
}

fn node(ready: ConditionStatus, verdict: &'static str, taints: &[&str]) -> NodeFacts {
    NodeFacts {
        node: NodeDump {
            name: Rc::from("worker-3"),
            zone: "eu/a".into(),
            ready: Some(ready),
            probe_age: Duration::from_secs(45),
            grace: Duration::from_secs(40),
            taints: taints.iter().map(|t| t.to_string()).collect(),
            pending_deadline: None,
            verdict,
            excluded_from_disruption: false,
            planned_maintenance: false,
            legacy: None,
            pool: None,
            autonomous: false,
        },
        zone: Some(zone(
            ZoneState::PartialDisruption,
            Rate::from_f64(0.01).unwrap(),
        )),
        queued: None,
        pods: 4,
        evictions: 0,
        history: vec![Entry {
            at: at("2026-11-22T11:59:50Z"),
            text: "node worker-3 judged Unknown: …".into(),
        }],
    }
}

fn next_of(text: &str) -> &str {
    text.lines()
        .find_map(|l| l.strip_prefix("next: "))
        .expect("a next: line")
}

#[test]
fn explain_node_in_each_state_says_what_happens_next() {
    let mut healthy = node(ConditionStatus::True, "idle", &[]);
    healthy.node.probe_age = Duration::from_secs(5);
    healthy.node.pending_deadline = Some(now() + Duration::from_secs(35));
    let text = explain_node(&healthy, Acting::Yes, now());
    assert!(
        text.starts_with(
            "node worker-3: Ready True, last heard from 5s ago, grace 40s\n\
         zone: eu/a (PartialDisruption, 60 nodes, 40 not ready, rate 0.01/s)\n\
         taints: none\n\
         pods: 4 (0 with an eviction pending or running)\n"
        ),
        "{text}"
    );
    assert_eq!(
        next_of(&text),
        "healthy; judged Unknown at 2026-11-22T12:00:35Z (in 35s) unless heard from"
    );
    assert!(
        text.contains("recent decisions:\n  2026-11-22T11:59:50Z  node worker-3 judged Unknown")
    );

    let reading = node(ConditionStatus::True, "reading-lease", &[]);
    assert!(
        next_of(&explain_node(&reading, Acting::Yes, now())).contains("Lease is being read live")
    );
    let writing = node(ConditionStatus::True, "writing-status", &[]);
    assert!(
        next_of(&explain_node(&writing, Acting::Yes, now())).starts_with("being marked Unknown")
    );

    let mut queued = node(
        ConditionStatus::Unknown,
        "idle",
        &["node.kubernetes.io/unreachable:NoSchedule"],
    );
    queued.queued = Some(QueuedTaint {
        position: 1,
        eta: Some(now() + Duration::from_secs(7)),
        waits_for_suspects: false,
    });
    assert_eq!(
        next_of(&explain_node(&queued, Acting::Yes, now())),
        "NoExecute taint waits for the zone's token: 1 ahead of it, about 7s (at 2026-11-22T12:00:07Z)"
    );
    queued.queued = Some(QueuedTaint {
        position: 0,
        eta: None,
        waits_for_suspects: false,
    });
    assert!(next_of(&explain_node(&queued, Acting::Yes, now())).contains("tainting is stopped"));
    queued.queued = Some(QueuedTaint {
        position: 0,
        eta: Some(now()),
        waits_for_suspects: true,
    });
    assert!(
        next_of(&explain_node(&queued, Acting::Yes, now()))
            .contains("nodes of its zone are about to be judged")
    );

    let mut tainted = node(
        ConditionStatus::Unknown,
        "idle",
        &[
            "node.kubernetes.io/unreachable:NoSchedule",
            "node.kubernetes.io/unreachable:NoExecute",
        ],
    );
    tainted.evictions = 3;
    assert_eq!(
        next_of(&explain_node(&tainted, Acting::Yes, now())),
        "tainted node.kubernetes.io/unreachable:NoExecute: pods that do not tolerate it are \
         deleted (3 pending or running)"
    );
    let mut stopped = node(ConditionStatus::Unknown, "idle", &[]);
    stopped.zone = Some(zone(ZoneState::FullDisruption, Rate::NEVER));
    let text = explain_node(&stopped, Acting::Yes, now());
    assert!(text.contains("zone: eu/a (FullDisruption, 60 nodes, 40 not ready, tainting stopped)"));
    assert!(next_of(&text).contains("tainting is stopped in its zone"));
    assert_eq!(
        next_of(&explain_node(&stopped, Acting::Follower, now())),
        "this daemon is a follower: the leader decides"
    );
}

fn pod(eviction: PodEviction, taints: &[&str]) -> PodFacts {
    PodFacts {
        pod: "shop/web-1".into(),
        node: Some("worker-3".into()),
        node_ready: Some(ConditionStatus::Unknown),
        node_no_execute: taints.iter().map(|t| t.to_string()).collect(),
        ready: Some(ConditionStatus::False),
        deleting: false,
        eviction,
        history: Vec::new(),
    }
}

/// The edge and bare-metal policies show where an operator asks: the node's pool and edge autonomy,
/// and the zone's cooldown.
#[test]
fn explain_node_names_its_pool_autonomy_and_the_zones_cooldown() {
    let plain = explain_node(
        &node(ConditionStatus::True, "idle", &[]),
        Acting::Yes,
        now(),
    );
    assert!(!plain.contains("policy:"), "{plain}");
    assert!(!plain.contains("cooldown"), "{plain}");

    let mut edge = node(ConditionStatus::Unknown, "idle", &[]);
    edge.node.pool = Some(Rc::from("rack-7"));
    edge.node.autonomous = true;
    if let Some(z) = &mut edge.zone {
        z.cooldown_until = Some(now() + Duration::from_secs(90));
    }
    let text = explain_node(&edge, Acting::Yes, now());
    assert!(
        text.contains(
            "\npolicy: pool rack-7; edge autonomy (pods stay Ready; not-ready/unreachable \
             evictions wait for the autonomy duration)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("rate 0.01/s, no NoExecute taint before 2026-11-22T12:01:30Z (cooldown))"),
        "{text}"
    );
}

#[test]
fn explain_pod_in_each_state_says_when_it_goes() {
    let taint = ["node.kubernetes.io/unreachable:NoExecute"];
    let waiting = pod(
        PodEviction::Scheduled {
            since: at("2026-11-22T11:56:03Z"),
            fire_at: at("2026-11-22T12:01:03Z"),
        },
        &taint,
    );
    let text = explain_pod(&waiting, Acting::Yes, now());
    assert!(
        text.starts_with(
            "pod shop/web-1: Ready False, on node worker-3 (Ready Unknown)\n\
         node's NoExecute taints: node.kubernetes.io/unreachable:NoExecute\n"
        ),
        "{text}"
    );
    assert_eq!(
        next_of(&text),
        "deleted at 2026-11-22T12:01:03Z (in 1m3s) unless the taint goes: tolerationSeconds 300 \
         from 2026-11-22T11:56:03Z"
    );
    assert!(text.ends_with("recent decisions: none kept\n"));
    let running = pod(
        PodEviction::Running {
            fire_at: at("2026-11-22T11:59:59Z"),
            attempt: 2,
        },
        &taint,
    );
    assert_eq!(
        next_of(&explain_pod(&running, Acting::Yes, now())),
        "being deleted since 2026-11-22T11:59:59Z (attempt 2)"
    );
    assert_eq!(
        next_of(&explain_pod(
            &pod(PodEviction::None, &taint),
            Acting::Yes,
            now()
        )),
        "stays: it tolerates its node's NoExecute taints"
    );
    assert_eq!(
        next_of(&explain_pod(
            &pod(PodEviction::None, &[]),
            Acting::Yes,
            now()
        )),
        "nothing pending: its node has no NoExecute taint"
    );
    let mut deleting = pod(PodEviction::None, &taint);
    deleting.deleting = true;
    assert!(
        next_of(&explain_pod(&deleting, Acting::Yes, now())).starts_with("already being deleted")
    );
    assert!(next_of(&explain_pod(&deleting, Acting::NotSynced, now())).contains("not synced"));
}

/// A node in planned maintenance (KEP-5683's condition) says so on its pods line.
#[test]
fn explain_node_in_planned_maintenance_says_it_is_no_failure() {
    let mut down = node(ConditionStatus::Unknown, "idle", &[]);
    down.node.planned_maintenance = true;
    let text = explain_node(&down, Acting::Yes, now());
    assert!(
        text.contains(
            "pods: 4 (0 with an eviction pending or running); in planned maintenance \
             (MaintenanceInProgress=True): no failure of its zone, the brake or fencing\n"
        ),
        "{text}"
    );
}
