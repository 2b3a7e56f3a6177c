//! What the lifecycle does when the store changes: a node, its Lease or a pod seen, the initial
//! sync, the tick; a node registered or forgotten.

use crate::actions::Action;
use crate::decisions::Decision;
use crate::health::NodeHealth;
use crate::model::{ClusterStore, ConditionStatus, Name, Node, NodeKey, PodChange};
use crate::taint_ops::{NoExecuteKind, has_no_execute};
use crate::time::Time;

use super::health;
use super::{NodeEntry, NodeLifecycle, Timer, domain_name, node_event};

impl NodeLifecycle {
    pub(super) fn on_node_changed(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        before: Option<&Node>,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(node) = store.node(name) else {
            return;
        };
        let uid = node.uid.clone();
        if let Some(e) = self.nodes.get(name)
            && e.uid != uid
            && let Some(old) = before
        {
            // Re-created with the same name: the old one is gone, this one starts fresh.
            self.forget_node(old, out);
        }
        let Some(node) = store.node(name) else {
            return;
        };
        let Some(e) = self.nodes.get_mut(name) else {
            let Some(key) = store.node_key(name) else {
                return;
            };
            let zone = domain_name(&self.zones, self.settings.domain_key(node));
            let health = NodeHealth::first_seen(node, now);
            let joined_live_at = self.synced.then_some(now);
            let entry = NodeEntry::new(key, uid, zone, health, now, joined_live_at);
            self.nodes.insert(name.clone(), entry);
            if self.synced {
                self.register(store, name, now, out);
            }
            return;
        };
        if !e.registered {
            return;
        }
        let no_execute = |n: Option<&Node>| {
            n.map_or((false, false), |n| {
                (
                    has_no_execute(n, NoExecuteKind::NotReady),
                    has_no_execute(n, NoExecuteKind::Unreachable),
                )
            })
        };
        let old_ready = before.and_then(|b| b.ready()).map(|c| c.status);
        let old_no_execute = no_execute(before);
        e.health.observe_node(node, now);
        let new_ready = node.ready().map(|c| c.status);
        let new_no_execute = no_execute(Some(node));
        let labels_changed = before.is_some_and(|b| b.labels != node.labels);
        // The zone key is built only when it changed (two allocations per status event otherwise).
        let zone_moved = !self.settings.has_domain_key(node, &e.zone);
        let zone: Name = if zone_moved {
            domain_name(&self.zones, self.settings.domain_key(node))
        } else {
            e.zone.clone()
        };
        if before.is_some() && new_ready == Some(ConditionStatus::True) && old_ready != new_ready {
            self.decisions.push(Decision::NodeReady {
                node: name.clone(),
                zone: zone.clone(),
                was: old_ready,
            });
        }
        if zone_moved {
            self.move_zone(name, zone, now);
        }
        self.arm_grace(store, name, now);
        self.update_contribution(store, name, new_ready, now);
        if labels_changed {
            // The node may have changed pools, and its zone's rate with it.
            let zone = self.nodes.get(name).map(|e| e.zone.clone());
            if let Some(zone) = zone {
                self.refresh_zone_rate(store, &zone, now);
            }
        }
        self.pump_taints(store, name, now, out);
        self.pump_labels(store, name, out);
        if old_ready != new_ready || old_no_execute != new_no_execute {
            self.evaluate(store, name, now, out);
        }
        if self.taint_based {
            self.queue_condition_taints(store, name, now);
        }
    }

    /// Prefetching a batch of renewals (`Controllers::prefetch_renewals`), the lifecycle's two
    /// stages: the line that holds the slot of `key`'s entry…
    pub(crate) fn prefetch_entry_index(&self, key: NodeKey) {
        self.nodes.prefetch_key(key);
    }

    /// …then the entry there.
    pub(crate) fn prefetch_entry(&self, key: NodeKey) {
        self.nodes.prefetch_entry(key);
    }

    /// The node's Lease was stored with this renewal (`World::apply`: the store holds it now);
    /// `key` is the node's, kept beside the Lease.
    pub(super) fn on_lease_changed(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        key: NodeKey,
        renew: Option<Time>,
        renewed: bool,
        now: Time,
    ) {
        let Some((slot, e)) = self.nodes.by_key_mut(key) else {
            return;
        };
        if !e.registered {
            // A standby (or a leader before its sync) learns how late this kubelet's renewals
            // reach it: at a takeover the node's health clock starts from its last renewal
            // (`register`), not from the takeover. Only from renewals it sees happen: the first
            // sight of a Lease (the initial list of a process just started) is no renewal
            // reaching it, and a kubelet silent since before the start would have its silence
            // taken for lag, and then never look silent to `suspects.rs`.
            if let Some(renew) = renew.filter(|_| renewed) {
                e.lease_lag_ms = Some(lease_lag(e.lease_lag_ms, renew, now));
            }
            return;
        }
        if !e.health.observe_lease(renew, now) {
            // No newer renewal; the Lease may have changed all the same (its duration).
            let grace = e.grace_memo.get();
            self.tally_renewed(store, name, slot, grace, now);
            return;
        }
        // The grace kept by the last arming (`GraceMemo`) spares the lookup of the node: an
        // entry exists only while its node is in the store (`forget_node` removes it with the
        // node), so the node the lookup would find is there, and the grace is its own.
        let memo = e.grace_memo.get();
        debug_assert!(
            memo.is_none_or(|g| store
                .node(name)
                .is_some_and(|node| health::grace_of(node, &self.settings) == g)),
            "the grace kept for {name} is the node's"
        );
        let grace = match memo {
            Some(grace) => grace,
            None => {
                let Some(node) = store.node(name) else {
                    return;
                };
                let grace = health::grace_of(node, &self.settings);
                e.grace_memo = health::GraceMemo::of(grace);
                grace
            }
        };
        if let Some(renew) = renew {
            e.lease_lag_ms = Some(lease_lag(e.lease_lag_ms, renew, now));
        }
        health::arm_grace_for(name, e, grace, &mut self.deadlines, now);
        self.tally_renewed(store, name, slot, Some(grace), now);
    }

    pub(super) fn on_pod_changed(
        &mut self,
        store: &ClusterStore,
        change: &PodChange,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        if !self.synced {
            return;
        }
        // Upstream `processPod`: a pod newly bound to (or moved onto) a node not Ready.
        let pod = store.pods().view(change.id);
        let Some(node_name) = pod.node_name().cloned() else {
            return;
        };
        let old_node = change.before.as_ref().and_then(|b| b.node.as_ref());
        if old_node == Some(&node_name) {
            return;
        }
        let Some(e) = self.nodes.get(&node_name) else {
            return;
        };
        if !e.registered {
            return;
        }
        let Some(ready) = e.health.saved_ready().map(|r| r.status) else {
            return;
        };
        if ready == ConditionStatus::True {
            return;
        }
        self.mark_pods_not_ready(store, &node_name, Some(&change.key), now, out);
        if !self.taint_based {
            self.process_no_taint_based_eviction(store, &node_name, ready, now, out);
        }
    }

    pub(super) fn on_initial_sync(
        &mut self,
        store: &ClusterStore,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        if self.synced {
            return;
        }
        self.synced = true;
        let names: Vec<Name> = self.nodes.keys().cloned().collect();
        for name in &names {
            self.register_only(store, name, now, out);
        }
        // The takeover sees the fleet before it acts: every node counted in its zone, the
        // zone states and holds computed, before any node is judged and any pod marked (at
        // registration no zone had a state yet, so a node of a dark site looked as if it failed
        // alone, and `unless-disrupted` marked its pods).
        self.disruption_dirty = true;
        self.handle_disruption(store, now, out);
        // A previous leader's hold starts, cooldowns and brakes (`clocks.rs`).
        self.apply_inherited_clocks(now);
        self.refresh_holds(store, now);
        for name in &names {
            self.evaluate(store, name, now, out);
        }
        self.disruption_dirty = true;
        self.deadlines
            .schedule(Timer::MonitorPass, now + self.settings.node_monitor_period);
    }

    pub(super) fn on_tick(&mut self, store: &ClusterStore, now: Time, out: &mut Vec<Action>) {
        if !self.synced {
            return;
        }
        let pass_tick = self.deadlines.deadline(&Timer::MonitorPass).unwrap_or(now);
        let mut pass_ran = false;
        while let Some(timer) = self.pop_due(now) {
            match timer {
                Timer::MonitorPass => {
                    self.run_monitor_pass(store, now, pass_tick, out);
                    pass_ran = true;
                }
                Timer::EvictionPass => self.eviction_pass(store, now, out),
                // The brakes are recounted after every tick (`decide`).
                Timer::BrakeRelease => {}
                Timer::TaintRetry(name) => {
                    if let Some(e) = self.nodes.get_mut(&name) {
                        e.busy.get_mut().taint_retry_pending = false;
                    }
                    self.pump_taints(store, &name, now, out);
                }
                Timer::NodeGrace(name) | Timer::LeaseReadRetry(name) | Timer::StatusRetry(name) => {
                    self.evaluate(store, &name, now, out);
                    if self.disruption_dirty {
                        self.handle_disruption(store, now, out);
                    }
                }
            }
        }
        // A tick inside the pass's window (the shell woke for something else just before
        // the pass was due): the pass runs now, after what was due before it.
        let window = self
            .monitor_pass_window()
            .filter(|w| w.0 <= now && !pass_ran);
        if let Some((_, tick)) = window {
            self.run_monitor_pass(store, now, tick, out);
        }
    }

    /// The periodic pass, and its next tick: a period after this one's nominal tick when it
    /// runs early, on time or a little late with `monitor_pass_early` set (the grid the shell
    /// aims other wake-ups at), a period after `now` otherwise, and after a pass so late that
    /// the next window would be open already (a new grid rather than two passes in a row).
    fn run_monitor_pass(
        &mut self,
        store: &ClusterStore,
        now: Time,
        nominal: Time,
        out: &mut Vec<Action>,
    ) {
        self.monitor_pass(store, now, out);
        // Pods kept Ready on a node now failing alone (its domain's suspects renewed).
        self.recheck_kept_pods(store, now, out);
        let period = self.settings.node_monitor_period;
        let early = self.settings.monitor_pass_early.min(period);
        let on_grid = nominal + period;
        let next = if !early.is_zero() && now + early < on_grid {
            on_grid
        } else {
            now + period
        };
        self.deadlines.schedule(Timer::MonitorPass, next);
    }

    // ---- node lifecycle ----------------------------------------------------------------------

    /// First sight of a node once synced (upstream: "added" in `classifyNodes`).
    pub(super) fn register(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        self.register_only(store, name, now, out);
        self.evaluate(store, name, now, out);
    }

    /// [`Self::register`] without judging the node (the initial sync judges every node once
    /// all are counted).
    fn register_only(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let lease_renew = store.lease(name).and_then(|l| l.renew_time);
        let eviction_rate = self.settings.node_eviction_rate;
        let (Some(e), Some(node)) = (self.nodes.get_mut(name), store.node(name)) else {
            return;
        };
        e.registered = true;
        e.registered_at = now;
        e.health = NodeHealth::first_seen(node, now);
        e.health.observe_lease(lease_renew, now);
        // The health clock of a node already silent does not restart at a takeover: a standby
        // watched its renewals, so the Lease's renewTime plus the least lag seen from this
        // kubelet is when the last renewal reached us (what the leader's clock counted from).
        // Never later than now; a process that never saw a renewal of it starts from now, as
        // upstream (a renewTime alone, on the kubelet's clock, may be skewed: it only makes
        // the node a suspect, `suspects.rs`).
        if let (Some(renew), Some(lag)) = (lease_renew, e.lease_lag_ms) {
            let heard = (renew.as_unix_millis() as i64).saturating_add(lag).max(0) as u64;
            let heard = Time::from_unix_millis(heard);
            e.health.heard_at(heard);
        }
        e.zone = domain_name(&self.zones, self.settings.domain_key(node));
        // After a restart, pods still Ready on a node already Unknown (not heard from) are
        // marked (kubernetes#135205: upstream leaves them Ready). A node whose kubelet reports
        // Ready=False is alive and manages its pods; upstream does not mark them on a restart,
        // and neither do we. A node that never posted Ready has no pods running yet.
        e.needs_pod_retry = node
            .ready()
            .is_some_and(|c| c.status == ConditionStatus::Unknown);
        out.push(node_event(
            node,
            "RegisteredNode",
            format!(
                "Node {} event: Registered Node {} in Controller",
                node.name, node.name
            ),
        ));
        let zone = e.zone.clone();
        let ready = node.ready().map(|c| c.status);
        self.join_zone(zone.clone(), eviction_rate, now);
        self.update_contribution(store, name, ready, now);
        self.refresh_zone_rate(store, &zone, now);
        if self.taint_based {
            self.found_tainted(store, name, ready, now);
        }
        if self.taint_based {
            // Upstream clears both NoExecute taints of every node it first sees, then its
            // first pass taints a dead node again with a new timeAdded: after each restart or
            // leader change the node is briefly untainted, pending deletions are cancelled and
            // every countdown starts over. A NoExecute taint on a node that is not Ready is the
            // previous leader's decision and still holds: it stays, with its
            // timeAdded (the zone queue's write of a taint already there changes nothing). A
            // Ready node's are stale, as upstream says. Every zone down is judged for all
            // nodes by `handle_disruption`, as for a running instance.
            if ready == Some(ConditionStatus::True) {
                self.mark_node_as_reachable(store, name, now, out);
            }
        } else {
            self.cancel_pod_eviction(name);
        }
        self.arm_grace(store, name, now);
        self.pump_taints(store, name, now, out);
        self.pump_labels(store, name, out);
    }

    /// A node found with the NoExecute taint its Ready calls for (a previous leader's) counts
    /// as processed by its zone's queue, as it would in the leader that tainted it: it is not
    /// queued again (a token of its zone spent on a write that changes nothing, one more in
    /// `evictions_total`, and a node failing after the takeover waiting behind it).
    fn found_tainted(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        ready: Option<ConditionStatus>,
        now: Time,
    ) {
        let kind = match ready {
            Some(ConditionStatus::False) => NoExecuteKind::NotReady,
            Some(ConditionStatus::Unknown) => NoExecuteKind::Unreachable,
            _ => return,
        };
        let (Some(e), Some(node)) = (self.nodes.get(name), store.node(name)) else {
            return;
        };
        if !has_no_execute(node, kind) {
            return;
        }
        if let Some(zone) = self.zones.get_mut(&e.zone) {
            zone.enqueue_processed(name, &node.uid, now);
        }
    }

    /// The node is gone (or re-created): forget its state, queue entries and timers.
    pub(super) fn forget_node(&mut self, node: &Node, out: &mut Vec<Action>) {
        let name = &node.name;
        self.tally_withdraw(name);
        let Some(mut e) = self.nodes.remove(name) else {
            return;
        };
        self.deadlines.forget(name, &mut e.grace);
        if !e.registered {
            return;
        }
        out.push(node_event(
            node,
            "RemovingNode",
            format!(
                "Node {} event: Removing Node {} from Controller",
                node.name, node.name
            ),
        ));
        self.leave_zone(name, &e.zone, e.counted);
    }
}

/// The least lag of a kubelet's renewals seen so far (`renewTime` on its clock, `now` on ours),
/// allowed to grow by 50 ms a renewal so that a clock stepped back is followed.
fn lease_lag(least: Option<i64>, renew: Time, now: Time) -> i64 {
    let sample = now.as_unix_millis() as i64 - renew.as_unix_millis() as i64;
    least.map_or(sample, |least| sample.min(least.saturating_add(50)))
}
