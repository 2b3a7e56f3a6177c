//! Scenarios of `node-lifecycled-sim run`: the TOML (every built-in parses; mistakes name the key
//! and line), the timeline and the expectations read from the simulator's write log, the daemon
//! config the run writes, and — once the daemon is wired — every built-in scenario played end to
//! end against the real `node-lifecycled` binary.

use std::path::PathBuf;
use std::time::Duration;

use node_lifecycled::config::Config;
use node_lifecycled::kube::Connection;
use node_lifecycled_sim::client::Api;
use node_lifecycled_sim::population::Population;
use node_lifecycled_sim::scenario::{
    self, BUILTIN, RunOptions, Scenario, daemon_config, evaluate, kubeconfig_yaml, zone_summary,
};
use node_lifecycled_sim::timeline::{Fact, FactKind, FactReader, Timeline};

use crate::plays::play_builtin;
use node_lifecycled_sim::{Identity, Resource, SimConfig, SimServer, Verb, WriteRecord};
use serde_json::json;

#[test]
fn every_builtin_scenario_parses_names_real_nodes_and_fits_in_a_minute() {
    assert_eq!(BUILTIN[0].0, "default");
    for name in [
        "node-failure",
        "zone-outage",
        "control-plane-partition",
        "flapping-node",
        "rolling-reboot",
    ] {
        assert!(scenario::builtin(name).is_some(), "{name} missing");
    }
    for (name, text) in BUILTIN {
        let s = Scenario::parse(text, &format!("builtin:{name}")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.name, *name);
        assert!(!s.description.is_empty(), "{name}: no description");
        assert!(s.duration < Duration::from_secs(60), "{name}: too long");
        assert!(!s.steps.is_empty() && !s.expects.is_empty(), "{name}");
        assert!(
            s.steps.iter().all(|st| st.at < s.duration),
            "{name}: a step after the end"
        );
        assert!(
            s.expects
                .iter()
                .all(|e| e.by.is_none_or(|by| by <= s.duration)),
            "{name}: an expectation judged after the end"
        );
    }
}

#[test]
fn mistakes_in_a_scenario_file_name_the_key_and_the_line() {
    let cases = [
        (
            "duration = \"5s\"\n\n[[step]]\nat = \"1s\"\nstop_heartbeat = [\"z1-n001\"]\nwait = true\n",
            "x.toml:6: wait: unknown key",
        ),
        (
            "duration = \"5s\"\n[cluster]\nnodes = 4\nregions = 2\n",
            "x.toml:4: regions: unknown key",
        ),
        (
            "duration = \"5s\"\nincumbent = true\n[[shadow_expect]]\nclass = \"alike\"\n",
            "x.toml:3: shadow_expect.class: one of same, earlier, later, only_ours, only_theirs",
        ),
        (
            "duration = \"5s\"\n[[shadow_expect]]\nclass = \"same\"\n",
            "x.toml:2: shadow_expect needs incumbent = true",
        ),
        (
            "duration = \"5 s\"\n",
            "x.toml:1: duration: invalid duration",
        ),
        (
            "duration = \"5s\"\n[[step]]\nat = \"1s\"\nstop_heartbeat = [\"z7-n001\"]\n",
            "x.toml:2: stop_heartbeat: \"z7-n001\" matches no node",
        ),
        (
            "duration = \"5s\"\n[[step]]\nat = \"1s\"\nstop_heartbeat = [\"z1-n001\"]\ndrop_watches = true\n",
            "x.toml:2: one action per step, this one has stop_heartbeat and drop_watches",
        ),
        (
            "duration = \"5s\"\n[[step]]\nat = \"1s\"\nreboot = [\"z1-n001\"]\n",
            "x.toml:2: reboot needs down",
        ),
        (
            "duration = \"5s\"\n[[step]]\nat = \"1s\"\nadd_taint = \"k:Sometimes\"\nnodes = [\"*\"]\n",
            "x.toml:2: add_taint: \"k:Sometimes\" must be",
        ),
        (
            "duration = \"5s\"\n\n\n[[expect]]\nnodes = [\"*\"]\nready = \"Unknown\"\ndeleted = true\n",
            "x.toml:4: one check per [[expect]]",
        ),
        (
            "duration = \"5s\"\n[[expect]]\nnodes = [\"*\"]\ndeleted = true\n",
            "x.toml:2: not_ready and deleted are about pods",
        ),
        (
            "duration = \"5s\"\n[[expect]]\npods_on = [\"*\"]\nkind = \"batch\"\ndeleted = true\n",
            "x.toml:2: kind: \"batch\" must be",
        ),
        (
            "duration = \"5s\"\n[[expect]]\nnodes = [\"*\"]\nready = \"Unknown\"\nnever = true\nat_most = 1\n",
            "x.toml:2: never, at_least, at_most: at most one",
        ),
    ];
    for (text, expected) in cases {
        let err = Scenario::parse(text, "x.toml")
            .map(|_| ())
            .expect_err(expected)
            .to_string();
        assert!(err.starts_with(expected), "got {err:?}, want {expected:?}…");
        assert!(!err.contains('\n'), "one line: {err:?}");
    }
}

#[test]
fn node_patterns_expand_to_zones_and_except_removes_nodes() {
    let s = Scenario::parse(
        "duration = \"9s\"\n[cluster]\nnodes = 6\nzones = 2\n\
         [[step]]\nat = \"2s\"\nstop_heartbeat = [\"z2-*\", \"z1-n001\"]\n\
         [[step]]\nat = \"1s\"\nnote = \"first\"\n\
         [[expect]]\nnodes = [\"*\"]\nexcept = [\"z2-*\"]\nready = \"Unknown\"\nat_most = 1\nby = \"8s\"\n",
        "x.toml",
    )
    .unwrap();
    assert_eq!(s.steps[0].action, scenario_action_note("first"));
    let scenario::Action::StopHeartbeat(nodes) = &s.steps[1].action else {
        panic!("{:?}", s.steps[1]);
    };
    assert_eq!(nodes, &["z2-n001", "z2-n002", "z2-n003", "z1-n001"]);
    assert_eq!(
        s.expects[0].subject,
        scenario::Subject::Nodes(vec!["z1-n001".into(), "z1-n002".into(), "z1-n003".into()])
    );
    assert_eq!(s.expects[0].quantity, scenario::Quantity::AtMost(1));
}

fn scenario_action_note(text: &str) -> scenario::Action {
    scenario::Action::Note(text.to_string())
}

const DAEMON_TOKEN: &str = "daemon-token";

/// The writes a node lifecycle controller makes when node z1-n001 dies, in the shapes the
/// executor sends them (strategic-merge PATCHes with preconditions, a graceful DELETE with a UID
/// precondition, core/v1 events, a leader Lease), plus a refused write and kubelet noise.
fn stand_in_daemon_writes(sim: &node_lifecycled_sim::SimHandle) {
    let api = Api::with_token(sim.url(), DAEMON_TOKEN);
    let cluster = sim.cluster();
    let now = cluster.now().to_rfc3339();
    api.post(
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
        &json!({"metadata": {"name": "node-lifecycled"},
                "spec": {"holderIdentity": "cp-1", "leaseDurationSeconds": 15}}),
    );
    let mut lease = api
        .get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/node-lifecycled")
        .body;
    lease["spec"]["renewTime"] = json!(cluster.now().to_rfc3339_micros());
    assert_eq!(
        api.put(
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/node-lifecycled",
            &lease
        )
        .code,
        200
    );
    let node = api.get("/api/v1/nodes/z1-n001").body;
    let rv = node["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let uid = node["metadata"]["uid"].as_str().unwrap().to_string();
    let unknown = |t: &str| {
        json!({"type": t, "status": "Unknown", "reason": "NodeStatusUnknown",
                                   "message": "Kubelet stopped posting node status.",
                                   "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let reply = api.strategic(
        "/api/v1/nodes/z1-n001/status",
        &json!({"metadata": {"resourceVersion": rv, "uid": uid},
                "status": {"conditions": [unknown("MemoryPressure"), unknown("Ready")]}}),
    );
    assert_eq!(reply.code, 200, "{}", reply.body);
    let stale = api.strategic(
        "/api/v1/nodes/z1-n001",
        &json!({"metadata": {"resourceVersion": rv}, "spec": {"taints": []}}),
    );
    assert_eq!(stale.code, 409);
    let rv = api.get("/api/v1/nodes/z1-n001").body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let reply = api.strategic(
        "/api/v1/nodes/z1-n001",
        &json!({"metadata": {"resourceVersion": rv}, "spec": {"taints": [
            {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": now},
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": now},
        ]}}),
    );
    assert_eq!(reply.code, 200, "{}", reply.body);
    api.post(
        "/api/v1/namespaces/default/events",
        &json!({"metadata": {"name": "z1-n001.1", "namespace": "default"},
                "involvedObject": {"kind": "Node", "apiVersion": "v1", "name": "z1-n001"},
                "reason": "NodeNotReady", "message": "Node z1-n001 status is now: NodeNotReady",
                "type": "Normal", "source": {"component": "node-controller"}}),
    );
    for pod in ["web-0", "web-1"] {
        let p = api
            .get(&format!("/api/v1/namespaces/default/pods/{pod}"))
            .body;
        let uid = p["metadata"]["uid"].as_str().unwrap();
        let path = format!("/api/v1/namespaces/default/pods/{pod}/status");
        let r = api.strategic(
            &path,
            &json!({"metadata": {"uid": uid}, "status": {"conditions": [
                {"type": "Ready", "status": "False", "lastTransitionTime": now}]}}),
        );
        assert_eq!(r.code, 200, "{}", r.body);
    }
    // Taint eviction of web-0 (the DaemonSet pod tolerates forever).
    let p = api.get("/api/v1/namespaces/default/pods/web-0").body;
    let uid = p["metadata"]["uid"].as_str().unwrap();
    api.strategic(
        "/api/v1/namespaces/default/pods/web-0/status",
        &json!({"metadata": {"uid": uid}, "status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint", "lastTransitionTime": now}]}}),
    );
    let r = api.delete(
        "/api/v1/namespaces/default/pods/web-0",
        Some(&json!({"preconditions": {"uid": uid}})),
    );
    assert_eq!(r.code, 200, "{}", r.body);
    // The kubelet of another node heartbeats meanwhile: direct writes, not the daemon's.
    cluster.renew_lease("z1-n002", cluster.now()).unwrap();
    // The node comes back: the daemon drops both taints.
    let rv = api.get("/api/v1/nodes/z1-n001").body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let reply = api.strategic(
        "/api/v1/nodes/z1-n001",
        &json!({"metadata": {"resourceVersion": rv}, "spec": {"taints": []}}),
    );
    assert_eq!(reply.code, 200);
}

fn small_cluster() -> (node_lifecycled_sim::SimHandle, Population) {
    let sim = SimServer::start(SimConfig {
        log_direct_writes: true,
        ..SimConfig::default()
    })
    .unwrap();
    let population = Population {
        nodes: 4,
        zones: 2,
        pods_per_node: 2,
        ..Population::default()
    };
    population.populate(&sim.cluster()).unwrap();
    (sim, population)
}

#[test]
fn the_timeline_reads_the_daemons_writes_and_nothing_else() {
    let (sim, population) = small_cluster();
    let start = sim.cluster().elapsed();
    stand_in_daemon_writes(&sim);
    let mut reader = FactReader::new(Some(DAEMON_TOKEN), start);
    let facts = reader.read(&sim.writes());
    let kinds: Vec<&FactKind> = facts.iter().map(|f| &f.kind).collect();
    let s = String::from;
    assert_eq!(
        kinds,
        [
            &FactKind::LeaderLease {
                lease: s("kube-system/node-lifecycled"),
                holder: None
            },
            &FactKind::NodeReady {
                node: s("z1-n001"),
                status: s("Unknown"),
                reason: s("NodeStatusUnknown")
            },
            &FactKind::Failed {
                what: s("patch nodes z1-n001"),
                code: 409,
                message: s(
                    "Operation cannot be fulfilled on nodes \"z1-n001\": the object has been modified; please apply your changes to the latest version and try again"
                )
            },
            &FactKind::TaintAdded {
                node: s("z1-n001"),
                taint: s("node.kubernetes.io/unreachable:NoSchedule")
            },
            &FactKind::TaintAdded {
                node: s("z1-n001"),
                taint: s("node.kubernetes.io/unreachable:NoExecute")
            },
            &FactKind::Event {
                reason: s("NodeNotReady"),
                object: s("z1-n001")
            },
            &FactKind::PodNotReady {
                pod: s("default/web-0")
            },
            &FactKind::PodNotReady {
                pod: s("default/web-1")
            },
            &FactKind::PodDisruptionTarget {
                pod: s("default/web-0")
            },
            &FactKind::PodDeleted {
                pod: s("default/web-0"),
                detail: s("grace 30s")
            },
            &FactKind::TaintRemoved {
                node: s("z1-n001"),
                taint: s("node.kubernetes.io/unreachable:NoSchedule")
            },
            &FactKind::TaintRemoved {
                node: s("z1-n001"),
                taint: s("node.kubernetes.io/unreachable:NoExecute")
            },
        ],
        "lease renewals and the kubelet's direct writes are not the daemon's news"
    );
    assert!(facts.windows(2).all(|w| w[0].t <= w[1].t));
    assert!(
        reader.read(&sim.writes()).is_empty(),
        "records are read once"
    );
    assert_eq!(reader.controller_taints()["z1-n001"], Vec::<String>::new());

    // Rendered on a paced clock (10 ms a fact): the stand-in's writes are as far apart as the
    // machine makes them, and on a busy one the two pods' NotReady came more than the
    // renderer's 500 ms grouping window apart. The windows are tested on their own below.
    let paced: Vec<Fact> = facts
        .iter()
        .enumerate()
        .map(|(i, f)| Fact {
            t: Duration::from_millis(10 * i as u64),
            kind: f.kind.clone(),
        })
        .collect();
    let lines = Timeline::render(&paced);
    let text = lines.join("\n");
    for expected in [
        "leader lease kube-system/node-lifecycled taken",
        "node z1-n001 Ready=Unknown (NodeStatusUnknown)",
        "✗ 409 patch nodes z1-n001 conflict (stale resourceVersion)",
        "taint z1-n001 +node.kubernetes.io/unreachable:NoSchedule",
        "taint z1-n001 +node.kubernetes.io/unreachable:NoExecute",
        "event NodeNotReady z1-n001",
        "pod default/web-0, default/web-1 NotReady",
        "evict default/web-0 (DisruptionTarget)",
        "pod default/web-0 deleted (grace 30s)",
        "taint z1-n001 -node.kubernetes.io/unreachable:NoExecute",
    ] {
        assert!(text.contains(expected), "{expected:?} not in\n{text}");
    }
    assert!(lines.iter().all(|l| l.starts_with("t=")), "{text}");

    let summary = zone_summary(&facts, &population.node_names(), &population.pods());
    let z1 = summary.lines().find(|l| l.starts_with("z1 ")).unwrap();
    let numbers: Vec<&str> = z1.split_whitespace().collect();
    // zone nodes Unknown NotReady NoExecute+ NoExecute- podsNotReady podsDeleted
    assert_eq!(
        numbers,
        ["z1", "2", "1", "0", "1", "1", "2", "1"],
        "{summary}"
    );
    assert!(summary.contains("1 writes refused"), "{summary}");
}

#[test]
fn expectations_are_judged_against_the_facts_with_their_windows_and_quantities() {
    let (sim, population) = small_cluster();
    let start = sim.cluster().elapsed();
    stand_in_daemon_writes(&sim);
    let mut reader = FactReader::new(Some(DAEMON_TOKEN), start);
    let facts = reader.read(&sim.writes());
    let s = Scenario::parse(
        r#"
duration = "50s"
[cluster]
nodes = 4
zones = 2
pods_per_node = 2

[[expect]]
nodes = ["z1-n001"]
ready = "Unknown"
by = "30s"

[[expect]]
pods_on = ["z1-n001"]
kind = "web"
not_ready = true

[[expect]]
pods_on = ["z1-n001"]
deleted = true
at_least = 1

[[expect]]
pods_on = ["z1-n001"]
kind = "daemonset"
deleted = true
never = true

[[expect]]
nodes = ["z1-n001"]
untaint = "node.kubernetes.io/unreachable:NoExecute"

[[expect]]
nodes = ["*"]
taint_at_end = "node.kubernetes.io/unreachable:NoExecute"
never = true

[[expect]]
nodes = ["z1-n001"]
event = "NodeNotReady"

# These two must fail: too early a window, and a node that was never Unknown.
[[expect]]
nodes = ["z1-n001"]
ready = "Unknown"
after = "40s"

[[expect]]
nodes = ["z1-n001", "z2-n001"]
ready = "Unknown"
"#,
        "judge.toml",
    )
    .unwrap();
    let outcomes = evaluate(
        &s.expects,
        &facts,
        &population.pods(),
        reader.controller_taints(),
    );
    let held: Vec<bool> = outcomes.iter().map(|o| o.held).collect();
    assert_eq!(
        held,
        [true, true, true, true, true, true, true, false, false],
        "{outcomes:#?}"
    );
    assert_eq!(
        outcomes[2].to_string(),
        format!(
            "✓ at least 1 of 3 pods on z1-n001 deleted — seen: 1 of 3 at {:.1}s: default/web-0",
            facts
                .iter()
                .find(|f| matches!(f.kind, FactKind::PodDeleted { .. }))
                .unwrap()
                .t
                .as_secs_f64()
        )
    );
    assert!(
        outcomes[8].seen.starts_with("1 of 2") && outcomes[8].seen.ends_with("missing z2-n001"),
        "{}",
        outcomes[8].seen
    );
    assert_eq!(outcomes[8].line, s.expects[8].line);
}

#[test]
fn a_put_of_node_status_reads_as_the_ready_change_it_made() {
    let record = WriteRecord {
        seq: 7,
        elapsed: Duration::from_millis(52_140),
        wall: node_lifecycled::time::Time::from_unix_millis(1_700_000_052_140),
        identity: Identity {
            token: Some("d".into()),
            ..Identity::default()
        },
        verb: Verb::Update,
        resource: Resource::Nodes,
        subresource: Some("status".into()),
        namespace: None,
        name: "z1-n03".into(),
        code: 200,
        resource_version: Some(99),
        summary: r#"status.conditions[Ready].lastTransitionTime: "a" -> "b"; status.conditions[Ready].reason: "KubeletReady" -> "NodeStatusUnknown"; status.conditions[Ready].status: "True" -> "Unknown""#.into(),
    };
    let facts = FactReader::new(Some("d"), Duration::ZERO).read(&[record]);
    assert_eq!(
        Timeline::render(&facts),
        ["t=  52.1s node z1-n03 Ready=Unknown (NodeStatusUnknown)"]
    );
}

#[test]
fn bursts_of_the_same_change_are_one_line_and_steps_start_a_new_one() {
    let fact = |ms: u64, kind: FactKind| Fact {
        t: Duration::from_millis(ms),
        kind,
    };
    let registered = |n: usize| FactKind::Event {
        reason: "RegisteredNode".into(),
        object: format!("z1-n00{n}"),
    };
    let facts: Vec<Fact> = (1..=6)
        .map(|n| fact(300 + n as u64 * 10, registered(n)))
        .chain([
            fact(5_000, FactKind::Step("stop heartbeat z1-n003".into())),
            fact(5_100, registered(7)),
        ])
        .collect();
    assert_eq!(
        Timeline::render(&facts),
        [
            "t=   0.3s event RegisteredNode z1-n001, z1-n002, z1-n003, z1-n004 (+2 more)",
            "t=   5.0s ▶ stop heartbeat z1-n003",
            "t=   5.1s event RegisteredNode z1-n007",
        ]
    );
    // Incremental use prints a group only once it can no longer grow: events trickle (at the
    // daemon's event rate), so their group waits for a 1 s gap; a younger group waits behind it.
    let mut timeline = Timeline::default();
    let taint = fact(
        700,
        FactKind::TaintAdded {
            node: "z1-n001".into(),
            taint: "node.kubernetes.io/unreachable:NoExecute".into(),
        },
    );
    for f in [fact(0, registered(1)), fact(600, registered(2)), taint] {
        assert!(timeline.push(&f).is_empty());
    }
    assert!(timeline.push(&fact(1_200, registered(3))).is_empty());
    assert!(timeline.flush(Duration::from_millis(2_100)).is_empty());
    assert_eq!(
        timeline.flush(Duration::from_millis(2_300)),
        [
            "t=   0.0s event RegisteredNode z1-n001, z1-n002, z1-n003",
            "t=   0.7s taint z1-n001 +node.kubernetes.io/unreachable:NoExecute",
        ]
    );
}

#[test]
fn the_daemon_config_layers_demo_scenario_and_user_settings_and_connects_to_the_simulator() {
    let dir = std::env::temp_dir().join(format!("sim-scenarios-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_yaml(sim.url(), "t0ken")).unwrap();
    let connection = Connection::from_kubeconfig(&kubeconfig, None, false).unwrap();
    assert_eq!(connection.base_url(), sim.url());

    let scenario: toml::Table = toml::from_str(
        "node_monitor_grace_period = \"7s\"\nnode_eviction_rate = 2.0\n[api]\nqps = 50.0\n",
    )
    .unwrap();
    let user: toml::Table = toml::from_str(
        "node_eviction_rate = 0.5\n[api]\nin_cluster = true\nburst = 60\n[leader_election]\nenabled = false\n",
    )
    .unwrap();
    let table = daemon_config(&scenario, Some(&user), &kubeconfig).unwrap();
    let path = dir.join("config.toml");
    std::fs::write(&path, toml::to_string(&table).unwrap()).unwrap();
    let config = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        config.controller.node_monitor_grace_period,
        Duration::from_secs(7)
    );
    assert_eq!(
        config.controller.node_monitor_period,
        Duration::from_secs(1),
        "demo"
    );
    assert_eq!(
        config.controller.node_eviction_rate.as_f64(),
        0.5,
        "user over scenario"
    );
    assert_eq!(config.api.qps.as_f64(), 50.0);
    assert_eq!(config.api.burst, 60);
    assert!(!config.leader_election.enabled);
    assert_eq!(
        config.api.source,
        node_lifecycled::config::ApiSource::Kubeconfig {
            path: kubeconfig.clone(),
            context: None
        },
        "the simulator's connection replaces the user's"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn quick_scenario() -> Scenario {
    Scenario::parse(
        "duration = \"5s\"\n[cluster]\nnodes = 2\nzones = 1\npods_per_node = 1\n\
         [[step]]\nat = \"1s\"\nstop_heartbeat = [\"z1-n001\"]\n\
         [[expect]]\nnodes = [\"z1-n001\"]\nready = \"Unknown\"\n",
        "quick.toml",
    )
    .unwrap()
}

#[test]
fn run_reports_a_daemon_that_exits_at_once_with_its_log() {
    let dir = std::env::temp_dir().join(format!("sim-scenarios-early-{}", std::process::id()));
    let options = RunOptions {
        daemon: PathBuf::from("/bin/false"),
        config: None,
        work_dir: Some(dir.clone()),
    };
    let mut out = Vec::new();
    let err = scenario::run(&quick_scenario(), &options, &mut out).unwrap_err();
    assert!(
        err.starts_with("node-lifecycled exited early (exit status: 1)"),
        "{err}"
    );
    let printed = String::from_utf8(out).unwrap();
    assert!(printed.contains("2 nodes in 1 zones, 4 pods"), "{printed}");
    assert!(dir.join("kubeconfig").is_file() && dir.join("config.toml").is_file());
    std::fs::remove_dir_all(&dir).unwrap();

    let missing = RunOptions {
        daemon: PathBuf::from("/nonexistent/node-lifecycled"),
        config: None,
        work_dir: None,
    };
    let err = scenario::run(&quick_scenario(), &missing, &mut Vec::new()).unwrap_err();
    assert!(
        err.starts_with("cannot start /nonexistent/node-lifecycled"),
        "{err}"
    );
}

#[test]
fn builtin_default_scenario_holds_against_the_daemon() {
    play_builtin("default");
}

#[test]
fn builtin_node_failure_holds_against_the_daemon() {
    play_builtin("node-failure");
}

#[test]
fn builtin_zone_outage_holds_against_the_daemon() {
    play_builtin("zone-outage");
}

#[test]
fn builtin_control_plane_partition_holds_against_the_daemon() {
    play_builtin("control-plane-partition");
}

#[test]
fn builtin_flapping_node_holds_against_the_daemon() {
    play_builtin("flapping-node");
}

#[test]
fn builtin_rolling_reboot_holds_against_the_daemon() {
    play_builtin("rolling-reboot");
}

// ---- policies for edge and bare-metal fleets ---------------------------------------------------

#[test]
fn builtin_edge_autonomy_holds_against_the_daemon() {
    play_builtin("edge-autonomy");
}

#[test]
fn builtin_pools_holds_against_the_daemon() {
    play_builtin("pools");
}

#[test]
fn builtin_custom_condition_holds_against_the_daemon() {
    play_builtin("custom-condition");
}

#[test]
fn builtin_planned_maintenance_holds_against_the_daemon() {
    play_builtin("planned-maintenance");
}

#[test]
fn builtin_readiness_gates_holds_against_the_daemon() {
    play_builtin("readiness-gates");
}

#[test]
fn builtin_control_plane_recovery_holds_against_the_daemon() {
    play_builtin("control-plane-recovery");
}

#[test]
fn scenario_steps_label_and_annotate_nodes_and_name_mistakes() {
    let text = "duration = \"5s\"\n[[step]]\nat = \"1s\"\nlabel = \"example.com/rack=r7\"\nnodes = [\"z1-n001\"]\n\
                [[step]]\nat = \"1s\"\nannotate = \"apps.openyurt.io/binding=true\"\nnodes = [\"z1-*\"]\n";
    let s = Scenario::parse(text, "x.toml").unwrap();
    assert_eq!(
        s.steps[0].action,
        scenario::Action::SetMetadata {
            nodes: vec!["z1-n001".to_string()],
            annotation: false,
            key: "example.com/rack".to_string(),
            value: "r7".to_string(),
        }
    );
    assert!(matches!(
        &s.steps[1].action,
        scenario::Action::SetMetadata {
            annotation: true,
            ..
        }
    ));
    let bad =
        "duration = \"5s\"\n[[step]]\nat = \"1s\"\nlabel = \"no-value\"\nnodes = [\"z1-n001\"]\n";
    let err = Scenario::parse(bad, "x.toml").unwrap_err().to_string();
    assert_eq!(err, "x.toml:2: label: \"no-value\" must be key=value");
    let missing = "duration = \"5s\"\n[[step]]\nat = \"1s\"\nannotate = \"a=b\"\n";
    let err = Scenario::parse(missing, "x.toml").unwrap_err().to_string();
    assert_eq!(err, "x.toml:2: annotate needs nodes = [...]");
}

/// Fencing: a dead node is fenced once after `after`, gets the out-of-service taint, loses it when
/// back; then a control-plane partition (every node silent) fences nobody.
#[test]
fn builtin_fencing_holds_against_the_daemon() {
    play_builtin("fencing");
}

// ---- a brake on mass decisions, eviction timing per pool ---------------------------------------

#[test]
fn builtin_brake_holds_against_the_daemon() {
    play_builtin("brake");
}

#[test]
fn builtin_pool_fast_failover_holds_against_the_daemon() {
    play_builtin("pool-fast-failover");
}

// ---- partitions are not failures ----------------------------------------------------------------

#[test]
fn builtin_site_cut_off_holds_against_the_daemon() {
    play_builtin("site-cut-off");
}

#[test]
fn builtin_site_dark_hold_holds_against_the_daemon() {
    play_builtin("site-dark-hold");
}

/// Shadow mode beside the simulator's incumbent: a node dies the same for both, a dark zone is
/// only theirs by our hold, and the daemon writes nothing.
#[test]
fn builtin_switch_over_holds_against_the_daemon() {
    play_builtin("switch-over");
}

/// A node annotated for maintenance (empty, or a value that is no time) is not fenced until the
/// window ends; the node beside it without the annotation is.
#[test]
fn builtin_fencing_maintenance_holds_against_the_daemon() {
    play_builtin("fencing-maintenance");
}

/// A failing first step escalates to the power-off, the node is tainted, its pods go, it is powered
/// on and, once Ready, untainted.
#[test]
fn builtin_fencing_power_cycle_holds_against_the_daemon() {
    play_builtin("fencing-power-cycle");
}
