//! What the shell feeds the controller. Every input comes with `now` (the controller's clock).

use crate::model::{Lease, Name, Node, Pod, PodKey};

use super::actions::ActionId;
use super::taint_eviction::{EvictionId, EvictionResult};

#[derive(Clone, Debug)]
pub enum Input {
    NodeUpsert(Node),
    NodeDeleted(Name),
    /// A Lease of `kube-node-lease` (named after its node).
    LeaseUpsert(Lease),
    LeaseDeleted(Name),
    PodUpsert(Pod),
    PodDeleted(PodKey),
    /// Nodes, Leases and Pods are listed: decisions may start. Nothing is decided before it.
    InitialSyncDone,
    /// `now >= next_deadline()`.
    Tick,
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
    /// The result of an [`super::Action::EvictPod`] (handled by the taint eviction machine).
    EvictionResult {
        id: EvictionId,
        result: EvictionResult,
    },
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
