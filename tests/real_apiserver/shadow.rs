//! Shadow mode against the real incumbent: a real kube-apiserver, kube-controller-manager
//! running its node lifecycle and taint eviction controllers, and node-lifecycled in shadow
//! mode beside it. The test plays the kubelets; the report is asked over the control socket.
//!
//! - A node dies (its pod tolerates 3 s) and comes back: every decision of either side is
//!   paired and `same` (or `earlier`, with its rule); nothing is only one side's.
//! - A whole zone goes dark beside healthy ones, node-lifecycled holding a dark domain
//!   (`full_disruption = "hold"`): kube-controller-manager taints it and evicts; the report
//!   has exactly that as `only_theirs`, each with the rule `hold`.
//!
//! Fails if the server cannot be started, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::e2e_support::{Daemon, TempDir, Timing, config_text, wait_until};
use crate::real_apiserver_support::RealApiserver;
use crate::real_apiserver_support::fleet::{
    FleetSpec, Kubelets, admin_client, create_fleet, create_running_pod, pod_deleting,
};
use crate::real_apiserver_support::upstream::ControllerManager;
use crate::real_apiserver_support::versions::{Kube, versions};
use serde_json::Value;

/// Grace 5 s (Leases of 4 s renewed every second), a 1 s pass, a fast zone rate: both sides
/// run with it. The pair bound is then 30 s.
fn timing() -> Timing {
    Timing {
        grace: "5s",
        startup_grace: "10s",
        monitor_period: "1s",
        eviction_rate: 1.0,
        secondary_rate: 0.01,
        large_cluster_size_threshold: 50,
        leader: None,
        ..Timing::default()
    }
}

struct Run {
    _server: RealApiserver,
    kubelets: Kubelets,
    d: Daemon,
    kcm: ControllerManager,
    socket: PathBuf,
    text: String,
    dir: TempDir,
    admin: node_lifecycled::kube::ApiClient,
}

fn start(kube: Kube, name: &str, zones: usize, per_zone: usize, top: &str) -> Option<Run> {
    let server = RealApiserver::start(kube)?;
    let spec = FleetSpec::zones(zones, per_zone);
    let kubelets = create_fleet(&server, &spec);
    for node in spec.names() {
        create_running_pod(&server, &format!("on-{node}"), &node, Some(3));
    }
    let dir = TempDir::new(name);
    let socket = dir.path().join("control.sock");
    let kcm = ControllerManager::start(&server, &timing(), &[], &dir);
    let text = format!(
        "shadow = true\nshadow_file = \"{}\"\ncontrol_socket = \"{}\"\n{top}{}",
        dir.path().join("shadow.json").display(),
        socket.display(),
        config_text(Path::new(server.var("DAEMON_KUBECONFIG")), &timing())
    );
    let mut d = Daemon::start(name, &dir, &text, &[]);
    d.wait_log("acting (leader election disabled)", Duration::from_secs(30));
    // Both controllers see the fleet healthy for a while.
    std::thread::sleep(Duration::from_secs(4));
    let admin = admin_client(&server);
    Some(Run {
        _server: server,
        kubelets,
        d,
        kcm,
        socket,
        text,
        dir,
        admin,
    })
}

fn report(socket: &Path, format: &str) -> String {
    node_lifecycled::runtime::control_socket::ask(
        socket,
        &format!("shadow report --format {format}"),
        Duration::from_secs(5),
    )
    .unwrap_or_else(|e| format!("error: {e}"))
}

fn json_report(socket: &Path) -> Value {
    serde_json::from_str(&report(socket, "json")).unwrap_or(Value::Null)
}

fn count(r: &Value, class: &str, kind: &str) -> u64 {
    r["counts"][class][kind].as_u64().unwrap_or(0)
}

fn total(r: &Value, class: &str) -> u64 {
    r["counts"][class]
        .as_object()
        .map_or(0, |kinds| kinds.values().filter_map(Value::as_u64).sum())
}

/// Waits until nothing is pending and `done` holds of the report; the text report on failure.
fn settle(run: &mut Run, what: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let socket = run.socket.clone();
    let kcm_log = run.kcm.log.clone();
    let d = &run.d;
    wait_until(
        what,
        limit,
        || {
            let r = json_report(&socket);
            r["pending"] == 0 && done(&r)
        },
        || {
            format!(
                "{}\n--- kube-controller-manager ---\n{}\n--- daemon ---\n{}",
                report(&socket, "text"),
                std::fs::read_to_string(&kcm_log).unwrap_or_default(),
                d.log()
            )
        },
    );
    json_report(&run.socket)
}

fn a_node_that_dies_and_comes_back_is_judged_the_same_by_both(kube: Kube) {
    let Some(mut run) = start(kube, "shadow-node-dies", 3, 2, "") else {
        return;
    };
    let started = Instant::now();
    run.kubelets.silence(&["z1-n1".to_string()]);
    let admin = &mut run.admin;
    wait_until(
        "kube-controller-manager evicts the dead node's pod",
        Duration::from_secs(40),
        || pod_deleting(admin, "on-z1-n1"),
        String::new,
    );
    let r = settle(
        &mut run,
        "Unknown, both taints, the pod NotReady and evicted: paired",
        Duration::from_secs(40),
        |r| {
            count(r, "same", "node_unknown") + count(r, "earlier", "node_unknown") == 1
                && count(r, "same", "taint_added") + count(r, "earlier", "taint_added") == 2
                && count(r, "same", "pod_deletion") + count(r, "earlier", "pod_deletion") == 1
        },
    );
    // At the start both removed the not-ready:NoSchedule taint the nodes registered with.
    let removed =
        |r: &Value| count(r, "same", "taint_removed") + count(r, "earlier", "taint_removed");
    let before = removed(&r);
    run.kubelets.set_alive("z1-n1", true);
    let r2 = settle(
        &mut run,
        "both taints removed, paired",
        Duration::from_secs(40),
        |r| removed(r) == before + 2,
    );
    let text = report(&run.socket, "text");
    eprintln!(
        "== shadow report after {:.0} s ==\n{text}",
        started.elapsed().as_secs_f64()
    );
    for r in [&r, &r2] {
        assert_eq!(total(r, "only_ours"), 0, "{text}");
        assert_eq!(total(r, "only_theirs"), 0, "{text}");
        assert_eq!(total(r, "later"), 0, "{text}");
        assert_eq!(r["findings"], 0, "{text}");
    }
    assert!(
        count(&r, "same", "pod_not_ready") + count(&r, "earlier", "pod_not_ready") >= 1,
        "{text}"
    );
    assert!(run.kcm.running(), "{}", run.kcm.log_text());
    assert!(text.contains("verdict: clean"), "{text}");

    // A restart loses nothing classed: the file under the state directory holds it.
    run.d.signal("TERM");
    run.d.wait_exit(Duration::from_secs(15));
    let again = Daemon::start("shadow-node-dies-again", &run.dir, &run.text, &[]);
    let after = json_report(&run.socket);
    assert_eq!(after["counts"], r2["counts"], "{}", again.log());
}

fn a_dark_zone_held_by_us_is_tainted_only_by_the_incumbent_with_the_rule_named(kube: Kube) {
    let top = "full_disruption = \"hold\"\n";
    let Some(mut run) = start(kube, "shadow-dark-zone", 3, 2, top) else {
        return;
    };
    let dark = ["z1-n1".to_string(), "z1-n2".to_string()];
    run.kubelets.silence(&dark);
    let admin = &mut run.admin;
    wait_until(
        "kube-controller-manager evicts the dark zone's pods",
        Duration::from_secs(60),
        || pod_deleting(admin, "on-z1-n1") && pod_deleting(admin, "on-z1-n2"),
        String::new,
    );
    let r = settle(
        &mut run,
        "the NoExecute taints and deletions classed only theirs",
        Duration::from_secs(90),
        |r| {
            count(r, "only_theirs", "taint_added") == 2
                && count(r, "only_theirs", "pod_deletion") == 2
        },
    );
    let text = report(&run.socket, "text");
    eprintln!("== shadow report ==\n{text}");
    assert_eq!(total(&r, "only_ours"), 0, "{text}");
    assert_eq!(total(&r, "earlier"), 0, "{text}");
    let divergences = r["divergences"].as_array().cloned().unwrap_or_default();
    assert!(divergences.len() >= 4, "{text}");
    for d in &divergences {
        assert_eq!(d["rule"], "hold", "every divergence is the hold's: {text}");
    }
    assert!(count(&r, "same", "node_unknown") >= 1, "{text}");
    assert!(run.d.has_line("DECISION=shadow") || run.d.has_line("shadow: only_theirs"));
}

versions! {
    v1_37 => [
        a_node_that_dies_and_comes_back_is_judged_the_same_by_both,
        a_dark_zone_held_by_us_is_tainted_only_by_the_incumbent_with_the_rule_named,
    ],
}
