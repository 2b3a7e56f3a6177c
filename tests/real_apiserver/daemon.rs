//! The daemon end to end against real kube-apiservers (the releases at the end of this file): the
//! node-failure scenario with the daemon connecting as `DAEMON_KUBECONFIG` (TLS client certificate,
//! user `node-lifecycled`), holding only what `conf/rbac.yaml` grants (applied with the admin
//! kubeconfig), leader election on. The test plays the kubelets through the admin's API client.
//!
//! Fails if the server cannot be started, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1 (then it
//! says why).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::e2e_support::{Daemon, TempDir, Timing, config_text, wait_until};
use crate::real_apiserver_support::RealApiserver;
use crate::real_apiserver_support::fleet::{
    Kubelets, admin_client, create_running_pod, event_reasons, node_json, pod_deleting, post_ready,
    ready_of, taints_of,
};
use crate::real_apiserver_support::versions::{Kube, versions};
use serde::de::IgnoredAny;
use serde_json::json;

fn node_failure_against_a_real_apiserver_with_the_rbac_of_conf(kube: Kube) {
    let Some(server) = RealApiserver::start(kube) else {
        return;
    };
    let rbac =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/rbac.yaml"))
            .unwrap();
    server.kubectl(&["apply", "-f", "-"], Some(&rbac));
    server.kubectl(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Namespace\nmetadata: {name: e2e}\n"),
    );
    let mut admin = admin_client(&server);
    let nodes = ["n1", "n2", "n3"];
    for name in nodes {
        server.kubectl(
            &["apply", "-f", "-"],
            Some(&format!(
                "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/os: linux, beta.kubernetes.io/os: linux, topology.kubernetes.io/zone: z1}}\n"
            )),
        );
        let now = admin.now();
        post_ready(&mut admin, name, &now.to_rfc3339());
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now.to_rfc3339_micros()}});
        admin
            .post::<IgnoredAny>(
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                lease.to_string().as_bytes(),
            )
            .unwrap();
    }
    // Running and Ready (MarkPodsNotReady changes only a Ready condition that exists, as
    // upstream).
    for (pod, node, seconds) in [
        ("at-once", "n1", Some(0)),
        ("two-seconds", "n1", Some(2)),
        ("long", "n1", Some(60)),
        ("forever", "n1", None),
        ("elsewhere", "n2", Some(0)),
    ] {
        create_running_pod(&server, pod, node, seconds);
    }
    let names: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
    // The kubelets renew every 500 ms, all at the same instant.
    let kubelets = Kubelets::start(
        PathBuf::from(server.var("ADMIN_KUBECONFIG")),
        &names,
        Duration::from_millis(500),
        false,
    );

    let dir = TempDir::new("real-apiserver");
    let timing = Timing {
        grace: "4s",
        startup_grace: "5s",
        leader: Some("e2e-real".to_string()),
        ..Timing::default()
    };
    let text = config_text(Path::new(server.var("DAEMON_KUBECONFIG")), &timing);
    let mut d = Daemon::start("real-apiserver", &dir, &text, &[]);
    d.wait_log("acting as leader", Duration::from_secs(30));
    // 1.32 and later stream the initial list of a watch (the daemon's default there); 1.20 has
    // no watch-list, so the daemon lists and then watches.
    let initial_list = if kube.has_watch_list() {
        "watch-list streaming"
    } else {
        "list+watch"
    };
    assert!(
        d.has_line(initial_list),
        "{} should use {initial_list}\n{}",
        kube.release(),
        d.log()
    );

    // Healthy for longer than the grace period: nothing happens.
    std::thread::sleep(Duration::from_secs(5));
    for name in nodes {
        assert_eq!(
            ready_of(&node_json(&mut admin, name)).0,
            "True",
            "{}",
            d.log()
        );
    }

    kubelets.set_alive("n1", false);
    let took = wait_until(
        "n1 Ready=Unknown",
        Duration::from_secs(20),
        || ready_of(&node_json(&mut admin_client(&server), "n1")).0 == "Unknown",
        || d.log(),
    );
    let (_, reason, message) = ready_of(&node_json(&mut admin, "n1"));
    assert_eq!(reason, "NodeStatusUnknown");
    assert_eq!(message, "Kubelet stopped posting node status.");
    wait_until(
        "n1 tainted unreachable NoSchedule and NoExecute",
        Duration::from_secs(10),
        || {
            let t = taints_of(&node_json(&mut admin_client(&server), "n1"));
            t.contains("node.kubernetes.io/unreachable:NoExecute")
                && t.contains("node.kubernetes.io/unreachable:NoSchedule")
        },
        || d.log(),
    );
    wait_until(
        "at-once evicted",
        Duration::from_secs(10),
        || pod_deleting(&mut admin_client(&server), "at-once"),
        || d.log(),
    );
    let two = wait_until(
        "two-seconds evicted",
        Duration::from_secs(10),
        || pod_deleting(&mut admin_client(&server), "two-seconds"),
        || d.log(),
    );
    assert!(
        two >= Duration::from_millis(1000),
        "two-seconds evicted after {two:?}"
    );
    let started = Instant::now();
    assert!(!pod_deleting(&mut admin, "long") && !pod_deleting(&mut admin, "forever"));
    assert!(!pod_deleting(&mut admin, "elsewhere"));
    let events = event_reasons(&server, "forever");
    assert!(
        events.iter().any(|(r, _)| r == "NodeNotReady"),
        "{events:?}\n{}",
        server.kubectl(&["get", "events", "-A"], None)
    );
    let pod = server.get(&["pod", "-n", "e2e", "forever"]);
    let ready = pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"].clone());
    assert_eq!(ready, Some(json!("False")), "{pod}");

    kubelets.set_alive("n1", true);
    wait_until(
        "n1 Ready and untainted",
        Duration::from_secs(15),
        || {
            let n = node_json(&mut admin_client(&server), "n1");
            ready_of(&n).0 == "True" && taints_of(&n).is_empty()
        },
        || d.log(),
    );
    wait_until(
        "long's eviction cancelled",
        Duration::from_secs(10),
        || {
            event_reasons(&server, "long")
                .iter()
                .any(|(r, m)| r == "TaintManagerEviction" && m.starts_with("Cancelling deletion"))
        },
        || d.log(),
    );
    assert!(!pod_deleting(&mut admin, "long"));
    // Nothing was refused by RBAC on the way. (An API error reads `<request>: 403 Forbidden`;
    // a bare "403" also matches random digits in the daemon's temporary paths.)
    assert!(!d.has_line(": 403 "), "{}", d.log());
    eprintln!(
        "real apiserver: Unknown {took:?} after the kubelet stopped; recovery in {:?}",
        started.elapsed()
    );
    d.signal("TERM");
    assert_eq!(d.wait_exit(Duration::from_secs(5)).0.code(), Some(0));
    assert!(d.has_line("released leader lease"));
}

// The releases each scenario runs on: the whole tier on the newest; on 1.35 and the 1.20.2 floor
// the protocol and a representative few of each kind (README, Supported Kubernetes versions).
versions! {
    v1_37 => [node_failure_against_a_real_apiserver_with_the_rbac_of_conf],
    v1_35 => [node_failure_against_a_real_apiserver_with_the_rbac_of_conf],
    v1_20 => [node_failure_against_a_real_apiserver_with_the_rbac_of_conf],
}
