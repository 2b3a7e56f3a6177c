//! Which rule of ours explains a divergence: what the controllers say of the node when it is
//! classed ([`NodeFacts`]), and what our own decisions said of its domain meanwhile
//! ([`Notes`]: a domain held, a domain waiting for its suspects, a brake engaged, pods kept
//! Ready).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::controller::Decision;
use crate::time::Time;

use super::{Class, ShadowKind, Subject};

/// The rule names a divergence can carry.
pub(crate) mod rule {
    pub(crate) const SUSPECTS: &str = "suspects";
    pub(crate) const HOLD: &str = "hold";
    pub(crate) const PODS_KEPT_READY: &str = "hold (pods kept Ready)";
    pub(crate) const BRAKE: &str = "brake";
    pub(crate) const AUTONOMY: &str = "autonomy";
    pub(crate) const POOL_TIMING: &str = "pool timing";
    pub(crate) const STALE_CACHE: &str = "stale-cache hold";
    pub(crate) const RESTART: &str = "restart kept invisible";
    pub(crate) const PAUSE: &str = "pause";
}

/// What the controllers say of a node at the moment a divergence about it is classed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeFacts {
    /// Its zone (as our decisions name it), if known.
    pub(crate) zone: Option<String>,
    /// Edge autonomy in force for it.
    pub(crate) autonomous: bool,
    /// It belongs to a `[[pool]]` with timing of its own.
    pub(crate) pool_timing: bool,
    /// The caches do not follow the server (or just came back): tainting and deletions wait.
    pub(crate) caches_held: bool,
    /// A fleet pause of tainting is in force.
    pub(crate) paused: bool,
    /// Its zone's NoExecute decisions wait for suspects.
    pub(crate) waits_for_suspects: bool,
    /// A brake is engaged.
    pub(crate) brake_engaged: bool,
}

/// What our decisions said lately, by zone and node (bounded: forgotten after a while).
#[derive(Clone, Debug, Default)]
pub(crate) struct Notes {
    /// Zones whose NoExecute decisions waited for suspects, and when last.
    suspects: BTreeMap<String, Time>,
    /// Zones held (`full_disruption = "hold"`), and since when; removed when the hold ends.
    held: BTreeMap<String, Time>,
    /// When a brake last engaged, and whether one is engaged now.
    brake: Option<(Time, bool)>,
    /// Nodes whose pods were kept Ready, and when.
    kept_ready: BTreeMap<String, Time>,
    /// The zone of each node our decisions named (for the facts' zone when the probe has none).
    zone_of: BTreeMap<String, String>,
    /// When a fleet pause last started.
    paused: Option<Time>,
}

/// Nodes whose zone is remembered at most.
const ZONES_KEPT: usize = 100_000;

impl Notes {
    pub(crate) fn note(&mut self, d: &Decision, now: Time) {
        match d {
            Decision::ZoneWaits { zone, .. } => {
                self.suspects.insert(zone.to_string(), now);
            }
            Decision::DomainHold { zone, end, .. } => {
                if end.is_none() {
                    self.held.insert(zone.to_string(), now);
                } else {
                    self.held.remove(&**zone);
                }
            }
            Decision::Brake(change) => self.brake = Some((now, change.engaged)),
            Decision::PodsKeptReady { node, zone, .. } => {
                self.kept_ready.insert(node.to_string(), now);
                self.remember_zone(node, zone);
            }
            Decision::Pause { .. } => self.paused = Some(now),
            Decision::NodeUnknown { node, zone, .. }
            | Decision::NodeReady { node, zone, .. }
            | Decision::Taints { node, zone, .. }
            | Decision::PodsNotReady { node, zone, .. } => self.remember_zone(node, zone),
            _ => {}
        }
    }

    fn remember_zone(&mut self, node: &str, zone: &str) {
        if self.zone_of.len() >= ZONES_KEPT && !self.zone_of.contains_key(node) {
            self.zone_of.clear();
        }
        self.zone_of.insert(node.to_string(), zone.to_string());
    }

    /// Forgets notes older than `keep` (a hold in force is kept whatever its age).
    pub(crate) fn forget_before(&mut self, now: Time, keep: Duration) {
        let fresh = |at: &Time| now.since(*at) < keep;
        self.suspects.retain(|_, at| fresh(at));
        self.kept_ready.retain(|_, at| fresh(at));
        if self
            .brake
            .is_some_and(|(at, engaged)| !engaged && !fresh(&at))
        {
            self.brake = None;
        }
        if self.paused.is_some_and(|at| !fresh(&at)) {
            self.paused = None;
        }
    }

    fn zone<'a>(&'a self, facts: &'a NodeFacts, node: &str) -> Option<&'a str> {
        facts
            .zone
            .as_deref()
            .or_else(|| self.zone_of.get(node).map(String::as_str))
    }
}

/// The rule of ours that explains a divergence, if one does. Rules that hold our hand (holds,
/// suspects, brakes, the stale-cache hold, autonomy) explain ours being later or missing; a
/// pool's own timing explains either way; a restart explains a pair of which we missed the
/// start.
pub(crate) fn explain(
    subject: &Subject,
    class: Class,
    facts: &NodeFacts,
    notes: &Notes,
    restart: bool,
) -> Option<&'static str> {
    let held_back = matches!(class, Class::Later | Class::OnlyTheirs);
    let zone = notes.zone(facts, &subject.node);
    let evicting = matches!(
        subject.kind,
        ShadowKind::TaintAdded | ShadowKind::PodDeletion
    );
    if held_back {
        if subject.kind == ShadowKind::PodNotReady && notes.kept_ready.contains_key(&subject.node) {
            return Some(rule::PODS_KEPT_READY);
        }
        if facts.autonomous
            && matches!(
                subject.kind,
                ShadowKind::PodNotReady | ShadowKind::PodDeletion
            )
        {
            return Some(rule::AUTONOMY);
        }
        if zone.is_some_and(|z| notes.held.contains_key(z)) {
            return Some(rule::HOLD);
        }
        if evicting {
            if facts.waits_for_suspects || zone.is_some_and(|z| notes.suspects.contains_key(z)) {
                return Some(rule::SUSPECTS);
            }
            if facts.brake_engaged || notes.brake.is_some() {
                return Some(rule::BRAKE);
            }
            if facts.caches_held {
                return Some(rule::STALE_CACHE);
            }
            if facts.paused || notes.paused.is_some() {
                return Some(rule::PAUSE);
            }
        }
    }
    if facts.pool_timing && class != Class::Same {
        return Some(rule::POOL_TIMING);
    }
    if restart && matches!(class, Class::OnlyOurs | Class::OnlyTheirs) {
        return Some(rule::RESTART);
    }
    None
}
