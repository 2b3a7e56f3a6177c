//! The brake (`controller/brake.rs`) as the node lifecycle keeps it: the count of unhealthy nodes
//! per scope (suspects included, as the zone rules count them), the decision
//! lines when a brake engages and releases, and the gate of the zone queues.

use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;

use crate::actions::Action;
use crate::decisions::Decision;
use crate::inputs::Observed;
use crate::model::{ClusterStore, Name};
use crate::settings::NODE_EVICTION_PERIOD;
use crate::time::Time;

use super::{NodeLifecycle, Timer};
use crate::brake::{BrakeChange, BrakeCover, BrakeScope, BrakeState, Brakes};
use crate::pools::pool_of;

impl NodeLifecycle {
    /// Recounts every configured brake at `now`: engages one over its limit at once, releases
    /// one that has stayed within it for `disruption_cooldown` (a decision line each), and arms
    /// the release. Only with a brake configured.
    pub(super) fn update_brakes(&mut self, store: &ClusterStore, now: Time) {
        if !self.synced || (!self.settings.brakes_configured() && self.brakes.scopes.is_empty()) {
            return;
        }
        // Scopes a reload removed are dropped; a brake engaged there is released (its limit is
        // gone), with its line.
        let mut wanted: BTreeMap<BrakeScope, crate::brake::MaxUnhealthy> = BTreeMap::new();
        if let Some(limit) = self.settings.max_unhealthy {
            wanted.insert(BrakeScope::Fleet, limit);
        }
        for p in &self.settings.pools {
            if let Some(limit) = p.max_unhealthy {
                wanted.insert(BrakeScope::Pool(p.name.clone()), limit);
            }
        }
        let decisions = &mut self.decisions;
        let mut removed = false;
        self.brakes.scopes.retain(|k, state| {
            let keep = wanted.contains_key(k);
            removed |= !keep;
            if !keep && state.engaged() {
                decisions.push(Decision::Brake(BrakeChange {
                    scope: k.clone(),
                    engaged: false,
                    unhealthy: state.unhealthy,
                    total: state.total,
                    limit: state.limit,
                }));
            }
            keep
        });
        if removed {
            self.brakes.pool_cover = None;
        }
        // Counted as nodes change (`suspect_tally.rs`), brought to `now`.
        self.tally_advance(store, now);
        self.tally_check(store, now);
        let cooldown = self.settings.disruption_cooldown;
        let mut release_at: Option<Time> = None;
        for (scope, limit) in wanted {
            let (unhealthy, total) = self.tally.brake_count(&scope, &self.settings.pools);
            let state = self
                .brakes
                .scopes
                .entry(scope.clone())
                .or_insert_with(|| BrakeState::new(limit));
            state.limit = limit;
            if state.step(unhealthy, total, now, cooldown) {
                self.brakes.pool_cover = None;
                self.decisions.push(Decision::Brake(BrakeChange {
                    scope,
                    engaged: state.engaged(),
                    unhealthy,
                    total,
                    limit,
                }));
            }
            if let Some(at) = state.releases_at(cooldown) {
                release_at = Some(release_at.map_or(at, |a: Time| a.min(at)));
            }
        }
        match release_at {
            Some(at) => {
                self.deadlines.schedule(Timer::BrakeRelease, at);
            }
            None => {
                self.deadlines.cancel(&Timer::BrakeRelease);
            }
        }
        self.keep_pool_cover(store);
    }

    /// Whether an input may change a brake: node changes and verdicts may engage one; a Lease
    /// renewal only takes a suspect off, so it matters only while one is engaged.
    pub(super) fn brakes_follow(&self, observed: &Observed) -> bool {
        if !self.settings.brakes_configured() && self.brakes.scopes.is_empty() {
            return false;
        }
        match observed {
            Observed::Nothing | Observed::Pod(_) | Observed::PodsGone(_) => false,
            Observed::Lease { .. } => self.brakes.any_engaged(),
            _ => true,
        }
    }

    /// Recounts the brakes before the other machines decide on `observed` (see
    /// `Controllers::handle`): a deletion due at the very instant a mass failure is seen waits.
    pub(super) fn brakes_before(&mut self, store: &ClusterStore, observed: &Observed, now: Time) {
        if self.brakes_follow(observed) {
            self.update_brakes(store, now);
        }
    }

    /// The engaged brake covering the node, if any.
    pub fn brake_covering(
        &self,
        store: &ClusterStore,
        node: &str,
    ) -> Option<(&BrakeScope, &BrakeState)> {
        if !self.brakes.any_engaged() {
            return None;
        }
        let node = store.node(node)?;
        let pool = pool_of(&self.settings.pools, node).map(|p| &p.name);
        self.brakes.covering(pool)
    }

    /// Every brake configured, with its state (for `explain`, the dump and `/metrics`).
    pub fn brakes(&self) -> &Brakes {
        &self.brakes
    }

    /// The nodes whose pod deletions the engaged brakes hold.
    pub(crate) fn brake_cover(&self, store: &ClusterStore) -> BrakeCover {
        if !self.brakes.any_engaged() {
            return BrakeCover::Nothing;
        }
        if self.brakes.fleet_engaged() {
            return BrakeCover::Everything;
        }
        match &self.brakes.pool_cover {
            Some(nodes) => {
                if cfg!(debug_assertions) && self.nodes.len() <= 2_000 {
                    assert_eq!(
                        **nodes,
                        self.pool_cover_walk(store),
                        "the kept pools' cover"
                    );
                }
                BrakeCover::Nodes(nodes.clone())
            }
            None => {
                let walks = &self.tally.walks.pool_cover;
                walks.set(walks.get() + 1);
                BrakeCover::Nodes(Rc::new(self.pool_cover_walk(store)))
            }
        }
    }

    /// The nodes of the pools whose brakes are engaged: a walk of the fleet, taken when a
    /// brake engages or releases and when a node joins, leaves or changes labels
    /// (`pool_cover_changed`), not at every input.
    fn pool_cover_walk(&self, store: &ClusterStore) -> HashSet<Name> {
        store
            .nodes()
            .filter(|n| {
                pool_of(&self.settings.pools, n).is_some_and(|p| {
                    self.brakes
                        .scopes
                        .get(&BrakeScope::Pool(p.name.clone()))
                        .is_some_and(BrakeState::engaged)
                })
            })
            .map(|n| n.name.clone())
            .collect()
    }

    /// A node joined, left or changed labels: the pools' cover is taken again.
    pub(super) fn pool_cover_changed(&mut self) {
        self.brakes.pool_cover = None;
        self.hold_votes_changed();
    }

    /// Keeps the pools' cover while only pool brakes are engaged.
    fn keep_pool_cover(&mut self, store: &ClusterStore) {
        if !self.brakes.any_engaged() || self.brakes.fleet_engaged() {
            self.brakes.pool_cover = None;
        } else if self.brakes.pool_cover.is_none() {
            let walks = &self.tally.walks.pool_cover;
            walks.set(walks.get() + 1);
            self.brakes.pool_cover = Some(Rc::new(self.pool_cover_walk(store)));
        }
    }

    /// Pops the due heads of a zone's queue and hands each to `act`, except that a node an
    /// engaged brake covers goes back, behind the nodes due now (as a braked head it arms no
    /// pass: `arm_eviction_pass`; it is taken when the brake releases). `act` is the tainting or the
    /// legacy eviction.
    pub(super) fn drain_zone_queue(
        &mut self,
        store: &ClusterStore,
        zone: &Name,
        now: Time,
        out: &mut Vec<Action>,
        act: fn(&mut NodeLifecycle, &ClusterStore, &Name, &Name, Time, &mut Vec<Action>),
    ) {
        let taint_based = self.taint_based;
        while let Some(value) = self
            .zones
            .get_mut(zone)
            .and_then(|z| z.take_due(taint_based, now))
        {
            if self.brake_covering(store, &value.value).is_some() {
                // Behind the nodes due now: another pool's node may go first.
                if let Some(z) = self.zones.get_mut(zone) {
                    z.retry(&value.value, now + NODE_EVICTION_PERIOD);
                }
                continue;
            }
            act(self, store, zone, &value.value, now, out);
        }
    }
}
