//! Zones: membership, each zone's contribution to the disruption count, and the zone state
//! transitions that set the tainting rate (upstream's `handleDisruption`).

use std::collections::BTreeMap;

use crate::actions::Action;
use crate::decisions::Decision;
use crate::model::{ClusterStore, ConditionStatus, Name};
use crate::time::{Rate, Time};
use crate::zones::{ZoneState, compute_zone_state, zone_rate_with};

use super::NodeLifecycle;
use super::entries::Entries;

impl NodeLifecycle {
    pub(super) fn leave_zone(&mut self, name: &str, zone_key: &Name, counted: Option<bool>) {
        if let Some(last) = self.zones.leave(name, zone_key, counted)
            && (last || counted.is_some())
        {
            self.disruption_dirty = true;
        }
    }

    pub(super) fn move_zone(&mut self, name: &Name, zone: Name, now: Time) {
        let eviction_rate = self.settings.node_eviction_rate;
        // Its share of the counts goes with it (`update_contribution` takes the new one).
        self.tally_withdraw(name);
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let (old, counted) = (std::mem::replace(&mut e.zone, zone.clone()), e.counted);
        e.counted = None;
        self.leave_zone(name, &old, counted);
        self.join_zone(zone, eviction_rate, now);
    }

    /// Counts one more member in `zone`, creating the zone (state Initial, a full bucket at the
    /// healthy rate) on first use.
    pub(super) fn join_zone(&mut self, zone: Name, eviction_rate: Rate, now: Time) {
        self.zones.join(zone, eviction_rate, now);
    }

    /// Keeps the zone's counts in line with the node's current Ready and exclusion label.
    /// A node in planned maintenance (`Settings::in_planned_maintenance`) is left out as an
    /// excluded one is: its outage is no failure of its zone.
    ///
    /// A node that joined less than a pass ago without a Ready condition is not counted yet: a
    /// kubelet registers its node and posts its status milliseconds apart, a transient
    /// upstream's pass practically never sees. Counted at once, it turned a new one-node zone
    /// fully disrupted and back, and that swap drained the zone's new limiter (a later
    /// `Ready=False` was tainted 3.9 s after the report, where upstream took 1.2 s). The
    /// periodic pass counts it once it is older (nodes without Ready are always evaluated).
    /// The nodes of the initial sync are counted at once, as upstream's first pass sees them.
    pub(super) fn update_contribution(
        &mut self,
        store: &ClusterStore,
        name: &str,
        current: Option<ConditionStatus>,
        now: Time,
    ) {
        self.count_in_zone(store, name, current, now);
        // Whatever changed in the node, its share of the suspects and brakes with it.
        self.tally_refresh(store, name, now);
    }

    fn count_in_zone(
        &mut self,
        store: &ClusterStore,
        name: &str,
        current: Option<ConditionStatus>,
        now: Time,
    ) {
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let Some(node) = store.node(name) else {
            return;
        };
        let newborn = current.is_none()
            && e.joined_live_at
                .is_some_and(|at| now < at + self.settings.node_monitor_period);
        let new = if node.excluded_from_disruption()
            || self.settings.in_planned_maintenance(node)
            || newborn
        {
            None
        } else {
            Some(current == Some(ConditionStatus::True))
        };
        if e.counted == new {
            return;
        }
        let old = std::mem::replace(&mut e.counted, new);
        let Some(zone) = self.zones.get_mut(&e.zone) else {
            return;
        };
        zone.counts.recount(old, new);
        self.disruption_dirty = true;
    }

    pub(super) fn all_zones_fully_disrupted(&self) -> bool {
        let mut any = false;
        for z in self.zones.values() {
            if let Some(state) = z.state {
                any = true;
                if state != ZoneState::FullDisruption {
                    return false;
                }
            }
        }
        any
    }

    pub(super) fn set_limiter_in_zone(&mut self, store: &ClusterStore, key: &Name, now: Time) {
        let rates = self.settings.zone_rates(
            self.nodes
                .iter()
                .filter(|(_, e)| e.registered && e.zone == *key)
                .filter_map(|(n, _)| store.node(n)),
        );
        let Some(z) = self.zones.get_mut(key) else {
            return;
        };
        let Some(state) = z.state else {
            return;
        };
        if let Some(rate) = zone_rate_with(state, z.counts.size(), &self.settings, rates) {
            z.set_rate(rate, now);
        }
    }

    /// Upstream `handleDisruption`.
    pub(super) fn handle_disruption(
        &mut self,
        store: &ClusterStore,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        self.disruption_dirty = false;
        let threshold = self.settings.unhealthy_zone_threshold;
        let mut new_states: BTreeMap<Name, ZoneState> = BTreeMap::new();
        for (key, z) in self.zones.iter_mut() {
            let counts = z.counts;
            if counts.size() == 0 {
                // No node counted any more: the zone's state is forgotten.
                z.state = None;
                z.hold.forget_full();
                continue;
            }
            let state = compute_zone_state(counts.size(), counts.ready(), threshold);
            new_states.insert(key.clone(), state);
            if z.state.is_none() {
                z.state = Some(ZoneState::Initial);
            }
        }
        let all_are_full = new_states.values().all(|s| *s == ZoneState::FullDisruption);
        let all_were_full = self
            .zones
            .values()
            .filter_map(|z| z.state)
            .all(|s| s == ZoneState::FullDisruption);
        if all_are_full && all_were_full {
            return;
        }
        let registered = |nodes: &Entries| -> Vec<Name> {
            nodes
                .iter()
                .filter(|(_, e)| e.registered)
                .map(|(n, _)| n.clone())
                .collect()
        };
        if all_are_full {
            let names = registered(&self.nodes);
            // Entering "master disruption mode": every zone is down, most likely our own
            // view of the cluster is broken. Stop everything.
            for name in &names {
                if self.taint_based {
                    self.mark_node_as_reachable(store, name, now, out);
                } else {
                    self.cancel_pod_eviction(name);
                }
            }
            for z in self.zones.values_mut().filter(|z| z.state.is_some()) {
                z.set_rate(Rate::NEVER, now);
                z.enter(ZoneState::FullDisruption, now);
            }
            self.decisions.push(Decision::AllZonesDown {
                entered: true,
                zones: new_states.len(),
            });
            return;
        }
        if all_were_full {
            self.decisions.push(Decision::AllZonesDown {
                entered: false,
                zones: new_states.len(),
            });
            let names = registered(&self.nodes);
            // Exiting: every node gets a fresh grace period (upstream behaviour).
            for name in &names {
                if let Some(e) = self.nodes.get_mut(name) {
                    e.health.restart_clock(now);
                }
                self.arm_grace(store, name, now);
            }
            self.tally_invalidate();
            for (key, state) in &new_states {
                let mut from = None;
                if let Some(z) = self.zones.get_mut(key) {
                    from = z.enter(*state, now);
                    z.hold
                        .start_cooldown(self.settings.disruption_cooldown, now);
                }
                self.set_limiter_in_zone(store, key, now);
                self.zone_state_decision(key, from);
            }
            self.recheck_kept_pods(store, now, out);
            return;
        }
        for (key, state) in &new_states {
            let Some(z) = self.zones.get_mut(key) else {
                continue;
            };
            if z.state == Some(*state) {
                continue;
            }
            if z.state == Some(ZoneState::FullDisruption) {
                z.hold
                    .start_cooldown(self.settings.disruption_cooldown, now);
            }
            let from = z.enter(*state, now);
            self.set_limiter_in_zone(store, key, now);
            self.zone_state_decision(key, from);
        }
        // A domain's state changed: pods kept Ready may now be on a node failing alone.
        self.recheck_kept_pods(store, now, out);
    }

    pub(super) fn zone_state_decision(&mut self, key: &Name, from: Option<ZoneState>) {
        let Some(z) = self.zones.get(key) else {
            return;
        };
        let Some(to) = z.state else {
            return;
        };
        if from == Some(to) {
            return;
        }
        self.decisions.push(Decision::ZoneState {
            zone: key.clone(),
            from,
            to,
            size: z.counts.size(),
            not_ready: z.counts.unhealthy(),
            rate: z.queue().rate(),
        });
    }

    // ---- pods (docs/upstream.md, "Pods NotReady") -----------------------------------------------
}

impl NodeLifecycle {
    /// A pool's rate override may change a zone's rate when a node joins, leaves or changes
    /// pools; nothing to do without such overrides, or while every zone is down.
    pub(super) fn refresh_zone_rate(&mut self, store: &ClusterStore, zone: &Name, now: Time) {
        if self
            .settings
            .pools
            .iter()
            .all(|p| p.node_eviction_rate.is_none() && p.secondary_node_eviction_rate.is_none())
            || self.all_zones_fully_disrupted()
        {
            return;
        }
        self.set_limiter_in_zone(store, zone, now);
    }
}
