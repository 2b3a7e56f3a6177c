//! Writes as the real API server treats them: optimistic concurrency, the three PATCH flavours,
//! status subresources, DELETE preconditions and graceful pod deletion, and the write log that
//! records who wrote what.

use node_lifecycled_sim::client::{Api, rv_of};
use node_lifecycled_sim::{Resource, SimConfig, SimServer, Verb, fixtures};
use serde_json::json;

fn sim_with_node() -> (node_lifecycled_sim::SimHandle, Api) {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let cluster = sim.cluster();
    cluster
        .create(
            Resource::Nodes,
            fixtures::ready_node("n1", Some("z1"), cluster.now()),
        )
        .unwrap();
    let api = Api::with_token(sim.url(), "daemon-a");
    (sim, api)
}

#[test]
fn put_with_a_stale_resource_version_conflicts_and_without_one_is_unconditional() {
    let (sim, api) = sim_with_node();
    let node = api.get("/api/v1/nodes/n1").body;
    let mut stale = node.clone();
    sim.cluster()
        .set_node_condition(
            "n1",
            "Ready",
            "True",
            sim.cluster().now() + std::time::Duration::from_secs(10),
        )
        .unwrap();

    stale["status"]["conditions"][3]["status"] = json!("Unknown");
    let conflict = api.put("/api/v1/nodes/n1/status", &stale);
    assert_eq!(conflict.code, 409);
    assert_eq!(conflict.body["reason"], "Conflict");
    assert_eq!(
        conflict.body["message"],
        "Operation cannot be fulfilled on nodes \"n1\": the object has been modified; please apply your changes to the latest version and try again"
    );

    let mut fresh = api.get("/api/v1/nodes/n1").body;
    fresh["status"]["conditions"][3]["status"] = json!("Unknown");
    fresh["spec"]["unschedulable"] = json!(true);
    let ok = api.put("/api/v1/nodes/n1/status", &fresh);
    assert_eq!(ok.code, 200);
    assert!(rv_of(&ok.body) > rv_of(&fresh));
    assert_eq!(ok.body["status"]["conditions"][3]["status"], "Unknown");
    assert!(
        ok.body["spec"]["unschedulable"].is_null(),
        "a status write changes only status"
    );

    let mut unconditional = ok.body.clone();
    unconditional["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    unconditional["status"]["conditions"] = json!([]);
    unconditional["metadata"]["labels"]["new"] = json!("label");
    let ok = api.put("/api/v1/nodes/n1", &unconditional);
    assert_eq!(ok.code, 200);
    assert_eq!(ok.body["metadata"]["labels"]["new"], "label");
    assert_eq!(
        ok.body["status"]["conditions"][3]["status"], "Unknown",
        "a main-resource write keeps status"
    );

    let update = sim
        .writes()
        .into_iter()
        .find(|w| w.is(Verb::Update, "nodes/status") && w.succeeded())
        .unwrap();
    assert_eq!(update.identity.token.as_deref(), Some("daemon-a"));
    assert_eq!(update.identity.user_agent.as_deref(), Some("sim-test"));
    assert!(
        update
            .summary
            .contains(r#"status.conditions[Ready].status: "True" -> "Unknown""#),
        "{}",
        update.summary
    );
    assert_eq!(
        api.put(
            "/api/v1/nodes/missing",
            &json!({"metadata": {"name": "missing"}})
        )
        .code,
        404
    );
}

#[test]
fn taint_patch_with_a_stale_version_conflicts_and_a_fresh_one_replaces_the_whole_list() {
    let (sim, api) = sim_with_node();
    let set = |taints: serde_json::Value, rv: u64| {
        api.strategic(
            "/api/v1/nodes/n1",
            &json!({"metadata": {"resourceVersion": rv.to_string()}, "spec": {"taints": taints}}),
        )
    };
    let rv = rv_of(&api.get("/api/v1/nodes/n1").body);
    let first = set(
        json!([{"key": "user", "effect": "NoSchedule"}, {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]),
        rv,
    );
    assert_eq!(first.code, 200);

    let stale = set(
        json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]),
        rv,
    );
    assert_eq!(stale.code, 409);
    assert_eq!(stale.body["reason"], "Conflict");

    let fresh = set(
        json!([{"key": "user", "effect": "NoSchedule"}, {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2025-01-01T00:00:00Z"}]),
        rv_of(&first.body),
    );
    assert_eq!(fresh.code, 200);
    assert_eq!(
        fresh.body["spec"]["taints"],
        json!([{"key": "user", "effect": "NoSchedule"}, {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2025-01-01T00:00:00Z"}])
    );
    let writes = sim.writes();
    let patches: Vec<u16> = writes
        .iter()
        .filter(|w| w.is(Verb::Patch, "nodes"))
        .map(|w| w.code)
        .collect();
    assert_eq!(patches, [200, 409, 200]);
    assert!(
        writes[0].summary.starts_with("strategic {"),
        "{}",
        writes[0].summary
    );
}

#[test]
fn status_conditions_merge_by_type_and_labels_merge_with_null_deleting() {
    let (_sim, api) = sim_with_node();
    let patched = api.strategic(
        "/api/v1/nodes/n1/status",
        &json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}}),
    );
    assert_eq!(patched.code, 200);
    let conditions = patched.body["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 4, "other conditions are kept");
    let ready = conditions.iter().find(|c| c["type"] == "Ready").unwrap();
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("Unknown"), Some("NodeStatusUnknown"))
    );
    assert_eq!(
        ready["message"], "kubelet is posting ready status",
        "fields not in the patch are kept"
    );

    let labels = api.strategic(
        "/api/v1/nodes/n1",
        &json!({"metadata": {"labels": {"beta.kubernetes.io/os": null, "extra": "1"}}}),
    );
    assert_eq!(labels.code, 200);
    let labels = &labels.body["metadata"]["labels"];
    assert!(labels.get("beta.kubernetes.io/os").is_none());
    assert_eq!(
        (
            labels["extra"].as_str(),
            labels["kubernetes.io/os"].as_str()
        ),
        (Some("1"), Some("linux"))
    );

    let status_via_main = api.strategic("/api/v1/nodes/n1", &json!({"status": {"conditions": []}}));
    assert_eq!(
        status_via_main.body["status"]["conditions"]
            .as_array()
            .unwrap()
            .len(),
        4,
        "status ignored on the main resource"
    );

    let unsupported = api.strategic(
        "/api/v1/nodes/n1",
        &json!({"spec": {"$retainKeys": ["taints"]}}),
    );
    assert_eq!(
        (unsupported.code, unsupported.body["reason"].as_str()),
        (422, Some("Invalid"))
    );
    let pod_uid_mismatch = api.strategic(
        "/api/v1/nodes/n1",
        &json!({"metadata": {"uid": "not-the-uid"}}),
    );
    assert_eq!(pod_uid_mismatch.code, 409);
    assert!(
        pod_uid_mismatch.body["message"]
            .as_str()
            .unwrap()
            .contains("Precondition failed: UID in precondition: not-the-uid")
    );
}

#[test]
fn merge_patch_and_json_patch_apply_and_unknown_content_types_are_refused() {
    let (_sim, api) = sim_with_node();
    let merged = api.merge("/api/v1/nodes/n1", &json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}, "metadata": {"labels": {"kubernetes.io/arch": null}}}));
    assert_eq!(merged.code, 200);
    assert_eq!(
        merged.body["spec"]["taints"],
        json!([{"key": "a", "effect": "NoSchedule"}])
    );
    assert!(
        merged.body["metadata"]["labels"]
            .get("kubernetes.io/arch")
            .is_none()
    );

    let patched = api.json_patch(
        "/api/v1/nodes/n1",
        &json!([
            {"op": "test", "path": "/spec/taints/0/key", "value": "a"},
            {"op": "add", "path": "/spec/taints/-", "value": {"key": "b", "effect": "NoExecute"}}
        ]),
    );
    assert_eq!(patched.code, 200);
    assert_eq!(patched.body["spec"]["taints"].as_array().unwrap().len(), 2);
    let failed_test = api.json_patch(
        "/api/v1/nodes/n1",
        &json!([{"op": "test", "path": "/spec/taints/0/key", "value": "zzz"}]),
    );
    assert_eq!(failed_test.code, 422);
    let stale = api.json_patch(
        "/api/v1/nodes/n1",
        &json!([{"op": "replace", "path": "/metadata/resourceVersion", "value": "1"}]),
    );
    assert_eq!(stale.code, 409);
    let wrong_type = api.call(
        "PATCH",
        "/api/v1/nodes/n1",
        "application/apply-patch+yaml",
        Some(&json!({})),
    );
    assert_eq!(wrong_type.code, 415);
}

#[test]
fn delete_honours_uid_and_resource_version_preconditions() {
    let (sim, api) = sim_with_node();
    let node = api.get("/api/v1/nodes/n1").body;
    let uid = node["metadata"]["uid"].as_str().unwrap().to_string();
    let wrong_uid = api.delete(
        "/api/v1/nodes/n1",
        Some(&json!({"preconditions": {"uid": "other"}})),
    );
    assert_eq!(wrong_uid.code, 409);
    assert!(
        wrong_uid.body["message"]
            .as_str()
            .unwrap()
            .contains(&format!(
                "UID in precondition: other, UID in object meta: {uid}"
            ))
    );
    let wrong_rv = api.delete(
        "/api/v1/nodes/n1",
        Some(&json!({"preconditions": {"resourceVersion": "999"}})),
    );
    assert_eq!(wrong_rv.code, 409);
    let rv = node["metadata"]["resourceVersion"].as_str().unwrap();
    let ok = api.delete(
        "/api/v1/nodes/n1",
        Some(&json!({"preconditions": {"uid": uid, "resourceVersion": rv}})),
    );
    assert_eq!(ok.code, 200);
    assert_eq!(api.get("/api/v1/nodes/n1").code, 404);
    assert_eq!(
        api.delete("/api/v1/nodes/n1", None).body["reason"],
        "NotFound"
    );
    let deletes: Vec<u16> = sim
        .writes()
        .iter()
        .filter(|w| w.verb == Verb::Delete)
        .map(|w| w.code)
        .collect();
    assert_eq!(deletes, [409, 409, 200, 404]);
}

#[test]
fn graceful_pod_delete_sets_deletion_timestamp_until_the_kubelet_finalizes() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let cluster = sim.cluster();
    cluster
        .create(
            Resource::Pods,
            fixtures::running_pod("default", "p", Some("n1")),
        )
        .unwrap();
    cluster
        .create(
            Resource::Pods,
            fixtures::running_pod("default", "pending", None),
        )
        .unwrap();
    let api = Api::new(sim.url());
    let uid = api.get("/api/v1/namespaces/default/pods/p").body["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let deleted = api.delete(
        "/api/v1/namespaces/default/pods/p",
        Some(&json!({"preconditions": {"uid": uid}})),
    );
    assert_eq!(deleted.code, 200);
    assert_eq!(deleted.body["metadata"]["deletionGracePeriodSeconds"], 30);
    assert!(deleted.body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        api.get("/api/v1/namespaces/default/pods/p").code,
        200,
        "still there, terminating"
    );
    assert_eq!(
        cluster.terminating_pods(),
        [("default".to_string(), "p".to_string())]
    );
    cluster
        .remove(Resource::Pods, Some("default"), "p")
        .unwrap();
    assert_eq!(api.get("/api/v1/namespaces/default/pods/p").code, 404);
    // A pod that never ran anywhere goes at once.
    assert_eq!(
        api.delete("/api/v1/namespaces/default/pods/pending", None)
            .code,
        200
    );
    assert_eq!(api.get("/api/v1/namespaces/default/pods/pending").code, 404);

    let finalizing = SimServer::start(SimConfig {
        finalize_pod_deletes: true,
        ..SimConfig::default()
    })
    .unwrap();
    finalizing
        .cluster()
        .create(
            Resource::Pods,
            fixtures::running_pod("default", "p", Some("n1")),
        )
        .unwrap();
    let api = Api::new(finalizing.url());
    assert_eq!(
        api.delete(
            "/api/v1/namespaces/default/pods/p?gracePeriodSeconds=30",
            None
        )
        .code,
        200
    );
    assert_eq!(api.get("/api/v1/namespaces/default/pods/p").code, 404);
}

#[test]
fn pod_status_patch_with_uid_precondition_adds_disruption_target_condition() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    sim.cluster()
        .create(
            Resource::Pods,
            fixtures::running_pod("default", "p", Some("n1")),
        )
        .unwrap();
    let api = Api::new(sim.url());
    let uid = api.get("/api/v1/namespaces/default/pods/p").body["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let patch = json!({"metadata": {"uid": uid}, "status": {"conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
         "message": "Taint manager: deleting due to NoExecute taint"}]}});
    let ok = api.strategic("/api/v1/namespaces/default/pods/p/status", &patch);
    assert_eq!(ok.code, 200);
    let types: Vec<&str> = ok.body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["PodScheduled", "Ready", "DisruptionTarget"]);
    let same_again = api.strategic("/api/v1/namespaces/default/pods/p/status", &patch);
    assert_eq!(
        rv_of(&same_again.body),
        rv_of(&ok.body),
        "a no-op write does not bump the version"
    );
}

#[test]
fn create_conflicts_with_an_existing_object_and_events_are_logged_with_their_writer() {
    let (sim, api) = sim_with_node();
    let again = api.post(
        "/api/v1/nodes",
        &fixtures::ready_node("n1", None, sim.cluster().now()),
    );
    assert_eq!(
        (again.code, again.body["reason"].as_str()),
        (409, Some("AlreadyExists"))
    );
    let event = json!({
        "metadata": {"generateName": "n1."},
        "involvedObject": {"kind": "Node", "name": "n1", "uid": "n1"},
        "reason": "NodeNotReady", "message": "Node n1 status is now: NodeNotReady",
        "type": "Normal", "source": {"component": "node-controller"}
    });
    let created =
        Api::with_token(sim.url(), "daemon-b").post("/api/v1/namespaces/default/events", &event);
    assert_eq!(created.code, 201);
    assert!(
        created.body["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("n1.")
    );
    let events: Vec<_> = sim
        .writes()
        .into_iter()
        .filter(|w| w.is(Verb::Create, "events"))
        .collect();
    assert_eq!(events.len(), 1);
    assert!(events[0].by("daemon-b"));
    assert_eq!(
        events[0].summary,
        "Normal NodeNotReady Node n1: Node n1 status is now: NodeNotReady (source node-controller)"
    );
    print!("{}", sim.write_log_text());
}

#[test]
fn configured_tokens_reject_other_callers_with_401() {
    let sim = SimServer::start(SimConfig {
        tokens: Some(vec!["good".into()]),
        ..SimConfig::default()
    })
    .unwrap();
    assert_eq!(Api::new(sim.url()).get("/api/v1/nodes").code, 401);
    assert_eq!(
        Api::with_token(sim.url(), "bad").get("/api/v1/nodes").code,
        401
    );
    assert_eq!(
        Api::with_token(sim.url(), "good").get("/api/v1/nodes").code,
        200
    );
    let version = Api::new(sim.url()).get("/version").body;
    assert_eq!(version["gitVersion"], "v1.32.0-sim");
    assert_eq!(Api::new(sim.url()).get("/healthz").code, 200);
}

#[test]
fn a_body_that_does_not_parse_as_the_upstream_type_is_a_400_status_and_changes_nothing() {
    let (sim, api) = sim_with_node();
    let before = api.get("/api/v1/nodes/n1").body;
    let bad_taints = json!({"spec": {"taints": [{"key": "k", "effect": 7}]}});
    let bad_conditions = json!({"status": {"conditions": "Ready"}});
    let bad_lease = json!({"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": "15s"}});
    let bad_event = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Node"},
        "count": "one"});
    let replies = [
        api.strategic("/api/v1/nodes/n1", &bad_taints),
        api.merge("/api/v1/nodes/n1/status", &bad_conditions),
        api.put(
            "/api/v1/nodes/n1",
            &json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": "yes"}}),
        ),
        api.post(
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            &bad_lease,
        ),
        api.post("/api/v1/namespaces/default/events", &bad_event),
    ];
    for reply in &replies {
        assert_eq!(reply.code, 400, "{}", reply.body);
        assert_eq!(reply.body["kind"], "Status");
        assert_eq!(reply.body["status"], "Failure");
        assert_eq!(reply.body["reason"], "BadRequest");
        assert!(
            reply.body["message"]
                .as_str()
                .unwrap()
                .contains("cannot be handled as a"),
            "{}",
            reply.body
        );
    }
    assert_eq!(
        api.get("/api/v1/nodes/n1").body["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    let refused: Vec<u16> = sim.writes().iter().map(|w| w.code).collect();
    assert_eq!(refused, vec![400; 5], "each refusal is in the write log");

    // The same shapes with the right types are accepted.
    let good_taints = json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
    assert_eq!(api.strategic("/api/v1/nodes/n1", &good_taints).code, 200);
}
