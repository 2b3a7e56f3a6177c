//! A node's health: the grace timer, the monitor pass and the Unknown verdict (upstream's
//! `monitorNodeHealth` / `tryUpdateNodeHealth`), and what follows a verdict.

use std::time::Duration;

use crate::actions::Action;
use crate::decisions::{Decision, Heartbeat, LeaseEvidence};
use crate::health::{NodeHealth, stale_conditions};
use crate::model::{ClusterStore, ConditionStatus, Name, Node};
use crate::settings::Settings;
use crate::taint_ops::{NoExecuteKind, has_no_execute};
use crate::time::Time;

use super::deadlines::Deadlines;

use super::{NodeEntry, NodeLifecycle, Pending, Timer, Verdict, node_event};

impl NodeLifecycle {
    pub(super) fn arm_grace(&mut self, store: &ClusterStore, name: &Name, now: Time) {
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let Some(node) = store.node(name) else {
            return;
        };
        arm_grace_of(name, e, node, &self.settings, &mut self.deadlines, now);
    }

    /// The next timer due at `now`, from the heap or the grace lanes, in the order one heap
    /// holding both would give (deadline, then when it was armed).
    pub(super) fn pop_due(&mut self, now: Time) -> Option<Timer> {
        let timer = self.deadlines.pop_due(now)?;
        if let Timer::NodeGrace(name) = &timer
            && let Some(e) = self.nodes.get_mut(name)
        {
            e.grace.due = None;
            e.grace.in_heap = false;
        }
        Some(timer)
    }

    pub(super) fn monitor_pass(&mut self, store: &ClusterStore, now: Time, out: &mut Vec<Action>) {
        // A settled node's evaluation does nothing, and no other node's evaluation can unsettle
        // it (they change their own entries, counts and queue places), so leaving it out keeps
        // every decision and its order (most of the pass at 5,000 healthy nodes).
        // The entries and the store's nodes are both maps ordered by name: each node is found
        // by walking the store alongside, not by a lookup by name per entry (a dozen string
        // comparisons each, which would be most of the pass).
        let names: Vec<Name> = {
            let mut store_nodes = store.nodes().peekable();
            self.nodes
                .iter()
                .filter(|(name, e)| {
                    if self.full_monitor_pass {
                        return true;
                    }
                    while store_nodes.next_if(|n| *n.name < ***name).is_some() {}
                    let node = store_nodes.peek().copied().filter(|n| n.name == **name);
                    !self.settled(name, node, e, now)
                })
                .map(|(name, _)| name.clone())
                .collect()
        };
        for name in &names {
            self.evaluate(store, name, now, out);
        }
        // The safety net recomputes zone states even if no count changed.
        self.disruption_dirty = true;
        self.handle_disruption(store, now, out);
    }

    /// Whether `evaluate(name, now)` would change nothing and send nothing: a node not judged
    /// (unregistered, a verdict in flight), or one Ready, within its grace, counted Ready in
    /// its zone, without NoExecute taints, taint writes or queue place, with no pods to mark
    /// again. Condition taints and the legacy mode are always evaluated (they re-queue nodes).
    /// `tests/randomized/monitor_pass.rs` runs random scripts both ways.
    /// `node`: the store's node of that name.
    fn settled(&self, name: &str, node: Option<&Node>, e: &NodeEntry, now: Time) -> bool {
        if !e.registered || e.busy.get().verdict != Verdict::Idle {
            return true;
        }
        let Some(node) = node else {
            return true;
        };
        if !self.taint_based
            || !self.settings.condition_taints.is_empty()
            || e.needs_pod_retry
            || e.counted != Some(true)
            || !e.busy.get().taint_ops.is_empty()
            || e.busy.get().taint_write.is_some()
            || node.ready().map(|c| c.status) != Some(ConditionStatus::True)
            || node.excluded_from_disruption()
            || has_no_execute(node, NoExecuteKind::NotReady)
            || has_no_execute(node, NoExecuteKind::Unreachable)
        {
            return false;
        }
        let (monitor, startup) = self.settings.graces(node);
        if now
            >= e.health
                .verdict_at(NodeHealth::grace(node, monitor, startup))
        {
            return false;
        }
        self.zones
            .get(&e.zone)
            .is_none_or(|z| !z.queue().contains(name))
    }

    /// Upstream's per-node body of `monitorNodeHealth`: the health verdict, then the NoExecute
    /// (or legacy eviction) decision and pod readiness from the Ready observed before it.
    pub(super) fn evaluate(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let retry_pending = self
            .deadlines
            .contains(&Timer::LeaseReadRetry(name.clone()));
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let Some(node) = store.node(name) else {
            return;
        };
        if !e.registered || e.busy.get().verdict != Verdict::Idle {
            return;
        }
        let (monitor, startup) = self.settings.graces(node);
        let grace = NodeHealth::grace(node, monitor, startup);
        let observed = node
            .ready()
            .map(|c| c.status)
            .unwrap_or(ConditionStatus::Unknown);
        if now > e.health.probe_time() + grace
            && let Some(conditions) = stale_conditions(node, now)
        {
            // No verdict without fresh evidence: a node that heartbeats through a Lease is only
            // declared Unknown once a live read confirms the Lease is stale.
            if e.health.lease_renew().is_some()
                && e.busy.get().lease_confirmed_for != Some(e.health.probe_time())
            {
                if !retry_pending {
                    let about = Pending::LeaseRead {
                        node: name.clone(),
                        uid: node.uid.clone(),
                    };
                    let read = |id| Action::ReadLease {
                        id,
                        node: name.clone(),
                    };
                    e.busy.get_mut().verdict =
                        Verdict::ReadingLease(self.in_flight.send(about, read, out));
                    self.tally_refresh(store, name, now);
                }
                return;
            }
            if e.busy.get().verdict_tries == 0 {
                let heartbeat = match e.health.lease_renew() {
                    Some(renew) => Heartbeat::Lease {
                        renew_time: Some(renew),
                    },
                    None => Heartbeat::NodeStatus {
                        last_heartbeat: node.ready().and_then(|c| c.last_heartbeat_time),
                    },
                };
                let lease = match e.health.lease_renew() {
                    Some(_) => e
                        .busy
                        .get()
                        .lease_evidence
                        .clone()
                        .unwrap_or(LeaseEvidence::NoLease),
                    None => LeaseEvidence::NoLease,
                };
                self.decisions.push(Decision::NodeUnknown {
                    node: name.clone(),
                    zone: e.zone.clone(),
                    last_seen: e.health.probe_time(),
                    heartbeat,
                    grace,
                    lease,
                });
            }
            // The saved Ready condition changes only once the write succeeded (upstream keeps
            // the old one when its update fails): see `on_status_result`.
            let about = Pending::NodeStatus {
                node: name.clone(),
                uid: node.uid.clone(),
            };
            let written = conditions.clone();
            let write = |id| Action::UpdateNodeConditions {
                id,
                node: name.clone(),
                uid: node.uid.clone(),
                resource_version: node.resource_version.clone(),
                conditions: written,
            };
            e.busy.get_mut().verdict = Verdict::Writing {
                id: self.in_flight.send(about, write, out),
                observed,
                resource_version: node.resource_version.clone(),
                conditions,
            };
            self.tally_refresh(store, name, now);
            return;
        }
        let current = node.ready().map(|c| c.status);
        self.after_health(store, name, observed, current, now, out);
    }

    /// The part of the pass that follows the health update.
    pub(super) fn after_health(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        observed: ConditionStatus,
        current: Option<ConditionStatus>,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        self.update_contribution(store, name, current, now);
        let Some(current) = current else {
            return;
        };
        if self.taint_based {
            self.process_taint_based_eviction(store, name, observed, now, out);
            self.queue_condition_taints(store, name, now);
        } else {
            self.process_no_taint_based_eviction(store, name, observed, now, out);
        }
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let Some(node) = store.node(name) else {
            return;
        };
        if current != ConditionStatus::True && observed == ConditionStatus::True {
            out.push(node_event(
                node,
                "NodeNotReady",
                format!("Node {} status is now: NodeNotReady", node.name),
            ));
            self.mark_pods_not_ready(store, name, None, now, out);
        } else if e.needs_pod_retry && observed != ConditionStatus::True {
            self.mark_pods_not_ready(store, name, None, now, out);
        } else {
            e.needs_pod_retry = false;
        }
    }

    // ---- NoExecute tainting (docs/upstream.md, "NoExecute tainting") ----------------------------
}

/// The grace a node is entitled to under `settings`: its pool's or the global, startup or
/// monitor (`NodeHealth::grace`).
pub(super) fn grace_of(node: &Node, settings: &Settings) -> Duration {
    let (monitor, startup) = settings.graces(node);
    NodeHealth::grace(node, monitor, startup)
}

/// [`NodeLifecycle::arm_grace`] on an entry already looked up. The grace it computes is kept in
/// the entry (`GraceMemo`) for the node's next renewals: see `on_lease_changed`.
pub(super) fn arm_grace_of(
    name: &Name,
    e: &mut NodeEntry,
    node: &Node,
    settings: &Settings,
    deadlines: &mut Deadlines,
    now: Time,
) {
    if !e.registered {
        return;
    }
    let grace = grace_of(node, settings);
    e.grace_memo = GraceMemo::of(grace);
    arm_grace_for(name, e, grace, deadlines, now);
}

/// Arms the entry's grace deadline, `probe_time + grace`, in its lane or in the heap.
pub(super) fn arm_grace_for(
    name: &Name,
    e: &mut NodeEntry,
    grace: Duration,
    deadlines: &mut Deadlines,
    now: Time,
) {
    if !e.registered {
        return;
    }
    let at = e.health.verdict_at(grace);
    deadlines.arm_grace(name, grace, at, &mut e.grace, now);
}

/// The grace last computed for a node (`arm_grace_of`), so that a renewal arms the node's
/// deadline without finding its `Node` in the store (a hash lookup and the cache lines of the
/// node's record and its conditions, at every renewal). Whole milliseconds below 2^24 (4.6
/// hours), 0 for none: three bytes, in what was the entry's padding (`NodeEntry` stays 144 B).
/// A grace it cannot hold exactly is not kept (the renewal then computes it from the node, as
/// before).
///
/// The grace is a function of the node (its Ready condition's presence, its pool's labels)
/// and the settings. It is recomputed by every `arm_grace_of`, which runs for the node on
/// every change of it the lifecycle decides on (`on_node_changed`, `register`), on every
/// settings change (`apply_settings` arms every node), and it is forgotten when the store
/// changes the node without the lifecycle deciding on it (a write of ours that landed:
/// `landed_applied`, `observe.rs`). Debug builds check it against the node at every use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GraceMemo([u8; 3]);

impl GraceMemo {
    pub(super) const NONE: GraceMemo = GraceMemo([0; 3]);

    pub(super) fn of(grace: Duration) -> GraceMemo {
        let millis = u32::try_from(grace.as_millis()).unwrap_or(0);
        let [a, b, c, high] = millis.to_le_bytes();
        if high == 0 && Duration::from_millis(u64::from(millis)) == grace {
            GraceMemo([a, b, c])
        } else {
            GraceMemo::NONE
        }
    }

    pub(super) fn get(self) -> Option<Duration> {
        let [a, b, c] = self.0;
        let millis = u32::from_le_bytes([a, b, c, 0]);
        (millis != 0).then(|| Duration::from_millis(u64::from(millis)))
    }
}

#[cfg(test)]
mod grace_memo_tests {
    use super::*;

    #[test]
    fn keeps_a_grace_only_when_it_gives_it_back_exactly() {
        for ms in [1u64, 40_000, 50_000, 300_000, (1 << 24) - 1] {
            let grace = Duration::from_millis(ms);
            assert_eq!(GraceMemo::of(grace).get(), Some(grace));
        }
        for grace in [
            Duration::ZERO,
            Duration::from_micros(40_000_500),
            Duration::from_millis(1 << 24),
            Duration::from_secs(u64::MAX),
        ] {
            assert_eq!(GraceMemo::of(grace).get(), None, "{grace:?}");
        }
        assert_eq!(GraceMemo::NONE.get(), None);
    }
}
