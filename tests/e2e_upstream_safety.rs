//! Never less safe than upstream, against a real kube-apiserver v1.20.2
//! (`../shared/real-apiserver`): the scenarios where an event-driven decision could differ from
//! what kube-controller-manager's batched passes decide. The test plays the kubelets (each
//! renewing its node Lease at a quarter of `leaseDurationSeconds`, at its own phase or all
//! together); the daemon connects with the RBAC of `conf/rbac.yaml`.
//!
//! - zones: a zone whose nodes die together is judged whole (upstream's pass sees them at one
//!   instant), a zone that dies with heartbeats spread over a renew interval too (beyond
//!   upstream: missed renewals are early evidence), a whole zone dark beside a healthy one is
//!   tainted at the normal rate, every node silent taints nothing, a single dead node in a
//!   healthy zone is tainted at its deadline;
//! - restarts and failovers leave the taints of dead nodes alone and pods go at
//!   `timeAdded + tolerationSeconds`;
//! - a connection reset does not make a pod's deletion late.
//!
//! Fails if the server cannot be started, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1 (then it
//! says why).

mod e2e_support;
mod real_apiserver_support;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use e2e_support::{Daemon, TempDir, Timing, config_text, holds_for, wait_until};
use node_lifecycled::kube::ApiClient;
use node_lifecycled::time::Time;
use real_apiserver_support::RealApiserver;
use real_apiserver_support::fleet::{
    FleetSpec, Kubelets, UNREACHABLE_NO_EXECUTE, UNREACHABLE_NO_SCHEDULE, admin_client,
    create_fleet, create_running_pod, node_json, pod_deleting, ready_of, taint_time_added,
    taints_of,
};

/// One scenario at a time: each measures timing against its own server, and two servers with
/// their etcds on a 2-core machine would blur every figure.
static SERIAL: Mutex<()> = Mutex::new(());

/// A started server with the fleet of `spec` and its kubelets running (and the lock that keeps
/// the scenarios apart), or `None` when the server is unavailable and the skip variable says so.
fn fleet(spec: &FleetSpec) -> Option<(RealApiserver, Kubelets, MutexGuard<'static, ()>)> {
    let serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let server = RealApiserver::start()?;
    let kubelets = create_fleet(&server, spec);
    Some((server, kubelets, serial))
}

/// The daemon as `DAEMON_KUBECONFIG`, started and leading.
fn leading_daemon(server: &RealApiserver, dir: &TempDir, name: &str, timing: &Timing) -> Daemon {
    let text = config_text(Path::new(server.var("DAEMON_KUBECONFIG")), timing);
    let mut d = Daemon::start(name, dir, &text, &[]);
    d.wait_log("acting as leader", Duration::from_secs(30));
    d
}

// ---- zones: decisions on a consistent view ------------------------------------------------

/// The zone scenarios' timing: grace 8 s, Leases of 8 s (renewed every 2 s, so a node silent for
/// more than 4 s has missed two renewals), a 1 s pass, 0.5 taints per second and zone, small
/// clusters (a partially disrupted zone stops tainting).
fn zone_timing() -> Timing {
    Timing {
        grace: "8s",
        startup_grace: "16s",
        monitor_period: "1s",
        eviction_rate: 0.5,
        secondary_rate: 0.01,
        leader: Some("e2e-safety".to_string()),
        ..Timing::default()
    }
}

fn zone_fleet(zones: usize, per_zone: usize, spread_phases: bool) -> FleetSpec {
    FleetSpec {
        lease_duration_seconds: 8,
        spread_phases,
        ..FleetSpec::zones(zones, per_zone)
    }
}

/// One pod per node that tolerates `unreachable:NoExecute` for 0 s: deleted the moment its node
/// is tainted.
fn at_once_pods(server: &RealApiserver, nodes: &[String]) {
    for n in nodes {
        create_running_pod(server, &format!("{n}-at-once"), n, Some(0));
    }
}

fn no_execute_tainted(admin: &mut ApiClient, nodes: &[String]) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| taints_of(&node_json(admin, n)).contains(UNREACHABLE_NO_EXECUTE))
        .cloned()
        .collect()
}

fn deleted(admin: &mut ApiClient, nodes: &[String]) -> Vec<String> {
    nodes
        .iter()
        .map(|n| format!("{n}-at-once"))
        .filter(|p| pod_deleting(admin, p))
        .collect()
}

/// Every node of `nodes` Ready=Unknown and tainted `unreachable:NoSchedule` (judged), then
/// nothing NoExecute-tainted and no pod deleted anywhere for `window`.
fn judged_and_spared(
    server: &RealApiserver,
    d: &Daemon,
    dead: &[String],
    all: &[String],
    window: Duration,
) {
    let mut admin = admin_client(server);
    wait_until(
        "the silent nodes Ready=Unknown and tainted NoSchedule",
        Duration::from_secs(30),
        || {
            dead.iter().all(|n| {
                let node = node_json(&mut admin, n);
                ready_of(&node).0 == "Unknown" && taints_of(&node).contains(UNREACHABLE_NO_SCHEDULE)
            })
        },
        || d.log(),
    );
    holds_for(
        "no NoExecute taint and no deletion",
        window,
        || no_execute_tainted(&mut admin, all).is_empty() && deleted(&mut admin, all).is_empty(),
        || {
            format!(
                "tainted {:?}, deleted {:?}\n{}",
                no_execute_tainted(&mut admin_client(server), all),
                deleted(&mut admin_client(server), all),
                d.log()
            )
        },
    );
}

/// Three of a zone's four nodes stop heartbeating at the same instant in a cluster of 8:
/// upstream's pass sees all three Unknown together, the zone is partially disrupted and, the
/// cluster being small, nothing is tainted NoExecute. The first verdict must not taint its node
/// before the other two are judged.
#[test]
fn most_of_a_zone_dying_together_in_a_small_cluster_taints_nothing() {
    let spec = zone_fleet(2, 4, false);
    let Some((server, kubelets, _serial)) = fleet(&spec) else {
        return;
    };
    let all = spec.names();
    at_once_pods(&server, &all);
    let dir = TempDir::new("safety-zone-sync");
    let d = leading_daemon(&server, &dir, "safety-zone-sync", &zone_timing());
    std::thread::sleep(Duration::from_secs(3));
    let dead: Vec<String> = spec.in_zone("z1").into_iter().take(3).collect();
    kubelets.silence(&dead);
    judged_and_spared(&server, &d, &dead, &all, Duration::from_secs(6));
    assert!(d.has_line("PartialDisruption"), "{}", d.log());
}

/// The same with each kubelet renewing at its own phase, so the three deadlines spread over a
/// renew interval (2 s, wider than the 1 s pass): upstream's pass sees the first node alone and
/// taints it. Beyond upstream, the nodes that have missed two renewals are counted as suspects
/// in the zone state used for NoExecute tainting: nothing is tainted.
#[test]
fn most_of_a_zone_dying_with_spread_heartbeats_taints_nothing() {
    let spec = zone_fleet(2, 4, true);
    let Some((server, kubelets, _serial)) = fleet(&spec) else {
        return;
    };
    let all = spec.names();
    at_once_pods(&server, &all);
    let dir = TempDir::new("safety-zone-spread");
    let d = leading_daemon(&server, &dir, "safety-zone-spread", &zone_timing());
    std::thread::sleep(Duration::from_secs(3));
    let dead: Vec<String> = spec.in_zone("z1").into_iter().take(3).collect();
    kubelets.silence(&dead);
    judged_and_spared(&server, &d, &dead, &all, Duration::from_secs(6));
}

/// Every node of the cluster silent at once (the control plane cut off from its nodes): every
/// zone fully disrupted, nothing tainted NoExecute, nothing deleted.
#[test]
fn every_node_silent_taints_nothing() {
    let spec = zone_fleet(2, 3, false);
    let Some((server, kubelets, _serial)) = fleet(&spec) else {
        return;
    };
    let all = spec.names();
    at_once_pods(&server, &all);
    let dir = TempDir::new("safety-all-silent");
    let d = leading_daemon(&server, &dir, "safety-all-silent", &zone_timing());
    std::thread::sleep(Duration::from_secs(3));
    kubelets.silence(&all);
    judged_and_spared(&server, &d, &all, &all, Duration::from_secs(5));
}

/// A whole zone goes dark (heartbeats spread) while the other is healthy: upstream presumes the
/// zone dead and keeps tainting it at the normal rate (here 0.5/s: one node every 2 s).
#[test]
fn a_whole_zone_dark_beside_a_healthy_one_is_tainted_at_the_normal_rate() {
    let spec = zone_fleet(2, 4, true);
    let Some((server, kubelets, _serial)) = fleet(&spec) else {
        return;
    };
    let all = spec.names();
    let dead = spec.in_zone("z1");
    at_once_pods(&server, &all);
    let dir = TempDir::new("safety-zone-dark");
    let d = leading_daemon(&server, &dir, "safety-zone-dark", &zone_timing());
    std::thread::sleep(Duration::from_secs(3));
    kubelets.silence(&dead);
    let mut admin = admin_client(&server);
    wait_until(
        "every node of the dark zone tainted NoExecute",
        Duration::from_secs(40),
        || no_execute_tainted(&mut admin, &dead).len() == dead.len(),
        || d.log(),
    );
    let mut added: Vec<Time> = dead
        .iter()
        .map(|n| taint_time_added(&node_json(&mut admin, n), UNREACHABLE_NO_EXECUTE).unwrap())
        .collect();
    added.sort();
    // timeAdded has whole seconds: 2 s apart, give or take one.
    for pair in added.windows(2) {
        assert!(
            pair[1].since(pair[0]) >= Duration::from_secs(1),
            "tainted faster than the zone's rate: {added:?}\n{}",
            d.log()
        );
    }
    let healthy = spec.in_zone("z2");
    assert!(no_execute_tainted(&mut admin, &healthy).is_empty());
    assert!(deleted(&mut admin, &healthy).is_empty());
    assert_eq!(deleted(&mut admin, &dead).len(), dead.len());
}

/// A single node dies in a healthy zone: judged at its deadline and tainted NoExecute at once
/// (no other node of its zone is a suspect, so nothing waits).
#[test]
fn a_single_dead_node_in_a_healthy_zone_is_tainted_at_its_deadline() {
    let spec = zone_fleet(2, 4, true);
    let Some((server, kubelets, _serial)) = fleet(&spec) else {
        return;
    };
    let all = spec.names();
    at_once_pods(&server, &all);
    let dir = TempDir::new("safety-single");
    let d = leading_daemon(&server, &dir, "safety-single", &zone_timing());
    std::thread::sleep(Duration::from_secs(3));
    let victim = "z1-n2".to_string();
    kubelets.silence(std::slice::from_ref(&victim));
    let silenced = Instant::now();
    let mut admin = admin_client(&server);
    // Polled every few milliseconds: when Unknown and the taint were first seen.
    let (mut unknown_at, mut tainted_at) = (None, None);
    while tainted_at.is_none() && silenced.elapsed() < Duration::from_secs(20) {
        let node = node_json(&mut admin, &victim);
        let seen = (Instant::now(), admin.now());
        if unknown_at.is_none() && ready_of(&node).0 == "Unknown" {
            unknown_at = Some(seen);
        }
        if taints_of(&node).contains(UNREACHABLE_NO_EXECUTE) {
            tainted_at = Some(seen);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let last = kubelets.last_renewal(&victim).expect("renewed before");
    let (Some(unknown_at), Some(tainted_at)) = (unknown_at, tainted_at) else {
        panic!("not judged and tainted within 20 s\n{}", d.log());
    };
    let deadline = last + Duration::from_secs(8);
    let verdict_late = unknown_at.1.since(deadline);
    let taint_after_verdict = tainted_at.0.saturating_duration_since(unknown_at.0);
    eprintln!(
        "single node: Unknown {verdict_late:?} after last renewal + grace, NoExecute {taint_after_verdict:?} after Unknown"
    );
    assert!(
        unknown_at.1 >= deadline,
        "judged before its deadline\n{}",
        d.log()
    );
    // The verdict: read late by at most the watch's batching (200 ms in a small cluster), then
    // the live Lease read and the status write.
    assert!(
        verdict_late <= Duration::from_millis(600),
        "Unknown {verdict_late:?} after the deadline\n{}",
        d.log()
    );
    assert!(
        taint_after_verdict <= Duration::from_millis(100),
        "NoExecute {taint_after_verdict:?} after Unknown\n{}",
        d.log()
    );
    assert_eq!(deleted(&mut admin, std::slice::from_ref(&victim)).len(), 1);
    let others: Vec<String> = all.into_iter().filter(|n| *n != victim).collect();
    assert!(no_execute_tainted(&mut admin, &others).is_empty());
}

// ---- restarts and leader changes ----------------------------------------------------------

/// The restart scenarios' timing: grace 8 s, Leases of 8 s, a 1 s pass; one node dies in a
/// zone of three (1 of 3 not Ready: Normal, tainted at once).
fn restart_timing(leader: Option<&str>) -> Timing {
    Timing {
        grace: "8s",
        startup_grace: "16s",
        monitor_period: "1s",
        eviction_rate: 0.5,
        secondary_rate: 0.01,
        leader: leader.map(str::to_string),
        ..Timing::default()
    }
}

/// How long the dead node's pods tolerate `unreachable:NoExecute`.
const RESTART_TOLERATION: Duration = Duration::from_secs(12);

/// A fleet of 2 zones × 3 nodes whose victim `z1-n2` carries two pods tolerating the
/// unreachable taint for [`RESTART_TOLERATION`].
#[allow(clippy::type_complexity)]
fn restart_fleet() -> Option<(
    RealApiserver,
    Kubelets,
    String,
    Vec<String>,
    MutexGuard<'static, ()>,
)> {
    let spec = FleetSpec {
        lease_duration_seconds: 8,
        spread_phases: true,
        ..FleetSpec::zones(2, 3)
    };
    let (server, kubelets, serial) = fleet(&spec)?;
    let victim = "z1-n2".to_string();
    let pods: Vec<String> = ["a", "b"]
        .iter()
        .map(|p| format!("{victim}-tolerates-{p}"))
        .collect();
    let seconds = i64::try_from(RESTART_TOLERATION.as_secs()).unwrap();
    for p in &pods {
        create_running_pod(&server, p, &victim, Some(seconds));
    }
    Some((server, kubelets, victim, pods, serial))
}

/// Silences `victim` and waits for its `unreachable:NoExecute` taint: its `timeAdded`, and
/// when the test first saw it.
fn kill_kubelet_until_tainted(
    server: &RealApiserver,
    kubelets: &Kubelets,
    victim: &str,
    d: &Daemon,
) -> (Time, Instant) {
    kubelets.silence(&[victim.to_string()]);
    let mut admin = admin_client(server);
    let mut added = None;
    wait_until(
        "the silent node tainted unreachable:NoExecute",
        Duration::from_secs(30),
        || {
            added = taint_time_added(&node_json(&mut admin, victim), UNREACHABLE_NO_EXECUTE);
            added.is_some()
        },
        || d.log(),
    );
    (added.unwrap(), Instant::now())
}

/// Polls the victim every 25 ms until every pod's deletion was asked (or `limit`): the
/// NoExecute taint must stay on the node with its `timeAdded` throughout. Returns when the
/// test first saw each pod being deleted (its own clock, the daemons' too: one host).
fn watch_the_taint_until_deleted(
    server: &RealApiserver,
    victim: &str,
    time_added: Time,
    pods: &[String],
    limit: Duration,
    context: impl Fn() -> String,
) -> Vec<Time> {
    let mut admin = admin_client(server);
    let started = Instant::now();
    let mut seen: Vec<Option<Time>> = vec![None; pods.len()];
    while seen.iter().any(Option::is_none) {
        let now = admin.now();
        let taint = taint_time_added(&node_json(&mut admin, victim), UNREACHABLE_NO_EXECUTE);
        assert_eq!(
            taint,
            Some(time_added),
            "{victim}'s unreachable:NoExecute taint (timeAdded {}) removed or re-stamped {:?} \
             after the watch began\n{}",
            time_added.to_rfc3339(),
            started.elapsed(),
            context()
        );
        for (p, at) in pods.iter().zip(seen.iter_mut()) {
            if at.is_none() && pod_deleting(&mut admin, p) {
                *at = Some(now);
            }
        }
        assert!(
            started.elapsed() < limit,
            "pods not deleted within {limit:?}: {seen:?}\n{}",
            context()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
    seen.into_iter().map(Option::unwrap).collect()
}

/// The pods went at `timeAdded + tolerationSeconds` (seen within 1.5 s of it: the poll, the
/// API round-trips), not a full `tolerationSeconds` after `old_gone` (`what`: the old process
/// killed, the new one started); no "Cancelling deletion" event on any of them.
fn assert_deleted_from_time_added(
    server: &RealApiserver,
    pods: &[String],
    deleted: &[Time],
    time_added: Time,
    (what, old_gone): (&str, Time),
    context: impl Fn() -> String,
) {
    let deadline = time_added + RESTART_TOLERATION;
    let mut admin = admin_client(server);
    for (p, at) in pods.iter().zip(deleted) {
        let asked = real_apiserver_support::fleet::pod_deletion_asked(&mut admin, p);
        eprintln!(
            "{p}: deletion seen {} after timeAdded + {RESTART_TOLERATION:?}, {:?} after {what} \
             (deletionTimestamp less grace: {:?})",
            if *at >= deadline {
                format!("{:?}", at.since(deadline))
            } else {
                format!("-{:?}", deadline.since(*at))
            },
            at.since(old_gone),
            asked.map(|a| a.to_rfc3339()),
        );
        assert!(
            *at + Duration::from_millis(100) >= deadline,
            "{p} deleted at {}, before timeAdded {} + {RESTART_TOLERATION:?}\n{}",
            at.to_rfc3339(),
            time_added.to_rfc3339(),
            context()
        );
        assert!(
            at.since(deadline) <= Duration::from_millis(1500),
            "{p} deleted at {}: {:?} after timeAdded {} + {RESTART_TOLERATION:?} ({what} at \
             {})\n{}",
            at.to_rfc3339(),
            at.since(deadline),
            time_added.to_rfc3339(),
            old_gone.to_rfc3339(),
            context()
        );
        assert!(*at < old_gone + RESTART_TOLERATION);
        let cancelled: Vec<(String, String)> =
            real_apiserver_support::fleet::event_reasons(server, p)
                .into_iter()
                .filter(|(_, message)| message.starts_with("Cancelling deletion"))
                .collect();
        assert!(cancelled.is_empty(), "{p}: {cancelled:?}\n{}", context());
    }
}

/// Issue #25 item 2: systemd restarts the daemon 1 s after a SIGKILL that came 5 s after it
/// tainted a dead node. The new process leaves the taint and its `timeAdded` alone (upstream's
/// first pass removes it and taints again 0.1 s later, cancelling every pending deletion and
/// restarting the countdowns), and the pods go at `timeAdded + tolerationSeconds`.
#[test]
fn a_restart_mid_outage_keeps_the_taint_and_its_countdown() {
    let Some((server, kubelets, victim, pods, _serial)) = restart_fleet() else {
        return;
    };
    let dir = TempDir::new("safety-restart");
    let timing = restart_timing(None);
    let text = config_text(Path::new(server.var("DAEMON_KUBECONFIG")), &timing);
    let mut first = Daemon::start("safety-restart-1", &dir, &text, &[]);
    first.wait_log("acting", Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(3));
    let (time_added, seen) = kill_kubelet_until_tainted(&server, &kubelets, &victim, &first);
    std::thread::sleep(Duration::from_secs(5).saturating_sub(seen.elapsed()));
    first.signal("KILL");
    first.wait_exit(Duration::from_secs(5));
    std::thread::sleep(Duration::from_secs(1));
    let mut second = Daemon::start("safety-restart-2", &dir, &text, &[]);
    let restarted = admin_client(&server).now();
    let context = || format!("{}\n{}", first.log(), second.log());
    // Watched from before the new process lists the cluster until the pods are gone.
    let deleted = watch_the_taint_until_deleted(
        &server,
        &victim,
        time_added,
        &pods,
        Duration::from_secs(30),
        context,
    );
    second.wait_log("acting", Duration::from_secs(5));
    let restarted = ("the restart", restarted);
    assert_deleted_from_time_added(&server, &pods, &deleted, time_added, restarted, || {
        format!("{}\n{}", first.log(), second.log())
    });
    assert!(
        !second.has_line("taints -node.kubernetes.io/unreachable:NoExecute"),
        "{}",
        second.log()
    );
}

/// Issue #25 item 2, failover: the leader is SIGKILLed 3 s after it tainted a dead node; the
/// standby takes over when the lease runs out and, like a restart, keeps the taint and its
/// `timeAdded` and deletes the pods at `timeAdded + tolerationSeconds`.
#[test]
fn a_leader_failover_mid_outage_keeps_the_taint_and_its_countdown() {
    let Some((server, kubelets, victim, pods, _serial)) = restart_fleet() else {
        return;
    };
    let dir = TempDir::new("safety-failover");
    let kubeconfig = Path::new(server.var("DAEMON_KUBECONFIG"));
    let text_a = config_text(kubeconfig, &restart_timing(Some("failover-a")));
    let text_b = config_text(kubeconfig, &restart_timing(Some("failover-b")));
    let mut a = Daemon::start("safety-failover-a", &dir, &text_a, &[]);
    a.wait_log("acting as leader", Duration::from_secs(30));
    let mut b = Daemon::start("safety-failover-b", &dir, &text_b, &[]);
    b.wait_log("initial sync complete", Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(2));
    let (time_added, seen) = kill_kubelet_until_tainted(&server, &kubelets, &victim, &a);
    assert!(!b.has_line("acting as leader"), "{}", b.log());
    std::thread::sleep(Duration::from_secs(3).saturating_sub(seen.elapsed()));
    a.signal("KILL");
    a.wait_exit(Duration::from_secs(5));
    let killed = admin_client(&server).now();
    let deleted = watch_the_taint_until_deleted(
        &server,
        &victim,
        time_added,
        &pods,
        Duration::from_secs(30),
        || format!("{}\n{}", a.log(), b.log()),
    );
    b.wait_log("acting as leader", Duration::from_secs(1));
    let killed = ("the leader's SIGKILL", killed);
    assert_deleted_from_time_added(&server, &pods, &deleted, time_added, killed, || {
        format!("{}\n{}", a.log(), b.log())
    });
    assert!(
        !b.has_line("taints -node.kubernetes.io/unreachable:NoExecute"),
        "{}",
        b.log()
    );
}

// ---- the stale-cache hold after a connection reset ----------------------------------------
