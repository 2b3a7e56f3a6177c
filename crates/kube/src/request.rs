//! The exact requests the executor sends: paths and JSON bodies, as pure functions.
//!
//! Bodies are the smallest patches that carry upstream's effect and its preconditions
//! (docs/upstream.md, "How writes are made"): a node status or taint write carries the
//! resourceVersion it was decided on, so a stale decision fails with 409 instead of overwriting
//! another writer; pod writes carry the pod's UID, so a pod re-created under the same name is never
//! touched.
//!
//! Every body is built from the upstream `k8s-openapi` types and serialized with serde_json, so a
//! misspelt field or a wrong type is a compile error rather than a 400 in production. A
//! strategic-merge patch is a partial object: [`StrategicPatch`] carries `metadata`, `spec` and
//! `status` as k8s-openapi types with every field we do not set left `None` (k8s-openapi omits
//! those when serializing), and no `apiVersion`/`kind` (a patch names its target by path).
//! Only fields every supported server (back to 1.20) knows are set.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

pub(crate) use crate::body::to_json;

use crate::model::{Lease, NodeCondition, PodKey, Taint, disruption};
use crate::reflector::Watched;
use crate::time::Time;

/// Where events about cluster-scoped objects (nodes) go, as client-go's recorder does.
pub(crate) const NODE_EVENT_NAMESPACE: &str = "default";

/// A name as one URL path segment. Names come from decoded API objects, which the API server
/// validated (DNS subdomains), so this only refuses what would change the request's meaning.
pub(crate) fn segment(name: &str) -> Result<&str, String> {
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

/// A strategic-merge patch: a partial object of which only the parts set are sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct StrategicPatch<Spec, Status> {
    pub(crate) metadata: meta::ObjectMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) spec: Option<Spec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<Status>,
}

pub(crate) type NodePatch = StrategicPatch<core::NodeSpec, core::NodeStatus>;
pub(crate) type PodPatch = StrategicPatch<core::PodSpec, core::PodStatus>;

/// Our millisecond time as `metav1.Time` (which serializes with second precision, as the API
/// stores it). Out-of-range values clamp; none occur with a sane clock.
pub(crate) fn k8s_time(t: Time) -> meta::Time {
    let ms = i64::try_from(t.as_unix_millis()).unwrap_or(i64::MAX);
    meta::Time(Timestamp::from_millisecond(ms).unwrap_or(Timestamp::MAX))
}

fn condition(c: &NodeCondition) -> core::NodeCondition {
    core::NodeCondition {
        type_: c.kind.as_str().to_string(),
        status: c.status.as_str().to_string(),
        last_heartbeat_time: c.last_heartbeat_time.map(k8s_time),
        last_transition_time: c.last_transition_time.map(k8s_time),
        reason: c.text.reason().map(|r| r.to_string()),
        message: c.text.message().map(|m| m.to_string()),
    }
}

/// Strategic-merge patch of `nodes/NAME/status`: conditions merge by type, so the listed ones
/// replace the stored ones and any other type (one we do not model) is kept.
pub fn node_conditions_patch(uid: &str, resource_version: &str, conds: &[NodeCondition]) -> Value {
    to_json(&NodePatch {
        metadata: meta::ObjectMeta {
            resource_version: Some(resource_version.to_string()),
            uid: Some(uid.to_string()),
            ..Default::default()
        },
        spec: None,
        status: Some(core::NodeStatus {
            conditions: Some(conds.iter().map(condition).collect()),
            ..Default::default()
        }),
    })
}

pub(crate) fn k8s_taint(t: &Taint) -> core::Taint {
    core::Taint {
        key: t.key.to_string(),
        value: (!t.value.is_empty()).then(|| t.value.to_string()),
        effect: t.effect.as_str().to_string(),
        time_added: t.time_added.map(k8s_time),
    }
}

/// Strategic-merge patch of `spec.taints`: the list has no merge key, so it is replaced whole
/// (the full desired list, other writers' taints included), guarded by the resourceVersion.
pub fn node_taints_patch(resource_version: &str, taints: &[Taint]) -> Value {
    to_json(&NodePatch {
        metadata: meta::ObjectMeta {
            resource_version: Some(resource_version.to_string()),
            ..Default::default()
        },
        // `Some(vec![])` when the last taint goes: an empty list, not nothing.
        spec: Some(core::NodeSpec {
            taints: Some(taints.iter().map(k8s_taint).collect()),
            ..Default::default()
        }),
        status: None,
    })
}

/// Strategic-merge patch of `metadata.labels`, no precondition (as upstream's
/// `addOrUpdateLabelsOnNode`).
pub fn node_labels_patch(labels: &[(crate::model::Name, crate::model::Name)]) -> Value {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    to_json(&NodePatch {
        metadata: meta::ObjectMeta {
            labels: Some(labels),
            ..Default::default()
        },
        spec: None,
        status: None,
    })
}

/// Strategic-merge patch of `metadata.annotations` (`null` removes a key) and, with `taints`,
/// the FULL `spec.taints`, guarded by the resourceVersion: the taint and the record that we
/// added it land together or not at all. Its own typed body rather than k8s-openapi's
/// `ObjectMeta`: those annotations are a `BTreeMap<String, String>`, which cannot carry the
/// `null` that tells the server to remove a key (the taints inside are k8s-openapi types).
pub fn node_annotations_patch(
    resource_version: &str,
    annotations: &[(&'static str, Option<String>)],
    taints: Option<&[Taint]>,
) -> Value {
    #[derive(Serialize)]
    struct Patch<'a> {
        metadata: Metadata<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        spec: Option<Spec>,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Metadata<'a> {
        resource_version: &'a str,
        annotations: BTreeMap<&'static str, Option<&'a str>>,
    }
    #[derive(Serialize)]
    struct Spec {
        taints: Vec<core::Taint>,
    }
    to_json(&Patch {
        metadata: Metadata {
            resource_version,
            annotations: annotations
                .iter()
                .map(|(k, v)| (*k, v.as_deref()))
                .collect(),
        },
        spec: taints.map(|taints| Spec {
            taints: taints.iter().map(k8s_taint).collect(),
        }),
    })
}

fn pod_status_patch(uid: &str, status: core::PodStatus) -> Value {
    to_json(&PodPatch {
        metadata: meta::ObjectMeta {
            uid: Some(uid.to_string()),
            ..Default::default()
        },
        spec: None,
        status: Some(status),
    })
}

/// Pod Ready=False (upstream `MarkPodsNotReady`, which keeps reason and message and moves the
/// transition time). Pod conditions merge by type.
pub fn pod_not_ready_patch(uid: &str, now: Time) -> Value {
    pod_status_patch(
        uid,
        core::PodStatus {
            conditions: Some(vec![core::PodCondition {
                type_: "Ready".into(),
                status: "False".into(),
                last_transition_time: Some(k8s_time(now)),
                ..Default::default()
            }]),
            ..Default::default()
        },
    )
}

/// Legacy mode: `status.reason = NodeLost` with the controller's message.
pub fn pod_node_lost_patch(uid: &str, reason: &str, message: &str) -> Value {
    pod_status_patch(
        uid,
        core::PodStatus {
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            ..Default::default()
        },
    )
}

/// The condition upstream's taint eviction adds before deleting (`addConditionAndDeletePod`).
pub fn disruption_target_patch(uid: &str, now: Time) -> Value {
    pod_status_patch(
        uid,
        core::PodStatus {
            conditions: Some(vec![core::PodCondition {
                type_: disruption::CONDITION.into(),
                status: "True".into(),
                reason: Some(disruption::REASON.into()),
                message: Some(disruption::MESSAGE.into()),
                last_transition_time: Some(k8s_time(now)),
                ..Default::default()
            }]),
            ..Default::default()
        },
    )
}

/// The object an event is about (`involvedObject`); an empty uid is left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvolvedObject<'a> {
    Node {
        name: &'a str,
        uid: &'a str,
    },
    Pod {
        namespace: &'a str,
        name: &'a str,
        uid: &'a str,
    },
}

/// What a core/v1 Event says: about what, why (`reason`, `message`), how grave
/// (`event_type`: `Normal` or `Warning`), and who says it (`component`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRecord<'a> {
    pub object: InvolvedObject<'a>,
    pub event_type: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
    pub component: &'a str,
}

/// A core/v1 Event as client-go's recorder creates it: named `<object>.<hex nanoseconds>`,
/// in the object's namespace (`default` for nodes), count 1. `unique` keeps two events about
/// one object in the same millisecond from colliding (client-go uses the nanosecond clock).
pub fn event_body(event: &EventRecord<'_>, now: Time, unique: u64) -> (String, Value) {
    let non_empty = |uid: &str| (!uid.is_empty()).then(|| uid.to_string());
    let (namespace, object) = match event.object {
        InvolvedObject::Node { name, uid } => (
            NODE_EVENT_NAMESPACE.to_string(),
            core::ObjectReference {
                kind: Some("Node".into()),
                api_version: Some("v1".into()),
                name: Some(name.to_string()),
                uid: non_empty(uid),
                ..Default::default()
            },
        ),
        InvolvedObject::Pod {
            namespace,
            name,
            uid,
        } => (
            namespace.to_string(),
            core::ObjectReference {
                kind: Some("Pod".into()),
                api_version: Some("v1".into()),
                namespace: Some(namespace.to_string()),
                name: Some(name.to_string()),
                uid: non_empty(uid),
                ..Default::default()
            },
        ),
    };
    let object_name = object.name.clone().unwrap_or_default();
    let nanos = u128::from(now.as_unix_millis()) * 1_000_000 + u128::from(unique % 1_000_000);
    let stamp = k8s_time(now);
    let body = core::Event {
        metadata: meta::ObjectMeta {
            name: Some(format!("{object_name}.{nanos:x}")),
            namespace: Some(namespace.clone()),
            ..Default::default()
        },
        involved_object: object,
        reason: Some(event.reason.to_string()),
        message: Some(event.message.to_string()),
        type_: Some(event.event_type.to_string()),
        source: Some(core::EventSource {
            component: Some(event.component.to_string()),
            host: None,
        }),
        first_timestamp: Some(stamp.clone()),
        last_timestamp: Some(stamp),
        count: Some(1),
        reporting_component: Some(event.component.to_string()),
        ..Default::default()
    };
    (namespace, to_json(&body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ConditionStatus, ConditionText, NodeConditionType, TaintEffect};
    use serde_json::json;
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
            text: ConditionText::new(
                Some(Rc::from("NodeStatusUnknown")),
                Some(Rc::from("Kubelet stopped posting node status.")),
            ),
        };
        let bare = NodeCondition {
            kind: NodeConditionType::PIDPressure,
            status: ConditionStatus::Unknown,
            last_heartbeat_time: None,
            last_transition_time: None,
            text: ConditionText::new(None, None),
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
        let node = EventRecord {
            object: InvolvedObject::Node {
                name: "n1",
                uid: "uid-1",
            },
            event_type: "Normal",
            reason: "RegisteredNode",
            message: "Node n1 event: Registered Node n1 in Controller",
            component: "node-controller",
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
        let pod = EventRecord {
            object: InvolvedObject::Pod {
                namespace: "ns",
                name: "p",
                uid: "",
            },
            ..node
        };
        let (ns, body) = event_body(&pod, T0, 0);
        assert_eq!(ns, "ns");
        assert!(body["involvedObject"].get("uid").is_none());
        assert_eq!(body["involvedObject"]["namespace"], "ns");
    }

    #[test]
    fn pod_and_label_patches_are_exactly_the_partial_objects_they_were() {
        assert_eq!(
            pod_not_ready_patch("u1", T0),
            json!({"metadata": {"uid": "u1"}, "status": {"conditions": [
                {"type": "Ready", "status": "False", "lastTransitionTime": "2023-11-14T22:13:20Z"}
            ]}})
        );
        assert_eq!(
            pod_node_lost_patch("u1", "NodeLost", "gone"),
            json!({"metadata": {"uid": "u1"}, "status": {"reason": "NodeLost", "message": "gone"}})
        );
        assert_eq!(
            disruption_target_patch("u1", T0),
            json!({"metadata": {"uid": "u1"}, "status": {"conditions": [{
                "type": disruption::CONDITION, "status": "True", "reason": disruption::REASON,
                "message": disruption::MESSAGE, "lastTransitionTime": "2023-11-14T22:13:20Z",
            }]}})
        );
        assert_eq!(
            node_labels_patch(&[(Rc::from("beta.kubernetes.io/os"), Rc::from("linux"))]),
            json!({"metadata": {"labels": {"beta.kubernetes.io/os": "linux"}}})
        );
    }

    #[test]
    fn an_event_is_a_whole_core_v1_event() {
        let event = EventRecord {
            object: InvolvedObject::Pod {
                namespace: "ns",
                name: "p",
                uid: "u",
            },
            event_type: "Normal",
            reason: "TaintManagerEviction",
            message: "Marking for deletion Pod ns/p",
            component: "node-controller",
        };
        let (_, body) = event_body(&event, T0, 0);
        assert_eq!(
            body,
            json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": format!("p.{:x}", 1_700_000_000_000u128 * 1_000_000),
                             "namespace": "ns"},
                "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": "ns",
                                   "name": "p", "uid": "u"},
                "reason": "TaintManagerEviction", "message": "Marking for deletion Pod ns/p",
                "type": "Normal", "source": {"component": "node-controller"},
                "firstTimestamp": "2023-11-14T22:13:20Z", "lastTimestamp": "2023-11-14T22:13:20Z",
                "count": 1, "reportingComponent": "node-controller",
            })
        );
    }
}
