//! The exact requests the executor sends: paths and JSON bodies, as pure functions.
//!
//! Bodies are the smallest patches that carry upstream's effect and its preconditions
//! (SPEC §11, DESIGN field notes): a node status or taint write carries the resourceVersion it
//! was decided on, so a stale decision fails with 409 instead of overwriting another writer;
//! pod writes carry the pod's UID, so a pod re-created under the same name is never touched.

use serde_json::{Map, Value, json};

use crate::controller::events::{Event, EventObject};
use crate::controller::taint_eviction::{
    DISRUPTION_CONDITION, DISRUPTION_MESSAGE, DISRUPTION_REASON,
};
use crate::kube::reflector::Watched;
use crate::model::{Lease, NodeCondition, PodKey, Taint};
use crate::time::Time;

/// Where events about cluster-scoped objects (nodes) go, as client-go's recorder does.
pub const NODE_EVENT_NAMESPACE: &str = "default";

/// A name as one URL path segment. Names come from decoded API objects, which the API server
/// validated (DNS subdomains), so this only refuses what would change the request's meaning.
pub fn segment(name: &str) -> Result<&str, String> {
    let bad = name.is_empty()
        || name == "."
        || name == ".."
        || name
            .bytes()
            .any(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':')));
    if bad {
        Err(format!("{name:?} is not a valid object name"))
    } else {
        Ok(name)
    }
}

pub fn node_path(node: &str) -> Result<String, String> {
    Ok(format!("/api/v1/nodes/{}", segment(node)?))
}

pub fn node_status_path(node: &str) -> Result<String, String> {
    Ok(format!("{}/status", node_path(node)?))
}

pub fn pod_path(pod: &PodKey) -> Result<String, String> {
    Ok(format!(
        "/api/v1/namespaces/{}/pods/{}",
        segment(&pod.namespace)?,
        segment(&pod.name)?
    ))
}

pub fn pod_status_path(pod: &PodKey) -> Result<String, String> {
    Ok(format!("{}/status", pod_path(pod)?))
}

pub fn lease_path(node: &str) -> Result<String, String> {
    // The collection the lease reflector watches: the live read looks at the same objects.
    Ok(format!(
        "{}/{}",
        <Lease as Watched>::COLLECTION,
        segment(node)?
    ))
}

pub fn events_path(namespace: &str) -> Result<String, String> {
    Ok(format!("/api/v1/namespaces/{}/events", segment(namespace)?))
}

fn condition_json(c: &NodeCondition) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), c.kind.as_str().into());
    m.insert("status".into(), c.status.as_str().into());
    if let Some(t) = c.last_heartbeat_time {
        m.insert("lastHeartbeatTime".into(), t.to_rfc3339().into());
    }
    if let Some(t) = c.last_transition_time {
        m.insert("lastTransitionTime".into(), t.to_rfc3339().into());
    }
    if let Some(r) = &c.reason {
        m.insert("reason".into(), (**r).into());
    }
    if let Some(msg) = &c.message {
        m.insert("message".into(), (**msg).into());
    }
    Value::Object(m)
}

/// Strategic-merge patch of `nodes/NAME/status`: conditions merge by type, so the listed ones
/// replace the stored ones and any other type (one we do not model) is kept.
pub fn node_conditions_patch(uid: &str, resource_version: &str, conds: &[NodeCondition]) -> Value {
    json!({
        "metadata": {"resourceVersion": resource_version, "uid": uid},
        "status": {"conditions": conds.iter().map(condition_json).collect::<Vec<_>>()},
    })
}

pub fn taint_json(t: &Taint) -> Value {
    let mut m = Map::new();
    m.insert("key".into(), (*t.key).into());
    if !t.value.is_empty() {
        m.insert("value".into(), (*t.value).into());
    }
    m.insert("effect".into(), t.effect.as_str().into());
    if let Some(at) = t.time_added {
        m.insert("timeAdded".into(), at.to_rfc3339().into());
    }
    Value::Object(m)
}

/// Strategic-merge patch of `spec.taints`: the list has no merge key, so it is replaced whole
/// (the full desired list, other writers' taints included), guarded by the resourceVersion.
pub fn node_taints_patch(resource_version: &str, taints: &[Taint]) -> Value {
    json!({
        "metadata": {"resourceVersion": resource_version},
        "spec": {"taints": taints.iter().map(taint_json).collect::<Vec<_>>()},
    })
}

/// Strategic-merge patch of `metadata.labels`, no precondition (as upstream's
/// `addOrUpdateLabelsOnNode`).
pub fn node_labels_patch(labels: &[(crate::model::Name, crate::model::Name)]) -> Value {
    let map: Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(&**v)))
        .collect();
    json!({"metadata": {"labels": map}})
}

/// Pod Ready=False (upstream `MarkPodsNotReady`, which keeps reason and message and moves the
/// transition time). Pod conditions merge by type.
pub fn pod_not_ready_patch(uid: &str, now: Time) -> Value {
    json!({
        "metadata": {"uid": uid},
        "status": {"conditions": [
            {"type": "Ready", "status": "False", "lastTransitionTime": now.to_rfc3339()}
        ]},
    })
}

/// Legacy mode: `status.reason = NodeLost` with the controller's message.
pub fn pod_node_lost_patch(uid: &str, reason: &str, message: &str) -> Value {
    json!({"metadata": {"uid": uid}, "status": {"reason": reason, "message": message}})
}

/// The condition upstream's taint eviction adds before deleting (`addConditionAndDeletePod`).
pub fn disruption_target_patch(uid: &str, now: Time) -> Value {
    json!({
        "metadata": {"uid": uid},
        "status": {"conditions": [{
            "type": DISRUPTION_CONDITION,
            "status": "True",
            "reason": DISRUPTION_REASON,
            "message": DISRUPTION_MESSAGE,
            "lastTransitionTime": now.to_rfc3339(),
        }]},
    })
}

/// A core/v1 Event as client-go's recorder creates it: named `<object>.<hex nanoseconds>`,
/// in the object's namespace (`default` for nodes), count 1. `unique` keeps two events about
/// one object in the same millisecond from colliding (client-go uses the nanosecond clock).
pub fn event_body(event: &Event, now: Time, unique: u64) -> (String, Value) {
    let (namespace, object) = match &event.object {
        EventObject::Node { name, uid } => {
            let mut o = json!({"kind": "Node", "apiVersion": "v1", "name": &**name});
            if !uid.is_empty() {
                o["uid"] = Value::from(&**uid);
            }
            (NODE_EVENT_NAMESPACE.to_string(), o)
        }
        EventObject::Pod {
            namespace,
            name,
            uid,
        } => {
            let mut o = json!({
                "kind": "Pod", "apiVersion": "v1", "namespace": &**namespace, "name": &**name,
            });
            if !uid.is_empty() {
                o["uid"] = Value::from(&**uid);
            }
            (namespace.to_string(), o)
        }
    };
    let object_name = object["name"].as_str().unwrap_or_default().to_string();
    let nanos = u128::from(now.as_unix_millis()) * 1_000_000 + u128::from(unique % 1_000_000);
    let stamp = now.to_rfc3339();
    let body = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": format!("{object_name}.{nanos:x}"), "namespace": namespace},
        "involvedObject": object,
        "reason": event.reason,
        "message": event.message,
        "type": event.event_type.as_str(),
        "source": {"component": event.component},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": event.component,
    });
    (namespace, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::events::{EventType, NODE_CONTROLLER};
    use crate::model::{ConditionStatus, NodeConditionType, TaintEffect};
    use std::rc::Rc;

    const T0: Time = Time::from_unix_millis(1_700_000_000_000);

    #[test]
    fn names_that_would_change_the_path_are_refused() {
        assert_eq!(
            segment("ip-10-0-0-1.ec2.internal"),
            Ok("ip-10-0-0-1.ec2.internal")
        );
        for bad in ["", "..", "a/b", "a?b", "a b", "a%2F"] {
            assert!(segment(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            lease_path("n1").unwrap(),
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
        );
    }

    #[test]
    fn taint_patch_carries_the_version_and_the_full_list_with_time_added() {
        let taints = [
            Taint {
                key: Rc::from("user"),
                value: Rc::from("x"),
                effect: TaintEffect::NoSchedule,
                time_added: None,
            },
            Taint {
                key: Rc::from("node.kubernetes.io/unreachable"),
                value: Rc::from(""),
                effect: TaintEffect::NoExecute,
                time_added: Some(T0),
            },
        ];
        assert_eq!(
            node_taints_patch("42", &taints),
            json!({"metadata": {"resourceVersion": "42"}, "spec": {"taints": [
                {"key": "user", "value": "x", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                 "timeAdded": "2023-11-14T22:13:20Z"},
            ]}})
        );
        assert_eq!(
            node_taints_patch("43", &[])["spec"]["taints"],
            json!([]),
            "removing the last taint sends an empty list, not nothing"
        );
    }

    #[test]
    fn condition_patch_keeps_absent_fields_absent() {
        let c = NodeCondition {
            kind: NodeConditionType::Ready,
            status: ConditionStatus::Unknown,
            last_heartbeat_time: Some(T0),
            last_transition_time: Some(T0),
            reason: Some(Rc::from("NodeStatusUnknown")),
            message: Some(Rc::from("Kubelet stopped posting node status.")),
        };
        let bare = NodeCondition {
            kind: NodeConditionType::PIDPressure,
            status: ConditionStatus::Unknown,
            last_heartbeat_time: None,
            last_transition_time: None,
            reason: None,
            message: None,
        };
        let p = node_conditions_patch("u1", "7", &[c, bare]);
        assert_eq!(p["metadata"], json!({"resourceVersion": "7", "uid": "u1"}));
        assert_eq!(
            p["status"]["conditions"][0],
            json!({"type": "Ready", "status": "Unknown",
                   "lastHeartbeatTime": "2023-11-14T22:13:20Z",
                   "lastTransitionTime": "2023-11-14T22:13:20Z",
                   "reason": "NodeStatusUnknown",
                   "message": "Kubelet stopped posting node status."})
        );
        assert_eq!(
            p["status"]["conditions"][1],
            json!({"type": "PIDPressure", "status": "Unknown"})
        );
    }

    #[test]
    fn node_events_go_to_default_and_carry_the_uid_pod_events_without_uid_omit_it() {
        let node = Event {
            object: EventObject::Node {
                name: Rc::from("n1"),
                uid: Rc::from("uid-1"),
            },
            event_type: EventType::Normal,
            reason: "RegisteredNode",
            message: "Node n1 event: Registered Node n1 in Controller".into(),
            component: NODE_CONTROLLER,
        };
        let (ns, body) = event_body(&node, T0, 3);
        assert_eq!(ns, "default");
        assert_eq!(
            body["metadata"]["name"],
            format!("n1.{:x}", 1_700_000_000_000u128 * 1_000_000 + 3)
        );
        assert_eq!(body["involvedObject"]["uid"], "uid-1");
        assert_eq!(body["source"], json!({"component": "node-controller"}));
        assert_eq!(body["count"], 1);
        let pod = Event {
            object: EventObject::Pod {
                namespace: Rc::from("ns"),
                name: Rc::from("p"),
                uid: Rc::from(""),
            },
            ..node
        };
        let (ns, body) = event_body(&pod, T0, 0);
        assert_eq!(ns, "ns");
        assert!(body["involvedObject"].get("uid").is_none());
        assert_eq!(body["involvedObject"]["namespace"], "ns");
    }
}
