//! What the controllers ask the shell to do: plain data, one type for every machine. Requests
//! carry an [`ActionId`] (from `in_flight.rs`); the shell answers each with an input carrying
//! the same id (`Result`, `LeaseRead`, `EvictionResult`, `FenceTargetRead`, `FenceExited`).

use crate::model::{Name, NodeCondition, PodKey, Taint};

use super::events::Event;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActionId(pub u64);

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Write the node's status conditions (optimistic: fails with 409 on a stale
    /// `resource_version`). `conditions` is the node's full condition list after the change.
    UpdateNodeConditions {
        id: ActionId,
        node: Name,
        uid: Name,
        resource_version: Name,
        conditions: Vec<NodeCondition>,
    },
    /// Replace `spec.taints` with `taints` (the FULL desired list), guarded by
    /// `resource_version`. Taints added by this write carry `time_added = now`.
    PatchNodeTaints {
        id: ActionId,
        node: Name,
        uid: Name,
        resource_version: Name,
        taints: Vec<Taint>,
    },
    /// Merge these labels into `metadata.labels` (only keys that must change).
    PatchNodeLabels {
        id: ActionId,
        node: Name,
        uid: Name,
        labels: Vec<(Name, Name)>,
    },
    /// Set the pod's Ready condition to False (UID precondition).
    MarkPodNotReady {
        id: ActionId,
        pod: PodKey,
        uid: Name,
        node: Name,
    },
    /// Legacy mode: set `status.reason = NodeLost` and `status.message = message`.
    SetPodStatusNodeLost {
        id: ActionId,
        pod: PodKey,
        uid: Name,
        message: String,
    },
    /// Legacy mode: graceful DELETE of the pod (its own grace period, UID precondition).
    DeletePod {
        id: ActionId,
        pod: PodKey,
        uid: Name,
    },
    /// Best effort: never answered.
    RecordEvent(Event),
    /// Taint eviction (upstream's `addConditionAndDeletePod`, emitted by `TaintEviction` only):
    /// strategic-merge PATCH of `pods/NAME/status` adding the condition `DisruptionTarget`=True
    /// (reason and message in `taint_eviction::DISRUPTION_*`) with `metadata.uid` = `uid` as
    /// precondition, then DELETE with `preconditions.uid` = `uid` and no grace period override
    /// (the pod's own). Report the outcome as [`super::Input::EvictionResult`].
    EvictPod {
        id: ActionId,
        pod: PodKey,
        uid: Name,
        /// 1 for the first try, up to `taint_eviction::MAX_ATTEMPTS`.
        attempt: u32,
        /// The pod carries the condition already: only the DELETE is sent (upstream's
        /// `UpdatePodCondition` reports no change, and no status update is made).
        condition_present: bool,
    },
    /// Read `kube-node-lease/<node>` live from the API server (not from a cache).
    ReadLease { id: ActionId, node: Name },
    /// Fencing: read the node (labels, addresses, fencing annotations) and its Lease live,
    /// just before deciding to fence. Answered by [`super::Input::FenceTargetRead`].
    ReadFenceTarget { id: ActionId, node: Name },
    /// Fencing: one write of the node's fencing annotations (`None` removes the key) and, when
    /// `taints` is set, its FULL taint list, guarded by `resource_version` (409 on a stale one:
    /// the shell re-reads the node, as for `PatchNodeTaints`). Answered by `Input::Result`.
    PatchNodeFencing {
        id: ActionId,
        node: Name,
        uid: Name,
        resource_version: Name,
        annotations: Vec<(&'static str, Option<String>)>,
        taints: Option<Vec<Taint>>,
    },
    /// Fencing: run the operator's fence command for a node (a child process, in the shell).
    /// Answered by [`super::Input::FenceExited`].
    RunFenceCommand { id: ActionId, command: FenceCommand },
}

impl Action {
    pub fn id(&self) -> Option<ActionId> {
        match self {
            Action::UpdateNodeConditions { id, .. }
            | Action::PatchNodeTaints { id, .. }
            | Action::PatchNodeLabels { id, .. }
            | Action::MarkPodNotReady { id, .. }
            | Action::SetPodStatusNodeLost { id, .. }
            | Action::DeletePod { id, .. }
            | Action::EvictPod { id, .. }
            | Action::ReadLease { id, .. }
            | Action::ReadFenceTarget { id, .. }
            | Action::PatchNodeFencing { id, .. }
            | Action::RunFenceCommand { id, .. } => Some(*id),
            Action::RecordEvent(_) => None,
        }
    }
}

/// Which command the shell runs: a power-off step (index into the configured steps) or the
/// power-on of `power-cycle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceStep {
    Off(usize),
    On,
    /// `status_command`: the shell's credential check, never decided by the core.
    Status,
}

impl Default for FenceStep {
    fn default() -> FenceStep {
        FenceStep::Off(0)
    }
}

impl FenceStep {
    /// `FENCE_STEP` in the command's environment: `1`, `2`, … or `on`.
    pub fn env(self) -> String {
        match self {
            FenceStep::Off(i) => (i + 1).to_string(),
            FenceStep::On => "on".to_string(),
            FenceStep::Status => "status".to_string(),
        }
    }
}

/// What the fence command is told about its node (its environment, in the shell).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FenceCommand {
    /// Which command (`FENCE_STEP` in its environment).
    pub step: FenceStep,
    pub node: Name,
    pub uid: Name,
    /// `(type, address)`, as in `status.addresses`.
    pub addresses: Vec<(String, String)>,
    pub labels: Vec<(String, String)>,
}
