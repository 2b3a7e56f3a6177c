//! An incumbent to rehearse shadow mode against: kube-controller-manager's node lifecycle and
//! taint eviction controllers reduced to their batch rules, writing to the simulated cluster
//! directly (identity `kube-controller-manager`), on a thread of its own.
//!
//! Every `period` (upstream `--node-monitor-period`) a health pass: a node whose Lease has not
//! moved for `grace` is set Ready=Unknown (`NodeStatusUnknown`, with MemoryPressure,
//! DiskPressure and PIDPressure) and its Ready pods NotReady. Then, every 100 ms as upstream's
//! tainting pass: zones counted (FullDisruption when none is Ready, PartialDisruption over
//! `unhealthy_zone_threshold` with more than two not Ready; every zone down stops all tainting
//! and lifts the NoExecute taints), `unreachable` / `not-ready` NoSchedule at once, NoExecute at
//! `eviction_rate` per zone (none in a partially disrupted small zone), both off when the node
//! is Ready; and taint eviction: a pod not tolerating a NoExecute taint past its
//! `tolerationSeconds` from `timeAdded` gets `DisruptionTarget` and a graceful DELETE. It knows
//! nothing of suspects, holds, brakes or autonomy: what node-lifecycled does beyond upstream
//! shows in the shadow report.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

use crate::cluster::{Cluster, NODE_LEASE_NAMESPACE};
use crate::resource::Resource;
use crate::write_log::Identity;
use node_lifecycled::time::Time;

const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const NOT_READY: &str = "node.kubernetes.io/not-ready";
const TICK: Duration = Duration::from_millis(100);

#[derive(Clone, Debug)]
pub struct IncumbentConfig {
    pub period: Duration,
    pub grace: Duration,
    /// Nodes per second per zone tainted NoExecute.
    pub eviction_rate: f64,
    pub large_cluster_size_threshold: usize,
    pub unhealthy_zone_threshold: f64,
}

/// The incumbent's thread; dropping it stops it.
pub struct Incumbent {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Incumbent {
    pub fn start(cluster: &Cluster, config: IncumbentConfig) -> std::io::Result<Incumbent> {
        let stop = Arc::new(AtomicBool::new(false));
        let cluster = cluster.with_identity(Identity::direct("kube-controller-manager"));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("sim-incumbent".into())
                .spawn(move || {
                    let mut state = State::default();
                    let mut next_health = cluster.now();
                    while !stop.load(Ordering::Relaxed) {
                        let now = cluster.now();
                        if now >= next_health {
                            state.health_pass(&cluster, &config, now);
                            next_health = now + config.period;
                        }
                        state.tainting_pass(&cluster, &config, now);
                        evict(&cluster, now);
                        std::thread::sleep(TICK);
                    }
                })?
        };
        Ok(Incumbent {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Incumbent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[derive(Default)]
struct State {
    /// Per node: the heartbeat last seen (Lease renewTime) and when it was seen moving.
    probe: HashMap<String, (String, Time)>,
    /// Per zone: when its last NoExecute taint was added.
    last_taint: HashMap<String, Time>,
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn ready_of(node: &Value) -> String {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map_or("Unknown", |c| str_at(c, "/status"))
        .to_string()
}

fn zone_of(node: &Value) -> String {
    str_at(node, "/metadata/labels/topology.kubernetes.io~1zone").to_string()
}

fn taints(node: &Value) -> Vec<Value> {
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn has_taint(node: &Value, key: &str, effect: &str) -> bool {
    taints(node)
        .iter()
        .any(|t| t["key"] == key && t["effect"] == effect)
}

impl State {
    fn health_pass(&mut self, cluster: &Cluster, config: &IncumbentConfig, now: Time) {
        let renewals: HashMap<String, String> = cluster
            .list(Resource::Leases, Some(NODE_LEASE_NAMESPACE))
            .iter()
            .map(|l| {
                (
                    str_at(l, "/metadata/name").to_string(),
                    str_at(l, "/spec/renewTime").to_string(),
                )
            })
            .collect();
        for node in cluster.list(Resource::Nodes, None) {
            let name = str_at(&node, "/metadata/name").to_string();
            let renew = renewals.get(&name).cloned().unwrap_or_default();
            let probe = self
                .probe
                .entry(name.clone())
                .or_insert_with(|| (renew.clone(), now));
            if probe.0 != renew {
                *probe = (renew, now);
            }
            if now.since(probe.1) > config.grace && ready_of(&node) != "Unknown" {
                set_unknown(cluster, &name, now);
                mark_pods_not_ready(cluster, &name, now);
            }
        }
    }

    fn tainting_pass(&mut self, cluster: &Cluster, config: &IncumbentConfig, now: Time) {
        let nodes = cluster.list(Resource::Nodes, None);
        // Zone states from Ready, as upstream's ComputeZoneState.
        let mut zones: HashMap<String, (usize, usize)> = HashMap::new();
        for n in &nodes {
            let z = zones.entry(zone_of(n)).or_default();
            z.0 += 1;
            if ready_of(n) != "True" {
                z.1 += 1;
            }
        }
        let state = |zone: &str| {
            let (size, not_ready) = zones.get(zone).copied().unwrap_or((0, 0));
            if not_ready > 0 && not_ready == size {
                "Full"
            } else if not_ready > 2
                && not_ready as f64 / size.max(1) as f64 >= config.unhealthy_zone_threshold
            {
                "Partial"
            } else {
                "Normal"
            }
        };
        let all_down = !zones.is_empty() && zones.keys().all(|z| state(z) == "Full");
        let gap = Duration::from_secs_f64(1.0 / config.eviction_rate.max(1e-6));
        for node in &nodes {
            let name = str_at(node, "/metadata/name");
            let zone = zone_of(node);
            let ready = ready_of(node);
            let no_schedule = match ready.as_str() {
                "True" => None,
                "False" => Some(NOT_READY),
                _ => Some(UNREACHABLE),
            };
            let mut want: Vec<(&str, &str)> =
                no_schedule.map(|k| (k, "NoSchedule")).into_iter().collect();
            let tainted = [UNREACHABLE, NOT_READY]
                .iter()
                .find(|k| has_taint(node, k, "NoExecute"))
                .copied();
            let small_partial = state(&zone) == "Partial"
                && zones.get(&zone).map_or(0, |z| z.0) <= config.large_cluster_size_threshold;
            match (no_schedule, tainted) {
                (Some(key), Some(_)) if !all_down => want.push((key, "NoExecute")),
                (Some(key), None) if !all_down && !small_partial => {
                    let due = self
                        .last_taint
                        .get(&zone)
                        .is_none_or(|at| now.since(*at) >= gap);
                    if due {
                        want.push((key, "NoExecute"));
                        self.last_taint.insert(zone.clone(), now);
                    }
                }
                _ => {}
            }
            set_lifecycle_taints(cluster, name, node, &want, now);
        }
    }
}

fn set_unknown(cluster: &Cluster, node: &str, now: Time) {
    let stamp = now.to_rfc3339();
    let _ = cluster.update(Resource::Nodes, None, node, |v| {
        let Some(list) = v
            .pointer_mut("/status/conditions")
            .and_then(Value::as_array_mut)
        else {
            return;
        };
        for c in list.iter_mut() {
            let kind = c["type"].as_str().unwrap_or("").to_string();
            if matches!(
                kind.as_str(),
                "Ready" | "MemoryPressure" | "DiskPressure" | "PIDPressure"
            ) && c["status"] != "Unknown"
            {
                c["status"] = json!("Unknown");
                c["reason"] = json!("NodeStatusUnknown");
                c["message"] = json!("Kubelet stopped posting node status.");
                c["lastTransitionTime"] = json!(stamp);
            }
        }
    });
}

fn mark_pods_not_ready(cluster: &Cluster, node: &str, now: Time) {
    for pod in cluster.list(Resource::Pods, None) {
        if str_at(&pod, "/spec/nodeName") != node {
            continue;
        }
        let (ns, name) = (
            str_at(&pod, "/metadata/namespace"),
            str_at(&pod, "/metadata/name"),
        );
        let _ = cluster.update(Resource::Pods, Some(ns), name, |v| {
            if let Some(list) = v
                .pointer_mut("/status/conditions")
                .and_then(Value::as_array_mut)
            {
                for c in list
                    .iter_mut()
                    .filter(|c| c["type"] == "Ready" && c["status"] == "True")
                {
                    c["status"] = json!("False");
                    c["lastTransitionTime"] = json!(now.to_rfc3339());
                }
            }
        });
    }
}

/// Makes the node's not-ready / unreachable taints exactly `want` (new ones with `timeAdded`).
fn set_lifecycle_taints(
    cluster: &Cluster,
    name: &str,
    node: &Value,
    want: &[(&str, &str)],
    now: Time,
) {
    let current = taints(node);
    let ours = |t: &Value| t["key"] == UNREACHABLE || t["key"] == NOT_READY;
    let kept: Vec<&Value> = current
        .iter()
        .filter(|t| {
            !ours(t)
                || want
                    .iter()
                    .any(|(k, e)| t["key"] == *k && t["effect"] == *e)
        })
        .collect();
    let added: Vec<Value> = want
        .iter()
        .filter(|(k, e)| !current.iter().any(|t| t["key"] == *k && t["effect"] == *e))
        .map(|(k, e)| json!({"key": k, "effect": e, "timeAdded": now.to_rfc3339()}))
        .collect();
    if added.is_empty() && kept.len() == current.len() {
        return;
    }
    let taints: Vec<Value> = kept.into_iter().cloned().chain(added).collect();
    let _ = cluster.update(Resource::Nodes, None, name, |v| {
        v["spec"]["taints"] = Value::Array(taints);
    });
}

/// When the pod must go for the node's NoExecute taints: `None` never (or not tainted).
fn eviction_due(pod: &Value, node: &Value) -> Option<Time> {
    let tolerations = pod
        .pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut due: Option<Time> = None;
    for taint in taints(node).iter().filter(|t| t["effect"] == "NoExecute") {
        let added = Time::parse_rfc3339(str_at(taint, "/timeAdded")).unwrap_or(Time::ZERO);
        let toleration = tolerations.iter().find(|t| {
            (t["key"] == taint["key"] || (t["operator"] == "Exists" && t.get("key").is_none()))
                && (t["effect"] == "NoExecute" || t.get("effect").is_none())
        });
        let at = match toleration.map(|t| t.get("tolerationSeconds").and_then(Value::as_u64)) {
            None => added,
            Some(Some(s)) => added + Duration::from_secs(s),
            Some(None) => continue,
        };
        due = Some(due.map_or(at, |d| d.min(at)));
    }
    due
}

fn evict(cluster: &Cluster, now: Time) {
    let nodes: HashMap<String, Value> = cluster
        .list(Resource::Nodes, None)
        .into_iter()
        .map(|n| (str_at(&n, "/metadata/name").to_string(), n))
        .collect();
    for pod in cluster.list(Resource::Pods, None) {
        let Some(node) = nodes.get(str_at(&pod, "/spec/nodeName")) else {
            continue;
        };
        if pod.pointer("/metadata/deletionTimestamp").is_some()
            || eviction_due(&pod, node).is_none_or(|at| at > now)
        {
            continue;
        }
        let (ns, name) = (
            str_at(&pod, "/metadata/namespace"),
            str_at(&pod, "/metadata/name"),
        );
        let _ = cluster.update(Resource::Pods, Some(ns), name, |v| {
            let condition = json!({"type": "DisruptionTarget", "status": "True",
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint",
                "lastTransitionTime": now.to_rfc3339()});
            if let Some(list) = v
                .pointer_mut("/status/conditions")
                .and_then(Value::as_array_mut)
            {
                list.retain(|c| c["type"] != "DisruptionTarget");
                list.push(condition);
            }
        });
        let _ = cluster.delete(Resource::Pods, Some(ns), name);
    }
}
