//! Objects shaped as a kubelet and a scheduler would create them, for tests, the demo and the
//! benchmark: only the fields the controller reads, plus enough to look real.

use serde_json::{Value, json};

use node_lifecycled::time::Time;

/// A node whose kubelet posted Ready=True (and no pressure) at `heartbeat`, in `zone` if given.
pub fn ready_node(name: &str, zone: Option<&str>, heartbeat: Time) -> Value {
    let stamp = heartbeat.to_rfc3339();
    let condition = |t: &str, status: &str, reason: &str, message: &str| {
        json!({"type": t, "status": status, "lastHeartbeatTime": stamp,
               "lastTransitionTime": stamp, "reason": reason, "message": message})
    };
    let mut labels = json!({
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    });
    if let Some(zone) = zone {
        labels["topology.kubernetes.io/zone"] = json!(zone);
        labels["topology.kubernetes.io/region"] = json!("sim");
    }
    json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [{"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.32.0-sim"}
        }
    })
}

/// A running pod bound to `node` (or pending, unbound), Ready, with the default tolerations the
/// DefaultTolerationSeconds admission plugin adds (300 s for not-ready and unreachable).
pub fn running_pod(namespace: &str, name: &str, node: Option<&str>) -> Value {
    let toleration = |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300});
    let mut pod = json!({
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "sim"}},
        "spec": {
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
            "terminationGracePeriodSeconds": 30,
            "tolerations": [toleration("node.kubernetes.io/not-ready"), toleration("node.kubernetes.io/unreachable")]
        },
        "status": {"phase": "Pending"}
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
        pod["status"] = json!({
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"}
            ]
        });
    }
    pod
}

/// A node heartbeat Lease in `kube-node-lease`.
pub fn node_lease(node: &str, renew: Time) -> Value {
    json!({
        "metadata": {"name": node, "namespace": super::NODE_LEASE_NAMESPACE},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40,
                 "renewTime": renew.to_rfc3339_micros()}
    })
}
