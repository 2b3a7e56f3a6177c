//! Kubernetes Events the controllers record (what `kubectl describe` shows), as plain data.
//! Reasons and messages are upstream's, verbatim (docs/upstream.md, "Events"). Events are best
//! effort: the shell throttles them and never lets a failed event block or fail an action.

use crate::model::Name;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// The object an event is about (`involvedObject`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventObject {
    /// Node events carry the node's UID (upstream `RecordNodeEvent`).
    Node { name: Name, uid: Name },
    /// Pod events; the taint eviction controller's carry no UID (empty), as upstream's.
    Pod {
        namespace: Name,
        name: Name,
        uid: Name,
    },
}

/// Source components, as upstream's recorders name themselves.
pub const NODE_CONTROLLER: &str = "node-controller";
pub const TAINT_EVICTION_CONTROLLER: &str = "taint-eviction-controller";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub object: EventObject,
    pub event_type: EventType,
    pub reason: &'static str,
    pub message: String,
    /// `source.component`: [`NODE_CONTROLLER`] or [`TAINT_EVICTION_CONTROLLER`].
    pub component: &'static str,
}
