//! Faults never cause a wrong action. The lease watch stalls for longer than the grace period, the
//! API server restarts (connections refused), every watch gets 410, writes get 409
//! and 500 for a while, a corrupt line arrives: no node whose Lease was renewed is marked
//! Unknown, nothing is deleted that should not be, and once the fault clears the daemon still
//! acts on a real failure.
//!
//! The restart outage is the 20 s, almost seven times the 3 s grace period used here.

use std::time::Duration;

use crate::e2e_support::{Daemon, Kubelets, Sim, Timing, config_text, holds_for, wait_until};
use node_lifecycled_sim::{RequestMatch, Resource, Verb};
use serde_json::{Value, json};

const TOKEN: &str = "daemon-a";
const UNREACHABLE: &str = "node.kubernetes.io/unreachable:NoExecute";

struct Scene {
    sim: Sim,
    kubelets: Kubelets,
    daemon: Daemon,
    nodes: Vec<String>,
}

/// Three healthy nodes in one zone, a pod without tolerations on each, and the daemon acting.
fn scene(name: &str) -> Scene {
    let sim = Sim::start(name, &[TOKEN]);
    let nodes: Vec<String> = ["n1", "n2", "n3"].iter().map(|s| s.to_string()).collect();
    for n in &nodes {
        sim.add_node(n, Some("z1"));
        sim.add_pod(&format!("pod-{n}"), n, json!([]));
    }
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    let timing = Timing {
        dump_format: "json",
        ..Timing::default()
    };
    let mut daemon = Daemon::start(
        name,
        &sim.dir,
        &config_text(&sim.kubeconfig(TOKEN), &timing),
        &[],
    );
    daemon.wait_log("acting (leader election disabled)", Duration::from_secs(15));
    Scene {
        sim,
        kubelets,
        daemon,
        nodes,
    }
}

impl Scene {
    /// Status writes the daemon made (a verdict is one).
    fn status_writes(&self) -> usize {
        self.sim
            .handle
            .writes()
            .iter()
            .filter(|w| {
                w.identity.token.as_deref() == Some(TOKEN)
                    && w.resource == Resource::Nodes
                    && w.subresource.as_deref() == Some("status")
                    && w.succeeded()
            })
            .count()
    }

    /// No verdict, no taint, no deletion: what healthy nodes must see whatever the API does.
    fn untouched(&self) -> bool {
        self.nodes
            .iter()
            .all(|n| self.sim.ready(n) == "True" && self.sim.taints(n).is_empty())
            && self.sim.deleted_pods().is_empty()
            && self.status_writes() == 0
    }

    fn hold_untouched(&self, what: &str, window: Duration) {
        holds_for(what, window, || self.untouched(), || self.daemon.log());
    }

    /// After the fault: a real failure is still acted on (the daemon converged).
    fn node_failure_still_acted_on(&self) {
        self.kubelets.set_alive("n1", false);
        wait_until(
            "n1 Unknown, tainted, its pod evicted",
            Duration::from_secs(20),
            || {
                self.sim.ready("n1") == "Unknown"
                    && self.sim.has_taint("n1", UNREACHABLE)
                    && self.sim.deleted_pods().contains("pod-n1")
            },
            || self.daemon.log(),
        );
        assert!(["n2", "n3"].iter().all(|n| self.sim.ready(n) == "True"));
        let deleted = self.sim.deleted_pods();
        assert_eq!(deleted.len(), 1, "{deleted:?}");
    }

    fn dump(&mut self) -> Value {
        self.daemon.signal("USR1");
        let line = self
            .daemon
            .wait_log("\"dump\":\"node-lifecycled\"", Duration::from_secs(5));
        serde_json::from_str(&line[line.find('{').unwrap()..]).unwrap()
    }
}

fn reflector_sum(dump: &Value, field: &str) -> u64 {
    dump["reflectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[field].as_u64().unwrap())
        .sum()
}

fn lease_gets(dump: &Value) -> u64 {
    dump["client"]["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["verb"] == "GET" && r["code"] == "200")
        .map(|r| r["count"].as_u64().unwrap())
        .sum()
}

#[test]
fn stalled_watches_longer_than_the_grace_period_cause_no_false_unknown() {
    let mut s = scene("fault-stall");
    let reads_before = lease_gets(&s.dump());
    // 6 s of silence on every watch (the lease watch included), twice the grace period; the
    // kubelets keep renewing meanwhile.
    s.sim
        .handle
        .faults()
        .stall_watches(Some(Duration::from_secs(6)));
    s.hold_untouched(
        "no verdict while the watches are stalled",
        Duration::from_secs(7),
    );
    // The verdicts that came due were refused by live Lease reads.
    let reads = lease_gets(&s.dump()) - reads_before;
    assert!(reads >= 3, "{reads} live Lease reads during the stall");
    s.hold_untouched("no verdict after the stall", Duration::from_secs(2));
    s.node_failure_still_acted_on();
}

#[test]
fn an_api_server_restart_longer_than_the_grace_period_causes_no_false_unknown() {
    let mut s = scene("fault-restart");
    let before = reflector_sum(&s.dump(), "reconnects");
    // Every connection closed and new ones refused for 20 s; the kubelets keep renewing.
    s.sim.handle.faults().restart(Duration::from_secs(20));
    s.hold_untouched(
        "no verdict during the outage and after",
        Duration::from_secs(24),
    );
    assert!(
        s.daemon.has_line("Connection refused"),
        "{}",
        s.daemon.log()
    );
    assert!(reflector_sum(&s.dump(), "reconnects") > before);
    s.node_failure_still_acted_on();
}

#[test]
fn every_watch_answered_410_and_a_corrupt_line_cause_no_wrong_action() {
    let mut s = scene("fault-watch");
    let relists_before = reflector_sum(&s.dump(), "relists");
    let faults = s.sim.handle.faults();
    // Every watch ends now; the next 9 attempts are answered 410 Gone: each informer relists.
    faults.fail_next(RequestMatch::verb(Verb::Watch), 9, 410);
    faults.drop_watches();
    s.hold_untouched("no wrong action through 410s", Duration::from_secs(4));
    let relists = reflector_sum(&s.dump(), "relists") - relists_before;
    assert!(relists >= 1, "{relists} relists after 410s");
    faults.corrupt_watches();
    s.hold_untouched(
        "no wrong action after a corrupt line",
        Duration::from_secs(3),
    );
    assert!(s.daemon.has_line("skipping an event"), "{}", s.daemon.log());
    s.node_failure_still_acted_on();
}

#[test]
fn writes_answered_409_and_500_for_a_while_still_converge() {
    let s = scene("fault-writes");
    let faults = s.sim.handle.faults();
    faults.fail_next(RequestMatch::on(Verb::Update, "nodes/status"), 2, 409);
    faults.fail_next(RequestMatch::on(Verb::Patch, "nodes/status"), 2, 409);
    faults.fail_next(RequestMatch::on(Verb::Patch, "nodes"), 2, 500);
    faults.fail_next(RequestMatch::on(Verb::Patch, "nodes"), 2, 409);
    faults.fail_next(RequestMatch::on(Verb::Delete, "pods"), 2, 500);
    faults.fail_next(RequestMatch::on(Verb::Patch, "pods/status"), 1, 500);
    s.node_failure_still_acted_on();
    let failed: Vec<_> = s
        .sim
        .handle
        .writes()
        .into_iter()
        .filter(|w| w.identity.token.as_deref() == Some(TOKEN) && !w.succeeded())
        .collect();
    assert!(failed.len() >= 4, "the faults were met: {failed:?}");
    // Nothing else was touched: the healthy nodes carry no taint, only n1's pod went.
    assert!(["n2", "n3"].iter().all(|n| s.sim.taints(n).is_empty()));
}
