//! The words the eviction writes (what the shell reports back about an `Action::EvictPod` is an
//! input: `inputs::EvictionResult`).

/// The event reason for both marking and cancelling.
pub(crate) const EVICTION_EVENT_REASON: &str = "TaintManagerEviction";
