//! Node health bookkeeping (docs/upstream.md, "Node health", upstream `tryUpdateNodeHealth`): when
//! the controller last saw a sign of life (`probe_time`), when Ready last changed, and what the
//! node looks like once its grace period ran out. All times are the controller's clock, never the
//! kubelet's.

use std::rc::Rc;
use std::time::Duration;

use crate::model::{ConditionStatus, ConditionText, Node, NodeCondition, NodeConditionType};
use crate::time::Time;

/// What of the node's Ready condition is compared between observations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReadySnapshot {
    pub(crate) status: ConditionStatus,
    pub(crate) last_heartbeat_time: Option<Time>,
    pub(crate) last_transition_time: Option<Time>,
}

impl ReadySnapshot {
    pub(crate) fn of(c: &NodeCondition) -> ReadySnapshot {
        ReadySnapshot {
            status: c.status,
            last_heartbeat_time: c.last_heartbeat_time,
            last_transition_time: c.last_transition_time,
        }
    }
}

/// A node's evidence of life (upstream's `nodeHealth`): when it was last heard from, when its
/// Ready last changed, its Ready as last saved and its newest Lease renewal. Its fields change
/// only as evidence arrives or a verdict is written, through the methods below.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeHealth {
    probe_time: Time,
    ready_transition_time: Time,
    /// The Ready condition as last saved (upstream `nodeHealth.status`).
    saved_ready: Option<ReadySnapshot>,
    /// `renewTime` of the newest Lease seen; `None`: never had one.
    lease_renew: Option<Time>,
}

impl NodeHealth {
    /// When the node was last heard from (upstream `probeTimestamp`), on our clock.
    pub(crate) fn probe_time(&self) -> Time {
        self.probe_time
    }

    /// When its Ready last changed, as we saw it (upstream `readyTransitionTimestamp`).
    pub(crate) fn ready_transition_time(&self) -> Time {
        self.ready_transition_time
    }

    pub(crate) fn saved_ready(&self) -> Option<&ReadySnapshot> {
        self.saved_ready.as_ref()
    }

    /// `renewTime` of the newest Lease seen; `None`: never had one.
    pub(crate) fn lease_renew(&self) -> Option<Time> {
        self.lease_renew
    }

    /// Every node gets a fresh grace period (upstream, on leaving the all-zones-down mode).
    pub(crate) fn restart_clock(&mut self, now: Time) {
        self.probe_time = now;
        self.ready_transition_time = now;
    }

    /// The last renewal reached us at `heard`, before the probe time set at first sight: the
    /// clock counts from there.
    pub(crate) fn heard_at(&mut self, heard: Time) {
        self.probe_time = self.probe_time.min(heard);
    }

    /// Our write of its conditions landed at `now`; `ready` is the Ready it wrote.
    pub(crate) fn verdict_written(&mut self, ready: Option<&NodeCondition>, now: Time) {
        self.ready_transition_time = now;
        if let Some(ready) = ready {
            self.saved_ready = Some(ReadySnapshot::of(ready));
        }
    }

    /// First sight of a node. Without a Ready condition its clock starts at its creation (the
    /// startup grace counts from there); with one, now.
    pub(crate) fn first_seen(node: &Node, now: Time) -> NodeHealth {
        match node.ready() {
            None => NodeHealth {
                probe_time: node.creation_timestamp,
                ready_transition_time: node.creation_timestamp,
                saved_ready: None,
                lease_renew: None,
            },
            Some(c) => NodeHealth {
                probe_time: now,
                ready_transition_time: now,
                saved_ready: Some(ReadySnapshot::of(c)),
                lease_renew: None,
            },
        }
    }

    /// A newer version of the node was seen. Returns true if `probe_time` moved.
    pub(crate) fn observe_node(&mut self, node: &Node, now: Time) -> bool {
        let Some(current) = node.ready() else {
            // Upstream overwrites the saved status before comparing, so a Ready condition that
            // disappears does not refresh the probe time: the startup grace counts from the
            // last sign of life.
            self.saved_ready = None;
            return false;
        };
        let current = ReadySnapshot::of(current);
        let moved = match &self.saved_ready {
            None => {
                // Ready appeared (or the controller restarted with the node already there).
                self.probe_time = now;
                self.ready_transition_time = now;
                true
            }
            Some(saved) if saved.last_heartbeat_time != current.last_heartbeat_time => {
                if saved.last_transition_time != current.last_transition_time {
                    self.ready_transition_time = now;
                }
                self.probe_time = now;
                true
            }
            Some(_) => false,
        };
        self.saved_ready = Some(current);
        moved
    }

    /// A Lease renewal is evidence of life when it is newer than the one saved.
    pub fn observe_lease(&mut self, renew_time: Option<Time>, now: Time) -> bool {
        let Some(renew) = renew_time.filter(|r| self.is_newer_renewal(Some(*r))) else {
            return false;
        };
        self.lease_renew = Some(renew);
        self.probe_time = now;
        true
    }

    /// Whether a Lease renewed at `renew_time` is newer than the renewal saved (what
    /// [`NodeHealth::observe_lease`] would take).
    pub fn is_newer_renewal(&self, renew_time: Option<Time>) -> bool {
        renew_time.is_some_and(|renew| self.lease_renew.is_none_or(|saved| saved < renew))
    }

    /// The grace this node is entitled to: startup grace until it posts a Ready condition.
    pub(crate) fn grace(node: &Node, monitor: Duration, startup: Duration) -> Duration {
        if node.ready().is_some() {
            monitor
        } else {
            startup
        }
    }

    /// The first instant at which the node is overdue (`now > probe_time + grace`).
    pub(crate) fn verdict_at(&self, grace: Duration) -> Time {
        self.probe_time + grace + Duration::from_millis(1)
    }
}

/// The node's conditions once its grace ran out: Ready, MemoryPressure, DiskPressure and
/// PIDPressure become Unknown (NetworkUnavailable is the network plugin's, left alone).
/// Returns `None` when the Ready condition would not change (nothing to write).
pub(crate) fn stale_conditions(node: &Node, now: Time) -> Option<Vec<NodeCondition>> {
    let observed = node.ready().map(|c| c.status);
    let mut conditions = node.conditions.clone();
    for kind in [
        NodeConditionType::Ready,
        NodeConditionType::MemoryPressure,
        NodeConditionType::DiskPressure,
        NodeConditionType::PIDPressure,
    ] {
        match conditions.iter_mut().find(|c| c.kind == kind) {
            None => conditions.push(NodeCondition {
                kind,
                status: ConditionStatus::Unknown,
                last_heartbeat_time: Some(node.creation_timestamp),
                last_transition_time: Some(now),
                text: ConditionText::new(
                    Some(Rc::from("NodeStatusNeverUpdated")),
                    Some(Rc::from("Kubelet never posted node status.")),
                ),
            }),
            Some(c) if c.status != ConditionStatus::Unknown => {
                c.status = ConditionStatus::Unknown;
                c.text = ConditionText::new(
                    Some(Rc::from("NodeStatusUnknown")),
                    Some(Rc::from("Kubelet stopped posting node status.")),
                );
                c.last_transition_time = Some(now);
            }
            Some(_) => {}
        }
    }
    // Upstream compares the whole Ready condition: a missing one (observed as a synthetic
    // Unknown dated at creation) differs from the one added here by its reason.
    if observed == Some(ConditionStatus::Unknown) {
        return None;
    }
    Some(conditions)
}
