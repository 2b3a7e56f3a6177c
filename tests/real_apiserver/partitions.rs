//! Partitions are not failures, against real kube-apiservers (the releases at the end of this file),
//! one short scenario per feature. The test plays the kubelets (Leases of 8 s renewed every 2 s at
//! their own phases); a site is the label
//! `example.com/site=s1` on four nodes, two in zone z1 and two in z2.
//!
//! - pods stay Ready under `mark_pods_not_ready = "unless-disrupted"` in a site cut off;
//! - a disruption domain by label groups nodes across zones (three of the site's four nodes
//!   dead: the site is partially disrupted and a small cluster taints nothing, where by zone
//!   each zone would be Normal and taint);
//! - `full_disruption = "hold"`: a dark site is not tainted NoExecute until `hold_max`, then at
//!   the normal rate.
//!
//! Fails if the server cannot be started, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1 (then it
//! says why).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::e2e_support::{Daemon, TempDir, Timing, config_text, holds_for, wait_until};
use crate::real_apiserver_support::RealApiserver;
use crate::real_apiserver_support::fleet::{
    FleetSpec, Kubelets, UNREACHABLE_NO_EXECUTE, UNREACHABLE_NO_SCHEDULE, admin_client,
    create_fleet, create_running_pod, deleted, no_execute_tainted, node_json, ready_of,
    taint_time_added, taints_of,
};
use crate::real_apiserver_support::versions::{Kube, versions};
use node_lifecycled::kube::{ApiClient, PatchType};
use node_lifecycled::time::Time;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

const SITE_NODES: [&str; 4] = ["z1-n1", "z1-n2", "z2-n1", "z2-n2"];

/// Grace 8 s, a 1 s pass, 0.5 taints per second, small clusters.
fn timing() -> Timing {
    Timing {
        grace: "8s",
        startup_grace: "16s",
        monitor_period: "1s",
        eviction_rate: 0.5,
        secondary_rate: 0.01,
        leader: Some("e2e-partitions".to_string()),
        ..Timing::default()
    }
}

struct Run {
    server: RealApiserver,
    kubelets: Kubelets,
    all: Vec<String>,
    d: Daemon,
    _dir: TempDir,
}

/// Two zones of four nodes, the site labelled, one pod per node deleted at once by a NoExecute
/// taint, and the daemon leading with `extra` top-level keys; the fleet healthy for 3 s.
fn run(kube: Kube, name: &str, extra: &str) -> Option<Run> {
    run_with_site(kube, name, extra, &SITE_NODES)
}

/// The same with `site` labelled as the site.
fn run_with_site(kube: Kube, name: &str, extra: &str, site: &[&str]) -> Option<Run> {
    let server = RealApiserver::start(kube)?;
    let spec = FleetSpec {
        lease_duration_seconds: 8,
        spread_phases: true,
        ..FleetSpec::zones(2, 4)
    };
    let kubelets = create_fleet(&server, &spec);
    let all = spec.names();
    let mut admin = admin_client(&server);
    for n in site {
        let body = json!({"metadata": {"labels": {"example.com/site": "s1"}}});
        admin
            .patch::<IgnoredAny>(
                &format!("/api/v1/nodes/{n}"),
                PatchType::Merge,
                body.to_string().as_bytes(),
            )
            .unwrap();
    }
    for n in &all {
        create_running_pod(&server, &format!("{n}-at-once"), n, Some(0));
    }
    let dir = TempDir::new(name);
    let text = format!(
        "disruption_domain = \"example.com/site\"\n{extra}{}",
        config_text(Path::new(server.var("DAEMON_KUBECONFIG")), &timing())
    );
    let mut d = Daemon::start(name, &dir, &text, &[]);
    d.wait_log("acting as leader", Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(3));
    Some(Run {
        server,
        kubelets,
        all,
        d,
        _dir: dir,
    })
}

fn site() -> Vec<String> {
    SITE_NODES.iter().map(|n| n.to_string()).collect()
}

/// The pods on `nodes` whose Ready condition is not True.
fn pods_not_ready(admin: &mut ApiClient, nodes: &[String]) -> Vec<String> {
    nodes
        .iter()
        .map(|n| format!("{n}-at-once"))
        .filter(|p| {
            let pod: Value = admin
                .get_json(&format!("/api/v1/namespaces/e2e/pods/{p}"))
                .unwrap_or_default();
            let ready = pod["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                .map(|c| c["status"].as_str().unwrap_or("").to_string());
            ready.as_deref() != Some("True")
        })
        .collect()
}

fn judged(server: &RealApiserver, d: &Daemon, dead: &[String]) {
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
}

/// The whole site cut off (kubelets at spread phases) under `unless-disrupted` and `hold`: its
/// nodes are judged Unknown, but their pods stay Ready (endpoints kept) and nothing is
/// tainted NoExecute or deleted.
fn pods_stay_ready_in_a_site_cut_off_under_unless_disrupted(kube: Kube) {
    let Some(r) = run(
        kube,
        "partitions-cut-off",
        "mark_pods_not_ready = \"unless-disrupted\"\nfull_disruption = \"hold\"\n",
    ) else {
        return;
    };
    let dead = site();
    r.kubelets.silence(&dead);
    judged(&r.server, &r.d, &dead);
    let mut admin = admin_client(&r.server);
    holds_for(
        "the site's pods Ready, no NoExecute taint, no deletion",
        Duration::from_secs(6),
        || {
            pods_not_ready(&mut admin, &dead).is_empty()
                && no_execute_tainted(&mut admin, &r.all).is_empty()
                && deleted(&mut admin, &r.all).is_empty()
        },
        || {
            format!(
                "not ready {:?}, tainted {:?}\n{}",
                pods_not_ready(&mut admin_client(&r.server), &dead),
                no_execute_tainted(&mut admin_client(&r.server), &r.all),
                r.d.log()
            )
        },
    );
    assert!(r.d.has_line("kept Ready"), "{}", r.d.log());
}

/// Three of the site's four nodes (two in z1, one in z2) die: the site is partially disrupted
/// and, the cluster being small, nothing is tainted NoExecute. By zone, z1 (two of four down)
/// and z2 (one of four) would be Normal and their nodes tainted at once.
fn a_domain_by_label_groups_nodes_across_zones(kube: Kube) {
    let Some(r) = run(kube, "partitions-domain", "") else {
        return;
    };
    let dead: Vec<String> = site().into_iter().take(3).collect();
    r.kubelets.silence(&dead);
    judged(&r.server, &r.d, &dead);
    let mut admin = admin_client(&r.server);
    holds_for(
        "no NoExecute taint and no deletion",
        Duration::from_secs(6),
        || {
            no_execute_tainted(&mut admin, &r.all).is_empty()
                && deleted(&mut admin, &r.all).is_empty()
        },
        || r.d.log(),
    );
    assert!(
        r.d.has_line("example.com/site=s1") && r.d.has_line("PartialDisruption"),
        "{}",
        r.d.log()
    );
}

/// The whole site dark under `hold` with `hold_max = "10s"`: nothing tainted NoExecute while
/// held, then every node of the site tainted at the normal rate (0.5/s: 2 s apart).
fn a_dark_site_is_held_then_tainted_after_hold_max(kube: Kube) {
    let Some(r) = run(
        kube,
        "partitions-hold",
        "full_disruption = \"hold\"\nhold_max = \"10s\"\n",
    ) else {
        return;
    };
    let dead = site();
    r.kubelets.silence(&dead);
    judged(&r.server, &r.d, &dead);
    let judged_at = Instant::now();
    let mut admin = admin_client(&r.server);
    // Held from the last verdict: at least 8 s of the 10 s remain.
    holds_for(
        "no NoExecute taint while held",
        Duration::from_secs(7),
        || no_execute_tainted(&mut admin, &r.all).is_empty(),
        || r.d.log(),
    );
    wait_until(
        "every node of the site tainted NoExecute after hold_max",
        Duration::from_secs(25),
        || no_execute_tainted(&mut admin, &dead).len() == dead.len(),
        || r.d.log(),
    );
    assert!(judged_at.elapsed() >= Duration::from_secs(9));
    let mut added: Vec<Time> = dead
        .iter()
        .map(|n| taint_time_added(&node_json(&mut admin, n), UNREACHABLE_NO_EXECUTE).unwrap())
        .collect();
    added.sort();
    // timeAdded has whole seconds: 2 s apart, give or take one.
    for pair in added.windows(2) {
        let gap = pair[1].since(pair[0]);
        assert!(
            gap >= Duration::from_secs(1) && gap <= Duration::from_secs(3),
            "{added:?}"
        );
    }
    assert!(
        r.d.has_line("held (full_disruption = \"hold\")") && r.d.has_line("hold_max has passed"),
        "{}",
        r.d.log()
    );
    let others: Vec<String> = r
        .all
        .iter()
        .filter(|n| !dead.contains(n))
        .cloned()
        .collect();
    assert_eq!(
        no_execute_tainted(&mut admin, &others),
        Vec::<String>::new()
    );
}

/// Issue 46, item 5: the same site cut off, and the leader SIGKILLed once its nodes are judged.
/// The standby counts every node and computes the domains' states before it judges any node, so
/// the dark site is disrupted from its first pass and its pods are not marked NotReady at the
/// takeover.
fn pods_stay_ready_in_a_dark_site_across_a_takeover_under_unless_disrupted(kube: Kube) {
    let extra = "mark_pods_not_ready = \"unless-disrupted\"\nfull_disruption = \"hold\"\n";
    let Some(mut r) = run(kube, "partitions-takeover", extra) else {
        return;
    };
    let standby_timing = Timing {
        leader: Some("e2e-partitions-standby".to_string()),
        ..timing()
    };
    let text = format!(
        "disruption_domain = \"example.com/site\"\n{extra}{}",
        config_text(
            Path::new(r.server.var("DAEMON_KUBECONFIG")),
            &standby_timing
        )
    );
    let dir = TempDir::new("partitions-takeover-standby");
    let mut standby = Daemon::start("partitions-takeover-standby", &dir, &text, &[]);
    standby.wait_log("initial sync complete", Duration::from_secs(30));
    let dead = site();
    r.kubelets.silence(&dead);
    judged(&r.server, &r.d, &dead);
    r.d.signal("KILL");
    r.d.wait_exit(Duration::from_secs(5));
    let mut admin = admin_client(&r.server);
    holds_for(
        "the site's pods Ready through the takeover, no NoExecute taint, no deletion",
        Duration::from_secs(10),
        || {
            pods_not_ready(&mut admin, &dead).is_empty()
                && no_execute_tainted(&mut admin, &r.all).is_empty()
                && deleted(&mut admin, &r.all).is_empty()
        },
        || format!("{}\n{}", r.d.log(), standby.log()),
    );
    standby.wait_log("acting as leader", Duration::from_secs(1));
}

/// Issue 46, item 1 (seen on a real API server before it was mended): a site of three nodes
/// under `hold` cut off with spread heartbeats. Its first node is judged while the site reads 1
/// of 3; with every suspect counted the site would be fully disrupted and held, so nothing is
/// tainted NoExecute and no pod goes, then or once all three are judged.
fn a_three_node_site_under_hold_loses_nothing_when_cut_off(kube: Kube) {
    const SMALL_SITE: [&str; 3] = ["z1-n1", "z1-n2", "z2-n1"];
    let Some(r) = run_with_site(
        kube,
        "partitions-small-site",
        "full_disruption = \"hold\"\n",
        &SMALL_SITE,
    ) else {
        return;
    };
    let dead: Vec<String> = SMALL_SITE.iter().map(|n| n.to_string()).collect();
    r.kubelets.silence(&dead);
    let mut admin = admin_client(&r.server);
    let cut = Instant::now();
    // From the cut until well after the last verdict (grace 8 s, renewals 2 s apart at most).
    holds_for(
        "no NoExecute taint and no deletion in the cut-off site",
        Duration::from_secs(8),
        || {
            no_execute_tainted(&mut admin, &r.all).is_empty()
                && deleted(&mut admin, &r.all).is_empty()
        },
        || r.d.log(),
    );
    judged(&r.server, &r.d, &dead);
    holds_for(
        "the site held once judged",
        Duration::from_secs(18).saturating_sub(cut.elapsed()),
        || {
            no_execute_tainted(&mut admin, &r.all).is_empty()
                && deleted(&mut admin, &r.all).is_empty()
        },
        || r.d.log(),
    );
    assert!(
        r.d.has_line("held (full_disruption = \"hold\")"),
        "{}",
        r.d.log()
    );
}

// The releases each scenario runs on: the whole tier on the newest; on 1.35 and the 1.20.2 floor
// the protocol and a representative few of each kind (README, Supported Kubernetes versions).
versions! {
    v1_37 => [
        pods_stay_ready_in_a_site_cut_off_under_unless_disrupted,
        a_domain_by_label_groups_nodes_across_zones,
        a_dark_site_is_held_then_tainted_after_hold_max,
        a_three_node_site_under_hold_loses_nothing_when_cut_off,
        pods_stay_ready_in_a_dark_site_across_a_takeover_under_unless_disrupted,
    ],
    v1_35 => [a_dark_site_is_held_then_tainted_after_hold_max],
}
