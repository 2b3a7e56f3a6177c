//! What a queued action's current stage calls, as data: the job, its stage, the plan of the
//! real call and the target dry-run reads. Pure functions, no I/O.

use super::*;
use crate::controller::events::EventObject;
use crate::kube::request::{EventRecord, InvolvedObject};

/// How far along a multi-call action is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    /// The action's (first) write, or in dry-run its precondition read.
    Write,
    /// A node write got 409: read the node again.
    Reread,
    /// Eviction: the DisruptionTarget condition is on; now the DELETE.
    Delete,
}

#[derive(Debug)]
pub(super) struct Job {
    pub(super) action: Action,
    pub(super) stage: Stage,
    pub(super) label_conflicts: u32,
    pub(super) not_before: Time,
}

/// What became of a job after one call.
pub(super) enum Next {
    Done,
    /// Continue with the next stage at once (stays at the head of the queue).
    Continue(Job),
    /// Retry at `job.not_before`.
    Delay(Job),
    /// Not sent or told to wait (throttle, 429): back to the head, stop this run.
    Hold(Job),
}

/// Room for one more event when `waiting` wait and at most `max` may: whether it is kept, and
/// how many of the oldest go to make room (client-go's event cache drops the same way).
pub(super) fn events_to_drop(waiting: usize, max: usize) -> (bool, usize) {
    if max == 0 {
        (false, 0)
    } else {
        (true, (waiting + 1).saturating_sub(max))
    }
}

/// The earlier of two optional wake-ups.
pub(super) fn earliest(a: Option<Time>, b: Option<Time>) -> Option<Time> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Takes the jobs whose retry time has come out of `delayed`.
pub(super) fn take_due(delayed: &mut Vec<Job>, now: Time) -> Vec<Job> {
    let mut due = Vec::new();
    let mut i = 0;
    while i < delayed.len() {
        if delayed[i].not_before <= now {
            due.push(delayed.swap_remove(i));
        } else {
            i += 1;
        }
    }
    due
}

/// The node's name: the last segment of its path.
pub(super) fn node_path_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// What a failed write leads to.
#[derive(Debug, PartialEq)]
pub(super) enum AfterError {
    /// A node write's 409: re-read the node, so the controller decides again on it.
    Reread,
    /// A label patch's 409 (no resourceVersion: nothing to decide again on): retried here,
    /// after [`LABEL_RETRY_DELAY`] with jitter (upstream `UpdateLabelBackoff`).
    RetryLabels,
    /// Anything else ends the job.
    End(Failure),
}

/// Upstream's conflict retries: node status, taint and fencing writes re-read the node; a
/// label patch is tried [`LABEL_CONFLICT_TRIES`] times in all. Counts the label conflict.
pub(super) fn after_write_error(failure: Failure, job: &mut Job) -> AfterError {
    match (failure, &job.action) {
        (
            Failure::Conflict,
            Action::UpdateNodeConditions { .. }
            | Action::PatchNodeTaints { .. }
            | Action::PatchNodeFencing { .. },
        ) => AfterError::Reread,
        (Failure::Conflict, Action::PatchNodeLabels { .. }) => {
            job.label_conflicts += 1;
            if job.label_conflicts < LABEL_CONFLICT_TRIES {
                AfterError::RetryLabels
            } else {
                AfterError::End(Failure::Failed(format!(
                    "409 Conflict {LABEL_CONFLICT_TRIES} times in a row"
                )))
            }
        }
        (failure, _) => AfterError::End(failure),
    }
}

/// How a write that met 409 ends when re-reading the node failed too; `None`: held by the
/// throttle, read again later.
pub(super) fn reread_failure(failure: Failure) -> Option<Outcome> {
    match failure {
        Failure::Hold => None,
        Failure::NotFound => Some(Outcome::NotFound),
        Failure::Conflict => Some(Outcome::Failed(
            "409 Conflict, then 409 re-reading the node".to_string(),
        )),
        Failure::Failed(e) => Some(Outcome::Failed(format!(
            "409 Conflict, then re-reading the node failed: {e}"
        ))),
    }
}

/// The call a job's current stage makes, for real.
pub(super) enum Plan {
    Patch(String, serde_json::Value),
    Delete(String, String),
    RereadNode(String),
    ReadLease(String),
    /// Fencing: the node's path, its Lease's path.
    ReadFenceTarget(String, String),
}

pub(super) fn plan(job: &Job, now: Time) -> Result<Plan, String> {
    Ok(match (&job.action, job.stage) {
        (
            Action::UpdateNodeConditions { node, .. }
            | Action::PatchNodeTaints { node, .. }
            | Action::PatchNodeFencing { node, .. },
            Stage::Reread,
        ) => Plan::RereadNode(request::node_path(node)?),
        (
            Action::PatchNodeFencing {
                node,
                resource_version,
                annotations,
                taints,
                ..
            },
            _,
        ) => Plan::Patch(
            request::node_path(node)?,
            request::node_annotations_patch(resource_version, annotations, taints.as_deref()),
        ),
        (Action::ReadFenceTarget { node, .. }, _) => {
            Plan::ReadFenceTarget(request::node_path(node)?, request::lease_path(node)?)
        }
        (Action::RunFenceCommand { .. }, _) => {
            return Err("fence commands are run by the daemon, not the executor".into());
        }
        (
            Action::UpdateNodeConditions {
                node,
                uid,
                resource_version,
                conditions,
                ..
            },
            _,
        ) => Plan::Patch(
            request::node_status_path(node)?,
            request::node_conditions_patch(uid, resource_version, conditions),
        ),
        (
            Action::PatchNodeTaints {
                node,
                resource_version,
                taints,
                ..
            },
            _,
        ) => Plan::Patch(
            request::node_path(node)?,
            request::node_taints_patch(resource_version, taints),
        ),
        (Action::PatchNodeLabels { node, labels, .. }, _) => Plan::Patch(
            request::node_path(node)?,
            request::node_labels_patch(labels),
        ),
        (Action::MarkPodNotReady { pod, uid, .. }, _) => Plan::Patch(
            request::pod_status_path(pod)?,
            request::pod_not_ready_patch(uid, now),
        ),
        (
            Action::SetPodStatusNodeLost {
                pod, uid, message, ..
            },
            _,
        ) => Plan::Patch(
            request::pod_status_path(pod)?,
            request::pod_node_lost_patch(uid, NODE_LOST_REASON, message),
        ),
        (Action::DeletePod { pod, uid, .. }, _) => {
            Plan::Delete(request::pod_path(pod)?, uid.to_string())
        }
        (Action::EvictPod { pod, uid, .. }, Stage::Delete)
        | (
            Action::EvictPod {
                pod,
                uid,
                condition_present: true,
                ..
            },
            _,
        ) => Plan::Delete(request::pod_path(pod)?, uid.to_string()),
        (Action::EvictPod { pod, uid, .. }, _) => Plan::Patch(
            request::pod_status_path(pod)?,
            request::disruption_target_patch(uid, now),
        ),
        (Action::ReadLease { node, .. }, _) => Plan::ReadLease(request::lease_path(node)?),
        (Action::RecordEvent(_), _) => return Err("events are not queued as actions".into()),
    })
}

/// An event as the API's request shape takes it.
pub(super) fn event_record(event: &Event) -> EventRecord<'_> {
    EventRecord {
        object: match &event.object {
            EventObject::Node { name, uid } => InvolvedObject::Node { name, uid },
            EventObject::Pod {
                namespace,
                name,
                uid,
            } => InvolvedObject::Pod {
                namespace,
                name,
                uid,
            },
        },
        event_type: event.event_type.as_str(),
        reason: event.reason,
        message: &event.message,
        component: event.component,
    }
}

/// What dry-run reads before "writing".
pub(super) enum DryTarget {
    Node(String),
    Pod(String),
    Lease(String),
    FenceTarget(String, String),
}

pub(super) fn dry_target(action: &Action) -> Result<DryTarget, String> {
    Ok(match action {
        Action::UpdateNodeConditions { node, .. }
        | Action::PatchNodeTaints { node, .. }
        | Action::PatchNodeLabels { node, .. }
        | Action::PatchNodeFencing { node, .. } => DryTarget::Node(request::node_path(node)?),
        Action::ReadFenceTarget { node, .. } => {
            DryTarget::FenceTarget(request::node_path(node)?, request::lease_path(node)?)
        }
        Action::RunFenceCommand { .. } => {
            return Err("fence commands are run by the daemon, not the executor".into());
        }
        Action::MarkPodNotReady { pod, .. }
        | Action::SetPodStatusNodeLost { pod, .. }
        | Action::DeletePod { pod, .. }
        | Action::EvictPod { pod, .. } => DryTarget::Pod(request::pod_path(pod)?),
        Action::ReadLease { node, .. } => DryTarget::Lease(request::lease_path(node)?),
        Action::RecordEvent(_) => return Err("events are not queued as actions".into()),
    })
}
