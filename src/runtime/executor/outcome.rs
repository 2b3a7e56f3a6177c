//! How a call's result reads: the failure classes, the answer each controller expects, and
//! the words the log uses for an action and for what happens after it failed.

use super::*;

/// How a failed call ends for the action.
#[derive(Debug, PartialEq)]
pub(super) enum Failure {
    /// Not sent (throttle) or 429: keep the action queued.
    Hold,
    NotFound,
    Conflict,
    Failed(String),
}

pub(super) fn classify(e: ApiError) -> Failure {
    match e {
        ApiError::Throttled { .. } | ApiError::TooManyRequests { .. } => Failure::Hold,
        ApiError::NotFound(_) => Failure::NotFound,
        ApiError::Conflict(_) => Failure::Conflict,
        other => Failure::Failed(other.to_string()),
    }
}

/// A timeout, a broken connection or a 5xx: the server (or the way to it) is in trouble.
pub(super) fn is_server_trouble(e: &ApiError) -> bool {
    match e {
        ApiError::Timeout(_) | ApiError::Transport(_) => true,
        ApiError::Server(s) => s.code >= 500,
        _ => false,
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Verb {
    Get,
    Patch,
    Delete,
    Create,
}

impl Verb {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::Create => "create",
        }
    }
}

/// The answer an action gets, in the form its controller expects.
pub(super) fn answer(action: &Action, outcome: Outcome) -> Option<Input> {
    match action {
        Action::UpdateNodeConditions { id, .. }
        | Action::PatchNodeTaints { id, .. }
        | Action::PatchNodeLabels { id, .. }
        | Action::MarkPodNotReady { id, .. }
        | Action::SetPodStatusNodeLost { id, .. }
        | Action::DeletePod { id, .. }
        | Action::PatchNodeFencing { id, .. } => Some(Input::Result { id: *id, outcome }),
        Action::ReadFenceTarget { id, .. } => {
            let outcome = match outcome {
                Outcome::NotFound => FenceTargetOutcome::NotFound,
                Outcome::Failed(m) => FenceTargetOutcome::Failed(m),
                Outcome::Ok | Outcome::Conflict => {
                    FenceTargetOutcome::Failed("unexpected answer to a node read".into())
                }
            };
            Some(Input::FenceTargetRead { id: *id, outcome })
        }
        // The daemon runs fence commands; one that reached the executor is a wiring mistake.
        Action::RunFenceCommand { id, .. } => Some(Input::FenceExited {
            id: *id,
            outcome: FenceOutcome::SpawnFailed("not run: the executor runs no commands".into()),
            took: Duration::ZERO,
        }),
        Action::ReadLease { id, .. } => {
            let outcome = match outcome {
                Outcome::NotFound => LeaseReadOutcome::NotFound,
                Outcome::Failed(m) => LeaseReadOutcome::Failed(m),
                // A read has no conflict, and success carries the lease (answered elsewhere).
                Outcome::Ok | Outcome::Conflict => {
                    LeaseReadOutcome::Failed("unexpected answer to a lease read".into())
                }
            };
            Some(Input::LeaseRead { id: *id, outcome })
        }
        Action::EvictPod { id, .. } => {
            let result = match outcome {
                Outcome::Ok => EvictionResult::Deleted,
                Outcome::NotFound => EvictionResult::NotFound,
                Outcome::Conflict => EvictionResult::Conflict,
                Outcome::Failed(m) => EvictionResult::Error(m),
            };
            Some(Input::EvictionResult { id: *id, result })
        }
        Action::RecordEvent(_) => None,
    }
}

/// Finishes a job with `outcome`, logging what is worth a line.
pub(super) fn finish(job: &Job, outcome: Outcome, out: &mut Vec<Input>) -> Next {
    match &outcome {
        Outcome::Failed(reason) => warn!(
            "{} failed: {reason}; {}",
            describe(&job.action),
            what_next(&job.action)
        ),
        Outcome::NotFound => debug!("{}: not found", describe(&job.action)),
        Outcome::Conflict => debug!("{}: conflict", describe(&job.action)),
        Outcome::Ok => {}
    }
    out.extend(answer(&job.action, outcome));
    Next::Done
}

/// The common ending of a failed call.
pub(super) fn fail(job: Job, failure: Failure, out: &mut Vec<Input>) -> Next {
    match failure {
        Failure::Hold => Next::Hold(job),
        Failure::NotFound => finish(&job, Outcome::NotFound, out),
        Failure::Conflict => finish(&job, Outcome::Conflict, out),
        Failure::Failed(m) => finish(&job, Outcome::Failed(m), out),
    }
}

/// One line naming what an action is about, for logs.
pub(super) fn describe(action: &Action) -> String {
    match action {
        Action::UpdateNodeConditions { node, .. } => format!("status of node {node}"),
        Action::PatchNodeTaints { node, .. } => format!("taints of node {node}"),
        Action::PatchNodeLabels { node, .. } => format!("labels of node {node}"),
        Action::MarkPodNotReady { pod, .. } => format!("NotReady mark of pod {pod}"),
        Action::SetPodStatusNodeLost { pod, .. } => format!("NodeLost status of pod {pod}"),
        Action::DeletePod { pod, .. } => format!("deletion of pod {pod}"),
        Action::EvictPod { pod, attempt, .. } => format!("eviction of pod {pod} (try {attempt})"),
        Action::ReadLease { node, .. } => format!("live read of the lease of node {node}"),
        Action::ReadFenceTarget { node, .. } => {
            format!("live read of node {node} and its lease (fencing)")
        }
        Action::PatchNodeFencing { node, .. } => format!("fencing annotations of node {node}"),
        Action::RunFenceCommand { command, .. } => {
            format!("fence command for node {}", command.node)
        }
        Action::RecordEvent(e) => format!("event {}", e.reason),
    }
}

/// What the controllers do after a write failed for good (timeout, transport error, 5xx or a
/// refusal), told in the same line so an operator need not look it up.
pub(super) fn what_next(action: &Action) -> String {
    match action {
        Action::UpdateNodeConditions { .. } => {
            "the verdict is tried again 20 ms later (5 tries), then at the next monitor pass".into()
        }
        Action::PatchNodeTaints { .. } => {
            "a NoExecute taint goes back to its zone queue; the rest is tried again at the node's next change".into()
        }
        Action::PatchNodeLabels { .. } => "tried again at the node's next change".into(),
        Action::MarkPodNotReady { .. } => {
            "the node's pods are marked again at its next health evaluation".into()
        }
        Action::SetPodStatusNodeLost { .. } | Action::DeletePod { .. } => {
            "the node's eviction is tried again by its zone queue".into()
        }
        Action::EvictPod { attempt, .. } if *attempt < MAX_ATTEMPTS => format!(
            "tried again after a backoff (try {} of {MAX_ATTEMPTS})",
            attempt + 1
        ),
        Action::EvictPod { .. } => format!(
            "given up after {MAX_ATTEMPTS} tries: the pod stays until its node's taints change"
        ),
        Action::ReadLease { .. } => {
            "no verdict without it: read again after node_monitor_period".into()
        }
        Action::RecordEvent(_) => "events are best effort: dropped".into(),
        Action::ReadFenceTarget { .. } => {
            "no fence without it: the node is checked again after a backoff".into()
        }
        Action::PatchNodeFencing { .. } => {
            "the fencing step is decided again on the node's next change or recheck".into()
        }
        Action::RunFenceCommand { .. } => "retried with the fencing backoff".into(),
    }
}
