//! The differential tier: upstream's own controllers are the oracle. Each scenario runs twice on
//! fresh real API servers of the same release, with the same fleet, pods and scripted
//! kubelets: once with kube-controller-manager (only `node-lifecycle-controller` and
//! `taint-eviction-controller`, periods scaled down), once with node-lifecycled given the same
//! settings. Both write as user `node-lifecycled`; the server's audit log records every write
//! with the object it produced, and `decisions.rs` turns each run's writes into decisions (Ready
//! and its reason, taints, labels, pods NotReady, deletions, events) timed from the script's
//! start. Nothing expected is written by hand: upstream's run is the expectation.
//!
//! The rules (README, "Proven against upstream"): every decision of one side is made by the
//! other; ours is never later than upstream's by more than one pass (`node_monitor_period`,
//! plus half a second for two runs on two servers); earlier is allowed (upstream decides at
//! its next pass, ours at the evidence). A difference the README explains comes from one of our
//! beyond-upstream defaults: the scenario then runs a third time with that default turned off,
//! and that run has no difference at all.
//!
//! Each comparison is printed, and written to `$TMPDIR/node-lifecycled-differential/`.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::e2e_support::{Daemon, TempDir, Timing, config_text};
use crate::real_apiserver_support::audit::{self, DECISIONS_POLICY};
use crate::real_apiserver_support::decisions::{
    Compared, Decision, Pairing, compare, decisions, differences, largest_gaps, table,
};
use crate::real_apiserver_support::fleet::{
    FleetSpec, Kubelets, admin_client, create_fleet, create_running_pod_tolerating,
};
use crate::real_apiserver_support::upstream::ControllerManager;
use crate::real_apiserver_support::versions::{Kube, versions};
use crate::real_apiserver_support::{RealApiserver, ServerOptions};
use node_lifecycled::kube::PatchType;
use node_lifecycled::time::Time;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

/// The writer of both sides.
const USER: &str = "node-lifecycled";

/// Measurement slack beyond one pass: the two runs are on two servers, seconds apart.
const SLACK: Duration = Duration::from_millis(500);

/// What the test does at a point of the script.
#[derive(Clone, Debug)]
enum Step {
    /// These kubelets stop renewing and posting.
    Silence(&'static [&'static str]),
    /// These kubelets renew and post again.
    Revive(&'static [&'static str]),
    /// The node's kubelet reports condition (type, status, reason) from now on.
    Report(&'static str, &'static str, &'static str, &'static str),
    /// The admin adds a taint `key:effect` to the node.
    Taint(&'static str, &'static str, &'static str),
    /// The admin removes every taint with this key from the node.
    Untaint(&'static str, &'static str),
    /// The admin creates a node in a zone that never posts status (no kubelet).
    CreateSilentNode(&'static str, &'static str),
    /// The admin sets labels on a node.
    Label(&'static str, &'static [(&'static str, &'static str)]),
    /// The admin creates a running pod (name, node, tolerations).
    Pod(&'static str, &'static str, fn() -> Value),
    /// The admin (a maintenance controller) sets condition (type, status, reason) on these
    /// nodes' status.
    Condition(
        &'static [&'static str],
        &'static str,
        &'static str,
        &'static str,
    ),
}

/// A pod created before the controller starts: name, node, tolerations.
type PodSpec = (&'static str, &'static str, fn() -> Value);

struct Scenario {
    name: &'static str,
    zones: usize,
    per_zone: usize,
    /// Each kubelet renews at its own phase (real kubelets) instead of all together.
    spread_phases: bool,
    eviction_rate: f64,
    pods: &'static [PodSpec],
    script: &'static [(u64, Step)],
    /// How long after the script's start the decisions are read (ms).
    length_ms: u64,
    /// Decisions upstream must make, (object, what), so the scenario proves something.
    exercises: &'static [(&'static str, &'static str)],
    /// One of our beyond-upstream defaults that makes this scenario differ, and the config
    /// line that turns it off.
    beyond_upstream: Option<BeyondUpstream>,
    /// Nodes upstream may take in any order (judged in one pass, its lister's order is Go's map
    /// order), each with the pods bound to it: compared by the order of their NoExecute taints,
    /// not by name.
    interchangeable: &'static [(&'static str, &'static [&'static str])],
    /// Decisions only upstream may make, by a race of its own batches: (decision prefix, why).
    /// The prefix is of the decision (`taint+ …`) or of the object and the decision
    /// (`node/z1-n3 taint+ …`), so a race of one node excuses nothing of the others.
    upstream_races: &'static [(&'static str, &'static str)],
    /// Feature gates on for the server and kube-controller-manager (`Name=true`).
    feature_gates: &'static [&'static str],
}

struct BeyondUpstream {
    /// The README section that explains the difference.
    explained_in: &'static str,
    /// Config lines (top level) that turn the default off.
    turned_off: &'static str,
    /// Every difference it may make: the decisions of upstream's that ours leaves out, and
    /// those ours makes where upstream makes none.
    only_upstream: &'static [&'static str],
    only_ours: &'static [&'static str],
}

fn tolerate(key: &str, seconds: Option<i64>) -> Value {
    let mut t = json!({"key": key, "operator": "Exists", "effect": "NoExecute"});
    if let Some(s) = seconds {
        t["tolerationSeconds"] = json!(s);
    }
    t
}

const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const NOT_READY: &str = "node.kubernetes.io/not-ready";

fn none() -> Value {
    json!([])
}
fn unreachable_0s() -> Value {
    json!([tolerate(UNREACHABLE, Some(0))])
}
fn unreachable_3s() -> Value {
    json!([tolerate(UNREACHABLE, Some(3))])
}
fn unreachable_forever() -> Value {
    json!([tolerate(UNREACHABLE, None)])
}
fn both_forever() -> Value {
    json!([tolerate(UNREACHABLE, None), tolerate(NOT_READY, None)])
}
fn not_ready_2s() -> Value {
    json!([tolerate(NOT_READY, Some(2))])
}
fn drain_2s() -> Value {
    json!([tolerate("example.com/drain", Some(2))])
}
fn drain_8s() -> Value {
    json!([tolerate("example.com/drain", Some(8))])
}
fn drain_forever() -> Value {
    json!([tolerate("example.com/drain", None)])
}
fn two_taints_6s_and_2s() -> Value {
    json!([
        tolerate("example.com/slow", Some(6)),
        tolerate("example.com/fast", Some(2))
    ])
}

/// Upstream's health pass marks a node Unknown and queues it at once, but sets its zone's state
/// only when the pass ends; its 100 ms tainting pass can take the node in between, so nodes that
/// die together can be tainted (and their pods evicted) before the zone counts as partially
/// disrupted (rate 0 in a small cluster) or every zone as down. When every zone is down, the lift
/// then removes taints by the node list the pass read before the taint, and misses it; when the
/// last zone goes down a pass later (its nodes judged in the next pass, as on a busy machine),
/// the lift reads the tainted nodes and takes the raced taints off.
const RACE_BEFORE_THE_ZONE_STATE: &[(&str, &str)] = &[
    (
        "taint+ node.kubernetes.io/unreachable:NoExecute",
        "upstream's tainting pass took the node before its health pass set the zone's state",
    ),
    (
        "taint- node.kubernetes.io/unreachable:NoExecute",
        "upstream's lift, every zone down, took off the taint its race had added",
    ),
    (
        "deleted",
        "its pod went with the node upstream tainted before the zone's state was set",
    ),
    (
        "event TaintManagerEviction",
        "its pod went with the node upstream tainted before the zone's state was set",
    ),
];

/// The settings both sides run with: grace 5 s (Leases of 2 s renewed every 0.5 s), startup
/// grace 10 s, a 1 s pass, a small cluster (a partially disrupted zone stops tainting).
fn timing(eviction_rate: f64) -> Timing {
    Timing {
        grace: "5s",
        startup_grace: "10s",
        monitor_period: "1s",
        eviction_rate,
        secondary_rate: 0.01,
        large_cluster_size_threshold: 50,
        leader: None,
        ..Timing::default()
    }
}

fn now_time() -> Time {
    Time::from_unix_millis(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64,
    )
}

/// Which controller a run has.
#[derive(Clone, Copy)]
enum Side<'a> {
    Upstream,
    /// node-lifecycled, with these config lines added at the top level.
    Ours(&'a str),
}

fn set_taints(server: &RealApiserver, node: &str, edit: impl FnOnce(&mut Vec<Value>)) {
    let mut admin = admin_client(server);
    let current: Value = admin.get_json(&format!("/api/v1/nodes/{node}")).unwrap();
    let mut taints = current["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    edit(&mut taints);
    let body = json!({"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                      "spec": {"taints": taints}});
    admin
        .patch::<IgnoredAny>(
            &format!("/api/v1/nodes/{node}"),
            PatchType::Merge,
            body.to_string().as_bytes(),
        )
        .unwrap();
}

fn play(server: &RealApiserver, kubelets: &Kubelets, step: &Step) {
    match step {
        Step::Silence(nodes) => {
            let nodes: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
            kubelets.silence(&nodes);
        }
        Step::Revive(nodes) => nodes.iter().for_each(|n| kubelets.set_alive(n, true)),
        Step::Report(node, kind, status, reason) => kubelets.report(node, kind, status, reason),
        Step::Taint(node, key, effect) => set_taints(server, node, |t| {
            t.push(json!({"key": key, "effect": effect, "value": "test"}))
        }),
        Step::Untaint(node, key) => set_taints(server, node, |t| t.retain(|x| x["key"] != *key)),
        Step::CreateSilentNode(name, zone) => server.apply(&format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/os: linux, topology.kubernetes.io/region: r1, topology.kubernetes.io/zone: {zone}}}\n"
        )),
        Step::Label(node, labels) => {
            let labels: serde_json::Map<String, Value> = labels
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            admin_client(server)
                .patch::<IgnoredAny>(
                    &format!("/api/v1/nodes/{node}"),
                    PatchType::Merge,
                    json!({"metadata": {"labels": labels}}).to_string().as_bytes(),
                )
                .unwrap();
        }
        Step::Pod(name, node, tolerations) => create_running_pod_tolerating(server, name, node, tolerations()),
        Step::Condition(nodes, kind, status, reason) => {
            let mut admin = admin_client(server);
            for node in *nodes {
                let stamp = admin.now().to_rfc3339();
                let body = json!({"status": {"conditions": [{"type": kind, "status": status,
                    "reason": reason, "message": "set by the test's maintenance controller",
                    "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]}});
                admin
                    .patch::<IgnoredAny>(
                        &format!("/api/v1/nodes/{node}/status"),
                        PatchType::StrategicMerge,
                        body.to_string().as_bytes(),
                    )
                    .unwrap();
            }
        }
    }
}

/// Every node has its RegisteredNode event: the controller has seen the fleet.
fn registered(server: &RealApiserver, nodes: &[String]) -> bool {
    let events: Vec<String> = audit::read(server.audit_log())
        .into_iter()
        .filter(|r| r.user == USER && r.resource == "events" && r.verb == "create")
        .filter(|r| r.response["reason"] == "RegisteredNode")
        .map(|r| {
            let o = if r.response["involvedObject"].is_object() {
                &r.response["involvedObject"]
            } else {
                &r.response["regarding"]
            };
            o["name"].as_str().unwrap_or("").to_string()
        })
        .collect();
    nodes.iter().all(|n| events.contains(n))
}

/// One run of `scenario` with `side` as the controller: its decisions, from the script's start.
fn run(kube: Kube, scenario: &Scenario, side: Side) -> Option<Vec<Decision>> {
    let options = ServerOptions {
        audit: Some(DECISIONS_POLICY.to_string()),
        feature_gates: scenario
            .feature_gates
            .iter()
            .map(|g| g.to_string())
            .collect(),
    };
    let server = RealApiserver::start_with(kube, &options)?;
    let spec = FleetSpec {
        lease_duration_seconds: 2,
        spread_phases: scenario.spread_phases,
        ..FleetSpec::zones(scenario.zones, scenario.per_zone)
    };
    let kubelets = create_fleet(&server, &spec);
    for (name, node, tolerations) in scenario.pods {
        create_running_pod_tolerating(&server, name, node, tolerations());
    }
    let timing = timing(scenario.eviction_rate);
    let dir = TempDir::new(&format!("differential-{}", scenario.name));
    let mut upstream = None;
    let mut ours = None;
    match side {
        Side::Upstream => {
            upstream = Some(ControllerManager::start(
                &server,
                &timing,
                scenario.feature_gates,
                &dir,
            ))
        }
        Side::Ours(extra) => {
            let text = format!(
                "{extra}{}",
                config_text(Path::new(server.var("DAEMON_KUBECONFIG")), &timing)
            );
            ours = Some(Daemon::start(scenario.name, &dir, &text, &[]));
        }
    }
    let log = |upstream: &Option<ControllerManager>, ours: &Option<Daemon>| match (upstream, ours) {
        (Some(u), _) => u.log_text(),
        (_, Some(d)) => d.log(),
        _ => String::new(),
    };
    let names = spec.names();
    let seen_by = Instant::now() + Duration::from_secs(60);
    while !registered(&server, &names) {
        if let Some(u) = upstream.as_mut() {
            assert!(
                u.running(),
                "kube-controller-manager exited:\n{}",
                u.log_text()
            );
        }
        assert!(
            Instant::now() < seen_by,
            "{}: no RegisteredNode for every node within 60 s\n{}",
            scenario.name,
            log(&upstream, &ours)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Healthy for a while after registration, then the script starts right after a renewal
    // round: both runs cut their kubelets off at the same point of the renew interval.
    let begin = kubelets.round_after(Duration::from_secs(2), Duration::from_millis(150));
    std::thread::sleep(begin.saturating_duration_since(Instant::now()));
    let start = now_time();
    let started = Instant::now();
    for (at_ms, step) in scenario.script {
        let at = started + Duration::from_millis(*at_ms);
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        play(&server, &kubelets, step);
    }
    let end = started + Duration::from_millis(scenario.length_ms);
    std::thread::sleep(end.saturating_duration_since(Instant::now()));
    if let Some(u) = upstream.as_mut() {
        assert!(
            u.running(),
            "kube-controller-manager exited:\n{}",
            u.log_text()
        );
    }
    drop(upstream);
    drop(ours);
    drop(kubelets);
    Some(decisions(&audit::read(server.audit_log()), USER, start))
}

/// Renames the `interchangeable` nodes, and their pods, by the order of their NoExecute taints
/// (`zone-dark#1`, `#2`, …; nodes never tainted keep their names).
fn by_taint_order(decisions: &[Decision], interchangeable: &[(&str, &[&str])]) -> Vec<Decision> {
    if interchangeable.is_empty() {
        return decisions.to_vec();
    }
    let mut tainted: Vec<(i64, &str)> = interchangeable
        .iter()
        .filter_map(|(node, _)| {
            decisions
                .iter()
                .find(|d| {
                    d.object == format!("node/{node}")
                        && d.what.starts_with("taint+")
                        && d.what.ends_with(":NoExecute")
                })
                .map(|d| (d.at_ms, *node))
        })
        .collect();
    tainted.sort();
    let mut renames: Vec<(String, String)> = Vec::new();
    for (rank, (_, node)) in tainted.iter().enumerate() {
        let alias = format!("#{}", rank + 1);
        renames.push((format!("node/{node}"), format!("node/tainted{alias}")));
        let pods = interchangeable
            .iter()
            .find(|(n, _)| n == node)
            .map_or(&[][..], |(_, p)| *p);
        for pod in pods {
            renames.push((
                format!("pod/e2e/{pod}"),
                format!("pod/e2e/on-tainted{alias}"),
            ));
        }
    }
    decisions
        .iter()
        .map(|d| {
            let object = renames
                .iter()
                .find(|(from, _)| *from == d.object)
                .map_or_else(|| d.object.clone(), |(_, to)| to.clone());
            Decision {
                object,
                ..d.clone()
            }
        })
        .collect()
}

/// Writes the comparison where CI prints it from, and to the test's output.
fn report(kube: Kube, scenario: &Scenario, label: &str, compared: &[Compared]) {
    let (earlier, later) = largest_gaps(compared);
    let mut text = format!(
        "== {} on {} ({label}): {} decisions, ours at most {:.2} s earlier, {:.2} s later\n{}",
        scenario.name,
        kube.release(),
        compared.len(),
        earlier as f64 / 1000.0,
        later as f64 / 1000.0,
        table(compared)
    );
    for c in compared {
        if c.pairing == Pairing::OnlyOurs
            && let Some(beyond) = &scenario.beyond_upstream
            && label == "defaults"
            && beyond.only_ours.iter().any(|w| c.what.starts_with(w))
        {
            text.push_str(&format!(
                "explained: {} {} is made by our default ({}; off: `{}`)\n",
                c.object,
                c.what,
                beyond.explained_in,
                beyond.turned_off.trim()
            ));
        }
        if c.pairing != Pairing::OnlyUpstream {
            continue;
        }
        if let Some(why) = upstream_race(scenario, compared, c) {
            text.push_str(&format!(
                "explained: {} {} is upstream's race: {why}\n",
                c.object, c.what
            ));
        }
        if let Some(beyond) = &scenario.beyond_upstream
            && label == "defaults"
            && beyond.only_upstream.iter().any(|w| c.what.starts_with(w))
        {
            text.push_str(&format!(
                "explained: {} {} is left out by our default ({}; off: `{}`)\n",
                c.object,
                c.what,
                beyond.explained_in,
                beyond.turned_off.trim()
            ));
        }
    }
    eprintln!("{text}");
    let dir = std::env::temp_dir().join("node-lifecycled-differential");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join(format!("{}-{}-{label}.txt", kube.release(), scenario.name)),
        text,
    );
}

/// Runs `scenario` on both sides (three with a beyond-upstream default) and applies the rules.
fn differential(kube: Kube, scenario: &Scenario) {
    let Some(theirs) = run(kube, scenario, Side::Upstream) else {
        return;
    };
    for (object, what) in scenario.exercises {
        assert!(
            theirs
                .iter()
                .any(|d| d.object == *object && d.what.starts_with(what)),
            "{}: upstream did not make `{object} {what}`, which the scenario is about:\n{theirs:#?}",
            scenario.name
        );
    }
    let pass = Duration::from_secs(1);
    let Some(ours) = run(kube, scenario, Side::Ours("")) else {
        return;
    };
    let theirs = by_taint_order(&theirs, scenario.interchangeable);
    let ours = by_taint_order(&ours, scenario.interchangeable);
    let compared = compare(&theirs, &ours);
    report(kube, scenario, "defaults", &compared);
    // Upstream's races are explained differences: reported, never made by us.
    let diffs: Vec<&Compared> = differences(&compared, pass, SLACK)
        .into_iter()
        .filter(|c| upstream_race(scenario, &compared, c).is_none())
        .collect();
    match &scenario.beyond_upstream {
        None => assert!(
            diffs.is_empty(),
            "{}: {} differences from upstream:\n{}",
            scenario.name,
            diffs.len(),
            table(&compared)
        ),
        Some(beyond) => {
            let unexplained: Vec<&&Compared> = diffs
                .iter()
                .filter(|c| {
                    let (side, explained) = match c.pairing {
                        Pairing::OnlyUpstream => (true, beyond.only_upstream),
                        Pairing::OnlyOurs => (true, beyond.only_ours),
                        Pairing::Both { .. } => (false, &[][..]),
                    };
                    !(side && explained.iter().any(|w| c.what.starts_with(w)))
                })
                .collect();
            assert!(
                unexplained.is_empty(),
                "{}: differences not explained by {}:\n{}",
                scenario.name,
                beyond.explained_in,
                table(&compared)
            );
            let Some(plain) = run(kube, scenario, Side::Ours(beyond.turned_off)) else {
                return;
            };
            let plain = by_taint_order(&plain, scenario.interchangeable);
            let compared = compare(&theirs, &plain);
            report(kube, scenario, "default-off", &compared);
            let diffs: Vec<&Compared> = differences(&compared, pass, SLACK)
                .into_iter()
                .filter(|c| upstream_race(scenario, &compared, c).is_none())
                .collect();
            assert!(
                diffs.is_empty(),
                "{} with `{}`: {} differences from upstream:\n{}",
                scenario.name,
                beyond.turned_off.trim(),
                diffs.len(),
                table(&compared)
            );
        }
    }
}

// ---- the scenarios ---------------------------------------------------------------------------

/// TestMonitorNodeHealth (one node unreachable in a healthy zone) with TestTaintBasedEvictions'
/// tolerations: Ready=Unknown, both unreachable taints, its pods NotReady; the pod tolerating 0 s
/// goes at once, 3 s three seconds later, the ones tolerating forever or the admission's default
/// 300 s stay.
fn a_node_dies_in_a_healthy_zone(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "a_node_dies_in_a_healthy_zone",
            zones: 2,
            per_zone: 3,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[
                ("p-0s", "z1-n1", unreachable_0s),
                ("p-3s", "z1-n1", unreachable_3s),
                ("p-forever", "z1-n1", unreachable_forever),
                ("p-default", "z1-n1", none),
                ("p-elsewhere", "z2-n1", none),
            ],
            script: &[(0, Step::Silence(&["z1-n1"]))],
            length_ms: 16_000,
            exercises: &[
                ("node/z1-n1", "Ready=Unknown"),
                (
                    "node/z1-n1",
                    "taint+ node.kubernetes.io/unreachable:NoExecute",
                ),
                ("pod/e2e/p-0s", "deleted"),
                ("pod/e2e/p-3s", "deleted"),
            ],
            beyond_upstream: None,
            interchangeable: &[],
            upstream_races: &[],
            feature_gates: &[],
        },
    );
}

/// A kubelet silent for less than the grace period: nothing is decided.
fn a_silence_shorter_than_the_grace_changes_nothing(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "a_silence_shorter_than_the_grace_changes_nothing",
            zones: 2,
            per_zone: 2,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[("p-0s", "z1-n1", unreachable_0s)],
            script: &[
                (0, Step::Silence(&["z1-n1"])),
                (3000, Step::Revive(&["z1-n1"])),
            ],
            length_ms: 10_000,
            exercises: &[],
            beyond_upstream: None,
            interchangeable: &[],
            upstream_races: &[],
            feature_gates: &[],
        },
    );
}

/// A node that comes back after it was tainted: Ready again (its kubelet posts it), and the
/// controller takes both unreachable taints off.
fn a_node_that_comes_back_is_untainted(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "a_node_that_comes_back_is_untainted",
            zones: 2,
            per_zone: 3,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[("p-forever", "z1-n1", unreachable_forever)],
            script: &[
                (0, Step::Silence(&["z1-n1"])),
                (10_000, Step::Revive(&["z1-n1"])),
            ],
            length_ms: 15_000,
            exercises: &[
                (
                    "node/z1-n1",
                    "taint+ node.kubernetes.io/unreachable:NoExecute",
                ),
                (
                    "node/z1-n1",
                    "taint- node.kubernetes.io/unreachable:NoExecute",
                ),
            ],
            beyond_upstream: None,
            interchangeable: &[],
            upstream_races: &[],
            feature_gates: &[],
        },
    );
}

/// TestTaintsNodeByCondition and the not-ready NoExecute taint: a kubelet reports Ready=False;
/// not-ready NoSchedule and NoExecute, pods NotReady, the pod tolerating 2 s deleted.
fn a_kubelet_reporting_not_ready_is_tainted_not_ready(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "a_kubelet_reporting_not_ready_is_tainted_not_ready",
            zones: 2,
            per_zone: 2,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[
                ("p-2s", "z1-n1", not_ready_2s),
                ("p-forever", "z1-n1", both_forever),
            ],
            script: &[(
                0,
                Step::Report("z1-n1", "Ready", "False", "KubeletNotReady"),
            )],
            length_ms: 8_000,
            exercises: &[
                (
                    "node/z1-n1",
                    "taint+ node.kubernetes.io/not-ready:NoExecute",
                ),
                ("pod/e2e/p-2s", "deleted"),
            ],
            beyond_upstream: None,
            interchangeable: &[],
            upstream_races: &[],
            feature_gates: &[],
        },
    );
}

/// TestSwapUnreachableNotReadyTaints: a node tainted unreachable whose kubelet comes back
/// reporting Ready=False gets not-ready in place of unreachable.
fn unreachable_swapped_for_not_ready(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "unreachable_swapped_for_not_ready",
            zones: 2,
            per_zone: 3,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[("p-forever", "z1-n1", both_forever)],
            script: &[
                (0, Step::Silence(&["z1-n1"])),
                (
                    9_000,
                    Step::Report("z1-n1", "Ready", "False", "KubeletNotReady"),
                ),
                (9_000, Step::Revive(&["z1-n1"])),
            ],
            length_ms: 14_000,
            exercises: &[
                (
                    "node/z1-n1",
                    "taint+ node.kubernetes.io/unreachable:NoExecute",
                ),
                (
                    "node/z1-n1",
                    "taint+ node.kubernetes.io/not-ready:NoExecute",
                ),
            ],
            beyond_upstream: None,
            interchangeable: &[],
            upstream_races: &[],
            feature_gates: &[],
        },
    );
}

/// TestTaintsNodeByCondition: memory, disk and PID pressure give their NoSchedule taints, and
/// lose them when the pressure is gone.
fn pressure_conditions_taint_no_schedule(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "pressure_conditions_taint_no_schedule",
            zones: 1,
            per_zone: 2,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[],
            script: &[
                (
                    0,
                    Step::Report(
                        "z1-n1",
                        "MemoryPressure",
                        "True",
                        "KubeletHasInsufficientMemory",
                    ),
                ),
                (
                    2_000,
                    Step::Report("z1-n1", "DiskPressure", "True", "KubeletHasDiskPressure"),
                ),
                (
                    4_000,
                    Step::Report("z1-n1", "PIDPressure", "True", "KubeletHasInsufficientPID"),
                ),
                (
                    7_000,
                    Step::Report(
                        "z1-n1",
                        "MemoryPressure",
                        "False",
                        "KubeletHasSufficientMemory",
                    ),
                ),
                (
                    7_000,
                    Step::Report("z1-n1", "DiskPressure", "False", "KubeletHasNoDiskPressure"),
                ),
                (
                    7_000,
                    Step::Report("z1-n1", "PIDPressure", "False", "KubeletHasSufficientPID"),
                ),
            ],
            length_ms: 10_000,
            exercises: &[
                (
                    "node/z1-n1",
                    "taint+ node.kubernetes.io/memory-pressure:NoSchedule",
                ),
                (
                    "node/z1-n1",
                    "taint- node.kubernetes.io/pid-pressure:NoSchedule",
                ),
            ],
            beyond_upstream: None,
            interchangeable: &[],
            upstream_races: &[],
            feature_gates: &[],
        },
    );
}

/// A node registered by someone else that never posts status: Unknown with
/// NodeStatusNeverUpdated after the startup grace, and tainted.
fn a_node_that_never_posted_status(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "a_node_that_never_posted_status",
            zones: 2,
            per_zone: 2,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[],
            script: &[(0, Step::CreateSilentNode("z1-new", "z1"))],
            length_ms: 15_000,
            exercises: &[("node/z1-new", "Ready=Unknown (NodeStatusNeverUpdated)")],
            beyond_upstream: None,
            interchangeable: &[],
            upstream_races: &[],
            feature_gates: &[],
        },
    );
}

/// TestMonitorNodeHealth, a zone fully disrupted beside a healthy one: presumed dead and
/// tainted at the normal rate (here 0.5 nodes a second), in the order the nodes were judged.
fn a_whole_zone_dark_beside_a_healthy_one(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "a_whole_zone_dark_beside_a_healthy_one",
            zones: 2,
            per_zone: 3,
            spread_phases: false,
            eviction_rate: 0.5,
            pods: &[
                ("p1", "z1-n1", unreachable_0s),
                ("p2", "z1-n2", unreachable_0s),
                ("p3", "z1-n3", unreachable_0s),
            ],
            script: &[(0, Step::Silence(&["z1-n1", "z1-n2", "z1-n3"]))],
            length_ms: 16_000,
            exercises: &[
                (
                    "node/z1-n1",
                    "taint+ node.kubernetes.io/unreachable:NoExecute",
                ),
                (
                    "node/z1-n3",
                    "taint+ node.kubernetes.io/unreachable:NoExecute",
                ),
            ],
            beyond_upstream: None,
            interchangeable: &[("z1-n1", &["p1"]), ("z1-n2", &["p2"]), ("z1-n3", &["p3"])],
            upstream_races: &[],
            feature_gates: &[],
        },
    );
}

/// TestMonitorNodeHealth, every zone fully disrupted (the control plane cut off from its
/// nodes): Unknown and NoSchedule, pods NotReady, no NoExecute taint, nothing deleted.
fn every_zone_down_taints_nothing(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "every_zone_down_taints_nothing",
            zones: 2,
            per_zone: 2,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[
                ("p1", "z1-n1", unreachable_0s),
                ("p2", "z2-n1", unreachable_0s),
            ],
            script: &[(0, Step::Silence(&["z1-n1", "z1-n2", "z2-n1", "z2-n2"]))],
            length_ms: 12_000,
            exercises: &[("node/z1-n1", "Ready=Unknown")],
            beyond_upstream: None,
            interchangeable: &[],
            upstream_races: RACE_BEFORE_THE_ZONE_STATE,
            feature_gates: &[],
        },
    );
}

/// TestMonitorNodeHealth, a partially disrupted zone in a small cluster (three of four nodes
/// dying together): rate 0, no NoExecute taint.
fn a_partial_disruption_in_a_small_cluster_stops_tainting(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "a_partial_disruption_in_a_small_cluster_stops_tainting",
            zones: 2,
            per_zone: 4,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[("p1", "z1-n1", unreachable_0s)],
            script: &[(0, Step::Silence(&["z1-n1", "z1-n2", "z1-n3"]))],
            length_ms: 12_000,
            exercises: &[("node/z1-n3", "Ready=Unknown")],
            beyond_upstream: None,
            interchangeable: &[],
            upstream_races: RACE_BEFORE_THE_ZONE_STATE,
            feature_gates: &[],
        },
    );
}

/// The taint eviction controller and a user's NoExecute taint (upstream's integration test):
/// pods not tolerating it go at once, the one tolerating 2 s after 2 s; the taint removed at
/// 5 s saves the one tolerating 8 s.
fn a_users_no_execute_taint_evicts_what_does_not_tolerate_it(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "a_users_no_execute_taint_evicts_what_does_not_tolerate_it",
            zones: 1,
            per_zone: 2,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[
                ("p-none", "z1-n1", none),
                ("p-2s", "z1-n1", drain_2s),
                ("p-8s", "z1-n1", drain_8s),
                ("p-forever", "z1-n1", drain_forever),
            ],
            script: &[
                (0, Step::Taint("z1-n1", "example.com/drain", "NoExecute")),
                (5_000, Step::Untaint("z1-n1", "example.com/drain")),
            ],
            length_ms: 11_000,
            exercises: &[("pod/e2e/p-none", "deleted"), ("pod/e2e/p-2s", "deleted")],
            beyond_upstream: None,
            interchangeable: &[],
            upstream_races: &[],
            feature_gates: &[],
        },
    );
}

/// The taint eviction controller's minimum toleration time: a pod under two NoExecute taints
/// goes at the shorter of its two tolerations.
fn several_taints_evict_at_the_shortest_toleration(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "several_taints_evict_at_the_shortest_toleration",
            zones: 1,
            per_zone: 2,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[("p-two", "z1-n1", two_taints_6s_and_2s)],
            script: &[
                (0, Step::Taint("z1-n1", "example.com/slow", "NoExecute")),
                (0, Step::Taint("z1-n1", "example.com/fast", "NoExecute")),
            ],
            length_ms: 8_000,
            exercises: &[("pod/e2e/p-two", "deleted")],
            beyond_upstream: None,
            interchangeable: &[],
            upstream_races: &[],
            feature_gates: &[],
        },
    );
}

/// A pod bound to a node already tainted counts from its binding, not from the taint.
fn a_pod_bound_to_a_tainted_node_counts_from_its_binding(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "a_pod_bound_to_a_tainted_node_counts_from_its_binding",
            zones: 2,
            per_zone: 3,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[],
            script: &[
                (0, Step::Silence(&["z1-n1"])),
                (9_000, Step::Pod("p-late", "z1-n1", unreachable_3s)),
            ],
            length_ms: 15_000,
            exercises: &[("pod/e2e/p-late", "deleted")],
            beyond_upstream: None,
            interchangeable: &[],
            upstream_races: &[],
            feature_gates: &[],
        },
    );
}

/// TestReconcileNodeLabels: `beta.kubernetes.io/arch` follows `kubernetes.io/arch`.
fn the_beta_labels_follow_the_stable_ones(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "the_beta_labels_follow_the_stable_ones",
            zones: 1,
            per_zone: 2,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[],
            script: &[(
                0,
                Step::Label(
                    "z1-n1",
                    &[
                        ("kubernetes.io/arch", "arm64"),
                        ("beta.kubernetes.io/arch", "amd64"),
                    ],
                ),
            )],
            length_ms: 5_000,
            exercises: &[],
            beyond_upstream: None,
            interchangeable: &[],
            upstream_races: &[],
            feature_gates: &[],
        },
    );
}

/// Whether `c` is the race `what` names: its decision, or its object and decision, begin so.
fn races_with(c: &Compared, what: &str) -> bool {
    c.what.starts_with(what) || format!("{} {}", c.object, c.what).starts_with(what)
}

/// Why `c`, a decision upstream made alone, is one of the scenario's upstream races. A taint's
/// removal counts only when the taint it removes was upstream's alone too: a lift of a taint
/// we also added, missing on our side, is a difference.
fn upstream_race(scenario: &Scenario, compared: &[Compared], c: &Compared) -> Option<&'static str> {
    if c.pairing != Pairing::OnlyUpstream {
        return None;
    }
    if let Some(taint) = c.what.strip_prefix("taint- ") {
        let added = format!("taint+ {taint}");
        let raced_taint = compared.iter().any(|other| {
            other.object == c.object
                && other.what == added
                && other.pairing == Pairing::OnlyUpstream
        });
        if !raced_taint {
            return None;
        }
    }
    scenario
        .upstream_races
        .iter()
        .find(|(what, _)| races_with(c, what))
        .map(|(_, why)| *why)
}

/// kubernetes#24200: most of a zone cut off, its kubelets falling silent 1.5 s apart (as
/// kubelets renewing at their own phases of a longer interval do). Upstream's pass sees the
/// first two nodes alone and taints them before the zone counts as partially disrupted; with
/// `early_suspects` (our default) the nodes that missed two renewals count as not ready, and
/// nothing is tainted. With `early_suspects = false` we decide as upstream.
fn most_of_a_zone_cut_off_with_spread_heartbeats(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "most_of_a_zone_cut_off_with_spread_heartbeats",
            zones: 2,
            per_zone: 4,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[
                ("p1", "z1-n1", unreachable_0s),
                ("p2", "z1-n2", unreachable_0s),
                ("p3", "z1-n3", unreachable_0s),
            ],
            script: &[
                (0, Step::Silence(&["z1-n1"])),
                (1_500, Step::Silence(&["z1-n2"])),
                (3_000, Step::Silence(&["z1-n3"])),
            ],
            length_ms: 13_000,
            exercises: &[
                ("node/z1-n3", "Ready=Unknown"),
                (
                    "node/z1-n1",
                    "taint+ node.kubernetes.io/unreachable:NoExecute",
                ),
            ],
            beyond_upstream: Some(BeyondUpstream {
                explained_in: "README: Why run it instead, the zone seen whole (early_suspects)",
                turned_off: "early_suspects = false\n",
                only_upstream: &[
                    "taint+ node.kubernetes.io/unreachable:NoExecute",
                    "deleted",
                    "event TaintManagerEviction",
                ],
                only_ours: &[],
            }),
            interchangeable: &[],
            // The third node's verdict is the one that makes z1 partially disrupted: upstream
            // may taint it before its pass ends and sets the zone's rate (seen once in a CI-sized
            // run on a busy machine); with the zone seen at once, ours never does.
            upstream_races: &[
                (
                    "node/z1-n3 taint+ node.kubernetes.io/unreachable:NoExecute",
                    RACE_N3,
                ),
                ("pod/e2e/p3 event TaintManagerEviction", RACE_N3),
                ("pod/e2e/p3 deleted", RACE_N3),
            ],
            feature_gates: &[],
        },
    );
}

const RACE_N3: &str = "its tainting pass may run between z1-n3's verdict and the end of the health pass that makes z1 partially disrupted";

/// KEP-5683's planned maintenance (1.37, `NodeLifecycleConditions` gate on for the server and
/// kube-controller-manager): a maintenance controller marks three nodes of a five-node zone
/// `MaintenanceInProgress=True` and powers them off, and a fourth node fails for real. Upstream
/// gives the condition no meaning: four of five not ready is a partial disruption, and a small
/// cluster taints nothing, the real failure included. With `lifecycle_conditions` (our default)
/// the nodes under planned work leave the zone's counts: one of two is not a disruption, and the
/// real failure is tainted and its pod evicted. With `lifecycle_conditions = false` we decide as
/// upstream.
fn a_rack_in_planned_maintenance_beside_a_real_failure(kube: Kube) {
    differential(
        kube,
        &Scenario {
            name: "a_rack_in_planned_maintenance_beside_a_real_failure",
            zones: 2,
            per_zone: 5,
            spread_phases: false,
            eviction_rate: 10.0,
            pods: &[("p4", "z1-n4", unreachable_0s)],
            script: &[
                (
                    0,
                    Step::Condition(
                        &["z1-n1", "z1-n2", "z1-n3"],
                        "MaintenanceInProgress",
                        "True",
                        "FirmwareUpgrade",
                    ),
                ),
                (0, Step::Silence(&["z1-n1", "z1-n2", "z1-n3", "z1-n4"])),
            ],
            length_ms: 12_000,
            exercises: &[("node/z1-n4", "Ready=Unknown")],
            beyond_upstream: Some(BeyondUpstream {
                explained_in: "README: Others' taints and conditions (lifecycle_conditions)",
                turned_off: "lifecycle_conditions = false\n",
                only_upstream: &[],
                only_ours: &[
                    "taint+ node.kubernetes.io/unreachable:NoExecute",
                    "deleted",
                    "event TaintManagerEviction",
                ],
            }),
            interchangeable: &[],
            upstream_races: RACE_BEFORE_THE_ZONE_STATE,
            feature_gates: &["NodeLifecycleConditions=true"],
        },
    );
}

versions! {
    v1_37 => [
        a_node_dies_in_a_healthy_zone,
        a_silence_shorter_than_the_grace_changes_nothing,
        a_node_that_comes_back_is_untainted,
        a_kubelet_reporting_not_ready_is_tainted_not_ready,
        unreachable_swapped_for_not_ready,
        pressure_conditions_taint_no_schedule,
        a_node_that_never_posted_status,
        a_whole_zone_dark_beside_a_healthy_one,
        every_zone_down_taints_nothing,
        a_partial_disruption_in_a_small_cluster_stops_tainting,
        a_users_no_execute_taint_evicts_what_does_not_tolerate_it,
        several_taints_evict_at_the_shortest_toleration,
        a_pod_bound_to_a_tainted_node_counts_from_its_binding,
        the_beta_labels_follow_the_stable_ones,
        most_of_a_zone_cut_off_with_spread_heartbeats,
        a_rack_in_planned_maintenance_beside_a_real_failure,
    ],
}
