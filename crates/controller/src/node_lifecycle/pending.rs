//! What each write or live read of the node lifecycle in flight is about (`InFlight<Pending>`).

use crate::model::{Name, PodKey};

#[derive(Debug)]
pub(super) enum Pending {
    NodeStatus {
        node: Name,
        uid: Name,
    },
    NodeTaints {
        node: Name,
        uid: Name,
    },
    NodeLabels {
        node: Name,
        uid: Name,
        labels: Vec<(Name, Name)>,
    },
    LeaseRead {
        node: Name,
        uid: Name,
    },
    PodNotReady {
        pod: PodKey,
        node: Name,
    },
    PodNodeLost {
        pod: PodKey,
        node: Name,
        uid: Name,
    },
    DeletePod {
        pod: PodKey,
        node: Name,
        uid: Name,
    },
}

impl Pending {
    /// A verdict's request: its live Lease read or its status write (the tainting pass waits
    /// for them, `verdicts_in_flight`).
    pub(super) fn is_verdict(&self) -> bool {
        matches!(self, Pending::LeaseRead { .. } | Pending::NodeStatus { .. })
    }

    /// The node the write or read is about.
    pub(super) fn node(&self) -> &Name {
        match self {
            Pending::NodeStatus { node, .. }
            | Pending::NodeTaints { node, .. }
            | Pending::NodeLabels { node, .. }
            | Pending::LeaseRead { node, .. }
            | Pending::PodNotReady { node, .. }
            | Pending::PodNodeLost { node, .. }
            | Pending::DeletePod { node, .. } => node,
        }
    }
}
