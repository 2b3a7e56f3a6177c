//! The suspects and the brakes' counts, kept as nodes change and time passes, so that no
//! decision walks the fleet (`suspects.rs` says what a suspect is, `brake.rs` what the brakes
//! count).
//!
//! Whether a node is a suspect depends on the time: a node is one from an instant its state
//! gives (`suspect_from`: its deadline less a `node_monitor_period`, or two renew intervals
//! after its kubelet's last renewal) until that state changes. So each node keeps a
//! [`SuspectMark`]: that instant and what it adds to the counts (its zone's suspects, the
//! brakes' unhealthy nodes and totals). Every change to a node's state is followed by
//! [`NodeLifecycle::tally_refresh`], which takes the node's old share off the counts and
//! adds its new one; time passing is [`NodeLifecycle::tally_advance`], which refreshes the
//! nodes whose instant came.
//!
//! The nodes that are not suspects are kept sorted by their instant (by their slot in the
//! node map, no name held). A node refreshed since with a later instant (a renewal) keeps its
//! old place, which is dropped when it comes (its mark says otherwise); the earliest instant
//! not sorted (`later`) brings the next sort, from the marks, without looking anything up.
//! With kubelets renewing every 10 s and two renew intervals making a suspect, that is one
//! sort per 10 to 20 s of steady time, where the walk per node change it replaces was about
//! 200 a second at 65,000 nodes. Only a reload, the sync or a change to every node at once
//! recomputes every mark.
//!
//! The counts are exactly what the walk gives at the same instant: a query at a time the tally
//! is not at walks instead (`suspect_view`), and test builds check the counts against the walk
//! at every query (`tally_check`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::inputs::Observed;
use crate::model::{ClusterStore, ConditionStatus, Name};
use crate::time::Time;
use crate::zones::Zone;

use super::{NodeEntry, NodeLifecycle, Verdict};
use crate::pools::pool_of;

/// What one node adds to the counts, and when it becomes a suspect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SuspectMark {
    /// From when the node is a suspect (`None`: not by time alone).
    from: Option<Time>,
    /// Counted a suspect (its instant had come when the mark was last taken).
    suspect: bool,
    /// Counted in its zone's `suspects` (registered, counted Ready, a suspect).
    in_zone: bool,
    /// Counted in the brakes' totals (registered, in the store, not in planned maintenance;
    /// only with a brake configured).
    member: bool,
    /// Counted unhealthy by the brakes: Ready not True, or a suspect.
    unhealthy: bool,
    /// Its Node's Ready is True (as the brakes read it).
    ready: bool,
    /// Its pool, an index into `Settings::pools` (`NO_POOL`: none).
    pool: u16,
}

const NO_POOL: u16 = u16::MAX;

impl SuspectMark {
    /// What it adds to the counts.
    fn shares(self) -> (bool, bool, bool, u16) {
        (self.in_zone, self.member, self.unhealthy, self.pool)
    }

    /// This mark's Node part (brake membership, Ready, pool) with the node's instant `from`,
    /// at `now`.
    fn at(self, from: Option<Time>, e: &NodeEntry, now: Time) -> SuspectMark {
        let suspect = from.is_some_and(|t| t <= now);
        SuspectMark {
            from,
            suspect,
            in_zone: e.registered && e.counted == Some(true) && suspect,
            unhealthy: self.member && (!self.ready || suspect),
            ..self
        }
    }
}

impl Default for SuspectMark {
    fn default() -> Self {
        SuspectMark {
            from: None,
            suspect: false,
            in_zone: false,
            member: false,
            unhealthy: false,
            ready: false,
            pool: NO_POOL,
        }
    }
}

/// The counts and the instants to come.
#[derive(Debug, Default)]
pub(super) struct SuspectTally {
    /// The instant the counts hold for; `None`: not built (before the sync, after a reload).
    at: Option<Time>,
    /// The nodes that were not suspects at the last sort, by their slot in the node map,
    /// latest instant first.
    upcoming: Vec<(Time, u32)>,
    /// The earliest instant of a node refreshed since, not in `upcoming`.
    later: Option<Time>,
    /// The brakes' counts: (unhealthy, total) of the fleet, and of each pool by index.
    fleet: (usize, usize),
    pools: Vec<(usize, usize)>,
    /// Walks of the fleet so far, by what took them (the tests count them).
    pub(super) walks: Walks,
}

/// How many times the fleet was walked, by what.
#[derive(Debug, Default)]
pub(crate) struct Walks {
    /// Rebuilds of the tally (every mark recomputed).
    pub(crate) tally: u64,
    /// Sorts of the instants to come, from the marks.
    pub(crate) sorts: u64,
    /// The pools' brake cover taken afresh (`brake.rs`).
    pub(crate) pool_cover: std::cell::Cell<u64>,
    /// Hold votes taken afresh (`partitions.rs`).
    pub(crate) hold_votes: u64,
}

impl SuspectTally {
    /// The brakes' count (unhealthy, total) of `scope`, `None` before the tally is built.
    pub(super) fn brake_count(
        &self,
        scope: &crate::brake::BrakeScope,
        pools: &[crate::pools::Pool],
    ) -> (usize, usize) {
        use crate::brake::BrakeScope;
        match scope {
            BrakeScope::Fleet => self.fleet,
            BrakeScope::Pool(name) => pools
                .iter()
                .position(|p| p.name == *name)
                .and_then(|i| self.pools.get(i).copied())
                .unwrap_or_default(),
        }
    }

    pub(super) fn is_at(&self, now: Time) -> bool {
        self.at == Some(now)
    }

    #[cfg(test)]
    pub(super) fn walks(&self) -> &Walks {
        &self.walks
    }
}

impl NodeLifecycle {
    /// The tally is to be rebuilt at its next use (a reload, the sync, clocks inherited: any
    /// change to many nodes at once).
    pub(super) fn tally_invalidate(&mut self) {
        self.tally.at = None;
    }

    /// The node map was compacted (its slots moved): the instants are sorted again at the
    /// next use.
    pub(super) fn tally_slots_moved(&mut self) {
        self.tally.later = Some(Time::ZERO);
    }

    /// Brings the counts to `now`: the nodes whose instant came become suspects.
    pub(super) fn tally_advance(&mut self, store: &ClusterStore, now: Time) {
        if !self.synced {
            self.tally.at = None;
            return;
        }
        match self.tally.at {
            Some(at) if at <= now => {}
            _ => return self.tally_rebuild(store, now),
        }
        if self.tally.later.is_some_and(|t| t <= now) {
            return self.tally_sort(now);
        }
        while let Some(&(due, slot)) = self.tally.upcoming.last() {
            if due > now {
                break;
            }
            self.tally.upcoming.pop();
            self.tally_came(slot, now);
        }
        self.tally.at = Some(now);
    }

    /// The node at `slot` becomes a suspect if its instant has come (an entry of `upcoming`
    /// whose node was refreshed since says nothing: its mark is what holds).
    fn tally_came(&mut self, slot: u32, now: Time) {
        let Some((_, e)) = self.nodes.at(slot) else {
            return;
        };
        if e.mark.suspect || e.mark.from.is_none_or(|t| t > now) {
            return;
        }
        let new = e.mark.at(e.mark.from, e, now);
        self.tally_set(slot, new, now);
    }

    /// Takes the node's share at `now` after a change to its state (its entry, its Node or its
    /// Lease in the store).
    pub(super) fn tally_refresh(&mut self, store: &ClusterStore, name: &str, now: Time) {
        if self.tally.at.is_none() {
            return;
        }
        self.tally_advance(store, now);
        let Some(slot) = self.nodes.slot(name) else {
            return;
        };
        if let Some((_, e)) = self.nodes.at(slot) {
            let new = self.mark_of(store, name, e, now);
            self.tally_set(slot, new, now);
        }
    }

    /// [`Self::tally_refresh`] after a renewal: only the node's instant can have changed (its
    /// Node did not), so its grace is the one kept by its last arming when there is one, and
    /// the Node is not looked up.
    pub(super) fn tally_renewed(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        slot: u32,
        grace: Option<Duration>,
        now: Time,
    ) {
        if self.tally.at.is_none() {
            return;
        }
        self.tally_advance(store, now);
        let Some((_, e)) = self.nodes.at(slot) else {
            return;
        };
        // An entry is here only while its node is in the store (`forget_node`).
        let new = match grace {
            Some(grace) if e.busy.get().verdict == Verdict::Idle => {
                let lease_seconds = store.lease(name).and_then(|l| l.duration_seconds);
                let from = Some(self.suspect_from_with(e, grace, lease_seconds));
                e.mark.at(from, e, now)
            }
            _ => self.mark_of(store, name, e, now),
        };
        self.tally_set(slot, new, now);
    }

    /// Takes the node's share off the counts (before it leaves its zone or the machine).
    pub(super) fn tally_withdraw(&mut self, name: &str) {
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let old = std::mem::take(&mut e.mark);
        let zone = e.zone.clone();
        if self.tally.at.is_some() {
            self.tally_count(&zone, old, false);
        }
    }

    /// Brings the tally to what `World::apply` just changed at `now` (before any machine
    /// decides on it: `Controllers::handle`).
    pub(crate) fn tally_observed(&mut self, store: &ClusterStore, observed: &Observed, now: Time) {
        match observed {
            Observed::Node { name, before } => {
                let joined_or_relabelled = before
                    .as_ref()
                    .is_none_or(|b| store.node(name).is_none_or(|n| n.labels != b.labels));
                if joined_or_relabelled {
                    self.pool_cover_changed();
                }
                self.tally_refresh(store, name, now);
            }
            Observed::NodesGone(nodes) => {
                self.pool_cover_changed();
                for node in nodes {
                    self.tally_refresh(store, &node.name, now);
                }
            }
            // Before the node lifecycle takes the renewal (`on_lease_changed` refreshes the
            // node then), only the brakes read the tally, and only while one is engaged.
            Observed::Lease {
                name,
                node: Some(key),
                ..
            } if self.brakes.any_engaged() => {
                let Some((slot, e)) = self.nodes.by_key(*key) else {
                    return self.tally_advance(store, now);
                };
                let grace = e.grace_memo.get();
                self.tally_renewed(store, name, slot, grace, now);
            }
            _ => self.tally_advance(store, now),
        }
    }

    /// The tally's suspects of `zone` (with [`SuspectTally::is_at`] the query's instant).
    pub(super) fn tally_zone_suspects(&self, zone: &Zone) -> usize {
        zone.counts.suspects()
    }

    /// Puts the node's new mark in place of its old one, in the counts too.
    fn tally_set(&mut self, slot: u32, new: SuspectMark, now: Time) {
        let Some(e) = self.nodes.at_mut(slot) else {
            return;
        };
        let old = std::mem::replace(&mut e.mark, new);
        if old.shares() != new.shares() {
            let zone = e.zone.clone();
            self.tally_count(&zone, old, false);
            self.tally_count(&zone, new, true);
        }
        if let Some(from) = new.from.filter(|t| *t > now && new != old) {
            self.tally.later = Some(self.tally.later.map_or(from, |t| t.min(from)));
        }
    }

    /// Adds (or takes off) a mark's share.
    fn tally_count(&mut self, zone: &Name, mark: SuspectMark, add: bool) {
        let step = |n: &mut usize, on: bool| {
            if on {
                *n = if add { *n + 1 } else { n.saturating_sub(1) };
            }
        };
        if mark.in_zone
            && let Some(z) = self.zones.get_mut(zone)
        {
            z.counts.step_suspects(add);
        }
        if mark.member {
            step(&mut self.tally.fleet.0, mark.unhealthy);
            step(&mut self.tally.fleet.1, true);
            if let Some(p) = self.tally.pools.get_mut(usize::from(mark.pool)) {
                step(&mut p.0, mark.unhealthy);
                step(&mut p.1, true);
            }
        }
    }

    /// Sorts the instants to come again, from the marks (every one current): the nodes whose
    /// instant has come become suspects.
    fn tally_sort(&mut self, now: Time) {
        let mut upcoming = std::mem::take(&mut self.tally.upcoming);
        upcoming.clear();
        let mut came = Vec::new();
        for (slot, _, e) in self.nodes.slots() {
            match e.mark.from {
                Some(_) if e.mark.suspect => {}
                Some(t) if t <= now => came.push(slot),
                Some(t) => upcoming.push((t, slot)),
                None => {}
            }
        }
        upcoming.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        self.tally.upcoming = upcoming;
        self.tally.later = None;
        self.tally.walks.sorts += 1;
        for slot in came {
            self.tally_came(slot, now);
        }
        self.tally.at = Some(now);
    }

    /// Walks the fleet: every node's mark and the counts afresh at `now`.
    fn tally_rebuild(&mut self, store: &ClusterStore, now: Time) {
        for z in self.zones.values_mut() {
            z.counts.clear_suspects();
        }
        let tally = &mut self.tally;
        tally.fleet = (0, 0);
        tally.pools.clear();
        tally.pools.resize(self.settings.pools.len(), (0, 0));
        tally.walks.tally += 1;
        let marks: Vec<(u32, SuspectMark)> = self
            .nodes
            .slots()
            .map(|(slot, name, e)| (slot, self.mark_of(store, name, e, now)))
            .collect();
        for (slot, mark) in marks {
            let Some(e) = self.nodes.at_mut(slot) else {
                continue;
            };
            e.mark = mark;
            let zone = e.zone.clone();
            self.tally_count(&zone, mark, true);
        }
        self.tally_sort(now);
    }

    /// The node's mark at `now`, as the walks would count it.
    fn mark_of(&self, store: &ClusterStore, name: &str, e: &NodeEntry, now: Time) -> SuspectMark {
        let mut node_part = SuspectMark::default();
        if e.registered
            && self.settings.brakes_configured()
            && let Some(node) = store.node(name)
            && !self.settings.in_planned_maintenance(node)
        {
            node_part.member = true;
            node_part.ready = node.ready().map(|c| c.status) == Some(ConditionStatus::True);
            node_part.pool = pool_of(&self.settings.pools, node)
                .and_then(|p| self.settings.pools.iter().position(|q| std::ptr::eq(p, q)))
                .and_then(|i| u16::try_from(i).ok())
                .unwrap_or(NO_POOL);
        }
        node_part.at(self.suspect_from(store, name, e), e, now)
    }

    /// Test builds: the counts are what a walk of the fleet gives at `now`.
    pub(super) fn tally_check(&self, store: &ClusterStore, now: Time) {
        if !cfg!(debug_assertions) || !self.tally.is_at(now) || self.nodes.len() > 2_000 {
            return;
        }
        let mut fleet = (0, 0);
        let mut pools = vec![(0usize, 0usize); self.settings.pools.len()];
        let mut zones: BTreeMap<&Name, usize> = BTreeMap::new();
        for (name, e) in self.nodes.iter() {
            let suspect = self.is_suspect(store, name, e, now);
            if e.registered && e.counted == Some(true) && suspect {
                *zones.entry(&e.zone).or_default() += 1;
            }
            if !e.registered || !self.settings.brakes_configured() {
                continue;
            }
            let Some(node) = store.node(name) else {
                continue;
            };
            if self.settings.in_planned_maintenance(node) {
                continue;
            }
            let ready = node.ready().map(|c| c.status) == Some(ConditionStatus::True);
            let unhealthy = usize::from(!ready || suspect);
            fleet.0 += unhealthy;
            fleet.1 += 1;
            if let Some(i) = pool_of(&self.settings.pools, node)
                .and_then(|p| self.settings.pools.iter().position(|q| std::ptr::eq(p, q)))
            {
                pools[i].0 += unhealthy;
                pools[i].1 += 1;
            }
        }
        for (key, z) in self.zones.iter() {
            assert_eq!(
                z.counts.suspects(),
                zones.get(key).copied().unwrap_or(0),
                "the tally's suspects of zone {key:?} at {now:?} are the walk's"
            );
        }
        assert_eq!(
            self.tally.fleet, fleet,
            "the fleet's brake count at {now:?}"
        );
        assert_eq!(
            self.tally.pools, pools,
            "the pools' brake counts at {now:?}"
        );
    }
}
