//! What the node lifecycle keeps per node beside the node itself (which is in the world's
//! store): its [`NodeEntry`], with where its verdict stands and the writes under way on it.

use crate::actions::ActionId;
use crate::dump::LegacyEviction;
use crate::health::NodeHealth;
use crate::model::{ConditionStatus, Name, NodeKey};
use crate::taint_ops::TaintOp;
use crate::time::Time;

use super::busy::BusySlot;
use super::{deadlines, health, suspect_tally};

/// Where a node's health verdict stands.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Verdict {
    Idle,
    /// The node looks overdue; its Lease is being read live before deciding.
    ReadingLease(ActionId),
    /// Conditions set Unknown are being written. `observed` is Ready before the write.
    Writing {
        id: ActionId,
        observed: ConditionStatus,
        resource_version: Name,
        conditions: Vec<crate::model::NodeCondition>,
    },
}

#[derive(Debug)]
pub(super) struct EvictionJob {
    pub(super) outstanding: usize,
    pub(super) failed: bool,
    /// Started by the zone queue (its outcome is reported back) or directly.
    pub(super) from_queue: bool,
}

#[derive(Debug)]
pub(super) struct TaintWrite {
    pub(super) id: ActionId,
    pub(super) resource_version: Name,
    pub(super) taints: Vec<crate::model::Taint>,
    pub(super) ops: Vec<TaintOp>,
}

#[derive(Debug)]
pub(super) struct NodeEntry {
    /// The node's key in the store (`model::NodeKey`): its renewals come with it.
    pub(super) key: NodeKey,
    /// The node's uid: the node itself is in the store; results for another node of the same
    /// name are ignored.
    pub(super) uid: Name,
    /// When it was registered (at the initial sync, or when it joined later).
    pub(super) registered_at: Time,
    /// How far behind its Lease's `renewTime` (the kubelet's clock) we see a renewal, at the
    /// least, in milliseconds: the clock skew plus the quickest read. Lets `suspects.rs` tell
    /// how long the kubelet has been silent even when its renewals reach us late (a stalled
    /// watch delivers them in a burst, and the probe time would call them fresh).
    pub(super) lease_lag_ms: Option<i64>,
    /// When a node created while the controller runs was first seen (`None` for the nodes of
    /// the initial sync): see `update_contribution`.
    pub(super) joined_live_at: Option<Time>,
    pub(super) health: NodeHealth,
    /// Where its grace deadline is armed (`deadlines.rs`).
    pub(super) grace: deadlines::GraceArming,
    pub(super) zone: Name,
    /// The writes, reads and evidence of work under way on the node; nothing on a settled one.
    pub(super) busy: BusySlot,
    /// Seen after the initial sync: `RegisteredNode` emitted, health tracked, zone counted.
    pub(super) registered: bool,
    /// The grace of the last arming, for the next renewals (`health.rs`, `GraceMemo`).
    pub(super) grace_memo: health::GraceMemo,
    /// `Some(ready)` while counted in its zone (not excluded from disruption checks).
    pub(super) counted: Option<bool>,
    /// Upstream `nodesToRetry`: mark pods NotReady again on the next evaluation.
    pub(super) needs_pod_retry: bool,
    pub(super) legacy: LegacyEviction,
    /// What it adds to the suspects' and the brakes' counts (`suspect_tally.rs`).
    pub(super) mark: suspect_tally::SuspectMark,
}

impl NodeEntry {
    /// A node's entry as it is first seen: unregistered (registered at the initial sync, or
    /// at once when it joins later: then `joined_live_at` is `Some(now)`), with nothing under way.
    pub(super) fn new(
        key: NodeKey,
        uid: Name,
        zone: Name,
        health: NodeHealth,
        now: Time,
        joined_live_at: Option<Time>,
    ) -> NodeEntry {
        NodeEntry {
            key,
            uid,
            registered: false,
            registered_at: now,
            lease_lag_ms: None,
            joined_live_at,
            health,
            grace: Default::default(),
            grace_memo: health::GraceMemo::NONE,
            zone,
            counted: None,
            needs_pod_retry: false,
            busy: BusySlot::default(),
            legacy: LegacyEviction::Unmarked,
            mark: Default::default(),
        }
    }
}
