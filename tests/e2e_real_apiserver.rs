//! Issue #6 against a real kube-apiserver v1.20.2 (`../shared/real-apiserver`): the node-failure
//! scenario with the daemon connecting as `DAEMON_KUBECONFIG` (TLS client certificate, user
//! `node-lifecycled`), holding only what `conf/rbac.yaml` grants (applied with the admin
//! kubeconfig), leader election on. The test plays the kubelets through the admin's API client.
//!
//! Fails if the server cannot be started, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1 (then it
//! says why).

mod e2e_support;
mod real_apiserver_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e_support::{Daemon, TempDir, Timing, config_text, wait_until};
use node_lifecycled::kube::{ApiClient, ClientSettings, Connection, PatchType};
use node_lifecycled::runtime::Clock;
use real_apiserver_support::RealApiserver;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

/// An API client as the admin (the kubelets' thread builds its own: clients stay on a thread).
fn admin_client(server: &RealApiserver) -> ApiClient {
    client_from(Path::new(server.var("ADMIN_KUBECONFIG")))
}

fn client_from(kubeconfig: &Path) -> ApiClient {
    let connection = Connection::from_kubeconfig(kubeconfig, None, false).unwrap();
    let clock = Clock::start();
    let settings = ClientSettings {
        qps: None,
        timeout: Duration::from_secs(5),
        ..ClientSettings::default()
    };
    ApiClient::new(&connection, &settings, Box::new(move || clock.now())).unwrap()
}

fn ready_condition(kind: &str, status: &str, reason: &str, stamp: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": "posted by the test kubelet",
           "lastHeartbeatTime": stamp, "lastTransitionTime": stamp})
}

/// Node status as a kubelet posts it.
fn post_ready(client: &mut ApiClient, node: &str, stamp: &str) {
    let body = json!({"status": {"conditions": [
        ready_condition("MemoryPressure", "False", "KubeletHasSufficientMemory", stamp),
        ready_condition("DiskPressure", "False", "KubeletHasNoDiskPressure", stamp),
        ready_condition("PIDPressure", "False", "KubeletHasSufficientPID", stamp),
        ready_condition("Ready", "True", "KubeletReady", stamp),
    ]}});
    client
        .patch::<IgnoredAny>(
            &format!("/api/v1/nodes/{node}/status"),
            PatchType::StrategicMerge,
            body.to_string().as_bytes(),
        )
        .unwrap();
}

fn node_json(client: &mut ApiClient, node: &str) -> Value {
    client.get_json(&format!("/api/v1/nodes/{node}")).unwrap()
}

fn ready_of(node: &Value) -> (String, String, String) {
    node["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
                c["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .unwrap_or_default()
}

fn taints_of(node: &Value) -> BTreeSet<String> {
    node["spec"]["taints"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| {
                    format!(
                        "{}:{}",
                        t["key"].as_str().unwrap(),
                        t["effect"].as_str().unwrap()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The test's kubelets: renew Leases every 500 ms for the nodes alive, and post Ready=True
/// again when the controller changed it.
struct Kubelets {
    alive: Arc<Mutex<BTreeSet<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Kubelets {
    fn start(kubeconfig: PathBuf, nodes: &[&str]) -> Kubelets {
        let alive = Arc::new(Mutex::new(
            nodes.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>(),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (alive, stop) = (alive.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut client = client_from(&kubeconfig);
                while !stop.load(Ordering::Relaxed) {
                    let names: Vec<String> = alive.lock().unwrap().iter().cloned().collect();
                    for name in names {
                        let now = client.now();
                        let renew = json!({"spec": {"renewTime": now.to_rfc3339_micros()}});
                        let _ = client.patch::<IgnoredAny>(
                            &format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"),
                            PatchType::Merge,
                            renew.to_string().as_bytes(),
                        );
                        if let Ok(node) = client.get_json::<Value>(&format!("/api/v1/nodes/{name}"))
                        {
                            if ready_of(&node).0 != "True" {
                                post_ready(&mut client, &name, &now.to_rfc3339());
                            }
                        }
                    }
                    // The kubelets' heartbeat period.
                    std::thread::sleep(Duration::from_millis(500));
                }
            })
        };
        Kubelets {
            alive,
            stop,
            thread: Some(thread),
        }
    }

    fn set_alive(&self, node: &str, alive: bool) {
        let mut set = self.alive.lock().unwrap();
        if alive {
            set.insert(node.to_string());
        } else {
            set.remove(node);
        }
    }
}

impl Drop for Kubelets {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn pod_manifest(name: &str, node: &str, toleration_seconds: Option<i64>) -> String {
    let mut toleration = json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"});
    if let Some(s) = toleration_seconds {
        toleration["tolerationSeconds"] = json!(s);
    }
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "e2e"},
           "spec": {"nodeName": node, "tolerations": [toleration],
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}})
    .to_string()
}

fn pod_deleting(server: &RealApiserver, name: &str) -> bool {
    server.get(&["pod", "-n", "e2e", name])["metadata"]["deletionTimestamp"].is_string()
}

fn event_reasons(server: &RealApiserver, object: &str) -> Vec<(String, String)> {
    server.get(&["events", "-A"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == object)
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or("").to_string(),
                e["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn node_failure_against_a_real_apiserver_with_the_rbac_of_conf() {
    let Some(server) = RealApiserver::start() else {
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
    for (pod, seconds) in [
        ("at-once", Some(0)),
        ("two-seconds", Some(2)),
        ("long", Some(60)),
        ("forever", None),
    ] {
        server.kubectl(
            &["apply", "-f", "-"],
            Some(&pod_manifest(pod, "n1", seconds)),
        );
    }
    server.kubectl(
        &["apply", "-f", "-"],
        Some(&pod_manifest("elsewhere", "n2", Some(0))),
    );
    // The kubelets report the pods running and Ready (MarkPodsNotReady changes only a Ready
    // condition that exists, as upstream).
    for pod in ["at-once", "two-seconds", "long", "forever", "elsewhere"] {
        let status = json!({"status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}});
        admin
            .patch::<IgnoredAny>(
                &format!("/api/v1/namespaces/e2e/pods/{pod}/status"),
                PatchType::StrategicMerge,
                status.to_string().as_bytes(),
            )
            .unwrap();
    }
    let kubelets = Kubelets::start(PathBuf::from(server.var("ADMIN_KUBECONFIG")), &nodes);

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
    assert!(
        d.has_line("list+watch"),
        "a 1.20 server has no watch-list\n{}",
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
        || pod_deleting(&server, "at-once"),
        || d.log(),
    );
    let two = wait_until(
        "two-seconds evicted",
        Duration::from_secs(10),
        || pod_deleting(&server, "two-seconds"),
        || d.log(),
    );
    assert!(
        two >= Duration::from_millis(1000),
        "two-seconds evicted after {two:?}"
    );
    let started = Instant::now();
    assert!(!pod_deleting(&server, "long") && !pod_deleting(&server, "forever"));
    assert!(!pod_deleting(&server, "elsewhere"));
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
    assert!(!pod_deleting(&server, "long"));
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
