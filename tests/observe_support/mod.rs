//! A cluster fed to the real controllers, and a `DaemonSnapshot` of it with every section filled,
//! for the dump and metrics tests.

use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use node_lifecycled::config::{Config, DumpFormat};
use node_lifecycled::controller::{Controllers, Input, Settings};
use node_lifecycled::model::{
    ConditionStatus, ConditionText, Name, Node, NodeCondition, NodeConditionType, Pod, PodKey,
    Taint, TaintEffect, Toleration, TolerationOperator, labels, taint_keys,
};
use node_lifecycled::observe::{
    ActionCount, BuildInfo, ClientSnapshot, DaemonSnapshot, HealthTimings, LeaderSnapshot,
    LoopSnapshot, LoopStats, ReflectorSnapshot, RequestCount, api_request_histogram,
};
use node_lifecycled::time::Time;

pub fn n(s: &str) -> Name {
    Rc::from(s)
}

pub fn t0() -> Time {
    Time::parse_rfc3339("2026-11-22T10:00:00Z").unwrap()
}

pub fn before(t: Time, d: Duration) -> Time {
    Time::from_unix_millis(t.as_unix_millis() - d.as_millis() as u64)
}

pub fn node(name: &str, region: &str, zone: &str, ready: ConditionStatus, now: Time) -> Node {
    let mut taints = Vec::new();
    if ready != ConditionStatus::True {
        taints.push(Taint {
            key: n(taint_keys::NOT_READY),
            value: n(""),
            effect: TaintEffect::NoExecute,
            time_added: Some(now),
        });
    }
    Node {
        name: n(name),
        uid: n(&format!("uid-{name}")),
        resource_version: n("1"),
        creation_timestamp: before(now, Duration::from_secs(3600)),
        labels: vec![(n(labels::REGION), n(region)), (n(labels::ZONE), n(zone))].into(),
        taints,
        unschedulable: false,
        conditions: vec![NodeCondition {
            kind: NodeConditionType::Ready,
            status: ready,
            last_heartbeat_time: Some(now),
            last_transition_time: Some(now),
            text: ConditionText::new(None, None),
        }],
        other_conditions: Vec::new(),
        autonomy: Default::default(),
        maintenance: Default::default(),
        writers: Default::default(),
    }
}

/// Tolerates `not-ready:NoExecute` for `seconds`: evicted that long after the taint is seen.
pub fn pod(name: &str, node: &str, seconds: i64) -> Pod {
    Pod {
        key: PodKey {
            namespace: n("default"),
            name: n(name),
        },
        uid: n(&format!("uid-{name}")),
        resource_version: n("1"),
        node_name: Some(n(node)),
        ready: Some(ConditionStatus::True),
        tolerations: Rc::from(vec![Toleration {
            key: n(taint_keys::NOT_READY),
            operator: TolerationOperator::Exists,
            value: n(""),
            effect: Some(TaintEffect::NoExecute),
            toleration_seconds: Some(seconds),
        }]),
        deleting: false,
        daemonset_owned: false,
        disruption_target: false,
        creation_timestamp: None,
    }
}

pub struct Cluster {
    pub controllers: Controllers,
    pub now: Time,
}

/// Zone `r1/a`: 3 Ready nodes and `a-sick` not Ready with 30 pods tolerating the taint for
/// 100..130 s. Zone `r1/b`: `outage` nodes, all not Ready.
pub fn cluster(taint_based_eviction: bool, outage: usize) -> Cluster {
    let now = t0();
    let settings = Settings {
        taint_based_eviction,
        ..Settings::default()
    };
    let mut controllers = Controllers::new(settings, now);
    for i in 0..3 {
        let node = node(&format!("a-{i}"), "r1", "a", ConditionStatus::True, now);
        controllers.handle(Input::NodeUpsert(node), now);
    }
    let sick = node("a-sick", "r1", "a", ConditionStatus::False, now);
    controllers.handle(Input::NodeUpsert(sick), now);
    for i in 0..outage {
        let node = node(
            &format!("b-{i:05}-a-rather-long-node-name.compute.internal"),
            "r1",
            "b",
            ConditionStatus::Unknown,
            now,
        );
        controllers.handle(Input::NodeUpsert(node), now);
    }
    for i in 0..30 {
        let pod = pod(&format!("web-{i:02}"), "a-sick", 100 + i);
        controllers.handle(Input::PodUpsert(pod), now);
    }
    controllers.handle(Input::InitialSyncDone, now);
    let later = now + Duration::from_secs(1);
    controllers.handle(Input::Tick, later);
    Cluster {
        controllers,
        now: later,
    }
}

pub fn snapshot(cluster: &Cluster, format: DumpFormat) -> DaemonSnapshot {
    let now = cluster.now;
    let (controller, evictions) = cluster.controllers.dump(now);
    let pod_deletion_duration = cluster
        .controllers
        .eviction()
        .map(|e| e.metrics.pod_deletion_duration.clone());
    let mut health_timings = HealthTimings::default();
    health_timings
        .update_all_nodes_health
        .observe(Duration::from_millis(12));
    let config = Config {
        dump_format: format,
        metrics_address: Some("127.0.0.1:10259".parse().unwrap()),
        log_format: node_lifecycled::config::LogFormat::Text,
        control_socket: None,
        ..Config::default()
    };
    DaemonSnapshot {
        now,
        build: BuildInfo::current(
            before(t0(), Duration::from_secs(90)),
            Duration::from_secs(91),
        ),
        config_path: PathBuf::from("/etc/node-lifecycled/config.toml"),
        config,
        status: "running: leader".to_string(),
        leadership: LeaderSnapshot {
            enabled: true,
            identity: "host-1_abc123".to_string(),
            holder: Some("host-1_abc123".to_string()),
            is_leader: true,
            renew_age: Some(Duration::from_millis(1500)),
        },
        reflectors: ["nodes", "leases", "pods"]
            .iter()
            .enumerate()
            .map(|(i, r)| ReflectorSnapshot {
                resource: r.to_string(),
                synced: true,
                resource_version: Some(format!("{}", 1000 + i)),
                last_event_age: Some(Duration::from_millis(250)),
                reconnects: i as u64,
                relists: 1,
                objects: 10 * (i + 1),
                // The pods watch has been down for 75 s; the others follow the server.
                down_for: (*r == "pods").then(|| Duration::from_secs(75)),
            })
            .collect(),
        controller,
        evictions,
        pod_deletion_duration,
        health_timings,
        client: ClientSnapshot {
            requests: vec![
                RequestCount {
                    verb: "GET".to_string(),
                    code: "200".to_string(),
                    count: 42,
                },
                RequestCount {
                    verb: "PATCH".to_string(),
                    code: "409".to_string(),
                    count: 2,
                },
                RequestCount {
                    verb: "PUT".to_string(),
                    code: "timeout".to_string(),
                    count: 1,
                },
            ],
            request_durations: vec![("GET".to_string(), {
                let mut h = api_request_histogram();
                h.observe(Duration::from_millis(20));
                h.observe(Duration::from_millis(300));
                h
            })],
            throttle_wait: Duration::from_millis(2500),
            dry_run_actions: vec![ActionCount {
                kind: "PatchNodeTaints".to_string(),
                count: 3,
            }],
        },
        rss_bytes: Some(5 * 1048576),
        store: Default::default(),
        event_loop: LoopSnapshot {
            stats: LoopStats {
                wakeups: 100,
                io_events: 40,
                timers_fired: 60,
                stale_events: 0,
            },
            sources: 5,
            timers_pending: 3,
            next_timer_in: Some(Duration::from_millis(100)),
        },
        fencing: None,
        decisions: [("node-unknown", 2), ("taints", 5)].into_iter().collect(),
        pause: None,
        fence_agent_ok: Default::default(),
        shadow: None,
    }
}
