//! Operating the daemon. `dry_run = true`: everything runs, every write is logged as "would …" and
//! counted, nothing is sent; turning it off with SIGHUP relists and then acts for real. The
//! optional metrics endpoint serves `/metrics`, `/healthz` and `/readyz`.

use std::time::Duration;

use crate::e2e_support::{
    Daemon, Kubelets, Sim, Timing, config_text, holds_for, http_get, metrics_run, wait_until,
};
use serde_json::json;

const TOKEN: &str = "daemon-a";
const UNREACHABLE: &str = "node.kubernetes.io/unreachable:NoExecute";

fn daemon_writes(sim: &Sim) -> usize {
    sim.handle
        .writes()
        .iter()
        .filter(|w| w.identity.token.as_deref() == Some(TOKEN))
        .count()
}

#[test]
fn dry_run_decides_and_logs_would_lines_but_writes_nothing_until_turned_off() {
    let sim = Sim::start("dry-run", &[TOKEN]);
    let nodes: Vec<String> = ["n1", "n2", "n3"].iter().map(|s| s.to_string()).collect();
    for n in &nodes {
        sim.add_node(n, Some("z1"));
    }
    sim.add_pod("plain", "n1", json!([]));
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    let timing = Timing {
        dry_run: true,
        dump_format: "json",
        ..Timing::default()
    };
    let kubeconfig = sim.kubeconfig(TOKEN);
    let mut d = Daemon::start("dry-run", &sim.dir, &config_text(&kubeconfig, &timing), &[]);
    d.wait_log("acting (leader election disabled)", Duration::from_secs(15));
    kubelets.set_alive("n1", false);
    let verdict = d.wait_log("would set node n1 conditions", Duration::from_secs(15));
    assert!(
        verdict.contains("Ready=Unknown (NodeStatusUnknown)"),
        "{verdict}"
    );
    // The NoExecute taint comes in the same taint write as the NoSchedule one, or in the next.
    let mut taint = d.wait_log("would taint node n1", Duration::from_secs(10));
    if !taint.contains(UNREACHABLE) {
        taint = d.wait_log("would taint node n1", Duration::from_secs(10));
    }
    assert!(taint.contains(UNREACHABLE), "{taint}");
    d.wait_log("would evict pod default/plain", Duration::from_secs(10));
    holds_for(
        "nothing written in dry-run",
        Duration::from_secs(2),
        || daemon_writes(&sim) == 0 && sim.ready("n1") == "True" && sim.deleted_pods().is_empty(),
        || d.log(),
    );
    d.signal("USR1");
    let line = d.wait_log("\"dump\":\"node-lifecycled\"", Duration::from_secs(5));
    let v: serde_json::Value = serde_json::from_str(&line[line.find('{').unwrap()..]).unwrap();
    let counted: u64 = v["client"]["dry_run_actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["count"].as_u64().unwrap())
        .sum();
    assert!(counted >= 3, "{v}");
    assert!(
        v["version"]["status"]
            .as_str()
            .unwrap()
            .starts_with("dry-run, 3 nodes"),
        "{v}"
    );

    // SIGHUP with dry_run = false: relist, then the same decisions are made for real.
    let real = Timing {
        dry_run: false,
        ..timing
    };
    d.rewrite_config(&config_text(&kubeconfig, &real));
    d.signal("HUP");
    d.wait_log("dry_run is now false", Duration::from_secs(5));
    wait_until(
        "n1 Unknown, tainted, its pod evicted for real",
        Duration::from_secs(20),
        || {
            sim.ready("n1") == "Unknown"
                && sim.has_taint("n1", UNREACHABLE)
                && sim.deleted_pods().contains("plain")
        },
        || d.log(),
    );
}

#[test]
fn metrics_endpoint_serves_metrics_health_and_readiness() {
    let run = metrics_run("metrics", TOKEN, "");
    let (sim, d, port) = (&run.sim, &run.daemon, run.port);
    let (code, body) = http_get(port, "/metrics");
    assert_eq!(code, 200, "{body}");
    let zone_size: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("node_collector_zone_size{"))
        .collect();
    assert_eq!(zone_size.len(), 1, "{body}");
    assert!(zone_size[0].ends_with(" 2"), "{body}");
    assert!(body.contains("node_collector_zone_health"), "{body}");
    let (code, _) = http_get(port, "/healthz");
    assert_eq!(code, 200);
    let (code, body) = http_get(port, "/readyz");
    assert_eq!(code, 200, "{body}");

    // A node falls silent: its Ready=Unknown status write is timed into the per-node health
    // histogram; every controller pass into the all-nodes one.
    run.kubelets.set_alive("n2", false);
    wait_until(
        "n2 Ready=Unknown",
        Duration::from_secs(20),
        || sim.ready("n2") == "Unknown",
        || d.log(),
    );
    let count = |body: &str, name: &str| -> u64 {
        body.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}_count ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let (_, body) = http_get(port, "/metrics");
    assert!(
        count(&body, "node_collector_update_node_health_duration_seconds") >= 1,
        "{body}"
    );
    assert!(
        count(
            &body,
            "node_collector_update_all_nodes_health_duration_seconds"
        ) >= 1,
        "{body}"
    );
}
