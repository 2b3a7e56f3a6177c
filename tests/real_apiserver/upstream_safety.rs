//! Never less safe than upstream, against real kube-apiservers (the releases at the end of
//! this file): the scenarios where an event-driven decision could differ from what
//! kube-controller-manager's batched passes decide. The test plays the kubelets (each
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

use std::path::Path;
use std::time::{Duration, Instant};

use crate::e2e_support::{Daemon, TempDir, Timing, config_text, holds_for, wait_until};
use crate::real_apiserver_support::RealApiserver;
use crate::real_apiserver_support::fleet::{
    FleetSpec, Kubelets, UNREACHABLE_NO_EXECUTE, UNREACHABLE_NO_SCHEDULE, admin_client,
    create_fleet, create_running_pod, deleted, no_execute_tainted, node_json, pod_deleting,
    ready_of, taint_time_added, taints_of,
};
use crate::real_apiserver_support::versions::{Kube, versions};
use node_lifecycled::kube::ApiClient;
use node_lifecycled::time::Time;

/// A started server with the fleet of `spec` and its kubelets running (`RealApiserver::start`
/// keeps the scenarios apart: each measures timing against its own server), or `None` when the server is unavailable and the skip variable says so.
fn fleet(kube: Kube, spec: &FleetSpec) -> Option<(RealApiserver, Kubelets)> {
    let server = RealApiserver::start(kube)?;
    let kubelets = create_fleet(&server, spec);
    Some((server, kubelets))
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

/// A zone scenario under way: the fleet of `zone_fleet`, a pod deleted at once per node, the
/// daemon leading and the fleet healthy for 3 s.
struct ZoneRun {
    server: RealApiserver,
    kubelets: Kubelets,
    spec: FleetSpec,
    all: Vec<String>,
    d: Daemon,
    _dir: TempDir,
}

fn zone_run(
    kube: Kube,
    name: &str,
    zones: usize,
    per_zone: usize,
    spread_phases: bool,
) -> Option<ZoneRun> {
    let spec = zone_fleet(zones, per_zone, spread_phases);
    let (server, kubelets) = fleet(kube, &spec)?;
    let all = spec.names();
    at_once_pods(&server, &all);
    let dir = TempDir::new(name);
    let d = leading_daemon(&server, &dir, name, &zone_timing());
    std::thread::sleep(Duration::from_secs(3));
    Some(ZoneRun {
        server,
        kubelets,
        spec,
        all,
        d,
        _dir: dir,
    })
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

/// Three of zone z1's four nodes fall silent at the same instant (their kubelets renewing at
/// their own phases, or all together): judged Unknown and tainted NoSchedule, nothing tainted
/// NoExecute and nothing deleted. Returns the daemon, for what else the scenario checks.
fn most_of_a_zone_dies(kube: Kube, name: &str, spread_phases: bool) -> Option<ZoneRun> {
    let run = zone_run(kube, name, 2, 4, spread_phases)?;
    let dead: Vec<String> = run.spec.in_zone("z1").into_iter().take(3).collect();
    run.kubelets.silence(&dead);
    judged_and_spared(&run.server, &run.d, &dead, &run.all, Duration::from_secs(6));
    Some(run)
}

/// Three of a zone's four nodes stop heartbeating at the same instant in a cluster of 8:
/// upstream's pass sees all three Unknown together, the zone is partially disrupted and, the
/// cluster being small, nothing is tainted NoExecute. The first verdict must not taint its node
/// before the other two are judged.
fn most_of_a_zone_dying_together_in_a_small_cluster_taints_nothing(kube: Kube) {
    if let Some(run) = most_of_a_zone_dies(kube, "safety-zone-sync", false) {
        assert!(run.d.has_line("PartialDisruption"), "{}", run.d.log());
    }
}

/// The same with each kubelet renewing at its own phase, so the three deadlines spread over a
/// renew interval (2 s, wider than the 1 s pass): upstream's pass sees the first node alone and
/// taints it. Beyond upstream, the nodes that have missed two renewals are counted as suspects
/// in the zone state used for NoExecute tainting: nothing is tainted.
fn most_of_a_zone_dying_with_spread_heartbeats_taints_nothing(kube: Kube) {
    most_of_a_zone_dies(kube, "safety-zone-spread", true);
}

/// Every node of the cluster silent at once (the control plane cut off from its nodes): every
/// zone fully disrupted, nothing tainted NoExecute, nothing deleted.
fn every_node_silent_taints_nothing(kube: Kube) {
    let Some(run) = zone_run(kube, "safety-all-silent", 2, 3, false) else {
        return;
    };
    run.kubelets.silence(&run.all);
    judged_and_spared(
        &run.server,
        &run.d,
        &run.all,
        &run.all,
        Duration::from_secs(5),
    );
}

/// A whole zone goes dark (heartbeats spread) while the other is healthy: upstream presumes the
/// zone dead and keeps tainting it at the normal rate (here 0.5/s: one node every 2 s).
fn a_whole_zone_dark_beside_a_healthy_one_is_tainted_at_the_normal_rate(kube: Kube) {
    let Some(run) = zone_run(kube, "safety-zone-dark", 2, 4, true) else {
        return;
    };
    let ZoneRun {
        server,
        kubelets,
        spec,
        d,
        ..
    } = &run;
    let dead = spec.in_zone("z1");
    kubelets.silence(&dead);
    let mut admin = admin_client(server);
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
    wait_until(
        "every pod of the dark zone deleted",
        Duration::from_secs(5),
        || deleted(&mut admin_client(server), &dead).len() == dead.len(),
        || d.log(),
    );
}

/// A single node dies in a healthy zone: judged at its deadline and tainted NoExecute at once
/// (no other node of its zone is a suspect, so nothing waits).
fn a_single_dead_node_in_a_healthy_zone_is_tainted_at_its_deadline(kube: Kube) {
    let Some(run) = zone_run(kube, "safety-single", 2, 4, true) else {
        return;
    };
    let ZoneRun {
        server,
        kubelets,
        all,
        d,
        ..
    } = &run;
    let victim = "z1-n2".to_string();
    kubelets.silence(std::slice::from_ref(&victim));
    let silenced = Instant::now();
    let mut admin = admin_client(server);
    // Polled every few milliseconds: when Unknown and the taint were first seen, with how long
    // the daemon and this thread had waited for a CPU by then (a busy machine's share).
    let (mut unknown_at, mut tainted_at) = (None, None);
    while tainted_at.is_none() && silenced.elapsed() < Duration::from_secs(20) {
        let node = node_json(&mut admin, &victim);
        let seen = (
            Instant::now(),
            admin.now(),
            d.runqueue_wait() + node_lifecycled_testkit::runqueue_wait(),
        );
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
    let waited = tainted_at.2.saturating_sub(unknown_at.2);
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
        taint_after_verdict <= Duration::from_millis(100) + waited,
        "NoExecute {taint_after_verdict:?} after Unknown ({waited:?} of it waiting for a CPU)\n{}",
        d.log()
    );
    wait_until(
        "the victim's pod deleted",
        Duration::from_secs(5),
        || deleted(&mut admin_client(server), std::slice::from_ref(&victim)).len() == 1,
        || d.log(),
    );
    let others: Vec<String> = all.iter().filter(|n| **n != victim).cloned().collect();
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
fn restart_fleet(kube: Kube) -> Option<(RealApiserver, Kubelets, String, Vec<String>)> {
    let spec = FleetSpec {
        lease_duration_seconds: 8,
        spread_phases: true,
        ..FleetSpec::zones(2, 3)
    };
    let (server, kubelets) = fleet(kube, &spec)?;
    let victim = "z1-n2".to_string();
    let pods: Vec<String> = ["a", "b"]
        .iter()
        .map(|p| format!("{victim}-tolerates-{p}"))
        .collect();
    let seconds = i64::try_from(RESTART_TOLERATION.as_secs()).unwrap();
    for p in &pods {
        create_running_pod(&server, p, &victim, Some(seconds));
    }
    Some((server, kubelets, victim, pods))
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
        let asked = crate::real_apiserver_support::fleet::pod_deletion_asked(&mut admin, p);
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
            crate::real_apiserver_support::fleet::event_reasons(server, p)
                .into_iter()
                .filter(|(_, message)| message.starts_with("Cancelling deletion"))
                .collect();
        assert!(cancelled.is_empty(), "{p}: {cancelled:?}\n{}", context());
    }
}

/// systemd restarts the daemon 1 s after a SIGKILL that came 5 s after it tainted a dead node. The
/// new process leaves the taint and its `timeAdded` alone (upstream's first pass removes it and
/// taints again 0.1 s later, cancelling every pending deletion and restarting the countdowns), and
/// the pods go at `timeAdded + tolerationSeconds`.
fn a_restart_mid_outage_keeps_the_taint_and_its_countdown(kube: Kube) {
    let Some((server, kubelets, victim, pods)) = restart_fleet(kube) else {
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

/// Restarts change nothing, failover: the leader is SIGKILLed 3 s after it tainted a dead node; the
/// standby takes over when the lease runs out and, like a restart, keeps the taint and its
/// `timeAdded` and deletes the pods at `timeAdded + tolerationSeconds`.
fn a_leader_failover_mid_outage_keeps_the_taint_and_its_countdown(kube: Kube) {
    let Some((server, kubelets, victim, pods)) = restart_fleet(kube) else {
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

/// Issue 46, item 2: a takeover sees the fleet before it acts. A node is tainted and its pods
/// count down; then the rest of the cluster goes silent and the leader is SIGKILLed before those
/// nodes are judged. A running upstream would find every zone down and lift the taint, and a
/// restarted one removes it at registration: the pods stay. The standby judges the silent nodes
/// from the last renewals it saw (not a fresh grace from the takeover), holds the inherited
/// countdowns while its suspects would put every zone down, then lifts the taint.
fn a_takeover_as_the_rest_of_the_cluster_goes_silent_keeps_the_pods_upstream_keeps(kube: Kube) {
    let Some((server, kubelets, victim, pods)) = restart_fleet(kube) else {
        return;
    };
    let dir = TempDir::new("safety-takeover-all-silent");
    let kubeconfig = Path::new(server.var("DAEMON_KUBECONFIG"));
    let text_a = config_text(kubeconfig, &restart_timing(Some("takeover-a")));
    let text_b = config_text(kubeconfig, &restart_timing(Some("takeover-b")));
    let mut a = Daemon::start("safety-takeover-a", &dir, &text_a, &[]);
    a.wait_log("acting as leader", Duration::from_secs(30));
    let mut b = Daemon::start("safety-takeover-b", &dir, &text_b, &[]);
    b.wait_log("initial sync complete", Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(2));
    kill_kubelet_until_tainted(&server, &kubelets, &victim, &a);
    let all: Vec<String> = ["z1-n1", "z1-n2", "z1-n3", "z2-n1", "z2-n2", "z2-n3"]
        .iter()
        .map(|n| n.to_string())
        .collect();
    kubelets.silence(&all);
    std::thread::sleep(Duration::from_secs(1));
    a.signal("KILL");
    a.wait_exit(Duration::from_secs(5));
    let mut admin = admin_client(&server);
    let pods_deleted = |admin: &mut ApiClient| pods.iter().any(|p| pod_deleting(admin, p));
    // Past the pods' countdown (12 s from the taint) and every verdict (8 s from the silence).
    holds_for(
        "the victim's pods kept through the takeover",
        Duration::from_secs(20),
        || !pods_deleted(&mut admin),
        || format!("{}\n{}", a.log(), b.log()),
    );
    b.wait_log("acting as leader", Duration::from_secs(1));
    wait_until(
        "every zone down lifts the victim's NoExecute taint",
        Duration::from_secs(10),
        || !no_execute_tainted(&mut admin, std::slice::from_ref(&victim)).contains(&victim),
        || format!("{}\n{}", a.log(), b.log()),
    );
    assert!(!pods_deleted(&mut admin), "{}\n{}", a.log(), b.log());
}

// ---- the stale-cache hold after a connection reset ----------------------------------------

use crate::real_apiserver_support::fleet::pod_deletion_asked;
use crate::real_apiserver_support::reset_proxy::{ResetProxy, kubeconfig_server};

/// The reset scenarios' timing: the installed watch idle timeout (30 s), so a quiet watch's
/// successor sends its first line only ~20 s after it is opened (a bookmark 2 s before its
/// `timeoutSeconds` of 21–27 s); the grace must be longer than the idle timeout.
fn reset_timing() -> Timing {
    Timing {
        grace: "32s",
        startup_grace: "40s",
        monitor_period: "1s",
        eviction_rate: 1.0,
        secondary_rate: 0.01,
        leader: Some("e2e-reset".to_string()),
        watch_idle_timeout: "30s",
        ..Timing::default()
    }
}

/// The hold's spans in the daemon's debug log: (held from, held until, the caches' settle not
/// included), as logged by `report_informers_watching`.
fn holds_in_log(d: &Daemon) -> Vec<(Time, Option<Time>)> {
    let stamp = |line: &str| line.split_whitespace().next().and_then(Time::parse_rfc3339);
    let mut holds: Vec<(Time, Option<Time>)> = Vec::new();
    for line in d.lines() {
        if line.contains("new NoExecute taints and pod deletions held") {
            if let Some(at) = stamp(&line) {
                holds.push((at, None));
            }
        } else if line.contains("informers watching again")
            && let (Some(at), Some(last)) = (stamp(&line), holds.last_mut())
            && last.1.is_none()
        {
            last.1 = Some(at);
        }
    }
    holds
}

/// What one reset scenario measured.
struct ResetOutcome {
    /// When the pod's deletion was first seen, less its due time (the taint's `timeAdded` +
    /// 20 s, on the test's monotonic clock), in seconds (negative: before).
    late: f64,
    /// The same against the moment this test first saw the taint + 20 s. The daemon counts
    /// from when it sees the taint, as upstream's taint manager does, and `timeAdded` has whole
    /// seconds: a taint written at x.97 s is due 0.97 s after `timeAdded` + 20 s. The test sees
    /// it at most a poll (20 ms) and a round trip after the daemon, so this is the lateness the
    /// reset can have caused, less at most that.
    late_from_sight: f64,
    /// The same against the taint's `timeAdded` (whole seconds) + 20 s.
    late_by_time_added: f64,
    /// The hold the reset caused, from the daemon's log (settle not included).
    hold: Option<Duration>,
}

/// A node dies in a healthy zone and is tainted `unreachable:NoExecute`; its pod tolerates it
/// for 20 s. `lead` before the pod is due, the proxy between the daemon and the API server
/// resets every connection once (new ones are accepted at once). Measures when the pod's
/// deletion is asked (polled every 20 ms) against its due time.
fn reset_before_due(kube: Kube, name: &str, lead: Duration) -> Option<ResetOutcome> {
    const TOLERATION: u64 = 20;
    let spec = FleetSpec {
        lease_duration_seconds: 8,
        spread_phases: true,
        ..FleetSpec::zones(2, 3)
    };
    let (server, kubelets) = fleet(kube, &spec)?;
    let victim = "z1-n2".to_string();
    let pod = "reset-victim";
    create_running_pod(&server, pod, &victim, Some(TOLERATION as i64));
    let dir = TempDir::new(name);
    let daemon_kubeconfig = Path::new(server.var("DAEMON_KUBECONFIG"));
    let proxy = ResetProxy::start(kubeconfig_server(daemon_kubeconfig));
    let via_proxy = proxy.kubeconfig_copy(daemon_kubeconfig, dir.path());
    // Debug lines say when the hold starts and ends.
    let text = format!(
        "log_level = \"debug\"\n{}",
        config_text(&via_proxy, &reset_timing())
    );
    let mut d = Daemon::start(name, &dir, &text, &[]);
    d.wait_log("acting as leader", Duration::from_secs(30));
    kubelets.silence(std::slice::from_ref(&victim));
    let mut admin = admin_client(&server);
    let poll = Duration::from_millis(20);
    let limit = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        if taints_of(&node_json(&mut admin, &victim)).contains(UNREACHABLE_NO_EXECUTE) {
            break Instant::now();
        }
        assert!(Instant::now() < limit, "not tainted in time\n{}", d.log());
        std::thread::sleep(poll);
    };
    let time_added = taint_time_added(&node_json(&mut admin, &victim), UNREACHABLE_NO_EXECUTE)
        .expect("timeAdded");
    // The pod may go from timeAdded + its toleration (whole seconds, up to a second before the
    // taint was written), on this clock; the daemon counts from when it saw the taint, just
    // before this test did, so the reset is aimed `lead` before the toleration runs out from
    // this test's sight.
    let due_wall = time_added + Duration::from_secs(TOLERATION);
    let due = Instant::now() + due_wall.since(admin.now());
    let reset_at = (seen + Duration::from_secs(TOLERATION)).max(due) - lead;
    while Instant::now() < reset_at {
        assert!(!pod_deleting(&mut admin, pod), "deleted early\n{}", d.log());
        std::thread::sleep(poll.min(reset_at.saturating_duration_since(Instant::now())));
    }
    let open = proxy.reset_all();
    let reset_wall = admin.now();
    let deleted_at = loop {
        if pod_deleting(&mut admin, pod) {
            break Instant::now();
        }
        assert!(
            Instant::now() < due + Duration::from_secs(40),
            "the pod was not deleted\n{}",
            d.log()
        );
        std::thread::sleep(poll);
    };
    let deleted_wall = admin.now();
    let signed = |a: Instant, b: Instant| match a.checked_duration_since(b) {
        Some(d) => d.as_secs_f64(),
        None => -b.duration_since(a).as_secs_f64(),
    };
    let late = signed(deleted_at, due);
    let late_from_sight = signed(deleted_at, seen + Duration::from_secs(TOLERATION));
    // The same, by the wall clocks (the test and the daemon share this host's).
    let due_by_time_added = time_added + Duration::from_secs(TOLERATION);
    let late_by_time_added = deleted_wall.as_unix_millis() as f64 / 1000.0
        - due_by_time_added.as_unix_millis() as f64 / 1000.0;
    let hold = holds_in_log(&d)
        .into_iter()
        .find(|(from, _)| from.as_unix_millis() + 2_000 >= reset_wall.as_unix_millis())
        .and_then(|(from, until)| until.map(|u| u.since(from)));
    let asked = pod_deletion_asked(&mut admin, pod);
    // What the daemon's watches did from the reset on.
    let from = reset_wall.as_unix_millis().saturating_sub(100);
    for line in d.lines() {
        let at = line.split_whitespace().next().and_then(Time::parse_rfc3339);
        let relevant = ["watch:", "held", "watching again", "deleting", "Deleting"]
            .iter()
            .any(|k| line.contains(k));
        if relevant && at.is_some_and(|t| t.as_unix_millis() >= from) {
            eprintln!("  {line}");
        }
    }
    eprintln!(
        "{name}: {open} connections reset {lead:?} before the pod was due; deletion seen {late:+.3} s \
         after due (timeAdded + {TOLERATION} s, on the monotonic clock), {late_from_sight:+.3} s \
         after the taint was first seen + {TOLERATION} s, {late_by_time_added:+.3} s after \
         timeAdded {time_added:?} + {TOLERATION} s (deletionTimestamp - grace: {asked:?}); hold \
         after the reset {hold:?} (settle not included); proxy accepted {} connections",
        proxy.accepted()
    );
    Some(ResetOutcome {
        late,
        late_from_sight,
        late_by_time_added,
        hold,
    })
}

/// 7 s before a pod's `tolerationSeconds` run out, every connection of the daemon is reset once (a
/// load balancer, an API server restart; new connections accepted at
/// once), with the installed watch idle timeout (30 s). Upstream deletes the pod on time; so
/// must the daemon: the hold after a reset ends once the watches are re-established, not at
/// their first line (~20 s later on a quiet resource).
fn a_connection_reset_before_a_pod_is_due_does_not_delay_its_deletion(kube: Kube) {
    let Some(outcome) = reset_before_due(kube, "reset-7s", Duration::from_secs(7)) else {
        return;
    };
    assert!(
        outcome.late_from_sight.abs() <= 1.0,
        "deletion {:+.3} s from the taint's sight + its toleration ({:+.3} s from timeAdded's \
         whole second), hold {:?}",
        outcome.late_from_sight,
        outcome.late,
        outcome.hold
    );
    assert!(outcome.late >= -0.1, "deleted before it was due");
}

/// The same reset 0.3 s before the pod is due: the deletion waits for the watches to be
/// re-established, and no longer: the first backoff (0.5 s ± 20 %), one round trip (connect,
/// TLS, the watch's answer) and the settle (the answer's round trip, 50–500 ms), plus 0.4 s
/// for a busy machine to schedule the daemon and the API server.
fn a_connection_reset_just_before_a_pod_is_due_delays_it_by_the_reconnect_at_most(kube: Kube) {
    let lead = Duration::from_millis(300);
    let Some(outcome) = reset_before_due(kube, "reset-0.3s", lead) else {
        return;
    };
    let allowance = 0.6 + 0.5 + 0.4;
    assert!(
        outcome.late_from_sight <= allowance - lead.as_secs_f64(),
        "deletion {:+.3} s from the taint's sight + its toleration, {:+.3} s after the reset \
         ({:+.3} s by timeAdded), hold {:?}: more than the reconnect allowance ({allowance} s)",
        outcome.late_from_sight,
        outcome.late + lead.as_secs_f64(),
        outcome.late_by_time_added,
        outcome.hold
    );
    assert!(outcome.late >= -0.1, "deleted before it was due");
}

// The releases each scenario runs on: the whole tier on the newest; on 1.35 and the 1.20.2 floor
// the protocol and a representative few of each kind (README, Supported Kubernetes versions).
versions! {
    v1_37 => [
        most_of_a_zone_dying_together_in_a_small_cluster_taints_nothing,
        most_of_a_zone_dying_with_spread_heartbeats_taints_nothing,
        every_node_silent_taints_nothing,
        a_whole_zone_dark_beside_a_healthy_one_is_tainted_at_the_normal_rate,
        a_single_dead_node_in_a_healthy_zone_is_tainted_at_its_deadline,
        a_restart_mid_outage_keeps_the_taint_and_its_countdown,
        a_leader_failover_mid_outage_keeps_the_taint_and_its_countdown,
        a_connection_reset_before_a_pod_is_due_does_not_delay_its_deletion,
        a_connection_reset_just_before_a_pod_is_due_delays_it_by_the_reconnect_at_most,
        a_takeover_as_the_rest_of_the_cluster_goes_silent_keeps_the_pods_upstream_keeps,
    ],
    v1_35 => [
        most_of_a_zone_dying_with_spread_heartbeats_taints_nothing,
        a_single_dead_node_in_a_healthy_zone_is_tainted_at_its_deadline,
        a_leader_failover_mid_outage_keeps_the_taint_and_its_countdown,
        a_connection_reset_before_a_pod_is_due_does_not_delay_its_deletion,
    ],
    v1_20 => [
        a_single_dead_node_in_a_healthy_zone_is_tainted_at_its_deadline,
        a_restart_mid_outage_keeps_the_taint_and_its_countdown,
        a_connection_reset_before_a_pod_is_due_does_not_delay_its_deletion,
    ],
}
