//! The executor's pure planning: which call a stage makes, what a failure leads to, the event
//! queue's room, the retry times. No client, no clock.

use super::*;
use crate::controller::ActionId;
use crate::controller::events::{EventObject, EventType, NODE_CONTROLLER};
use crate::model::PodKey;

const T0: Time = Time::from_unix_millis(1_700_000_000_000);

fn job(action: Action) -> Job {
    Job {
        action,
        stage: Stage::Write,
        label_conflicts: 0,
        not_before: T0,
    }
}

fn labels() -> Action {
    Action::PatchNodeLabels {
        id: ActionId(1),
        node: "n1".into(),
        uid: "u".into(),
        labels: vec![("beta.kubernetes.io/os".into(), "linux".into())],
    }
}

fn status() -> Action {
    Action::UpdateNodeConditions {
        id: ActionId(2),
        node: "n1".into(),
        uid: "u".into(),
        resource_version: "7".into(),
        conditions: Vec::new(),
    }
}

fn mark() -> Action {
    Action::MarkPodNotReady {
        id: ActionId(3),
        pod: PodKey {
            namespace: "ns".into(),
            name: "p".into(),
        },
        uid: "u".into(),
        node: "n1".into(),
    }
}

/// A node status write goes to `/status`, and after a 409 its next stage re-reads the node.
#[test]
fn a_status_write_patches_the_status_then_rereads_the_node_on_conflict() {
    let mut j = job(status());
    match plan(&j, T0) {
        Ok(Plan::Patch(path, body)) => {
            assert_eq!(path, "/api/v1/nodes/n1/status");
            assert_eq!(body["metadata"]["resourceVersion"], "7");
        }
        _ => panic!("a status write is a patch"),
    }
    assert_eq!(
        after_write_error(Failure::Conflict, &mut j),
        AfterError::Reread
    );
    j.stage = Stage::Reread;
    assert!(matches!(plan(&j, T0), Ok(Plan::RereadNode(p)) if p == "/api/v1/nodes/n1"));
}

/// Upstream `UpdateLabelBackoff`: a label patch meets 409 five times, then gives up.
#[test]
fn a_label_patch_is_retried_four_times_after_conflicts_then_fails() {
    let mut j = job(labels());
    for _ in 1..LABEL_CONFLICT_TRIES {
        assert_eq!(
            after_write_error(Failure::Conflict, &mut j),
            AfterError::RetryLabels
        );
    }
    assert_eq!(
        after_write_error(Failure::Conflict, &mut j),
        AfterError::End(Failure::Failed("409 Conflict 5 times in a row".into()))
    );
    assert_eq!(j.label_conflicts, LABEL_CONFLICT_TRIES);
}

/// A pod write's 409 (UID precondition) and every other failure are final for the job.
#[test]
fn other_failures_end_the_job_as_they_are() {
    let mut j = job(mark());
    assert_eq!(
        after_write_error(Failure::Conflict, &mut j),
        AfterError::End(Failure::Conflict)
    );
    assert_eq!(
        after_write_error(Failure::Hold, &mut j),
        AfterError::End(Failure::Hold)
    );
    let mut s = job(status());
    assert_eq!(
        after_write_error(Failure::NotFound, &mut s),
        AfterError::End(Failure::NotFound)
    );
}

#[test]
fn a_failed_reread_after_a_conflict_says_both() {
    assert_eq!(reread_failure(Failure::Hold), None);
    assert_eq!(reread_failure(Failure::NotFound), Some(Outcome::NotFound));
    assert_eq!(
        reread_failure(Failure::Failed("timeout".into())),
        Some(Outcome::Failed(
            "409 Conflict, then re-reading the node failed: timeout".into()
        ))
    );
    assert_eq!(
        reread_failure(Failure::Conflict),
        Some(Outcome::Failed(
            "409 Conflict, then 409 re-reading the node".into()
        ))
    );
}

/// client-go's event cache: the oldest events make room; with no room at all, none is kept.
#[test]
fn events_beyond_the_limit_drop_the_oldest() {
    assert_eq!(events_to_drop(0, 4096), (true, 0));
    assert_eq!(events_to_drop(4095, 4096), (true, 0));
    assert_eq!(events_to_drop(4096, 4096), (true, 1));
    assert_eq!(events_to_drop(10, 3), (true, 8));
    assert_eq!(events_to_drop(0, 0), (false, 0));
}

#[test]
fn the_next_wakeup_is_the_earlier_of_the_head_and_the_retries() {
    let later = T0 + Duration::from_secs(1);
    assert_eq!(earliest(None, None), None);
    assert_eq!(earliest(Some(later), None), Some(later));
    assert_eq!(earliest(None, Some(T0)), Some(T0));
    assert_eq!(earliest(Some(later), Some(T0)), Some(T0));
}

#[test]
fn only_jobs_whose_retry_time_has_come_are_taken() {
    let mut delayed: Vec<Job> = (0..4)
        .map(|i| Job {
            not_before: T0 + Duration::from_millis(100 * i),
            ..job(labels())
        })
        .collect();
    let due = take_due(&mut delayed, T0 + Duration::from_millis(150));
    assert_eq!(due.len(), 2);
    assert!(
        due.iter()
            .all(|j| j.not_before <= T0 + Duration::from_millis(150))
    );
    assert_eq!(delayed.len(), 2);
    assert!(
        delayed
            .iter()
            .all(|j| j.not_before > T0 + Duration::from_millis(150))
    );
}

/// The controller's event reaches the request shape unchanged: node events with the node's
/// UID in `default`, pod events in the pod's namespace.
#[test]
fn a_controller_event_maps_to_the_request_shape() {
    let event = Event {
        object: EventObject::Pod {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "".into(),
        },
        event_type: EventType::Warning,
        reason: "TaintManagerEviction",
        message: "Marking for deletion Pod ns/p".into(),
        component: NODE_CONTROLLER,
    };
    let record = event_record(&event);
    assert_eq!(
        record.object,
        request::InvolvedObject::Pod {
            namespace: "ns",
            name: "p",
            uid: ""
        }
    );
    assert_eq!(record.event_type, "Warning");
    assert_eq!(record.reason, "TaintManagerEviction");
    assert_eq!(record.message, "Marking for deletion Pod ns/p");
    assert_eq!(record.component, "node-controller");
    let (namespace, body) = request::event_body(&record, T0, 0);
    assert_eq!(namespace, "ns");
    assert_eq!(body["involvedObject"]["kind"], "Pod");
}
