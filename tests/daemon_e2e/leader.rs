//! Two daemons with leader election against one simulated API server. Only the leader writes (the
//! server's write log names each writer by its bearer token); after kill -9
//! of the leader the other takes over within lease duration + retry period; SIGTERM releases the
//! lease and hands over within 3 s.
//!
//! Short stand-ins: lease 3 s, renew deadline 2 s, retry 500 ms (upstream 15 s / 10 s / 2 s).

use std::time::{Duration, Instant};

use crate::e2e_support::{Daemon, Kubelets, Sim, Timing, config_text, wait_until};
use node_lifecycled::time::Time;
use node_lifecycled_sim::{RequestMatch, Resource, Verb, WriteRecord};
use serde_json::json;

const A: &str = "daemon-a";
const B: &str = "daemon-b";
const ACTING: &str = "acting as leader";

fn daemon(sim: &Sim, name: &str, token: &str) -> Daemon {
    let timing = Timing {
        leader: Some(token.to_string()),
        ..Timing::default()
    };
    Daemon::start(
        name,
        &sim.dir,
        &config_text(&sim.kubeconfig(token), &timing),
        &[],
    )
}

/// Writes a controller makes (its own leader Lease excluded), by token.
fn controller_writes(sim: &Sim, token: &str) -> Vec<WriteRecord> {
    sim.handle
        .writes()
        .into_iter()
        .filter(|w| w.identity.token.as_deref() == Some(token))
        .filter(|w| {
            !(w.resource == Resource::Leases && w.namespace.as_deref() == Some("kube-system"))
        })
        .collect()
}

fn within(w: &WriteRecord, from: Time, to: Time) -> bool {
    w.wall >= from && w.wall <= to
}

#[test]
fn only_the_leader_writes_kill_9_fails_over_and_sigterm_hands_over() {
    let sim = Sim::start("leader", &[A, B]);
    let nodes: Vec<String> = ["n1", "n2", "n3"].iter().map(|s| s.to_string()).collect();
    for n in &nodes {
        sim.add_node(n, Some("z1"));
    }
    sim.add_pod("plain", "n1", json!([]));
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    let clock = sim.cluster();

    let started_at = clock.now();
    let mut a = daemon(&sim, "leader-a", A);
    a.wait_log(ACTING, Duration::from_secs(15));
    let mut b = daemon(&sim, "leader-b", B);
    b.wait_log("initial sync complete", Duration::from_secs(15));
    assert!(!b.has_line(ACTING), "{}", b.log());

    // A node fails: the leader, and only the leader, acts.
    kubelets.set_alive("n1", false);
    wait_until(
        "n1 Unknown, tainted, its pod evicted",
        Duration::from_secs(15),
        || {
            sim.ready("n1") == "Unknown"
                && sim.has_taint("n1", "node.kubernetes.io/unreachable:NoExecute")
                && sim.deleted_pods().contains("plain")
        },
        || format!("{}\n{}", a.log(), b.log()),
    );
    assert!(!controller_writes(&sim, A).is_empty());
    assert!(
        controller_writes(&sim, B).is_empty(),
        "{}",
        sim.handle.write_log_text()
    );

    // kill -9 the leader: no release, the lease runs out; B takes over.
    a.child.kill().unwrap();
    a.wait_exit(Duration::from_secs(5));
    let killed = Instant::now();
    let killed_at = clock.now();
    let b_waited = b.runqueue_wait();
    let takeover = wait_until(
        "B acting after kill -9 of A",
        Duration::from_secs(10),
        || b.has_line(ACTING),
        || b.log(),
    );
    // Lease duration + retry period, plus the machine's scheduling noise (not counting time B
    // waited for a CPU on a busy machine).
    let starved = b.runqueue_wait().saturating_sub(b_waited);
    assert!(
        takeover.saturating_sub(starved) <= Duration::from_millis(3500 + 1000),
        "takeover {takeover:?} after kill -9 ({starved:?} of it waiting for a CPU)"
    );
    assert!(
        takeover >= Duration::from_millis(1000),
        "takeover {takeover:?}: lease not honoured"
    );

    // The node comes back: B removes the taints.
    kubelets.set_alive("n1", true);
    wait_until(
        "n1 Ready and untainted by B",
        Duration::from_secs(10),
        || sim.ready("n1") == "True" && sim.taints("n1").is_empty(),
        || b.log(),
    );
    assert!(
        !controller_writes(&sim, B).is_empty(),
        "{}",
        sim.handle.write_log_text()
    );

    // A restarts as a follower; SIGTERM to B releases the lease and A takes over at once.
    let mut a2 = daemon(&sim, "leader-a2", A);
    a2.wait_log("initial sync complete", Duration::from_secs(15));
    assert!(!a2.has_line(ACTING));
    let b_stopping_at = clock.now();
    let sigterm = Instant::now();
    let a2_waited = a2.runqueue_wait();
    b.signal("TERM");
    let (status, _) = b.wait_exit(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
    assert!(b.has_line("released leader lease"), "{}", b.log());
    let handover = wait_until(
        "A acting after SIGTERM to B",
        Duration::from_secs(10),
        || a2.has_line(ACTING),
        || a2.log(),
    );
    // B's exit, then A's next retry (500 ms); time A waited for a CPU not counted.
    let starved = a2.runqueue_wait().saturating_sub(a2_waited);
    assert!(
        handover.saturating_sub(starved) < Duration::from_secs(3),
        "handover {handover:?} after SIGTERM ({starved:?} waiting for a CPU)"
    );

    // Over the whole run, every controller write came from the instance leading at the time:
    // A until it was killed, B from then until it stopped, A again after that.
    let end = clock.now();
    let b_stopped_at = clock.now();
    for w in controller_writes(&sim, A) {
        assert!(
            within(&w, started_at, killed_at) || within(&w, b_stopping_at, end),
            "A wrote while not leading: {w:?}"
        );
    }
    for w in controller_writes(&sim, B) {
        assert!(
            within(&w, killed_at, b_stopped_at),
            "B wrote while not leading: {w:?}"
        );
    }
    eprintln!(
        "leader: kill -9 takeover {takeover:?}, SIGTERM handover {handover:?} ({:?} since the kill, {:?} since SIGTERM)",
        killed.elapsed(),
        sigterm.elapsed()
    );
}

/// A leader that cannot renew stops writing at its renew deadline, stands by as a follower
/// with warm caches, and acts again once it holds the lease again.
#[test]
fn a_leader_that_cannot_renew_stops_acting_then_acts_again_on_reacquiring() {
    let sim = Sim::start("leader-renew", &[A]);
    let nodes: Vec<String> = ["n1", "n2", "n3"].iter().map(|s| s.to_string()).collect();
    for n in &nodes {
        sim.add_node(n, Some("z1"));
    }
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    let mut a = daemon(&sim, "leader-renew", A);
    a.wait_log(ACTING, Duration::from_secs(15));
    // Every lease update fails for a while (the kubelets renew in-process, untouched): about
    // 4 s of failed renewals at one try per 500 ms.
    sim.handle
        .faults()
        .fail_next(RequestMatch::on(Verb::Update, "leases"), 8, 500);
    let stopped = a.wait_log("stopped acting", Duration::from_secs(10));
    assert!(stopped.contains("standing by as a follower"), "{stopped}");
    let clock = sim.cluster();
    let lost_at = clock.now();
    // While it stands by, a node fails: no write until the lease is held again.
    kubelets.set_alive("n1", false);
    a.wait_log(ACTING, Duration::from_secs(20));
    // When it held the lease again: its first successful leader-lease write after standing by,
    // in the server's own order of writes. (Its "acting" log line can come a millisecond after
    // its first write: seen on a busy machine.)
    let reacquired = sim
        .handle
        .writes()
        .into_iter()
        .filter(|w| {
            w.identity.token.as_deref() == Some(A)
                && w.resource == Resource::Leases
                && w.namespace.as_deref() == Some("kube-system")
                && w.code < 300
                && w.wall > lost_at
        })
        .min_by_key(|w| w.seq)
        .expect("the leader lease written again");
    for w in controller_writes(&sim, A) {
        assert!(
            !(w.wall > lost_at && w.seq < reacquired.seq),
            "wrote while standing by (lost {lost_at:?}, lease held again {reacquired:?}): {w:?}"
        );
    }
    // Warm caches: the silent node is judged without a fresh list.
    wait_until(
        "n1 Unknown and tainted after reacquiring",
        Duration::from_secs(15),
        || {
            sim.ready("n1") == "Unknown"
                && sim.has_taint("n1", "node.kubernetes.io/unreachable:NoExecute")
        },
        || a.log(),
    );
}

/// Issue 46 item 6: the leader keeps its clocks on its Lease (annotation
/// `node-lifecycled.io/clocks`, written with its renewals): a zone fully disrupted beside a
/// healthy one is there with the start of its full disruption, and after kill -9 the new
/// leader reads and honours them.
#[test]
fn the_leaders_clocks_on_its_lease_reach_the_next_leader() {
    let sim = Sim::start("leader-clocks", &[A, B]);
    sim.add_node("n1", Some("z1"));
    let nodes: Vec<String> = ["n1", "n2", "n3"].iter().map(|s| s.to_string()).collect();
    for n in &nodes[1..] {
        sim.add_node(n, Some("z2"));
    }
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    let mut a = daemon(&sim, "clocks-a", A);
    a.wait_log(ACTING, Duration::from_secs(15));
    let mut b = daemon(&sim, "clocks-b", B);
    b.wait_log("initial sync complete", Duration::from_secs(15));
    kubelets.set_alive("n1", false);
    let clocks = || {
        sim.cluster()
            .get(Resource::Leases, Some("kube-system"), "node-lifecycled")
            .and_then(|l| {
                l["metadata"]["annotations"]["node-lifecycled.io/clocks"]
                    .as_str()
                    .map(str::to_string)
            })
    };
    wait_until(
        "the clocks annotation with z1's full disruption",
        Duration::from_secs(20),
        || clocks().is_some_and(|c| c.contains("z1")),
        || format!("{:?}\n{}", clocks(), a.log()),
    );
    a.child.kill().unwrap();
    a.wait_exit(Duration::from_secs(5));
    let line = b.wait_log(
        "honouring the previous leader's clocks: 1 hold start(s)",
        Duration::from_secs(15),
    );
    assert!(line.contains("0 brake(s)"), "{line}");
    drop(kubelets);
}
