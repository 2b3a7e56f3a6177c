//! Objects decoded to their projections: real Nodes, Pods and Leases keep only what the
//! controllers read; unknown enums, nulls and bad timestamps cost a field, not the object.

use super::*;

#[test]
fn kubeadm_control_plane_node_keeps_only_what_the_controller_reads() {
    let mut ctx = DecodeContext::new();
    let node: Node = decode_object(NODE.as_bytes(), &mut ctx).unwrap();
    assert_eq!(&*node.name, "cp-1.k8s.example.internal");
    assert_eq!(&*node.resource_version, "4819203");
    assert_eq!(node.creation_timestamp, t("2024-03-11T09:14:27Z"));
    let mut labels: Vec<(&str, &str)> = node.labels.iter().map(|(k, v)| (&**k, &**v)).collect();
    labels.sort();
    assert_eq!(
        labels,
        [
            ("beta.kubernetes.io/arch", "amd64"),
            ("beta.kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            ("kubernetes.io/os", "linux"),
            ("topology.kubernetes.io/region", "eu-west-1"),
            ("topology.kubernetes.io/zone", "eu-west-1a"),
        ]
    );
    assert_eq!(node.zone_key(), "eu-west-1:\x00:eu-west-1a");
    assert_eq!(node.taints.len(), 1);
    assert_eq!(
        &*node.taints[0].key,
        "node-role.kubernetes.io/control-plane"
    );
    assert_eq!(node.taints[0].effect, TaintEffect::NoSchedule);
    assert_eq!(&*node.taints[0].value, "");
    assert!(!node.unschedulable);
    assert_eq!(node.conditions.len(), 5);
    let ready = node.ready().unwrap();
    assert_eq!(ready.status, ConditionStatus::True);
    assert_eq!(ready.last_heartbeat_time, Some(t("2024-03-12T10:02:11Z")));
    assert_eq!(ready.text.reason().map(|r| &**r), Some("KubeletReady"));
    let net = node
        .condition(NodeConditionType::NetworkUnavailable)
        .unwrap();
    assert_eq!(net.status, ConditionStatus::False);
}

#[test]
fn deployment_pod_with_managed_fields_decodes_to_the_projection() {
    let mut ctx = DecodeContext::new();
    let pod: Pod = decode_object(POD.as_bytes(), &mut ctx).unwrap();
    assert_eq!(pod.key.to_string(), "orders/orders-api-7d9f8b6c5d-x2kqz");
    assert_eq!(&*pod.uid, "5f0c3a2e-9b1d-4e7f-a6c8-0d2b4f6e8a13");
    assert_eq!(pod.node_name.as_deref(), Some("worker-eu-west-1a-17"));
    assert_eq!(pod.ready, Some(ConditionStatus::True));
    assert!(!pod.deleting);
    assert!(!pod.daemonset_owned, "owned by a ReplicaSet");
    assert_eq!(pod.tolerations.len(), 2);
    let unreachable = &pod.tolerations[1];
    assert_eq!(&*unreachable.key, "node.kubernetes.io/unreachable");
    assert_eq!(unreachable.operator, TolerationOperator::Exists);
    assert_eq!(unreachable.effect, Some(TaintEffect::NoExecute));
    assert_eq!(unreachable.toleration_seconds, Some(300));
}

#[test]
fn daemonset_pod_being_deleted_and_unbound_pod() {
    let mut ctx = DecodeContext::new();
    let json = r#"{"metadata":{"name":"fluentbit-x","namespace":"logging","uid":"u","resourceVersion":"9",
        "deletionTimestamp":"2024-01-01T00:00:00Z",
        "ownerReferences":[{"kind":"Node","name":"n","controller":false},{"kind":"DaemonSet","name":"fluentbit","controller":true}]},
        "spec":{"nodeName":"n1","tolerations":[{"operator":"Exists"}]},"status":{"conditions":[{"type":"Ready","status":"False"}]}}"#;
    let pod: Pod = decode_object(json.as_bytes(), &mut ctx).unwrap();
    assert!(pod.daemonset_owned);
    assert!(pod.deleting);
    assert_eq!(pod.ready, Some(ConditionStatus::False));
    let tol = &pod.tolerations[0];
    assert_eq!(
        (&*tol.key, &tol.operator, &tol.effect),
        ("", &TolerationOperator::Exists, &None)
    );

    let pending = r#"{"metadata":{"name":"p","namespace":"d","ownerReferences":[{"kind":"DaemonSet"}]},"spec":{"nodeName":""}}"#;
    let pod: Pod = decode_object(pending.as_bytes(), &mut ctx).unwrap();
    assert_eq!(pod.node_name, None);
    assert_eq!(pod.ready, None);
    assert!(
        !pod.daemonset_owned,
        "a DaemonSet reference that is not the controller"
    );
}

#[test]
fn node_lease_renew_time_is_micro_time() {
    let mut ctx = DecodeContext::new();
    let json = r#"{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"worker-1","namespace":"kube-node-lease","resourceVersion":"77",
        "ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"worker-1","uid":"x"}]},
        "spec":{"holderIdentity":"worker-1","leaseDurationSeconds":40,"renewTime":"2024-03-12T10:02:19.731204Z"}}"#;
    let lease: Lease = decode_object(json.as_bytes(), &mut ctx).unwrap();
    assert_eq!(&*lease.name, "worker-1");
    assert_eq!(lease.renew_time, Some(t("2024-03-12T10:02:19.731Z")));
    assert_eq!(lease.duration_seconds, Some(40));
    assert_eq!(&*lease.resource_version, "77");
}

#[test]
fn unknown_enum_strings_and_nulls_do_not_fail_decoding() {
    let mut ctx = DecodeContext::new();
    let node = r#"{"metadata":{"name":"n","labels":null,"creationTimestamp":null,"annotations":null},
        "spec":{"taints":[{"key":"k","effect":"NoFly"}],"unschedulable":null},
        "status":{"conditions":[{"type":"Ready","status":"Maybe","reason":null},{"type":"KernelDeadlock","status":"True"}]}}"#;
    let node: Node = decode_object(node.as_bytes(), &mut ctx).unwrap();
    assert_eq!(node.taints[0].effect, TaintEffect::Other("NoFly".into()));
    // Not read as Unknown: it matches no rule (see `ConditionStatus::Other`).
    assert_eq!(node.ready().unwrap().status, ConditionStatus::Other);
    assert_eq!(
        node.conditions.len(),
        1,
        "unknown condition types are dropped"
    );
    assert_eq!(node.creation_timestamp, Time::ZERO);
    let pod = r#"{"metadata":{"name":"p","namespace":"d"},"spec":{"nodeName":"n","tolerations":[{"key":"k","operator":"Gt","value":"3"}]}}"#;
    let pod: Pod = decode_object(pod.as_bytes(), &mut ctx).unwrap();
    assert_eq!(
        pod.tolerations[0].operator,
        TolerationOperator::Other("Gt".into())
    );
}

#[test]
fn missing_names_and_bad_timestamps_are_errors_with_context() {
    let mut ctx = DecodeContext::new();
    let e = decode_object::<Node>(br#"{"metadata":{}}"#, &mut ctx).unwrap_err();
    assert_eq!(e.to_string(), "cannot decode Node: missing metadata.name");
    let e = decode_object::<Lease>(
        br#"{"metadata":{"name":"x"},"spec":{"renewTime":"yesterday"}}"#,
        &mut ctx,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot decode Lease: spec.renewTime: bad timestamp \"yesterday\""
    );
    assert!(decode_object::<Pod>(b"not json", &mut ctx).is_err());
}

/// One bad taint or condition time must not cost the node: a failed decode would drop it from a
/// LIST and it would never be monitored. The node is kept, the field reads as absent, and the
/// warning is logged once however often the node is sent again.
#[test]
fn a_node_with_a_bad_timestamp_is_kept_without_that_field() {
    let json = r#"{"metadata":{"name":"n1","uid":"u1","resourceVersion":"5",
        "creationTimestamp":"2024-01-01T00:00:00Z"},
      "spec":{"taints":[{"key":"k","effect":"NoExecute","timeAdded":"not a time"}]},
      "status":{"conditions":[{"type":"Ready","status":"True",
        "lastHeartbeatTime":"2024-13-45T99:00:00Z","lastTransitionTime":"2024-01-01T00:00:00Z"}]}}"#;
    let mut ctx = DecodeContext::new();
    let node: Node = decode_object(json.as_bytes(), &mut ctx).expect("the node is kept");
    assert_eq!(&*node.taints[0].key, "k");
    assert_eq!(node.taints[0].time_added, None);
    let ready = node.ready().expect("Ready kept");
    assert_eq!(ready.status, ConditionStatus::True);
    assert_eq!(ready.last_heartbeat_time, None);
    assert!(ready.last_transition_time.is_some());
    assert_eq!(ctx.bad_fields_logged(), 2);
    let _again: Node = decode_object(json.as_bytes(), &mut ctx).expect("kept again");
    assert_eq!(ctx.bad_fields_logged(), 2, "logged once");
    let list = format!(r#"{{"metadata":{{"resourceVersion":"9"}},"items":[{json}]}}"#);
    let page: ListPage<Node> = decode_list(list.as_bytes(), &mut ctx).expect("a page");
    assert_eq!((page.items.len(), page.skipped.len()), (1, 0));
}

/// A Ready status other than True/False/Unknown is kept as `Other` (it matches no rule), not
/// read as Unknown (which would taint a node that heartbeats).
#[test]
fn an_unreadable_condition_status_decodes_as_other() {
    for status in ["", "true", "Ready"] {
        let json = format!(
            r#"{{"metadata":{{"name":"n1","uid":"u","resourceVersion":"1"}},
                "status":{{"conditions":[{{"type":"Ready","status":"{status}"}}]}}}}"#
        );
        let node: Node = decode_object(json.as_bytes(), &mut DecodeContext::new()).unwrap();
        assert_eq!(
            node.ready().unwrap().status,
            ConditionStatus::Other,
            "{status:?}"
        );
    }
}

/// Taint eviction's condition is recognised only with its own status, reason and message.
#[test]
fn a_pod_carrying_the_disruption_target_condition_says_so() {
    let pod = |reason: &str| {
        format!(
            r#"{{"metadata":{{"name":"p","namespace":"ns","uid":"u","resourceVersion":"1"}},
                "spec":{{"nodeName":"n1"}},
                "status":{{"conditions":[{{"type":"DisruptionTarget","status":"True",
                  "reason":"{reason}","message":"Taint manager: deleting due to NoExecute taint"}}]}}}}"#
        )
    };
    let mut ctx = DecodeContext::new();
    let ours: Pod = decode_object(pod("DeletionByTaintManager").as_bytes(), &mut ctx).unwrap();
    assert!(ours.disruption_target);
    let other: Pod = decode_object(pod("PreemptionByScheduler").as_bytes(), &mut ctx).unwrap();
    assert!(!other.disruption_target);
}

/// A node keeps the labels pool selectors read, the OpenYurt autonomy annotations (interpreted) and
/// the type+status of conditions beyond the five known ones — nothing else.
#[test]
fn edge_node_keeps_pool_labels_autonomy_and_other_conditions() {
    let json = |annotations: &str| {
        format!(
            r#"{{"metadata":{{"name":"edge-1","uid":"u","resourceVersion":"1",
                "labels":{{"example.com/rack":"r7","example.com/unused":"x","kubernetes.io/os":"linux"}},
                "annotations":{{"kubectl.kubernetes.io/last-applied-configuration":"{{}}",{annotations}}}}},
              "status":{{"conditions":[
                {{"type":"Ready","status":"True"}},
                {{"type":"KernelDeadlock","status":"True","reason":"DockerHung","message":"long"}},
                {{"type":"ReadonlyFilesystem","status":"False"}}]}}}}"#
        )
    };
    let mut ctx = DecodeContext::new();
    ctx.keep_node_labels(["example.com/rack".to_string()]);
    let decode = |ctx: &mut DecodeContext, annotations: &str| -> Node {
        decode_object(json(annotations).as_bytes(), ctx).unwrap()
    };
    let node = decode(&mut ctx, r#""node.openyurt.io/autonomy-duration":"1h30m""#);
    let mut labels: Vec<(&str, &str)> = node.labels.iter().map(|(k, v)| (&**k, &**v)).collect();
    labels.sort();
    assert_eq!(
        labels,
        [("example.com/rack", "r7"), ("kubernetes.io/os", "linux")]
    );
    assert_eq!(node.autonomy, Autonomy::For(Duration::from_secs(5400)));
    assert_eq!(node.conditions.len(), 1);
    let others: Vec<(&str, ConditionStatus)> = node
        .other_conditions
        .iter()
        .map(|(k, s)| (&**k, *s))
        .collect();
    assert_eq!(
        others,
        [
            ("KernelDeadlock", ConditionStatus::True),
            ("ReadonlyFilesystem", ConditionStatus::False)
        ]
    );
    assert_eq!(
        node.condition_status("KernelDeadlock"),
        Some(ConditionStatus::True)
    );
    assert_eq!(node.condition_status("Ready"), Some(ConditionStatus::True));

    let forever = [
        r#""node.openyurt.io/autonomy-duration":"0""#,
        r#""node.beta.openyurt.io/autonomy":"true""#,
        r#""apps.openyurt.io/binding":"true""#,
        // A forever marker wins over an unreadable duration.
        r#""node.openyurt.io/autonomy-duration":"soon","apps.openyurt.io/binding":"true""#,
    ];
    for a in forever {
        assert_eq!(decode(&mut ctx, a).autonomy, Autonomy::Forever, "{a}");
    }
    let none = [
        r#""apps.openyurt.io/binding":"false""#,
        r#""node.beta.openyurt.io/autonomy":"yes""#,
        r#""node.openyurt.io/autonomy-duration":"-5m""#,
        r#""node.openyurt.io/autonomy-duration":"soon""#,
        r#""other":"1""#,
    ];
    let warned_before = ctx.bad_fields_logged();
    for a in none {
        assert_eq!(decode(&mut ctx, a).autonomy, Autonomy::None, "{a}");
    }
    // The unreadable duration is warned about once per node, however often the node comes.
    decode(&mut ctx, r#""node.openyurt.io/autonomy-duration":"soon""#);
    assert_eq!(ctx.bad_fields_logged(), warned_before + 1);
}

/// The maintenance annotation is kept (interpreted), next to autonomy's; an unreadable value still
/// counts as maintenance and is warned about once.
#[test]
fn node_keeps_the_maintenance_annotation_interpreted() {
    use crate::model::Maintenance;
    let json = |annotations: &str| {
        format!(
            r#"{{"metadata":{{"name":"bm-1","uid":"u","resourceVersion":"1",
                "annotations":{{"kubectl.kubernetes.io/last-applied-configuration":"{{}}"{annotations}}}}},
              "status":{{"conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
        )
    };
    let mut ctx = DecodeContext::new();
    let mut decode = |annotations: &str| -> Node {
        decode_object(json(annotations).as_bytes(), &mut ctx).unwrap()
    };
    assert_eq!(decode("").maintenance, Maintenance::None);
    assert_eq!(
        decode(r#","node-lifecycled.io/maintenance":"""#).maintenance,
        Maintenance::Indefinite
    );
    assert_eq!(
        decode(r#","node-lifecycled.io/maintenance":"2026-03-01T10:00:00Z""#).maintenance,
        Maintenance::Until(Time::parse_rfc3339("2026-03-01T10:00:00Z").unwrap())
    );
    let odd = decode(r#","node-lifecycled.io/maintenance":"tomorrow""#).maintenance;
    assert_eq!(odd, Maintenance::Unreadable("tomorrow".into()));
    assert!(odd.holds(Time::ZERO));
    let before = ctx.bad_fields_logged();
    decode_object::<Node>(
        json(r#","node-lifecycled.io/maintenance":"tomorrow""#).as_bytes(),
        &mut ctx,
    )
    .unwrap();
    assert_eq!(ctx.bad_fields_logged(), before, "warned twice");
}

/// A pod's `metadata.creationTimestamp` is kept (taint eviction counts a pod found under a
/// taint at a start or a takeover from no earlier than its creation); absent, null or empty it
/// is `None`; unreadable, the pod is kept without it (logged once).
#[test]
fn a_pods_creation_timestamp_is_kept_and_a_bad_one_costs_only_that_field() {
    let mut ctx = DecodeContext::new();
    let pod: Pod = decode_object(POD.as_bytes(), &mut ctx).unwrap();
    assert_eq!(pod.creation_timestamp, Some(t("2024-03-11T09:14:27Z")));
    for meta in [
        r#""creationTimestamp":null"#,
        r#""creationTimestamp":"""#,
        r#""x":1"#,
    ] {
        let json = format!(
            r#"{{"metadata":{{"name":"p","namespace":"d",{meta}}},"spec":{{"nodeName":"n1"}}}}"#
        );
        let pod: Pod = decode_object(json.as_bytes(), &mut ctx).unwrap();
        assert_eq!(pod.creation_timestamp, None, "{meta}");
    }
    assert_eq!(ctx.bad_fields_logged(), 0);
    let bad = r#"{"metadata":{"name":"p","namespace":"d","creationTimestamp":"yesterday"},"spec":{"nodeName":"n1"}}"#;
    let pod: Pod = decode_object(bad.as_bytes(), &mut ctx).unwrap();
    assert_eq!(pod.creation_timestamp, None);
    assert_eq!(pod.node_name.as_deref(), Some("n1"));
    assert_eq!(ctx.bad_fields_logged(), 1);
}

/// A pod's conditions and owner references are folded as they are read (`wire/pod.rs`): the
/// answers are those of searching the whole list, the first `Ready` one counting, a
/// DaemonSet only as the controller, wherever it stands in the list.
#[test]
fn a_pods_conditions_and_owners_folded_as_read_answer_as_the_whole_list_would() {
    let pod = |conditions: &str, owners: &str| {
        let json = format!(
            r#"{{"metadata":{{"name":"p","namespace":"ns","uid":"u","resourceVersion":"1",
                "ownerReferences":{owners}}},
                "spec":{{"nodeName":"n1"}},"status":{{"conditions":{conditions}}}}}"#
        );
        decode_object::<Pod>(json.as_bytes(), &mut DecodeContext::new())
    };
    let ready = |status: &str| format!(r#"{{"type":"Ready","status":"{status}"}}"#);
    let ours = r#"{"type":"DisruptionTarget","status":"True","reason":"DeletionByTaintManager",
        "message":"Taint manager: deleting due to NoExecute taint"}"#;
    let owner = |kind: &str, controller: bool| {
        format!(
            r#"{{"apiVersion":"apps/v1","kind":"{kind}","name":"o","uid":"x","controller":{controller}}}"#
        )
    };
    let cases = [
        (
            format!("[{},{}]", ready("False"), ready("True")),
            Some(ConditionStatus::False),
            false,
        ),
        (
            format!("[{ours},{}]", ready("True")),
            Some(ConditionStatus::True),
            true,
        ),
        (
            format!("[{},{ours}]", ready("Maybe")),
            Some(ConditionStatus::Other),
            true,
        ),
        ("[]".to_string(), None, false),
        ("null".to_string(), None, false),
    ];
    for (conditions, want_ready, want_disruption) in cases {
        let p = pod(&conditions, "null").unwrap();
        assert_eq!(
            (p.ready, p.disruption_target),
            (want_ready, want_disruption),
            "{conditions}"
        );
    }
    let owned = |owners: String| pod("[]", &owners).unwrap().daemonset_owned;
    assert!(owned(format!(
        "[{},{}]",
        owner("Node", false),
        owner("DaemonSet", true)
    )));
    assert!(!owned(format!("[{}]", owner("DaemonSet", false))));
    assert!(!owned(format!("[{}]", owner("ReplicaSet", true))));
    assert!(!owned("[]".to_string()));
    // Not a list: refused, as a list's decode refused it.
    assert!(pod("{}", "null").is_err());
    assert!(pod("[]", "7").is_err());
}

/// A node as a 1.37 server with `NodeLifecycleConditions` returns it under planned work: the
/// five lifecycle conditions of KEP-5683 kept as type and status, with their reasons dropped,
/// and `MaintenanceInProgress=True` read as planned maintenance; False or absent is not.
#[test]
fn a_node_under_planned_work_keeps_its_lifecycle_conditions() {
    let json = |maintenance: &str| {
        format!(
            r#"{{"metadata":{{"name":"rack7-3","uid":"u","resourceVersion":"1"}},
              "status":{{"conditions":[
                {{"type":"Ready","status":"Unknown","reason":"NodeStatusUnknown"}},
                {{"type":"MaintenancePlanned","status":"True","reason":"MaintenanceWindow"}},
                {{"type":"DrainInProgress","status":"False","reason":"DrainCompleted"}},
                {{"type":"Drained","status":"True","reason":"DrainCompleted"}},
                {{"type":"MaintenanceInProgress","status":"{maintenance}","reason":"AdminRequested",
                  "message":"firmware upgrade, CHG-1234"}},
                {{"type":"GracefulNodeShutdownInProgress","status":"False","reason":"NodeShutdown"}}]}}}}"#
        )
    };
    let mut ctx = DecodeContext::new();
    let node: Node = decode_object(json("True").as_bytes(), &mut ctx).unwrap();
    assert!(node.in_planned_maintenance());
    let others: Vec<(&str, ConditionStatus)> = node
        .other_conditions
        .iter()
        .map(|(k, s)| (&**k, *s))
        .collect();
    assert_eq!(
        others,
        [
            ("MaintenancePlanned", ConditionStatus::True),
            ("DrainInProgress", ConditionStatus::False),
            ("Drained", ConditionStatus::True),
            ("MaintenanceInProgress", ConditionStatus::True),
            ("GracefulNodeShutdownInProgress", ConditionStatus::False),
        ]
    );
    for status in ["False", "Unknown"] {
        let node: Node = decode_object(json(status).as_bytes(), &mut ctx).unwrap();
        assert!(!node.in_planned_maintenance(), "{status}");
    }
}
