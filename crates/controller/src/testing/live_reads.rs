//! The fake API's answers to the live reads: a node's Lease (the Unknown verdict's check) and
//! a fencing target (node, annotations and Lease, read before a fence command).

use crate::LeaseReadOutcome;
use crate::fencing::{
    ATTEMPT_ANNOTATION, STATE_ANNOTATION, TAINT_ADDED_ANNOTATION, is_out_of_service,
};
use crate::inputs::{FenceTarget, FenceTargetOutcome};
use crate::model::Name;

use super::FakeApi;

impl FakeApi {
    pub(super) fn lease_read(&self, node: &Name) -> LeaseReadOutcome {
        match self.leases.get(node) {
            Some(l) => LeaseReadOutcome::Found(l.clone()),
            None => LeaseReadOutcome::NotFound,
        }
    }

    pub(super) fn read_target(&self, name: &Name) -> FenceTargetOutcome {
        if self.faults.fence_reads_fail {
            return FenceTargetOutcome::Failed("503 Service Unavailable".into());
        }
        let Some(node) = self.nodes.get(name) else {
            return FenceTargetOutcome::NotFound;
        };
        let notes = self.annotations.get(name).cloned().unwrap_or_default();
        let ready = node.ready();
        FenceTargetOutcome::Found(Box::new(FenceTarget {
            uid: node.uid.clone(),
            resource_version: node.resource_version.clone(),
            ready: ready.map(|c| c.status),
            ready_since: ready.and_then(|c| c.last_transition_time),
            labels: node
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            addresses: vec![("InternalIP".into(), "10.0.0.1".into())],
            attempt: notes.get(ATTEMPT_ANNOTATION).cloned(),
            taint_added: notes.get(TAINT_ADDED_ANNOTATION).cloned(),
            fence_state: notes.get(STATE_ANNOTATION).cloned(),
            maintenance: node.maintenance.clone(),
            unschedulable: node.unschedulable,
            maintenance_in_progress: node.in_planned_maintenance(),
            out_of_service: node.taints.iter().any(is_out_of_service),
            lease: self.lease_read(name),
        }))
    }
}
