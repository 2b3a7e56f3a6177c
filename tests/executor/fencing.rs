//! The API side of fencing, against the simulated API server over a real socket: the live read
//! before a fence (the node whole: labels, addresses, our annotations; then its Lease) and the one
//! write carrying fencing's annotations and the full taint list.

use crate::executor_support::{Harness, n};
use node_lifecycled::controller::fencing::{
    ATTEMPT_ANNOTATION, FenceTargetOutcome, TAINT_ADDED_ANNOTATION, out_of_service_taint,
};
use node_lifecycled::controller::{Action, ActionId, Input, LeaseReadOutcome, Outcome};
use node_lifecycled::model::{ConditionStatus, NodeCondition};
use node_lifecycled::time::Time;
use node_lifecycled_sim::{Resource, fixtures};
use serde_json::json;

fn read(h: &mut Harness, id: u64, node: &str) -> FenceTargetOutcome {
    h.submit([Action::ReadFenceTarget {
        id: ActionId(id),
        node: n(node),
    }]);
    let inputs = h.run_until_idle();
    match &inputs[..] {
        [Input::FenceTargetRead { id: got, outcome }] if *got == ActionId(id) => outcome.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_live_read_before_a_fence_brings_labels_addresses_annotations_and_the_lease() {
    let mut h = Harness::real();
    let node = h.add_node("n1");
    let renew = Time::from_unix_millis(1_700_000_000_123);
    h.sim
        .cluster()
        .create(Resource::Leases, fixtures::node_lease("n1", renew))
        .unwrap();
    let FenceTargetOutcome::Found(t) = read(&mut h, 1, "n1") else {
        panic!("not found");
    };
    assert_eq!(t.uid, node.uid);
    assert_eq!(t.ready, Some(ConditionStatus::True));
    assert!(
        t.labels.iter().any(|(k, _)| k == "kubernetes.io/hostname"),
        "{:?}",
        t.labels
    );
    assert!(!t.addresses.is_empty(), "{:?}", t.addresses);
    assert_eq!(t.attempt, None);
    assert!(!t.out_of_service);
    assert!(
        matches!(&t.lease, LeaseReadOutcome::Found(l) if l.renew_time == Some(renew)),
        "{:?}",
        t.lease
    );
    assert!(matches!(
        read(&mut h, 2, "gone"),
        FenceTargetOutcome::NotFound
    ));
    assert!(h.writes().is_empty(), "reads only");
}

#[test]
fn fencing_writes_its_annotations_and_taints_in_one_patch_and_removes_them_with_nulls() {
    let mut h = Harness::real();
    let node = h.add_node("n1");
    let now = h.now();
    h.submit([Action::PatchNodeFencing {
        id: ActionId(1),
        node: node.name.clone(),
        uid: node.uid.clone(),
        resource_version: node.resource_version.clone(),
        annotations: vec![
            (ATTEMPT_ANNOTATION, Some("outage=x".into())),
            (TAINT_ADDED_ANNOTATION, Some("x".into())),
        ],
        taints: Some(vec![out_of_service_taint(now)]),
    }]);
    let inputs = h.run_until_idle();
    assert_eq!(inputs.len(), 2, "the answer, then the result: {inputs:?}");
    assert!(matches!(
        &inputs[1],
        Input::Result {
            id: ActionId(1),
            outcome: Outcome::Ok
        }
    ));
    let stored = h.node("n1");
    assert_eq!(
        stored["metadata"]["annotations"][ATTEMPT_ANNOTATION],
        json!("outage=x")
    );
    assert_eq!(
        stored["spec"]["taints"],
        json!([{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown",
                "effect": "NoExecute", "timeAdded": Time::from_unix_millis(now.as_unix_millis() / 1000 * 1000).to_rfc3339()}])
    );
    let FenceTargetOutcome::Found(t) = read(&mut h, 2, "n1") else {
        panic!("not found");
    };
    assert!(t.out_of_service);
    assert_eq!(t.taint_added.as_deref(), Some("x"));

    // The release: annotations removed (null), the taint list without ours.
    let fresh = h.node_model("n1");
    h.submit([Action::PatchNodeFencing {
        id: ActionId(3),
        node: fresh.name.clone(),
        uid: fresh.uid.clone(),
        resource_version: fresh.resource_version.clone(),
        annotations: vec![(ATTEMPT_ANNOTATION, None), (TAINT_ADDED_ANNOTATION, None)],
        taints: Some(vec![]),
    }]);
    h.run_until_idle();
    let stored = h.node("n1");
    let notes = stored["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(!notes.contains_key(ATTEMPT_ANNOTATION), "{notes:?}");
    assert!(!notes.contains_key(TAINT_ADDED_ANNOTATION), "{notes:?}");
    assert_eq!(stored["spec"]["taints"], json!([]));

    // A stale write conflicts, the node is re-read and fed first, nothing changes.
    h.submit([Action::PatchNodeFencing {
        id: ActionId(4),
        node: node.name.clone(),
        uid: node.uid.clone(),
        resource_version: node.resource_version.clone(),
        annotations: vec![(ATTEMPT_ANNOTATION, Some("stale".into()))],
        taints: None,
    }]);
    let inputs = h.run_until_idle();
    assert!(matches!(&inputs[0], Input::NodeUpsert(_)), "{inputs:?}");
    assert!(matches!(
        &inputs[1],
        Input::Result {
            id: ActionId(4),
            outcome: Outcome::Conflict
        }
    ));
    assert!(
        h.node("n1")["metadata"]["annotations"]
            .get(ATTEMPT_ANNOTATION)
            .is_none()
    );
}

/// Dry-run sends the live read but no write: the attempt record is a `would` line. The read
/// sees what dry-run "wrote" (Ready=Unknown), or dry-run could never show `would fence`.
#[test]
fn dry_run_reads_live_over_its_own_writes_but_writes_no_fencing_annotation() {
    let mut h = Harness::dry();
    let node = h.add_node("n1");
    let now = h.now();
    let unknown: Vec<NodeCondition> = node
        .conditions
        .iter()
        .map(|c| NodeCondition {
            status: ConditionStatus::Unknown,
            last_transition_time: Some(now),
            ..c.clone()
        })
        .collect();
    h.submit([Action::UpdateNodeConditions {
        id: ActionId(9),
        node: node.name.clone(),
        uid: node.uid.clone(),
        resource_version: node.resource_version.clone(),
        conditions: unknown,
    }]);
    h.run_until_idle();
    let FenceTargetOutcome::Found(t) = read(&mut h, 1, "n1") else {
        panic!("not found");
    };
    assert_eq!(
        t.ready,
        Some(ConditionStatus::Unknown),
        "the shadow is read"
    );
    assert_eq!(t.ready_since, Some(now));
    h.submit([Action::PatchNodeFencing {
        id: ActionId(2),
        node: node.name.clone(),
        uid: node.uid.clone(),
        resource_version: node.resource_version.clone(),
        annotations: vec![(ATTEMPT_ANNOTATION, Some("outage=x".into()))],
        taints: None,
    }]);
    let inputs = h.run_until_idle();
    assert!(
        inputs.iter().any(|i| matches!(
            i,
            Input::Result {
                id: ActionId(2),
                outcome: Outcome::Ok
            }
        )),
        "{inputs:?}"
    );
    assert!(h.writes().is_empty(), "dry-run wrote: {:?}", h.writes());
    assert!(
        h.node("n1")["metadata"]["annotations"]
            .get(ATTEMPT_ANNOTATION)
            .is_none()
    );
}
