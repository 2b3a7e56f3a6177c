//! Shadow mode switched on and off with SIGHUP, beside the simulator's incumbent
//! (`node_lifecycled_sim::incumbent`): the daemon writes nothing, pairs its decisions with the
//! incumbent's writes, and answers `shadow report` only while shadowing.

use std::path::Path;
use std::time::Duration;

use crate::e2e_support::{Daemon, Kubelets, Sim, Timing, config_text, holds_for, wait_until};
use node_lifecycled_sim::incumbent::{Incumbent, IncumbentConfig};
use serde_json::{Value, json};

const TOKEN: &str = "shadow-a";

fn ask(socket: &Path, request: &str) -> String {
    node_lifecycled::runtime::control_socket::ask(socket, request, Duration::from_secs(5))
        .unwrap_or_else(|e| format!("error: {e}"))
}

fn report(socket: &Path) -> Value {
    serde_json::from_str(&ask(socket, "shadow report --format json")).unwrap_or(Value::Null)
}

#[test]
fn shadow_mode_switched_on_by_a_reload_pairs_the_incumbents_writes_and_writes_nothing() {
    let sim = Sim::start("shadow", &[TOKEN]);
    let nodes: Vec<String> = ["n1", "n2", "n3"].iter().map(|s| s.to_string()).collect();
    for n in &nodes {
        sim.add_node(n, Some("z1"));
    }
    sim.add_pod("plain", "n1", json!([]));
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    let timing = Timing {
        dry_run: true,
        ..Timing::default()
    };
    let kubeconfig = sim.kubeconfig(TOKEN);
    let socket = sim.dir.path().join("control.sock");
    let top = |shadow: bool| {
        format!(
            "shadow = {shadow}\nshadow_file = \"{}\"\ncontrol_socket = \"{}\"\n{}",
            sim.dir.path().join("shadow.json").display(),
            socket.display(),
            config_text(&kubeconfig, &timing)
        )
    };
    let mut d = Daemon::start("shadow", &sim.dir, &top(false), &[]);
    d.wait_log("acting (leader election disabled)", Duration::from_secs(15));
    assert!(
        ask(&socket, "shadow report").starts_with("error: shadow mode is off"),
        "{}",
        ask(&socket, "shadow report")
    );

    d.rewrite_config(&top(true));
    d.signal("HUP");
    d.wait_log("shadow mode is on", Duration::from_secs(5));
    wait_until(
        "the report answers after the relist",
        Duration::from_secs(10),
        || report(&socket)["pending"] == 0,
        || d.log(),
    );
    let config = node_lifecycled::config::Config::load(&d.config).unwrap();
    let _incumbent = Incumbent::start(
        &sim.cluster(),
        IncumbentConfig {
            period: config.controller.node_monitor_period,
            grace: config.controller.node_monitor_grace_period,
            eviction_rate: 10.0,
            large_cluster_size_threshold: 50,
            unhealthy_zone_threshold: 0.55,
        },
    )
    .unwrap();
    kubelets.set_alive("n1", false);
    wait_until(
        "Unknown, its taints and the eviction paired",
        Duration::from_secs(30),
        || {
            let r = report(&socket);
            let same = |kind: &str| r["counts"]["same"][kind].as_u64().unwrap_or(0);
            r["pending"] == 0
                && same("node_unknown") == 1
                && same("taint_added") == 2
                && same("pod_deletion") == 1
        },
        || format!("{}\n{}", ask(&socket, "shadow report"), d.log()),
    );
    let r = report(&socket);
    assert_eq!(
        r["divergences"],
        json!([]),
        "{}",
        ask(&socket, "shadow report")
    );
    holds_for(
        "the daemon wrote nothing",
        Duration::from_millis(500),
        || {
            sim.handle
                .writes()
                .iter()
                .all(|w| w.identity.token.as_deref() != Some(TOKEN))
        },
        || d.log(),
    );
    let status = ask(&socket, "status");
    assert!(status.contains("shadow"), "{status}");

    d.rewrite_config(&top(false));
    d.signal("HUP");
    d.wait_log("shadow mode is off", Duration::from_secs(5));
    assert!(ask(&socket, "shadow report").starts_with("error: shadow mode is off"));
    // What was classed was written out as shadow mode went off.
    let kept = std::fs::read_to_string(sim.dir.path().join("shadow.json")).unwrap();
    assert!(kept.contains("\"same/node_unknown\":1"), "{kept}");
}

/// The incumbent marks a dead node (Ready=Unknown, the unreachable taint) while our watches
/// are stalled; our verdict on the version before it then meets a newer node in dry-run's
/// read. That read (a 409's re-read, as a real write would have had) is fed to our
/// controllers: masked like a watched object, they still see the node as they left it and
/// decide its taint themselves. Unmasked, they took the incumbent's marks for done and never
/// decided the taint (found by `soak --shadow`: the marks, kept as ours, were then lifted
/// as an `earlier taint_removed` when the node's Ready came back through the watch).
#[test]
fn an_incumbents_marks_read_back_after_a_dry_run_conflict_stay_hidden_from_our_controllers() {
    let sim = Sim::start("shadow-reread", &[TOKEN]);
    let nodes: Vec<String> = ["n1", "n2", "n3"].iter().map(|s| s.to_string()).collect();
    for n in &nodes {
        sim.add_node(n, Some("z1"));
    }
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    let timing = Timing {
        dry_run: true,
        grace: "6s",
        // No reconnect of the stalled watches before our verdict: nothing but dry-run's read
        // shows the marks.
        watch_idle_timeout: "5s",
        ..Timing::default()
    };
    let kubeconfig = sim.kubeconfig(TOKEN);
    let socket = sim.dir.path().join("control.sock");
    let text = format!(
        "shadow = true\nshadow_file = \"{}\"\ncontrol_socket = \"{}\"\n{}",
        sim.dir.path().join("shadow.json").display(),
        socket.display(),
        config_text(&kubeconfig, &timing)
    );
    let mut d = Daemon::start("shadow-reread", &sim.dir, &text, &[]);
    d.wait_log("acting (leader election disabled)", Duration::from_secs(15));
    wait_until(
        "synced",
        Duration::from_secs(10),
        || report(&socket)["pending"] == 0,
        || d.log(),
    );
    kubelets.set_alive("n1", false);
    // Grace 6 s: the marks land two seconds before our verdict is due, unseen by our watches.
    std::thread::sleep(Duration::from_millis(3500));
    sim.handle
        .faults()
        .stall_watches(Some(Duration::from_secs(8)));
    std::thread::sleep(Duration::from_millis(300));
    let incumbent = sim
        .cluster()
        .with_identity(node_lifecycled_sim::Identity::direct(
            "kube-controller-manager",
        ));
    let now = incumbent.now().to_rfc3339();
    incumbent
        .update(node_lifecycled_sim::Resource::Nodes, None, "n1", |v| {
            for c in v["status"]["conditions"].as_array_mut().unwrap() {
                if c["type"] == "Ready" {
                    c["status"] = json!("Unknown");
                    c["reason"] = json!("NodeStatusUnknown");
                    c["lastTransitionTime"] = json!(now);
                }
            }
            v["spec"]["taints"] = json!([{"key": "node.kubernetes.io/unreachable",
                "effect": "NoSchedule", "timeAdded": now}]);
        })
        .unwrap();
    d.wait_log(
        "would taint node n1 node.kubernetes.io/unreachable:NoSchedule",
        Duration::from_secs(10),
    );
}
