//! A small fleet on the real kube-apiserver, played by the test: nodes with topology zones and
//! node Leases, running pods with NoExecute tolerations, and kubelets that renew each Lease at
//! its own phase (as real kubelets do) or all at the same instant. Shared by the end-to-end
//! scenarios that need a real server.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use node_lifecycled::kube::{ApiClient, ClientSettings, Connection, PatchType};
use node_lifecycled::runtime::Clock;
use node_lifecycled::time::Time;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use super::RealApiserver;

pub const UNREACHABLE_NO_EXECUTE: &str = "node.kubernetes.io/unreachable:NoExecute";
pub const UNREACHABLE_NO_SCHEDULE: &str = "node.kubernetes.io/unreachable:NoSchedule";

/// An API client as the admin (the kubelets' thread builds its own: clients stay on a thread).
pub fn admin_client(server: &RealApiserver) -> ApiClient {
    client_from(Path::new(server.var("ADMIN_KUBECONFIG")))
}

pub fn client_from(kubeconfig: &Path) -> ApiClient {
    let connection = Connection::from_kubeconfig(kubeconfig, None, false).unwrap();
    let clock = Clock::start();
    let settings = ClientSettings {
        qps: None,
        timeout: Duration::from_secs(5),
        ..ClientSettings::default()
    };
    ApiClient::new(&connection, &settings, Box::new(move || clock.now())).unwrap()
}

fn condition(kind: &str, status: &str, reason: &str, stamp: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": "posted by the test kubelet",
           "lastHeartbeatTime": stamp, "lastTransitionTime": stamp})
}

/// Node status as a kubelet posts it.
pub fn post_ready(client: &mut ApiClient, node: &str, stamp: &str) {
    post_conditions(client, node, stamp, &BTreeMap::new());
}

/// What a healthy kubelet reports, by condition type: (status, reason).
fn healthy_conditions() -> BTreeMap<String, (String, String)> {
    [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
        ("Ready", "True", "KubeletReady"),
    ]
    .into_iter()
    .map(|(k, s, r)| (k.to_string(), (s.to_string(), r.to_string())))
    .collect()
}

/// The conditions a kubelet reports: healthy, but for `overrides` (type → (status, reason)).
fn wanted_conditions(
    overrides: &BTreeMap<String, (String, String)>,
) -> BTreeMap<String, (String, String)> {
    let mut wanted = healthy_conditions();
    wanted.extend(overrides.iter().map(|(k, v)| (k.clone(), v.clone())));
    wanted
}

/// Node status with the healthy conditions but for `overrides`, as a kubelet posts it.
pub fn post_conditions(
    client: &mut ApiClient,
    node: &str,
    stamp: &str,
    overrides: &BTreeMap<String, (String, String)>,
) {
    let conditions: Vec<Value> = wanted_conditions(overrides)
        .iter()
        .map(|(kind, (status, reason))| condition(kind, status, reason, stamp))
        .collect();
    let body = json!({"status": {"conditions": conditions}});
    client
        .patch::<IgnoredAny>(
            &format!("/api/v1/nodes/{node}/status"),
            PatchType::StrategicMerge,
            body.to_string().as_bytes(),
        )
        .unwrap();
}

pub fn node_json(client: &mut ApiClient, node: &str) -> Value {
    client.get_json(&format!("/api/v1/nodes/{node}")).unwrap()
}

/// (status, reason, message) of the node's Ready condition.
pub fn ready_of(node: &Value) -> (String, String, String) {
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

/// `key:effect` of every taint.
pub fn taints_of(node: &Value) -> BTreeSet<String> {
    node["spec"]["taints"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| {
                    format!(
                        "{}:{}",
                        t["key"].as_str().unwrap_or(""),
                        t["effect"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `timeAdded` of the taint `key:effect`, if the node has it.
pub fn taint_time_added(node: &Value, taint: &str) -> Option<Time> {
    node["spec"]["taints"].as_array()?.iter().find_map(|t| {
        let name = format!("{}:{}", t["key"].as_str()?, t["effect"].as_str()?);
        (name == taint)
            .then(|| t["timeAdded"].as_str().and_then(Time::parse_rfc3339))
            .flatten()
    })
}

/// A pod bound to `node` that tolerates `unreachable:NoExecute` for `toleration_seconds`
/// (`None`: forever).
pub fn pod_manifest(name: &str, node: &str, toleration_seconds: Option<i64>) -> String {
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

/// The pod has a deletion timestamp (no kubelet finishes it here), or is gone.
pub fn pod_deleting(client: &mut ApiClient, name: &str) -> bool {
    match client.get_json::<Value>(&format!("/api/v1/namespaces/e2e/pods/{name}")) {
        Ok(pod) => pod["metadata"]["deletionTimestamp"].is_string(),
        Err(_) => true,
    }
}

/// When the pod's deletion was asked for (its `deletionTimestamp` less the grace period the
/// delete set), if it was.
pub fn pod_deletion_asked(client: &mut ApiClient, name: &str) -> Option<Time> {
    let pod = client
        .get_json::<Value>(&format!("/api/v1/namespaces/e2e/pods/{name}"))
        .ok()?;
    let at = Time::parse_rfc3339(pod["metadata"]["deletionTimestamp"].as_str()?)?;
    let grace = pod["metadata"]["deletionGracePeriodSeconds"]
        .as_u64()
        .unwrap_or(0);
    Some(Time::from_unix_millis(
        at.as_unix_millis().saturating_sub(grace * 1000),
    ))
}

pub fn event_reasons(server: &RealApiserver, object: &str) -> Vec<(String, String)> {
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

/// The fleet's shape: nodes by zone and how their kubelets heartbeat.
#[derive(Clone, Debug)]
pub struct FleetSpec {
    /// (node, zone) in creation order.
    pub nodes: Vec<(String, String)>,
    /// `leaseDurationSeconds` of every node Lease; the kubelets renew at a quarter of it, as
    /// the kubelet does.
    pub lease_duration_seconds: u32,
    /// Each kubelet renews at its own phase of the renew interval (real kubelets), or all at
    /// the same instant (a synchronised fleet: when it is cut off, every deadline falls together).
    pub spread_phases: bool,
}

impl FleetSpec {
    /// `per_zone` nodes in each of `zones` (named `z1`, `z2`, …), nodes named `{zone}-n{i}`.
    pub fn zones(zones: usize, per_zone: usize) -> FleetSpec {
        let nodes = (1..=zones)
            .flat_map(|z| (1..=per_zone).map(move |i| (format!("z{z}-n{i}"), format!("z{z}"))))
            .collect();
        FleetSpec {
            nodes,
            lease_duration_seconds: 4,
            spread_phases: false,
        }
    }

    pub fn renew_interval(&self) -> Duration {
        Duration::from_millis(u64::from(self.lease_duration_seconds) * 250)
    }

    pub fn names(&self) -> Vec<String> {
        self.nodes.iter().map(|(n, _)| n.clone()).collect()
    }

    pub fn in_zone(&self, zone: &str) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, z)| z == zone)
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// Applies `conf/rbac.yaml` and the `e2e` namespace, creates the nodes Ready with their
/// Leases, and starts their kubelets.
pub fn create_fleet(server: &RealApiserver, spec: &FleetSpec) -> Kubelets {
    let rbac =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/rbac.yaml"))
            .unwrap();
    server.apply(&rbac);
    server.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: e2e}\n");
    let mut admin = admin_client(server);
    for (name, zone) in &spec.nodes {
        server.apply(&format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/os: linux, topology.kubernetes.io/region: r1, topology.kubernetes.io/zone: {zone}}}\n"
        ));
        let now = admin.now();
        post_ready(&mut admin, name, &now.to_rfc3339());
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": spec.lease_duration_seconds,
                     "renewTime": now.to_rfc3339_micros()}});
        admin
            .post::<IgnoredAny>(
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                lease.to_string().as_bytes(),
            )
            .unwrap();
    }
    Kubelets::start(
        PathBuf::from(server.var("ADMIN_KUBECONFIG")),
        &spec.names(),
        spec.renew_interval(),
        spec.spread_phases,
    )
}

/// Creates `name` on `node`, tolerating `unreachable:NoExecute` for `toleration_seconds`,
/// running and Ready (MarkPodsNotReady changes only a Ready condition that exists, as upstream).
pub fn create_running_pod(
    server: &RealApiserver,
    name: &str,
    node: &str,
    toleration_seconds: Option<i64>,
) {
    server.apply(&pod_manifest(name, node, toleration_seconds));
    mark_running(server, name);
}

/// Creates `name` on `node` with exactly `tolerations` (the admission adds its 300 s defaults
/// for the keys they leave out), running and Ready.
pub fn create_running_pod_tolerating(
    server: &RealApiserver,
    name: &str,
    node: &str,
    tolerations: Value,
) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "e2e"},
        "spec": {"nodeName": node, "tolerations": tolerations,
                 "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}});
    server.apply(&pod.to_string());
    mark_running(server, name);
}

/// The pod's status as its kubelet posts it once the pod runs and is Ready.
fn mark_running(server: &RealApiserver, name: &str) {
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}});
    admin_client(server)
        .patch::<IgnoredAny>(
            &format!("/api/v1/namespaces/e2e/pods/{name}/status"),
            PatchType::StrategicMerge,
            status.to_string().as_bytes(),
        )
        .unwrap();
}

type Reports = Arc<Mutex<BTreeMap<String, BTreeMap<String, (String, String)>>>>;

/// The node's conditions have the statuses `wanted` gives.
fn reports_match(node: &Value, wanted: &BTreeMap<String, (String, String)>) -> bool {
    let Some(conditions) = node["status"]["conditions"].as_array() else {
        return false;
    };
    wanted.iter().all(|(kind, (status, _))| {
        conditions
            .iter()
            .any(|c| c["type"] == kind.as_str() && c["status"] == status.as_str())
    })
}

/// The test's kubelets: each alive node renews its Lease every renew interval (at its own
/// phase, or all together) and posts Ready=True again when the controller changed it.
pub struct Kubelets {
    alive: Arc<Mutex<BTreeSet<String>>>,
    /// Conditions a kubelet reports other than healthy ones (`report`).
    reports: Reports,
    /// The last renewal each kubelet got an answer for.
    renewed: Arc<Mutex<BTreeMap<String, Time>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// When the first renewal round began, and the renew interval: renewals (of phase 0, every
    /// node when the phases are not spread) happen at `started + k × renew`.
    started: Instant,
    renew: Duration,
}

impl Kubelets {
    pub fn start(kubeconfig: PathBuf, nodes: &[String], renew: Duration, spread: bool) -> Kubelets {
        let alive = Arc::new(Mutex::new(nodes.iter().cloned().collect::<BTreeSet<_>>()));
        let reports: Reports = Arc::default();
        let renewed = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let mut next: BTreeMap<String, Instant> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let phase = if spread {
                    renew.mul_f64(i as f64 / nodes.len().max(1) as f64)
                } else {
                    Duration::ZERO
                };
                (n.clone(), start + phase)
            })
            .collect();
        let thread = {
            let (alive, renewed, stop, reports) = (
                alive.clone(),
                renewed.clone(),
                stop.clone(),
                reports.clone(),
            );
            std::thread::spawn(move || {
                let mut client = client_from(&kubeconfig);
                while !stop.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    let due: Vec<String> = next
                        .iter()
                        .filter(|(_, at)| **at <= now)
                        .map(|(n, _)| n.clone())
                        .collect();
                    for name in due {
                        // The next renewal keeps the node's phase, whatever this one cost.
                        let at = next.get_mut(&name).unwrap();
                        while *at <= now {
                            *at += renew;
                        }
                        if !alive.lock().unwrap().contains(&name) {
                            continue;
                        }
                        let stamp = client.now();
                        let body = json!({"spec": {"renewTime": stamp.to_rfc3339_micros()}});
                        let path = format!(
                            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
                        );
                        let ok = client
                            .patch::<IgnoredAny>(
                                &path,
                                PatchType::Merge,
                                body.to_string().as_bytes(),
                            )
                            .is_ok();
                        // A kubelet cut off between deciding and answering did not renew.
                        if ok && alive.lock().unwrap().contains(&name) {
                            renewed.lock().unwrap().insert(name.clone(), stamp);
                        }
                        // Status is posted when what the server has differs from what this
                        // kubelet reports (the controller changed it, or the test did).
                        let overrides = reports
                            .lock()
                            .unwrap()
                            .get(&name)
                            .cloned()
                            .unwrap_or_default();
                        if let Ok(node) = client.get_json::<Value>(&format!("/api/v1/nodes/{name}"))
                            && !reports_match(&node, &wanted_conditions(&overrides))
                            && alive.lock().unwrap().contains(&name)
                        {
                            let stamp = client.now().to_rfc3339();
                            post_conditions(&mut client, &name, &stamp, &overrides);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        Kubelets {
            alive,
            reports,
            renewed,
            stop,
            thread: Some(thread),
            started: start,
            renew,
        }
    }

    pub fn set_alive(&self, node: &str, alive: bool) {
        let mut set = self.alive.lock().unwrap();
        if alive {
            set.insert(node.to_string());
        } else {
            set.remove(node);
        }
    }

    /// From now on the node's kubelet reports condition `kind` as (`status`, `reason`) (at its
    /// next renewal, and again whenever the server has something else).
    pub fn report(&self, node: &str, kind: &str, status: &str, reason: &str) {
        self.reports
            .lock()
            .unwrap()
            .entry(node.to_string())
            .or_default()
            .insert(kind.to_string(), (status.to_string(), reason.to_string()));
    }

    /// `offset` into the first renewal round that begins at least `wait` from now, so that two
    /// runs of one script cut their kubelets off at the same point of the renew interval (a
    /// small `offset`: just after that round's renewals).
    pub fn round_after(&self, wait: Duration, offset: Duration) -> Instant {
        let earliest = Instant::now() + wait;
        let rounds =
            earliest.duration_since(self.started).as_nanos() / self.renew.as_nanos().max(1);
        self.started + self.renew * (rounds as u32 + 1) + offset
    }

    /// Cuts these kubelets off at once.
    pub fn silence(&self, nodes: &[String]) {
        let mut set = self.alive.lock().unwrap();
        for n in nodes {
            set.remove(n);
        }
    }

    /// The renewTime of the node's last renewal, as written.
    pub fn last_renewal(&self, node: &str) -> Option<Time> {
        self.renewed.lock().unwrap().get(node).copied()
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

/// The nodes of `nodes` tainted `unreachable:NoExecute` now.
pub fn no_execute_tainted(admin: &mut ApiClient, nodes: &[String]) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| taints_of(&node_json(admin, n)).contains(UNREACHABLE_NO_EXECUTE))
        .cloned()
        .collect()
}

/// The `<node>-at-once` pods (`create_running_pod`, tolerating nothing) of `nodes` that are
/// deleted or being deleted.
pub fn deleted(admin: &mut ApiClient, nodes: &[String]) -> Vec<String> {
    nodes
        .iter()
        .map(|n| format!("{n}-at-once"))
        .filter(|p| pod_deleting(admin, p))
        .collect()
}
