//! What the controllers decided and why, as plain data: the evidence behind each action, for
//! the shell's decision log and `explain` (the core never logs; it hands these out next to its
//! actions, and the shell renders them).
//!
//! A decision is recorded when it is taken (the action that carries it out leaves at the same
//! instant); whether the write then succeeds is the executor's to tell. Retries of one decision
//! (a conflict, a failed write tried again) record nothing new.

use std::time::Duration;

use crate::model::{ConditionStatus, Name, Node, PodKey, Taint};
use crate::time::Rate;
use crate::time::Time;

use super::taint_ops::TaintOp;
use super::zones::ZoneState;

/// How a node's last sign of life reached us.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Heartbeat {
    /// The kubelet's Lease, `renewTime` as the kubelet stamped it.
    Lease { renew_time: Option<Time> },
    /// The node's status (no Lease seen), the Ready condition's `lastHeartbeatTime`.
    NodeStatus { last_heartbeat: Option<Time> },
}

/// The live Lease read that confirmed a verdict (KEP-5647's "no verdict without fresh
/// evidence").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseEvidence {
    /// Read live at `read_at`; its `renewTime` was no newer than what the watch had shown.
    Stale {
        read_at: Time,
        renew_time: Option<Time>,
    },
    /// The Lease no longer exists.
    Missing { read_at: Time },
    /// The node heartbeats through its status only: there is no Lease to read.
    NoLease,
}

/// Why a taint write adds or removes what it does.
#[derive(Clone, Debug, PartialEq)]
pub struct TaintReason {
    /// The node's Ready status when the write was decided (`None`: no Ready condition).
    pub ready: Option<ConditionStatus>,
    /// The zone whose rate-limited queue handed out this NoExecute taint, if one did.
    pub zone_queue: Option<Name>,
    /// The opposite NoExecute taint was swapped at once (not rate limited).
    pub swapped: bool,
    /// Both NoExecute taints came off because the node is reachable again (or every zone is
    /// down and all tainting stopped).
    pub reachable: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// A node's grace period ran out: its conditions are set Unknown.
    NodeUnknown {
        node: Name,
        zone: Name,
        /// When we last saw it alive (our clock).
        last_seen: Time,
        heartbeat: Heartbeat,
        grace: Duration,
        lease: LeaseEvidence,
    },
    /// A node seen Ready again after it was not.
    NodeReady {
        node: Name,
        zone: Name,
        /// Ready as it was before.
        was: Option<ConditionStatus>,
    },
    /// A zone's disruption state changed, and with it the tainting rate.
    ZoneState {
        zone: Name,
        from: Option<ZoneState>,
        to: ZoneState,
        size: usize,
        not_ready: usize,
        rate: Rate,
    },
    /// Every zone is fully disrupted (`entered`): all tainting stops and NoExecute taints come
    /// off; or that ended.
    AllZonesDown { entered: bool, zones: usize },
    /// A zone's NoExecute decisions wait for its suspects (`node_lifecycle/suspects.rs`):
    /// counted not ready, they would make the zone `would_be` (or every zone fully disrupted).
    ZoneWaits {
        zone: Name,
        suspects: usize,
        would_be: ZoneState,
        all_down: bool,
    },
    /// A node's taints are written.
    Taints {
        node: Name,
        zone: Name,
        added: Vec<Taint>,
        removed: Vec<Taint>,
        why: TaintReason,
    },
    /// Pods on a node that is not Ready get Ready=False.
    PodsNotReady {
        node: Name,
        zone: Name,
        pods: Vec<PodKey>,
    },
    /// A node is not Ready but its pods stay Ready (`mark_pods_not_ready = "unless-disrupted"`):
    /// its domain, counted with its suspects, is `state`, or every
    /// domain is down. Once per episode.
    PodsKeptReady {
        node: Name,
        zone: Name,
        state: ZoneState,
        all_down: bool,
    },
    /// A fully disrupted domain enters (`end: None`, held `until`; `None`: until it recovers) or
    /// leaves its hold (`full_disruption = "hold"`).
    DomainHold {
        zone: Name,
        until: Option<Time>,
        end: Option<HoldEnd>,
    },
    /// A pod's eviction started: the NoExecute taint it does not tolerate (or the toleration
    /// that ran out).
    PodDeletion {
        pod: PodKey,
        node: Option<Name>,
        taint: Option<Taint>,
        /// `None`: not tolerated at all.
        toleration_seconds: Option<u64>,
        /// When the countdown started: the taint's `timeAdded`, or this daemon's first sight
        /// of the taint when it has none or it lies in the future.
        countdown_from: Time,
    },
    /// A pending deletion stopped (the taint went, the pod now tolerates it, moved or went).
    DeletionCancelled { pod: PodKey },
    /// A fencing step (`controller/fencing`): `detail` is the whole line, its evidence as
    /// `key=value` pairs (`decision=fence node=… outage_since=… lease_renew=…`).
    Fencing { node: Name, detail: String },
    /// A brake on mass decisions engaged or released (`brake.rs`).
    Brake(super::brake::BrakeChange),
    /// A fleet pause started or ended (`controller/fleet_pause.rs`): `detail` is the line.
    Pause { detail: String },
}

impl Decision {
    /// Every [`Decision::kind`], in declaration order: `/metrics` counts each, zero included,
    /// so a kind that has not happened yet is a 0 and not a missing series.
    pub const KINDS: [&'static str; 14] = [
        "node-unknown",
        "node-ready",
        "zone-state",
        "all-zones-down",
        "zone-waits",
        "taints",
        "pods-not-ready",
        "pods-kept-ready",
        "domain-hold",
        "pod-deletion",
        "deletion-cancelled",
        "fencing",
        "brake",
        "pause",
    ];

    /// `DECISION=` in the journal: a stable name per kind (one of [`Decision::KINDS`]).
    pub fn kind(&self) -> &'static str {
        match self {
            Decision::NodeUnknown { .. } => "node-unknown",
            Decision::NodeReady { .. } => "node-ready",
            Decision::ZoneState { .. } => "zone-state",
            Decision::AllZonesDown { .. } => "all-zones-down",
            Decision::ZoneWaits { .. } => "zone-waits",
            Decision::Taints { .. } => "taints",
            Decision::PodsNotReady { .. } => "pods-not-ready",
            Decision::PodsKeptReady { .. } => "pods-kept-ready",
            Decision::DomainHold { .. } => "domain-hold",
            Decision::PodDeletion { .. } => "pod-deletion",
            Decision::DeletionCancelled { .. } => "deletion-cancelled",
            Decision::Fencing { .. } => "fencing",
            Decision::Brake(_) => "brake",
            Decision::Pause { .. } => "pause",
        }
    }

    /// The node it is about, if any.
    pub fn node(&self) -> Option<&Name> {
        match self {
            Decision::NodeUnknown { node, .. }
            | Decision::NodeReady { node, .. }
            | Decision::Taints { node, .. }
            | Decision::PodsNotReady { node, .. }
            | Decision::PodsKeptReady { node, .. }
            | Decision::Fencing { node, .. } => Some(node),
            Decision::PodDeletion { node, .. } => node.as_ref(),
            Decision::ZoneState { .. }
            | Decision::AllZonesDown { .. }
            | Decision::ZoneWaits { .. }
            | Decision::DomainHold { .. }
            | Decision::DeletionCancelled { .. }
            | Decision::Brake(_)
            | Decision::Pause { .. } => None,
        }
    }

    /// The zone key it is about, if any.
    pub fn zone(&self) -> Option<&Name> {
        match self {
            Decision::NodeUnknown { zone, .. }
            | Decision::NodeReady { zone, .. }
            | Decision::ZoneState { zone, .. }
            | Decision::ZoneWaits { zone, .. }
            | Decision::Taints { zone, .. }
            | Decision::PodsNotReady { zone, .. }
            | Decision::PodsKeptReady { zone, .. }
            | Decision::DomainHold { zone, .. } => Some(zone),
            _ => None,
        }
    }
}

/// Why a domain's hold ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HoldEnd {
    /// No longer fully disrupted.
    Recovered,
    /// `hold_max` has passed since it became fully disrupted: tainted at the normal rate.
    HoldMax,
    /// Every domain is down: all tainting stopped anyway.
    AllDown,
    /// A reload no longer holds it.
    Settings,
}

impl HoldEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            HoldEnd::Recovered => "no longer fully disrupted",
            HoldEnd::HoldMax => "hold_max has passed: tainted at the normal rate",
            HoldEnd::AllDown => "every domain is down: all tainting stopped",
            HoldEnd::Settings => "the settings no longer hold it",
        }
    }
}

/// The evidence of a taint write: what it adds and removes, and why.
pub(super) fn taint_decision(
    name: &Name,
    zone: &Name,
    node: &Node,
    desired: &[Taint],
    ops: &[TaintOp],
) -> Option<Decision> {
    let same = |a: &Taint, b: &Taint| a.key == b.key && a.effect == b.effect;
    let added: Vec<_> = desired
        .iter()
        .filter(|t| !node.taints.iter().any(|o| same(o, t)))
        .cloned()
        .collect();
    let removed: Vec<_> = node
        .taints
        .iter()
        .filter(|t| !desired.iter().any(|d| same(d, t)))
        .cloned()
        .collect();
    if added.is_empty() && removed.is_empty() {
        return None;
    }
    let why = TaintReason {
        ready: node.ready().map(|c| c.status),
        zone_queue: ops.iter().find_map(|o| match o {
            TaintOp::Apply { zone: Some(z), .. } => Some(z.clone()),
            _ => None,
        }),
        swapped: ops
            .iter()
            .any(|o| matches!(o, TaintOp::Apply { zone: None, .. })),
        reachable: ops.contains(&TaintOp::Reachable),
    };
    Some(Decision::Taints {
        node: name.clone(),
        zone: zone.clone(),
        added,
        removed,
        why,
    })
}
