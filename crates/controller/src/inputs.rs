//! What the shell feeds the controller. Every input comes with `now` (the controller's clock).

use crate::model::{
    ConditionStatus, Kind, Lease, Name, Node, NodeCondition, NodeKey, Pod, PodChange, PodKey, Taint,
};
use crate::time::Time;

use super::actions::ActionId;

#[derive(Clone, Debug)]
pub enum Input {
    NodeUpsert(Node),
    NodeDeleted(Name),
    /// A Lease of `kube-node-lease` (named after its node).
    LeaseUpsert(Lease),
    LeaseDeleted(Name),
    PodUpsert(Pod),
    PodDeleted(PodKey),
    /// A full state of `Kind` (a LIST, or a watch-list's initial events) starts: what it does
    /// not deliver before its `FullStateEnd` is gone.
    FullStateBegin(Kind),
    FullStateEnd(Kind),
    /// Nodes, Leases and Pods are listed: decisions may start. Nothing is decided before it.
    InitialSyncDone,
    /// Whether every informer (nodes, Leases, pods) follows the server: `Some(settle)` when
    /// all do, the caches current `settle` later (`cache_currency::cache_settle`); `None`
    /// while one is backing off, relisting, or waiting for its watch to be answered. Zone
    /// NoExecute tainting and pod deletions wait for the caches to be current
    /// (`cache_currency.rs`).
    InformersWatching(Option<std::time::Duration>),
    /// `now >= next_deadline()`.
    Tick,
    /// The fleet pause as read from the leader Lease (`None`: none), fed whenever a read of
    /// the Lease shows it changed (`fleet_pause.rs`).
    FleetPause(Option<super::fleet_pause::FleetPause>),
    /// The result of an earlier write. On `Conflict` the shell first re-reads the object and
    /// feeds it as an upsert, then this result; the controller decides again.
    Result {
        id: ActionId,
        outcome: Outcome,
    },
    /// The result of a [`super::Action::ReadLease`].
    LeaseRead {
        id: ActionId,
        outcome: LeaseReadOutcome,
    },
    /// The result of a [`super::Action::ReadFenceTarget`].
    FenceTargetRead {
        id: ActionId,
        outcome: FenceTargetOutcome,
    },
    /// A fence command ended (or could not start, or was not run in dry-run).
    FenceExited {
        id: ActionId,
        outcome: FenceOutcome,
        took: std::time::Duration,
    },
    /// The result of an [`super::Action::EvictPod`] (handled by the taint eviction machine).
    EvictionResult {
        id: ActionId,
        result: EvictionResult,
    },
    /// A write (or live read) of the node lifecycle known to have landed. Not for the shell,
    /// which feeds the write's answer as an upsert: `Controllers::handle` makes it from a
    /// `Result` or `LeaseRead` (`NodeLifecycle::landed`) so that its effect enters the store
    /// through `World::apply`, the store's one writer, like every other change.
    Landed(Landed),
}

/// What a write of ours put in the cluster, known from its result before the watch (or the
/// write's answer) brings the new version: it goes into the store at once, so decisions read
/// what is true and the next write of the object does not conflict.
#[derive(Clone, Debug, PartialEq)]
pub enum Landed {
    /// The conditions written over the node's version `resource_version` (nothing if the store
    /// holds another version by now: that one is newer).
    NodeConditions {
        node: Name,
        resource_version: Name,
        conditions: Vec<NodeCondition>,
    },
    /// The taints written over the node's version `resource_version` (as above).
    NodeTaints {
        node: Name,
        resource_version: Name,
        taints: Vec<Taint>,
    },
    /// Labels merged into the node (a patch of these keys, whatever the version).
    NodeLabels {
        node: Name,
        labels: Vec<(Name, Name)>,
    },
    /// The pod's Ready condition is now False.
    PodNotReady(PodKey),
    /// The pod's deletion was accepted.
    PodDeleting(PodKey),
    /// A Lease read live that is fresher than the one the watch delivered.
    Lease(Lease),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Conflict,
    NotFound,
    /// Anything else (timeout, 5xx, 403 …), with a one-line reason.
    Failed(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseReadOutcome {
    Found(Lease),
    NotFound,
    /// The API server could not be read: no verdict on this evidence.
    Failed(String),
}

/// What an input changed in the store (see `World::apply`): the machines decide on this,
/// reading the objects themselves from the store.
#[derive(Debug)]
pub enum Observed {
    /// Nothing either controller keeps changed (an older or identical object, a Lease deleted).
    Nothing,
    /// A node was added or changed; `before` is the version it replaced.
    Node {
        name: Name,
        before: Option<Node>,
    },
    NodesGone(Vec<Node>),
    /// A node's Lease was stored, with its renewal (the node lifecycle judges by it without
    /// looking the Lease up again) and its node's key, kept beside the Lease in the store
    /// (`None` while the node is not there): the machines find their entries for the node by
    /// it, with no lookup by name.
    Lease {
        name: Name,
        renew_time: Option<Time>,
        node: Option<NodeKey>,
        /// The store held an older renewal of this Lease: a renewal seen happening (not the
        /// first sight of the Lease, as in an initial list).
        renewed: bool,
    },
    Pod(PodChange),
    /// Pods removed, with the node each was bound to.
    PodsGone(Vec<(PodKey, Option<Name>)>),
    /// Not about a watched object: ticks, results, the initial sync.
    Input(Input),
}

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

/// The node and its Lease as read live just before a fence (or a taint removal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FenceTarget {
    pub uid: Name,
    pub resource_version: Name,
    pub ready: Option<ConditionStatus>,
    pub ready_since: Option<Time>,
    pub labels: Vec<(String, String)>,
    pub addresses: Vec<(String, String)>,
    pub attempt: Option<String>,
    pub taint_added: Option<String>,
    /// [`STATE_ANNOTATION`](super::fencing::STATE_ANNOTATION) as read live (power-cycle progress).
    pub fence_state: Option<String>,
    /// The maintenance annotation as read live.
    pub maintenance: crate::model::Maintenance,
    pub unschedulable: bool,
    /// KEP-5683's `MaintenanceInProgress` condition is True, as read live.
    pub maintenance_in_progress: bool,
    pub out_of_service: bool,
    pub lease: LeaseReadOutcome,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FenceTargetOutcome {
    Found(Box<FenceTarget>),
    NotFound,
    /// The API server could not be read: no fence on a guess.
    Failed(String),
}

/// How a fence command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FenceOutcome {
    Exited(i32),
    /// Ended by a signal it did not get from us.
    Signalled(i32),
    /// Ran past `timeout`: killed.
    TimedOut,
    SpawnFailed(String),
    /// Dry-run: logged, not run.
    DryRun,
}

impl FenceOutcome {
    /// The `result` label of `node_lifecycled_fencing_attempts_total`.
    pub fn result(&self) -> &'static str {
        match self {
            FenceOutcome::Exited(0) => "success",
            FenceOutcome::Exited(_) | FenceOutcome::Signalled(_) => "failure",
            FenceOutcome::TimedOut => "timeout",
            FenceOutcome::SpawnFailed(_) => "spawn_error",
            FenceOutcome::DryRun => "dry_run",
        }
    }
}

impl std::fmt::Display for FenceOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FenceOutcome::Exited(code) => write!(f, "exit status {code}"),
            FenceOutcome::Signalled(sig) => write!(f, "killed by signal {sig}"),
            FenceOutcome::TimedOut => write!(f, "timed out (killed)"),
            FenceOutcome::SpawnFailed(e) => write!(f, "could not start: {e}"),
            FenceOutcome::DryRun => write!(f, "dry-run: not run"),
        }
    }
}
