//! Zones and their disruption state (docs/upstream.md, "Zones", upstream `ComputeZoneState`,
//! `setLimiterInZone`).
//!
//! Owns, per zone ([`Zone`]): how its nodes count, its state, what stops its queue (cooldown,
//! hold) and the queue itself, each changed only through the zone's methods; and the table of
//! zones ([`Zones`]), which makes a zone as its first node joins and keeps its eviction count
//! after its last leaves. The node lifecycle decides when; this file keeps the rules of what a
//! change may do (a held or cooling zone gives no node out of its queue).

use crate::model::Name;
#[cfg(test)]
use crate::model::Node;
use crate::time::Rate;
use crate::time::Time;

use std::collections::BTreeMap;

use super::rate_limited_queue::{RateLimitedTimedQueue, TimedValue};
use super::settings::Settings;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ZoneState {
    Initial,
    Normal,
    FullDisruption,
    PartialDisruption,
}

impl ZoneState {
    pub const ALL: [ZoneState; 4] = [
        ZoneState::Initial,
        ZoneState::Normal,
        ZoneState::FullDisruption,
        ZoneState::PartialDisruption,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ZoneState::Initial => "Initial",
            ZoneState::Normal => "Normal",
            ZoneState::FullDisruption => "FullDisruption",
            ZoneState::PartialDisruption => "PartialDisruption",
        }
    }
}

/// The state of a zone with `ready` Ready nodes out of `size` (nodes without a Ready condition
/// count as not ready).
pub(crate) fn compute_zone_state(size: usize, ready: usize, unhealthy_threshold: f64) -> ZoneState {
    let not_ready = size.saturating_sub(ready);
    if ready == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2 && not_ready as f64 / size as f64 >= unhealthy_threshold {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    }
}

/// The tainting rate of a zone in `state` with `size` nodes (`None`: leave the limiter alone,
/// as upstream does for `Initial`).
#[cfg(test)]
pub(crate) fn zone_rate(state: ZoneState, size: usize, settings: &Settings) -> Option<Rate> {
    let rates = (
        settings.node_eviction_rate,
        settings.secondary_node_eviction_rate,
    );
    zone_rate_with(state, size, settings, rates)
}

/// [`zone_rate`] with the zone's (healthy, secondary) rates, which its pools may lower.
pub(crate) fn zone_rate_with(
    state: ZoneState,
    size: usize,
    settings: &Settings,
    (healthy, secondary): (Rate, Rate),
) -> Option<Rate> {
    match state {
        ZoneState::Normal | ZoneState::FullDisruption => Some(healthy),
        ZoneState::PartialDisruption => {
            if size > settings.large_cluster_size_threshold as usize {
                Some(secondary)
            } else {
                Some(Rate::NEVER)
            }
        }
        ZoneState::Initial => None,
    }
}

/// `node.kubernetes.io/exclude-disruption` present (any value).
#[cfg(test)]
pub(crate) fn is_node_excluded_from_disruption_checks(node: &Node) -> bool {
    node.excluded_from_disruption()
}

/// A zone: how its nodes count ([`ZoneCounts`]), its state once computed, what stops its
/// queue ([`ZoneHold`]: the cooldown after a full disruption, the hold) and the queue itself
/// (NoExecute tainting, or pod eviction in legacy mode) with what it tainted.
///
/// The counts and the hold keep their fields to themselves: the disruption's input changes
/// only as a node joins, leaves or counts anew, and the hold only through its transitions.
#[derive(Debug)]
pub(crate) struct Zone {
    pub(crate) key: Name,
    pub(crate) counts: ZoneCounts,
    /// `None` until the first disruption pass sees the zone (upstream: no entry in zoneStates).
    pub(crate) state: Option<ZoneState>,
    pub(crate) hold: ZoneHold,
    /// Its nodes to taint (or, legacy, to evict), paced by its rate: read through
    /// [`Zone::queue`], changed only through the transitions below.
    queue: RateLimitedTimedQueue,
    /// `node_collector_evictions_total{zone}`: taints applied (or, legacy, nodes evicted).
    evictions_total: u64,
    /// Its NoExecute decisions wait for suspects (`node_lifecycle/suspects.rs`): the wait's
    /// start is logged once.
    pub(crate) waiting_for_suspects: bool,
}

impl Zone {
    /// A zone seen for the first time: no member yet, state unknown, a full bucket at `rate`.
    fn new(key: Name, evictions_total: u64, rate: Rate, now: Time) -> Zone {
        Zone {
            key,
            counts: ZoneCounts::default(),
            state: None,
            hold: ZoneHold::default(),
            queue: RateLimitedTimedQueue::new(rate, now),
            evictions_total,
            waiting_for_suspects: false,
        }
    }

    /// Nothing is given out of its queue now: a hold, or (`taint_based`) the cooldown after a
    /// full disruption, which the legacy eviction does not have.
    pub(crate) fn stopped(&self, taint_based: bool, now: Time) -> bool {
        self.hold.held() || (taint_based && self.hold.in_cooldown(now))
    }

    /// Takes its new state, keeping the hold's start of full disruption in line; the state
    /// it had.
    pub(crate) fn enter(&mut self, state: ZoneState, now: Time) -> Option<ZoneState> {
        self.hold.note_state(state, now);
        self.state.replace(state)
    }

    /// Its queue, to read: the head and its due time, who is in it, the rate and tokens.
    pub(crate) fn queue(&self) -> &RateLimitedTimedQueue {
        &self.queue
    }

    /// `node_collector_evictions_total{zone}`.
    pub(crate) fn evictions_total(&self) -> u64 {
        self.evictions_total
    }

    /// A taint from its queue landed (or, legacy, a node's pods were evicted).
    pub(crate) fn count_eviction(&mut self) {
        self.evictions_total += 1;
    }

    /// Upstream `markNodeForTainting`: a node whose NoExecute taint is missing (`tainted`
    /// false) goes through the queue again even if it was processed; one still waiting keeps
    /// its place; a tainted one is queued only if it is not in the set.
    pub(crate) fn mark_for_tainting(&mut self, name: &Name, uid: &Name, tainted: bool, now: Time) {
        if !tainted && !self.queue.is_queued(name) {
            self.queue.remove(name);
        }
        self.queue.add(name, uid, now);
    }

    /// Queued, due now, unless in the set (waiting, or processed and not forgotten since).
    pub(crate) fn enqueue(&mut self, name: &Name, uid: &Name, now: Time) {
        self.queue.add(name, uid, now);
    }

    /// In the set as processed: a node a previous leader tainted, found at a takeover, is not
    /// queued again.
    pub(crate) fn enqueue_processed(&mut self, name: &Name, uid: &Name, now: Time) {
        self.queue.add_processed(name, uid, now);
    }

    /// Out of the queue and its set: reachable again, gone from the zone, or its eviction
    /// cancelled.
    pub(crate) fn forget(&mut self, name: &str) {
        self.queue.remove(name);
    }

    /// The next node due, one token taken (even when the head is not due, as upstream's `Try`
    /// takes one). Nothing, and no token taken, while the zone is [`Zone::stopped`].
    pub(crate) fn take_due(&mut self, taint_based: bool, now: Time) -> Option<TimedValue> {
        if self.stopped(taint_based, now) {
            return None;
        }
        self.queue.pop_due(now)
    }

    /// A node taken from the queue goes back, due at `at` (its write failed or must wait);
    /// ignored if it was forgotten meanwhile.
    pub(crate) fn retry(&mut self, name: &Name, at: Time) {
        self.queue.retry_at(name, at);
    }

    /// The rate its state gives (upstream `setLimiterInZone`): the bucket is kept at the same
    /// rate, new at another.
    pub(crate) fn set_rate(&mut self, rate: Rate, now: Time) {
        self.queue.swap_limiter(rate, now);
    }
}

/// The zones by key, in key order, and the eviction counts of zones that lost their last node
/// (a counter outlives its zone: one that comes back resumes it).
#[derive(Debug, Default)]
pub(crate) struct Zones {
    by_key: BTreeMap<Name, Zone>,
    past_evictions: BTreeMap<Name, u64>,
}

impl Zones {
    pub(crate) fn get(&self, key: &str) -> Option<&Zone> {
        self.by_key.get(key)
    }

    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut Zone> {
        self.by_key.get_mut(key)
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &Name> {
        self.by_key.keys()
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Zone> {
        self.by_key.values()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&Name, &mut Zone)> {
        self.by_key.iter_mut()
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut Zone> {
        self.by_key.values_mut()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Name, &Zone)> {
        self.by_key.iter()
    }

    /// One more member in `key`, the zone made on first use (state unknown, a full bucket at
    /// `rate`, its past count resumed).
    pub(crate) fn join(&mut self, key: Name, rate: Rate, now: Time) -> &mut Zone {
        let past_evictions = &mut self.past_evictions;
        let zone = self.by_key.entry(key.clone()).or_insert_with(|| {
            let evictions = past_evictions.remove(&key).unwrap_or(0);
            Zone::new(key, evictions, rate, now)
        });
        zone.counts.join();
        // Its hold's vote counted the members it had.
        zone.hold.forget_vote();
        zone
    }

    /// `name` leaves `key` (`counted`: how it counted there). Whether that was the zone's last
    /// member, which takes the zone with it; `None` when there is no such zone.
    pub(crate) fn leave(&mut self, name: &str, key: &Name, counted: Option<bool>) -> Option<bool> {
        let zone = self.by_key.get_mut(key)?;
        zone.forget(name);
        zone.hold.forget_vote();
        if !zone.counts.leave(counted) {
            return Some(false);
        }
        if let Some(gone) = self.by_key.remove(key)
            && gone.evictions_total > 0
        {
            self.past_evictions
                .insert(key.clone(), gone.evictions_total);
        }
        Some(true)
    }
}

/// How a zone's nodes count toward its state: its members (excluded ones too: they are
/// tainted all the same), the non-excluded ones (upstream's zone size), the Ready ones of
/// those, and of them the suspects (`node_lifecycle/suspect_tally.rs`, kept while the node
/// lifecycle is synced).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ZoneCounts {
    members: usize,
    size: usize,
    ready: usize,
    suspects: usize,
}

impl ZoneCounts {
    /// Non-excluded nodes (upstream `zone_size`).
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Non-excluded nodes whose current Ready is True.
    pub(crate) fn ready(&self) -> usize {
        self.ready
    }

    pub(crate) fn suspects(&self) -> usize {
        self.suspects
    }

    pub(crate) fn unhealthy(&self) -> usize {
        self.size.saturating_sub(self.ready)
    }

    /// One more member, not counted yet.
    pub(crate) fn join(&mut self) {
        self.members += 1;
    }

    /// A member leaves; `counted` is how it counted (`Some(ready)`), if it did. Whether it
    /// was the last.
    pub(crate) fn leave(&mut self, counted: Option<bool>) -> bool {
        self.members = self.members.saturating_sub(1);
        self.recount(counted, None);
        self.members == 0
    }

    /// A member counts anew: `old` and `new` as in [`ZoneCounts::leave`].
    pub(crate) fn recount(&mut self, old: Option<bool>, new: Option<bool>) {
        if let Some(ready) = old {
            self.size = self.size.saturating_sub(1);
            self.ready = self.ready.saturating_sub(usize::from(ready));
        }
        if let Some(ready) = new {
            self.size += 1;
            self.ready += usize::from(ready);
        }
    }

    /// One suspect more (`add`) or fewer.
    pub(crate) fn step_suspects(&mut self, add: bool) {
        self.suspects = if add {
            self.suspects + 1
        } else {
            self.suspects.saturating_sub(1)
        };
    }

    /// The tally counts its suspects afresh.
    pub(crate) fn clear_suspects(&mut self) {
        self.suspects = 0;
    }
}

/// What stops a zone's queue besides its rate (`node_lifecycle/partitions.rs` decides the
/// hold; `node_lifecycle/disruption.rs` the cooldown): the cooldown that follows the end of a
/// full disruption, and the hold (`full_disruption = "hold"`) with what it counts from.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct ZoneHold {
    /// Since when the zone has been fully disrupted (`hold_max` counts from there).
    full_since: Option<Time>,
    /// Held: no NoExecute taint nor eviction from its queue.
    held: bool,
    /// When the hold ends (`hold_max`); `None` with the domain's recovery only.
    until: Option<Time>,
    /// What its members say of a hold (`Settings::domain_hold`), kept until a node joins,
    /// leaves or changes labels (`None`: to be taken again).
    vote: Option<Option<crate::partitions::HoldFor>>,
    /// End of the disruption cooldown: no NoExecute taint is added here before it.
    cooldown_until: Option<Time>,
}

impl ZoneHold {
    /// Within the cooldown that follows the end of a full disruption (`disruption_cooldown`):
    /// the kubelets are still catching up, so silence is not yet evidence. The queue keeps its
    /// nodes; those that report in meanwhile leave it and are never tainted.
    pub(crate) fn in_cooldown(&self, now: Time) -> bool {
        self.cooldown_until.is_some_and(|until| now < until)
    }

    /// The cooldown's end, once set (it may be over).
    pub(crate) fn cooldown_until(&self) -> Option<Time> {
        self.cooldown_until
    }

    /// Starts the cooldown (nothing with a zero `cooldown`, the upstream behaviour).
    pub(crate) fn start_cooldown(&mut self, cooldown: std::time::Duration, now: Time) {
        if !cooldown.is_zero() {
            self.cooldown_until = Some(now + cooldown);
        }
    }

    /// A previous leader's cooldown: it ends no earlier than `until`.
    pub(crate) fn inherit_cooldown(&mut self, until: Time) {
        self.cooldown_until = Some(self.cooldown_until.map_or(until, |own| own.max(until)));
    }

    pub(crate) fn held(&self) -> bool {
        self.held
    }

    pub(crate) fn until(&self) -> Option<Time> {
        self.until
    }

    /// Takes the hold `hold` (`None`: not held; else when it ends). False when it is the
    /// hold already in place.
    pub(crate) fn set(&mut self, hold: Option<Option<Time>>) -> bool {
        if self.held == hold.is_some() && self.until == hold.flatten() {
            return false;
        }
        self.held = hold.is_some();
        self.until = hold.flatten();
        true
    }

    pub(crate) fn full_since(&self) -> Option<Time> {
        self.full_since
    }

    /// Keeps the start of full disruption in line with the zone's new state.
    pub(crate) fn note_state(&mut self, state: ZoneState, now: Time) {
        if state == ZoneState::FullDisruption {
            self.full_since.get_or_insert(now);
        } else {
            self.full_since = None;
        }
    }

    /// The zone counts no node any more: its disruption is forgotten.
    pub(crate) fn forget_full(&mut self) {
        self.full_since = None;
    }

    /// A previous leader saw it fully disrupted since `since`: the earlier start holds.
    pub(crate) fn inherit_full_since(&mut self, since: Time) {
        if self.full_since.is_none_or(|own| since < own) {
            self.full_since = Some(since);
        }
    }

    /// The members' vote kept (`None`: to be taken).
    pub(crate) fn vote(&self) -> Option<Option<crate::partitions::HoldFor>> {
        self.vote
    }

    pub(crate) fn keep_vote(&mut self, vote: Option<crate::partitions::HoldFor>) {
        self.vote = Some(vote);
    }

    /// A node joined, left or changed labels: the vote is taken again when next needed.
    pub(crate) fn forget_vote(&mut self) {
        self.vote = None;
    }
}

/// How the zone key reads in logs and dumps: `region/zone`, without the NUL separator.
pub fn display_zone(key: &str) -> String {
    if key.is_empty() {
        return String::from("(none)");
    }
    key.replacen(":\x00:", "/", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_zone_state_thresholds() {
        // Everything down: full; 2 down of 5: never partial (needs > 2); 3 of 5 >= 0.55.
        assert_eq!(compute_zone_state(4, 0, 0.55), ZoneState::FullDisruption);
        assert_eq!(compute_zone_state(5, 3, 0.55), ZoneState::Normal);
        assert_eq!(compute_zone_state(5, 2, 0.55), ZoneState::PartialDisruption);
        assert_eq!(compute_zone_state(4, 1, 0.55), ZoneState::PartialDisruption);
        assert_eq!(compute_zone_state(10, 6, 0.55), ZoneState::Normal);
        assert_eq!(compute_zone_state(0, 0, 0.55), ZoneState::Normal);
    }

    #[test]
    fn partial_disruption_rate_depends_on_zone_size() {
        let s = Settings::default();
        assert_eq!(
            zone_rate(ZoneState::PartialDisruption, 50, &s),
            Some(Rate::NEVER)
        );
        assert_eq!(
            zone_rate(ZoneState::PartialDisruption, 51, &s),
            Some(s.secondary_node_eviction_rate)
        );
        assert_eq!(
            zone_rate(ZoneState::FullDisruption, 3, &s),
            Some(s.node_eviction_rate)
        );
        assert_eq!(zone_rate(ZoneState::Initial, 3, &s), None);
    }
}
