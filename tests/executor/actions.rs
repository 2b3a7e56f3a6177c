//! Each controller action as the executor sends it to a (simulated) API server over a real
//! socket: the exact request (the simulator's write log: verb, target, body), its effect on the
//! stored object, and the input fed back to the controllers (`controller::actions`).

use std::rc::Rc;
use std::time::Duration;

use crate::executor_support::{Harness, key, mark, n, node_event};
use node_lifecycled::controller::events::{
    Event, EventObject, EventType, TAINT_EVICTION_CONTROLLER,
};
use node_lifecycled::controller::taint_eviction::EvictionResult;
use node_lifecycled::controller::{Action, ActionId, Input, LeaseReadOutcome, Outcome};
use node_lifecycled::model::{
    ConditionStatus, ConditionText, Node, NodeCondition, NodeConditionType, Taint, TaintEffect,
};
use node_lifecycled::runtime::executor::LABEL_CONFLICT_TRIES;
use node_lifecycled::time::Time;
use node_lifecycled_sim::{RequestMatch, Resource, Verb, fixtures};
use serde_json::json;

fn result(inputs: &[Input]) -> Vec<(ActionId, Outcome)> {
    inputs
        .iter()
        .filter_map(|i| match i {
            Input::Result { id, outcome } => Some((*id, outcome.clone())),
            _ => None,
        })
        .collect()
}

/// What `tryUpdateNodeHealth` writes for a node gone silent: the four kubelet conditions Unknown.
fn unknown_conditions(node: &Node, now: Time) -> Vec<NodeCondition> {
    node.conditions
        .iter()
        .filter(|c| c.kind != NodeConditionType::NetworkUnavailable)
        .map(|c| NodeCondition {
            status: ConditionStatus::Unknown,
            last_transition_time: Some(now),
            text: ConditionText::new(
                Some(n("NodeStatusUnknown")),
                Some(n("Kubelet stopped posting node status.")),
            ),
            ..c.clone()
        })
        .collect()
}

fn no_execute(key: &str, at: Time) -> Taint {
    Taint {
        key: n(key),
        value: n(""),
        effect: TaintEffect::NoExecute,
        time_added: Some(at),
    }
}

#[test]
fn node_status_update_patches_the_conditions_with_version_and_uid_preconditions() {
    let mut h = Harness::real();
    let node = h.add_node("n1");
    let now = h.now();
    let conditions = unknown_conditions(&node, now);
    h.submit([Action::UpdateNodeConditions {
        id: ActionId(1),
        node: node.name.clone(),
        uid: node.uid.clone(),
        resource_version: node.resource_version.clone(),
        conditions,
    }]);
    let inputs = h.run_until_idle();
    assert_eq!(result(&inputs), vec![(ActionId(1), Outcome::Ok)]);
    // The write's answer comes first: the node as written, at its new resourceVersion, so the
    // next write of it does not conflict with this one.
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    let Input::NodeUpsert(written) = &inputs[0] else {
        panic!("expected the written node first: {inputs:?}");
    };
    assert_ne!(written.resource_version, node.resource_version);
    assert_eq!(
        written.ready().map(|c| c.status),
        Some(ConditionStatus::Unknown)
    );

    let stored = h.node("n1");
    let ready = stored["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()
        .clone();
    assert_eq!(ready["status"], "Unknown");
    assert_eq!(ready["reason"], "NodeStatusUnknown");
    assert_eq!(ready["message"], "Kubelet stopped posting node status.");
    assert_eq!(ready["lastTransitionTime"], now.to_rfc3339());
    assert_eq!(
        stored["status"]["conditions"].as_array().unwrap().len(),
        4,
        "conditions merge by type: none lost, none duplicated"
    );
    assert!(
        stored["status"]["addresses"].is_array(),
        "the rest of status is kept"
    );

    let writes = h.writes();
    assert_eq!(writes.len(), 1);
    let w = &writes[0];
    assert!(w.is(Verb::Patch, "nodes/status") && w.name == "n1" && w.code == 200);
    assert!(w.summary.starts_with("strategic "), "{}", w.summary);
    assert!(
        w.summary.contains(&format!(
            r#""metadata":{{"resourceVersion":"{}","uid":"{}"}}"#,
            node.resource_version, node.uid
        )),
        "{}",
        w.summary
    );
}

#[test]
fn a_taint_patch_replaces_the_whole_list_and_a_stale_one_conflicts_then_the_node_is_reread() {
    let mut h = Harness::real();
    let node = h.add_node("n1");
    // `timeAdded` is stored with second precision.
    let now = Time::from_unix_millis(h.now().as_unix_millis() / 1000 * 1000);
    let desired = vec![
        Taint {
            key: n("user/dedicated"),
            value: n("db"),
            effect: TaintEffect::NoSchedule,
            time_added: None,
        },
        no_execute("node.kubernetes.io/unreachable", now),
    ];
    h.submit([Action::PatchNodeTaints {
        id: ActionId(1),
        node: node.name.clone(),
        uid: node.uid.clone(),
        resource_version: node.resource_version.clone(),
        taints: desired.clone(),
    }]);
    assert_eq!(
        result(&h.run_until_idle()),
        vec![(ActionId(1), Outcome::Ok)]
    );
    assert_eq!(
        h.node("n1")["spec"]["taints"],
        json!([
            {"key": "user/dedicated", "value": "db", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": now.to_rfc3339()},
        ])
    );

    // Decided on the version before that write: the server refuses, the executor re-reads.
    h.submit([Action::PatchNodeTaints {
        id: ActionId(2),
        node: node.name.clone(),
        uid: node.uid.clone(),
        resource_version: node.resource_version.clone(),
        taints: vec![],
    }]);
    let inputs = h.run_until_idle();
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    let Input::NodeUpsert(fresh) = &inputs[0] else {
        panic!("the re-read node comes first: {inputs:?}");
    };
    assert_eq!(
        fresh.taints, desired,
        "the fresh node carries the stored taints"
    );
    assert_eq!(
        *fresh.resource_version,
        *h.node("n1")["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
    );
    assert_eq!(result(&inputs), vec![(ActionId(2), Outcome::Conflict)]);
    assert_eq!(
        h.node("n1")["spec"]["taints"].as_array().unwrap().len(),
        2,
        "the stale write changed nothing"
    );
    let codes: Vec<u16> = h.writes().iter().map(|w| w.code).collect();
    assert_eq!(codes, vec![200, 409]);
}

#[test]
fn a_node_status_conflict_also_rereads_and_a_node_gone_meanwhile_is_not_found() {
    let mut h = Harness::real();
    let node = h.add_node("n1");
    h.sim
        .cluster()
        .set_node_condition("n1", "Ready", "True", h.now() + Duration::from_secs(10))
        .unwrap();
    let action = |id| Action::UpdateNodeConditions {
        id: ActionId(id),
        node: node.name.clone(),
        uid: node.uid.clone(),
        resource_version: node.resource_version.clone(),
        conditions: unknown_conditions(&node, Time::from_unix_millis(0)),
    };
    h.submit([action(1)]);
    let inputs = h.run_until_idle();
    assert!(
        matches!(&inputs[0], Input::NodeUpsert(n) if n.resource_version != node.resource_version)
    );
    assert_eq!(result(&inputs), vec![(ActionId(1), Outcome::Conflict)]);

    h.sim.cluster().remove(Resource::Nodes, None, "n1").unwrap();
    h.submit([action(2)]);
    assert_eq!(
        result(&h.run_until_idle()),
        vec![(ActionId(2), Outcome::NotFound)]
    );
}

#[test]
fn labels_are_merged_without_precondition_and_conflicts_retried_5_times_100ms_jittered() {
    let mut h = Harness::real();
    let node = h.add_node("n1");
    let labels = vec![(n("beta.kubernetes.io/arch"), n("arm64"))];
    let action = |id| Action::PatchNodeLabels {
        id: ActionId(id),
        node: node.name.clone(),
        uid: node.uid.clone(),
        labels: labels.clone(),
    };
    h.sim
        .faults()
        .fail_next(RequestMatch::on(Verb::Patch, "nodes"), 2, 409);
    h.submit([action(1)]);
    let start = h.now();
    assert!(h.run(10).is_empty(), "a 409 on labels is retried here");
    let retry = h.exec.next_wakeup().unwrap();
    assert!(
        retry >= start + Duration::from_millis(100) && retry <= start + Duration::from_millis(200),
        "retry at {retry:?}, start {start:?}"
    );
    let inputs = h.run_until_idle();
    assert_eq!(result(&inputs), vec![(ActionId(1), Outcome::Ok)]);
    assert!(h.now() >= start + Duration::from_millis(200));
    assert!(h.now() <= start + Duration::from_millis(400));
    let stored = h.node("n1");
    assert_eq!(
        stored["metadata"]["labels"]["beta.kubernetes.io/arch"],
        "arm64"
    );
    assert_eq!(
        stored["metadata"]["labels"]["kubernetes.io/hostname"], "n1",
        "other labels kept"
    );
    let last = h.writes().pop().unwrap();
    assert_eq!(
        last.summary,
        r#"strategic {"metadata":{"labels":{"beta.kubernetes.io/arch":"arm64"}}}"#
    );
    assert_eq!(h.exec.stats().conflict_retries, 2);

    h.sim
        .faults()
        .fail_next(RequestMatch::on(Verb::Patch, "nodes"), 10, 409);
    h.submit([action(2)]);
    let inputs = h.run_until_idle();
    assert!(
        matches!(&result(&inputs)[..], [(ActionId(2), Outcome::Failed(m))] if m.contains("409")),
        "{inputs:?}"
    );
    let refused = h.writes().iter().filter(|w| w.code == 409).count();
    assert_eq!(refused, 2 + LABEL_CONFLICT_TRIES as usize);
}

#[test]
fn marking_a_pod_not_ready_patches_its_status_with_a_uid_precondition() {
    let mut h = Harness::real();
    let pod = h.add_pod("ns", "p", "n1");
    let now = h.now();
    h.submit([mark(1, &pod)]);
    assert_eq!(
        result(&h.run_until_idle()),
        vec![(ActionId(1), Outcome::Ok)]
    );
    let stored = h.pod("ns", "p").unwrap();
    let ready = stored["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()
        .clone();
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["lastTransitionTime"], now.to_rfc3339());
    assert_eq!(
        stored["status"]["phase"], "Running",
        "the rest of status is kept"
    );
    let w = &h.writes()[0];
    assert!(w.is(Verb::Patch, "pods/status"), "{w}");
    assert!(
        w.summary
            .contains(&format!(r#""metadata":{{"uid":"{}"}}"#, pod.uid)),
        "{}",
        w.summary
    );

    // A pod gone is fine; a pod re-created under the name is not ours to mark.
    let gone = h.add_pod("ns", "gone", "n1");
    h.sim
        .cluster()
        .remove(Resource::Pods, Some("ns"), "gone")
        .unwrap();
    let mut replaced = pod.clone();
    replaced.uid = n("some-other-uid");
    h.submit([mark(2, &gone), mark(3, &replaced)]);
    assert_eq!(
        result(&h.run_until_idle()),
        vec![
            (ActionId(2), Outcome::NotFound),
            (ActionId(3), Outcome::Conflict)
        ]
    );
}

#[test]
fn legacy_node_lost_status_and_delete_with_the_pods_own_grace_period() {
    let mut h = Harness::real();
    let pod = h.add_pod("ns", "p", "n1");
    let message = "Node n1 which was running pod p is unresponsive".to_string();
    // As the legacy controller does: the DELETE only after the NodeLost status is written.
    h.submit([Action::SetPodStatusNodeLost {
        id: ActionId(1),
        pod: pod.key.clone(),
        uid: pod.uid.clone(),
        message: message.clone(),
    }]);
    assert_eq!(
        result(&h.run_until_idle()),
        vec![(ActionId(1), Outcome::Ok)]
    );
    h.submit([Action::DeletePod {
        id: ActionId(2),
        pod: pod.key.clone(),
        uid: pod.uid.clone(),
    }]);
    assert_eq!(
        result(&h.run_until_idle()),
        vec![(ActionId(2), Outcome::Ok)]
    );
    let stored = h.pod("ns", "p").unwrap();
    assert_eq!(stored["status"]["reason"], "NodeLost");
    assert_eq!(stored["status"]["message"], message.as_str());
    assert_eq!(
        h.sim.cluster().terminating_pods(),
        vec![("ns".to_string(), "p".to_string())]
    );
    let writes = h.writes();
    assert!(writes[1].is(Verb::Delete, "pods"));
    assert_eq!(
        writes[1].summary,
        format!(
            "graceful deletion, grace period 30s, precondition uid={}",
            pod.uid
        )
    );
}

#[test]
fn evict_pod_adds_the_disruption_target_condition_then_deletes_with_a_uid_precondition() {
    let mut h = Harness::real();
    let pod = h.add_pod("ns", "p", "n1");
    let now = h.now();
    h.submit([Action::EvictPod {
        id: ActionId(7),
        pod: pod.key.clone(),
        uid: pod.uid.clone(),
        attempt: 1,
        condition_present: false,
    }]);
    let inputs = h.run_until_idle();
    // Each write's answer first (the pod with its condition, then marked for deletion), then
    // the eviction's result.
    assert!(
        matches!(
            &inputs[..],
            [
                Input::PodUpsert(conditioned),
                Input::PodUpsert(deleting),
                Input::EvictionResult {
                    id: ActionId(7),
                    result: EvictionResult::Deleted
                }
            ] if !conditioned.deleting && deleting.deleting
        ),
        "{inputs:?}"
    );
    let stored = h.pod("ns", "p").unwrap();
    let condition = stored["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "DisruptionTarget")
        .unwrap()
        .clone();
    assert_eq!(
        condition,
        json!({"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
               "message": "Taint manager: deleting due to NoExecute taint",
               "lastTransitionTime": now.to_rfc3339()})
    );
    let writes = h.writes();
    assert_eq!(writes.len(), 2);
    assert!(writes[0].is(Verb::Patch, "pods/status"));
    assert!(
        writes[0]
            .summary
            .contains(&format!(r#""uid":"{}""#, pod.uid))
    );
    assert!(writes[1].is(Verb::Delete, "pods"));
    assert!(
        writes[1]
            .summary
            .ends_with(&format!("precondition uid={}", pod.uid))
    );
    assert!(h.pod("ns", "p").unwrap()["metadata"]["deletionTimestamp"].is_string());
}

#[test]
fn evicting_a_pod_replaced_under_the_same_name_conflicts_and_deletes_nothing() {
    let mut h = Harness::real();
    let old = h.add_pod("ns", "p", "n1");
    h.sim
        .cluster()
        .remove(Resource::Pods, Some("ns"), "p")
        .unwrap();
    let new = h.add_pod("ns", "p", "n1");
    assert_ne!(old.uid, new.uid);
    h.submit([Action::EvictPod {
        id: ActionId(1),
        pod: old.key.clone(),
        uid: old.uid.clone(),
        attempt: 1,
        condition_present: false,
    }]);
    let inputs = h.run_until_idle();
    assert!(
        matches!(
            &inputs[..],
            [Input::EvictionResult {
                result: EvictionResult::Conflict,
                ..
            }]
        ),
        "{inputs:?}"
    );
    assert!(h.sim.cluster().terminating_pods().is_empty());
    let stored = h.pod("ns", "p").unwrap();
    assert_eq!(stored["metadata"]["uid"], &*new.uid);
    assert!(
        !stored["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "DisruptionTarget"),
        "the new pod is not marked either"
    );
    let writes = h.writes();
    assert_eq!(writes.len(), 1, "no DELETE after the refused patch");
    assert_eq!(writes[0].code, 409);

    h.submit([Action::EvictPod {
        id: ActionId(2),
        pod: key("ns", "never-existed"),
        uid: n("u"),
        attempt: 1,
        condition_present: false,
    }]);
    assert!(matches!(
        &h.run_until_idle()[..],
        [Input::EvictionResult {
            id: ActionId(2),
            result: EvictionResult::NotFound
        }]
    ));
}

#[test]
fn a_lease_read_is_live_every_time_and_a_missing_lease_is_not_found() {
    let mut h = Harness::real();
    let first = Time::from_unix_millis(1_700_000_000_123);
    h.sim
        .cluster()
        .create(Resource::Leases, fixtures::node_lease("n1", first))
        .unwrap();
    let read = |h: &mut Harness, id| {
        h.submit([Action::ReadLease {
            id: ActionId(id),
            node: n("n1"),
        }]);
        h.run_until_idle()
    };
    let inputs = read(&mut h, 1);
    assert!(
        matches!(&inputs[..], [Input::LeaseRead { id: ActionId(1), outcome: LeaseReadOutcome::Found(l) }]
            if l.renew_time == Some(first) && &*l.name == "n1"),
        "{inputs:?}"
    );
    let second = first + Duration::from_secs(10);
    h.sim.cluster().renew_lease("n1", second).unwrap();
    let inputs = read(&mut h, 2);
    assert!(
        matches!(&inputs[..], [Input::LeaseRead { outcome: LeaseReadOutcome::Found(l), .. }]
            if l.renew_time == Some(second)),
        "read again, not answered from a cache: {inputs:?}"
    );
    h.submit([Action::ReadLease {
        id: ActionId(3),
        node: n("n2"),
    }]);
    assert!(matches!(
        &h.run_until_idle()[..],
        [Input::LeaseRead {
            id: ActionId(3),
            outcome: LeaseReadOutcome::NotFound
        }]
    ));
    assert!(h.writes().is_empty(), "reads only");
    assert_eq!(h.exec.stats().requests_with("get", 200), 2);
    assert_eq!(h.exec.stats().requests_with("get", 404), 1);
}

#[test]
fn events_are_created_as_client_gos_recorder_creates_them_and_never_answered() {
    let mut h = Harness::real();
    let node = h.add_node("n1");
    let now = h.now();
    h.submit([
        node_event(
            &node,
            "RegisteredNode",
            "Node n1 event: Registered Node n1 in Controller".into(),
        ),
        Action::RecordEvent(Event {
            object: EventObject::Pod {
                namespace: n("ns"),
                name: n("p"),
                uid: Rc::from(""),
            },
            event_type: EventType::Normal,
            reason: "TaintManagerEviction",
            message: "Marking for deletion Pod ns/p".into(),
            component: TAINT_EVICTION_CONTROLLER,
        }),
    ]);
    assert!(h.run_until_idle().is_empty(), "events are never answered");
    let default = h.sim.cluster().list(Resource::Events, Some("default"));
    assert_eq!(default.len(), 1);
    let e = &default[0];
    assert_eq!(
        e["involvedObject"],
        json!({"kind": "Node", "apiVersion": "v1", "name": "n1", "uid": &*node.uid})
    );
    assert_eq!(e["reason"], "RegisteredNode");
    assert_eq!(
        e["message"],
        "Node n1 event: Registered Node n1 in Controller"
    );
    assert_eq!(e["type"], "Normal");
    assert_eq!(e["source"], json!({"component": "node-controller"}));
    assert_eq!(e["count"], 1);
    assert_eq!(e["firstTimestamp"], now.to_rfc3339());
    assert!(e["metadata"]["name"].as_str().unwrap().starts_with("n1."));

    let pod_events = h.sim.cluster().list(Resource::Events, Some("ns"));
    assert_eq!(pod_events.len(), 1);
    assert_eq!(
        pod_events[0]["involvedObject"],
        json!({"kind": "Pod", "apiVersion": "v1", "namespace": "ns", "name": "p"})
    );
    assert_eq!(
        pod_events[0]["source"]["component"],
        "taint-eviction-controller"
    );
    let summaries: Vec<String> = h.writes().iter().map(|w| w.summary.clone()).collect();
    assert_eq!(
        summaries,
        vec![
            "Normal RegisteredNode Node n1: Node n1 event: Registered Node n1 in Controller (source node-controller)",
            "Normal TaintManagerEviction Pod ns/p: Marking for deletion Pod ns/p (source taint-eviction-controller)",
        ]
    );
    assert_eq!(h.exec.stats().events_sent, 2);
}

/// Upstream's `addConditionAndDeletePod` does not write the `DisruptionTarget` condition again
/// when the pod carries it already (its `lastTransitionTime` is kept): only the DELETE is sent.
#[test]
fn evict_pod_whose_condition_is_present_sends_only_the_delete() {
    let mut h = Harness::real();
    let pod = h.add_pod("ns", "p", "n1");
    h.submit([Action::EvictPod {
        id: ActionId(9),
        pod: pod.key.clone(),
        uid: pod.uid.clone(),
        attempt: 2,
        condition_present: true,
    }]);
    let inputs = h.run_until_idle();
    assert!(
        matches!(
            inputs.last(),
            Some(Input::EvictionResult {
                id: ActionId(9),
                result: EvictionResult::Deleted
            })
        ),
        "{inputs:?}"
    );
    let writes = h.writes();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0].verb, Verb::Delete);
}
