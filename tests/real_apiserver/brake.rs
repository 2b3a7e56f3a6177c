//! The brake and per-pool timing against real kube-apiservers
//! (the releases at the end of this file): the brake on mass decisions engaged and released, and a pool's
//! `default_toleration_seconds` standing in
//! for the admission default of a pod that kept it (the server's DefaultTolerationSeconds
//! admission gives it 300 s), not for a pod that chose its own. The test plays the kubelets; the
//! daemon connects with the RBAC of `conf/rbac.yaml`. Short: a few tens of seconds each.
//!
//! Fails if the server cannot be started, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1.

use std::path::Path;
use std::time::Duration;

use crate::e2e_support::{Daemon, TempDir, Timing, config_text, holds_for, wait_until};
use crate::real_apiserver_support::RealApiserver;
use crate::real_apiserver_support::fleet::{
    FleetSpec, Kubelets, UNREACHABLE_NO_EXECUTE, UNREACHABLE_NO_SCHEDULE, admin_client,
    create_fleet, create_running_pod, node_json, pod_deleting, pod_deletion_asked, ready_of,
    taint_time_added, taints_of,
};
use crate::real_apiserver_support::versions::{Kube, versions};
use node_lifecycled::kube::{ApiClient, PatchType};
use serde::de::IgnoredAny;
use serde_json::json;

/// Grace 8 s, Leases of 8 s renewed every 2 s, a 1 s pass, a fast zone rate.
fn timing() -> Timing {
    Timing {
        grace: "8s",
        startup_grace: "16s",
        monitor_period: "1s",
        eviction_rate: 10.0,
        leader: Some("e2e-brake".to_string()),
        ..Timing::default()
    }
}

struct Run {
    server: RealApiserver,
    kubelets: Kubelets,
    d: Daemon,
    _dir: TempDir,
}

/// `zones` zones of `per_zone` nodes (`z1-n1`, ...), `pods` created, then the daemon with
/// `top` (top-level keys) and `tables` (after the rest) added to its config, leading.
fn start(
    kube: Kube,
    name: &str,
    zones: usize,
    per_zone: usize,
    pods: impl FnOnce(&RealApiserver),
    top: &str,
    tables: &str,
) -> Option<Run> {
    let server = RealApiserver::start(kube)?;
    let spec = FleetSpec {
        lease_duration_seconds: 8,
        ..FleetSpec::zones(zones, per_zone)
    };
    let kubelets = create_fleet(&server, &spec);
    pods(&server);
    let dir = TempDir::new(name);
    let text = format!(
        "{top}{}{tables}",
        config_text(Path::new(server.var("DAEMON_KUBECONFIG")), &timing())
    );
    let mut d = Daemon::start(name, &dir, &text, &[]);
    d.wait_log("acting as leader", Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(2));
    Some(Run {
        server,
        kubelets,
        d,
        _dir: dir,
    })
}

fn no_execute(admin: &mut ApiClient, node: &str) -> bool {
    taints_of(&node_json(admin, node)).contains(UNREACHABLE_NO_EXECUTE)
}

/// Two of six nodes die, in two zones that each stay Normal: more than `max_unhealthy = 1`.
/// Both are judged (Unknown, NoSchedule) but nothing is tainted NoExecute and their pods, which
/// tolerate nothing, stay. One comes back: within the limit, and 3 s later (the cooldown) the
/// brake releases: the other is tainted and its pod deleted.
fn the_brake_holds_a_mass_failure_and_releases_after_the_cooldown(kube: Kube) {
    let nodes = ["z1-n1", "z1-n2", "z2-n1", "z2-n2", "z3-n1", "z3-n2"];
    let pods = |server: &RealApiserver| {
        for n in nodes {
            create_running_pod(server, &format!("{n}-at-once"), n, Some(0));
        }
    };
    let top = "max_unhealthy = 1\ndisruption_cooldown = \"3s\"\n";
    let Some(mut run) = start(kube, "brake-engaged", 3, 2, pods, top, "") else {
        return;
    };
    let dead = ["z1-n1".to_string(), "z2-n1".to_string()];
    run.kubelets.silence(&dead);
    let mut admin = admin_client(&run.server);
    let d = &mut run.d;
    wait_until(
        "both silent nodes Ready=Unknown and tainted NoSchedule",
        Duration::from_secs(30),
        || {
            dead.iter().all(|n| {
                let node = node_json(&mut admin, n);
                ready_of(&node).0 == "Unknown" && taints_of(&node).contains(UNREACHABLE_NO_SCHEDULE)
            })
        },
        || d.log(),
    );
    assert!(d.has_line("brake engaged (fleet): 2 of 6"), "{}", d.log());
    holds_for(
        "no NoExecute taint and no deletion under the brake",
        Duration::from_secs(5),
        || {
            nodes.iter().all(|n| {
                !no_execute(&mut admin, n) && !pod_deleting(&mut admin, &format!("{n}-at-once"))
            })
        },
        || d.log(),
    );
    run.kubelets.set_alive("z1-n1", true);
    d.wait_log("brake released (fleet)", Duration::from_secs(20));
    wait_until(
        "z2-n1 tainted NoExecute and its pod deleted after the release",
        Duration::from_secs(15),
        || no_execute(&mut admin, "z2-n1") && pod_deleting(&mut admin, "z2-n1-at-once"),
        || d.log(),
    );
    assert!(!no_execute(&mut admin, "z1-n1"), "{}", d.log());
    assert!(!pod_deleting(&mut admin, "z1-n1-at-once"), "{}", d.log());
}

/// A pod with no tolerations of its own (the admission plugin gives it 300 s) on a node of the
/// pool `fast` (`default_toleration_seconds = 4`) is deleted ~4 s after the taint; one that
/// chose 299 s for unreachable is not.
fn a_pools_default_toleration_seconds_replaces_the_admission_default_only(kube: Kube) {
    let pods = |server: &RealApiserver| {
        server.apply(
            &json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "admitted", "namespace": "e2e"},
                "spec": {"nodeName": "z1-n1",
                         "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}})
            .to_string(),
        );
        let status = json!({"status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}});
        admin_client(server)
            .patch::<IgnoredAny>(
                "/api/v1/namespaces/e2e/pods/admitted/status",
                PatchType::StrategicMerge,
                status.to_string().as_bytes(),
            )
            .unwrap();
        create_running_pod(server, "own-299", "z1-n1", Some(299));
    };
    let tables = "[[pool]]\nname = \"fast\"\n\
                  match_labels = { \"topology.kubernetes.io/zone\" = \"z1\" }\n\
                  default_toleration_seconds = 4\n";
    let Some(run) = start(kube, "pool-timing", 2, 2, pods, "", tables) else {
        return;
    };
    let mut admin = admin_client(&run.server);
    let admitted = run.server.get(&["pod", "-n", "e2e", "admitted"]);
    assert_eq!(
        admitted["spec"]["tolerations"][0]["tolerationSeconds"], 300,
        "the server's admission default: {admitted}"
    );
    run.kubelets.silence(&["z1-n1".to_string()]);
    let d = &run.d;
    wait_until(
        "the admitted pod deleted",
        Duration::from_secs(40),
        || pod_deleting(&mut admin, "admitted"),
        || d.log(),
    );
    let added =
        taint_time_added(&node_json(&mut admin, "z1-n1"), UNREACHABLE_NO_EXECUTE).expect("tainted");
    let asked = pod_deletion_asked(&mut admin, "admitted").expect("deletion asked");
    let after = asked.since(added);
    // timeAdded has whole seconds.
    assert!(
        after >= Duration::from_secs(3) && after <= Duration::from_secs(6),
        "deleted {after:?} after the taint\n{}",
        d.log()
    );
    holds_for(
        "the pod that chose 299 s stays",
        Duration::from_secs(4),
        || !pod_deleting(&mut admin, "own-299"),
        || d.log(),
    );
}

// The releases each scenario runs on: the whole tier on the newest; on 1.35 and the 1.20.2 floor
// the protocol and a representative few of each kind (README, Supported Kubernetes versions).
versions! {
    v1_37 => [
        the_brake_holds_a_mass_failure_and_releases_after_the_cooldown,
        a_pools_default_toleration_seconds_replaces_the_admission_default_only,
    ],
    v1_35 => [the_brake_holds_a_mass_failure_and_releases_after_the_cooldown],
}
