//! What the taint eviction machine asks the shell to do, and what the shell reports back.

use crate::controller::events::Event;
use crate::model::{Name, PodKey};

/// Names one attempt of one eviction, so a result finds its way back (and a stale one is ignored).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EvictionId(pub u64);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvictionAction {
    /// Best effort; never blocks or fails an eviction.
    RecordEvent(Event),
    /// Upstream's `addConditionAndDeletePod`, executed by the shell as: strategic-merge PATCH of
    /// `pods/NAME/status` adding the condition `DisruptionTarget`=True, reason
    /// [`DISRUPTION_REASON`], message [`DISRUPTION_MESSAGE`], with `metadata.uid` = `uid` as
    /// precondition; then DELETE with `preconditions.uid` = `uid` and no grace period override
    /// (the pod's own). Report the outcome with `TaintEviction::eviction_result(id, ..)`.
    EvictPod {
        id: EvictionId,
        pod: PodKey,
        uid: Name,
        /// 1 for the first try, up to [`super::MAX_ATTEMPTS`].
        attempt: u32,
        /// The pod carries the condition already: only the DELETE is sent (upstream's
        /// `UpdatePodCondition` reports no change, and no status update is made).
        condition_present: bool,
    },
}

pub const DISRUPTION_CONDITION: &str = crate::model::disruption::CONDITION;
pub const DISRUPTION_REASON: &str = crate::model::disruption::REASON;
pub const DISRUPTION_MESSAGE: &str = crate::model::disruption::MESSAGE;
/// The event reason for both marking and cancelling.
pub const EVICTION_EVENT_REASON: &str = "TaintManagerEviction";

/// How an [`EvictionAction::EvictPod`] ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvictionResult {
    /// Status patched (or already carrying the condition) and DELETE accepted.
    Deleted,
    /// The pod was already gone: success, someone beat us to it.
    NotFound,
    /// The UID precondition failed: the name now belongs to a new pod. This pod object is
    /// gone, which is what we wanted; the new one is judged on its own when it is seen.
    Conflict,
    /// Anything else (timeout, 5xx, 429 after the shell's own handling): retried with backoff.
    Error(String),
}
