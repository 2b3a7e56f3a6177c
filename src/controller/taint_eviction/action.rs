//! The words the eviction writes (what the shell reports back about an `Action::EvictPod` is an
//! input: `inputs::EvictionResult`).

pub const DISRUPTION_CONDITION: &str = crate::model::disruption::CONDITION;
pub const DISRUPTION_REASON: &str = crate::model::disruption::REASON;
pub const DISRUPTION_MESSAGE: &str = crate::model::disruption::MESSAGE;
/// The event reason for both marking and cancelling.
pub const EVICTION_EVENT_REASON: &str = "TaintManagerEviction";
