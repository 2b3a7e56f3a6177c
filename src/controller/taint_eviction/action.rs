//! What the shell reports back about an `Action::EvictPod`, and the words the eviction writes.

pub const DISRUPTION_CONDITION: &str = crate::model::disruption::CONDITION;
pub const DISRUPTION_REASON: &str = crate::model::disruption::REASON;
pub const DISRUPTION_MESSAGE: &str = crate::model::disruption::MESSAGE;
/// The event reason for both marking and cancelling.
pub const EVICTION_EVENT_REASON: &str = "TaintManagerEviction";

/// How an `Action::EvictPod` ended.
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
