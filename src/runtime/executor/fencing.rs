//! The API side of fencing: the live read of a node and its Lease before a fence, decoded for the
//! fencing machine (the patch that carries its annotations is
//! `kube::request::node_annotations_patch`).
//!
//! The read decodes the node with k8s-openapi, not the caches' compact projection: it is rare
//! (a node dead for `fencing.after`) and needs what the caches drop on purpose (every label,
//! the addresses, annotations).

use k8s_openapi::api::core::v1 as core;

use crate::controller::LeaseReadOutcome;
use crate::controller::fencing::FenceTarget;
use crate::model::{ConditionStatus, Maintenance, Name, Taint};
use crate::time::Time;

use crate::controller::fencing::{ATTEMPT_ANNOTATION, TAINT_ADDED_ANNOTATION, is_out_of_service};

/// The node as fencing needs it (the Lease is read next and filled in by the caller).
pub(crate) fn decode_target(bytes: &[u8]) -> Result<FenceTarget, String> {
    let node: core::Node =
        serde_json::from_slice(bytes).map_err(|e| format!("node does not decode: {e}"))?;
    let meta = node.metadata;
    let annotations = meta.annotations.unwrap_or_default();
    let status = node.status.unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    let maintenance_in_progress = conditions.iter().any(|c| {
        c.type_ == crate::model::lifecycle_conditions::MAINTENANCE_IN_PROGRESS && c.status == "True"
    });
    let ready = conditions.into_iter().find(|c| c.type_ == "Ready");
    let spec = node.spec.unwrap_or_default();
    let unschedulable = spec.unschedulable.unwrap_or(false);
    let taints = spec.taints.unwrap_or_default();
    Ok(FenceTarget {
        uid: Name::from(meta.uid.unwrap_or_default()),
        resource_version: Name::from(meta.resource_version.unwrap_or_default()),
        ready: ready.as_ref().map(|c| match c.status.as_str() {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            "Unknown" => ConditionStatus::Unknown,
            _ => ConditionStatus::Other,
        }),
        ready_since: ready
            .as_ref()
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| Time::from_unix_millis(t.0.as_millisecond().max(0) as u64)),
        labels: meta.labels.unwrap_or_default().into_iter().collect(),
        addresses: status
            .addresses
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect(),
        attempt: annotations.get(ATTEMPT_ANNOTATION).cloned(),
        taint_added: annotations.get(TAINT_ADDED_ANNOTATION).cloned(),
        fence_state: annotations
            .get(crate::controller::fencing::STATE_ANNOTATION)
            .cloned(),
        maintenance: annotations
            .get(crate::model::maintenance::ANNOTATION)
            .map_or(Maintenance::None, |v| Maintenance::parse(v)),
        unschedulable,
        maintenance_in_progress,
        out_of_service: taints.iter().any(|t| {
            is_out_of_service(&Taint {
                key: Name::from(t.key.as_str()),
                value: Name::from(""),
                effect: match t.effect.as_str() {
                    "NoExecute" => crate::model::TaintEffect::NoExecute,
                    _ => crate::model::TaintEffect::NoSchedule,
                },
                time_added: None,
            })
        }),
        lease: LeaseReadOutcome::NotFound,
    })
}

/// Lays what dry-run "wrote" on a node (its Ready condition, its taints) over the live read.
pub(crate) fn overlay(target: &mut FenceTarget, shadow: &crate::model::Node) {
    let ready = shadow.ready();
    target.ready = ready.map(|c| c.status);
    target.ready_since = ready.and_then(|c| c.last_transition_time);
    target.out_of_service = shadow.taints.iter().any(is_out_of_service);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_json(maintenance: Option<&str>) -> Vec<u8> {
        let mut conditions = vec![serde_json::json!({
            "type": "Ready", "status": "Unknown",
            "lastTransitionTime": "2026-12-01T22:00:00Z"
        })];
        if let Some(status) = maintenance {
            conditions.push(serde_json::json!({
                "type": "MaintenanceInProgress", "status": status, "reason": "AdminRequested"
            }));
        }
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "uid": "u1", "resourceVersion": "7"},
            "status": {"conditions": conditions}
        }))
        .unwrap()
    }

    /// The live read before a fence reads KEP-5683's `MaintenanceInProgress`: True only when
    /// the condition says True.
    #[test]
    fn the_live_read_before_a_fence_reads_the_maintenance_in_progress_condition() {
        let read = |m| decode_target(&node_json(m)).unwrap();
        assert!(read(Some("True")).maintenance_in_progress);
        assert!(!read(Some("False")).maintenance_in_progress);
        assert!(!read(Some("Unknown")).maintenance_in_progress);
        assert!(!read(None).maintenance_in_progress);
        assert_eq!(read(Some("True")).ready, Some(ConditionStatus::Unknown));
    }
}
