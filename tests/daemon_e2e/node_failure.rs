//! A node failure, end to end: the real binary against the simulated API server over sockets. A
//! node stops renewing its Lease → Ready=Unknown with upstream's reason and message at probe +
//! grace, the unreachable NoSchedule and NoExecute taints, its pods NotReady with events, pods
//! without a toleration deleted at once and pods with `tolerationSeconds` after it, tolerating
//! pods kept. The node comes back → taints removed, pending evictions cancelled.
//!
//! Durations are short stand-ins: grace 3 s (upstream 50 s), monitor period 1 s, kubelets renew
//! every 300 ms.

use std::time::{Duration, Instant};

use crate::e2e_support::{
    Daemon, Kubelets, Sim, Timing, config_text, tolerating_unreachable, wait_until,
};
use serde_json::json;

const TOKEN: &str = "daemon-a";
const UNREACHABLE_NO_EXECUTE: &str = "node.kubernetes.io/unreachable:NoExecute";
const UNREACHABLE_NO_SCHEDULE: &str = "node.kubernetes.io/unreachable:NoSchedule";

#[test]
fn node_failure_marks_taints_evicts_by_toleration_seconds_then_recovers() {
    let sim = Sim::start("node-failure", &[TOKEN]);
    let nodes: Vec<String> = ["n1", "n2", "n3"].iter().map(|s| s.to_string()).collect();
    for n in &nodes {
        sim.add_node(n, Some("z1"));
    }
    sim.add_pod("plain", "n1", json!([]));
    sim.add_pod("two-seconds", "n1", tolerating_unreachable(Some(2)));
    sim.add_pod("long", "n1", tolerating_unreachable(Some(60)));
    sim.add_pod("forever", "n1", tolerating_unreachable(None));
    sim.add_pod("elsewhere", "n2", json!([]));
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));

    let text = config_text(&sim.kubeconfig(TOKEN), &Timing::default());
    let mut d = Daemon::start("node-failure", &sim.dir, &text, &[]);
    d.wait_log("acting (leader election disabled)", Duration::from_secs(15));
    let ctx = || d.log();

    // Healthy nodes are left alone (a few seconds: longer than the grace period).
    std::thread::sleep(Duration::from_secs(4));
    assert!(nodes.iter().all(|n| sim.ready(n) == "True"), "{}", ctx());
    assert!(sim.deleted_pods().is_empty(), "{}", ctx());

    // n1's kubelet dies.
    kubelets.set_alive("n1", false);
    let silent_at = Instant::now();
    let waited_before = d.runqueue_wait();
    let took = wait_until(
        "n1 Ready=Unknown",
        Duration::from_secs(15),
        || sim.ready("n1") == "Unknown",
        ctx,
    );
    // Verdict at probe + grace (3 s) exactly, plus the live lease read and the write; the
    // upper bound does not count time the daemon waited for a CPU on a busy machine.
    let starved = d.runqueue_wait().saturating_sub(waited_before);
    assert!(
        took >= Duration::from_millis(2500)
            && took.saturating_sub(starved) < Duration::from_millis(6000),
        "Unknown after {took:?} ({starved:?} of it waiting for a CPU)"
    );
    let (_, reason, message) = sim.condition("n1", "Ready").unwrap();
    assert_eq!(reason, "NodeStatusUnknown");
    assert_eq!(message, "Kubelet stopped posting node status.");
    for kind in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
        let (status, reason, _) = sim.condition("n1", kind).unwrap();
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("Unknown", "NodeStatusUnknown")
        );
    }
    wait_until(
        "n1 tainted unreachable NoSchedule and NoExecute",
        Duration::from_secs(10),
        || {
            sim.has_taint("n1", UNREACHABLE_NO_EXECUTE)
                && sim.has_taint("n1", UNREACHABLE_NO_SCHEDULE)
        },
        ctx,
    );
    wait_until(
        "n1's pods NotReady with events",
        Duration::from_secs(10),
        || {
            ["plain", "two-seconds", "long", "forever"]
                .iter()
                .all(|p| sim.has_event("NodeNotReady", p))
                && ["long", "forever"]
                    .iter()
                    .all(|p| sim.pod_ready(p) == "False")
        },
        ctx,
    );
    assert!(sim.has_event("NodeNotReady", "n1"), "{:?}", sim.events());
    let tainted_at = Instant::now();

    // No toleration: deleted at once. 2 s toleration: 2 s after the taint. 60 s and forever: kept.
    wait_until(
        "plain evicted",
        Duration::from_secs(10),
        || sim.deleted_pods().contains("plain"),
        ctx,
    );
    let two = wait_until(
        "two-seconds evicted",
        Duration::from_secs(10),
        || sim.deleted_pods().contains("two-seconds"),
        ctx,
    );
    assert!(
        two >= Duration::from_millis(1200),
        "two-seconds evicted {two:?} after the taint was seen"
    );
    assert!(
        sim.has_event("TaintManagerEviction", "plain"),
        "{:?}",
        sim.events()
    );
    let deleted = sim.deleted_pods();
    assert!(
        !deleted.contains("long") && !deleted.contains("forever"),
        "{deleted:?}"
    );
    assert!(!deleted.contains("elsewhere"), "{deleted:?}");
    assert!(["n2", "n3"].iter().all(|n| sim.ready(n) == "True"));
    assert!(["n2", "n3"].iter().all(|n| sim.taints(n).is_empty()));

    // n1 comes back: taints removed, the pending eviction of "long" cancelled.
    kubelets.set_alive("n1", true);
    wait_until(
        "n1 Ready and untainted",
        Duration::from_secs(10),
        || sim.ready("n1") == "True" && sim.taints("n1").is_empty(),
        ctx,
    );
    wait_until(
        "long's eviction cancelled",
        Duration::from_secs(10),
        || {
            sim.events().iter().any(|(r, m, o)| {
                r == "TaintManagerEviction" && o == "long" && m.starts_with("Cancelling deletion")
            })
        },
        ctx,
    );
    eprintln!(
        "node failure: Unknown {took:?} after the last renewal, evictions from {:?}, recovered at {:?}",
        tainted_at - silent_at,
        silent_at.elapsed()
    );
    d.signal("TERM");
    assert_eq!(d.wait_exit(Duration::from_secs(5)).0.code(), Some(0));
}
